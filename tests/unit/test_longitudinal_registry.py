"""The randomizer registry: a mode defined and registered here, in the test alone, is built and
restored by :func:`make_randomizer` and :func:`restore_randomizer` like the built-in ones."""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction

import pytest

from dpfreq.errors import ParameterError
from dpfreq.longitudinal.laws import MODES
from dpfreq.longitudinal.randomizers import (
    RANDOMIZERS,
    ErlingssonRR,
    FutureRand,
    IndependentRR,
    Randomizer,
    make_randomizer,
    register_randomizer,
    restore_randomizer,
)
from dpfreq.noise import epsilon_to_fraction


class ToyRR(Randomizer):
    """Independent randomized response at ``γ = ⌊ε/k⌋`` on each non-zero input, sampled by the
    exact keep bit: at most ``k`` non-zeros, so every ratio is at most ``e^{kγ} <= e^ε``."""

    def _setup_mode(self, mode: str) -> None:
        self.name = mode
        self.gamma: Fraction = epsilon_to_fraction(self.epsilon / self.max_changes)
        self.c_gap = math.tanh(float(self.gamma) / 2.0)
        self.certificate = float(self.max_changes * self.gamma)
        self._refuse_if_uncertified()

    def _nonzero(self, x: int) -> int:
        return x if self.key.stream("keep", self.j).keep(self.gamma) else -x


@pytest.fixture
def toy() -> Iterator[None]:
    register_randomizer("toy")(ToyRR)
    try:
        yield
    finally:
        del RANDOMIZERS["toy"]


def test_the_built_in_modes_are_registered_once_each():
    assert ("auto", *sorted(RANDOMIZERS)) == MODES
    assert RANDOMIZERS["rr"] is IndependentRR
    assert RANDOMIZERS["erlingsson"] is ErlingssonRR
    assert {RANDOMIZERS[m] for m in ("futurerand", "calibrated", "threshold")} == {FutureRand}


def test_a_mode_name_is_registered_once(toy):
    for mode in ("toy", "rr", "auto"):
        with pytest.raises(ParameterError, match="not yet registered"):
            register_randomizer(mode)(IndependentRR if mode == "toy" else ToyRR)
    assert RANDOMIZERS["rr"] is IndependentRR


def test_a_registered_mode_is_built_and_restored(toy):
    r = make_randomizer("toy", length=6, max_changes=2, epsilon=1.0, rng=9)
    assert isinstance(r, ToyRR)
    assert r.name == "toy"
    assert r.certificate <= 1.0
    assert r.c_gap == math.tanh(float(epsilon_to_fraction(0.5)) / 2.0)
    assert r.step(1, 1) in (-1, 1)
    state = r.state()
    again = restore_randomizer("toy", length=6, max_changes=2, epsilon=1.0, state=state,
                               key=r.key)
    assert isinstance(again, ToyRR)
    xs = (0, -1, 0, 0, 0)
    assert [again.step(j, x) for j, x in enumerate(xs, start=2)] == [
        r.step(j, x) for j, x in enumerate(xs, start=2)]


def test_an_unregistered_mode_is_refused(toy):
    del RANDOMIZERS["toy"]
    try:
        with pytest.raises(ParameterError, match="method of make_randomizer"):
            make_randomizer("toy", length=6, max_changes=2, epsilon=1.0, rng=9)
    finally:
        register_randomizer("toy")(ToyRR)
