"""The online randomizer interface (Ohrimenko, Wirth & Wu 2022): init(L, k, ε), step(j, x_j),
c_gap and the exact certificate, refusal above ε; deterministic parts only (laws:
test_longitudinal.py)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from dpfreq.errors import DataError, ParameterError
from dpfreq.longitudinal import laws
from dpfreq.longitudinal.laws import (
    _futurerand_ideal,
    calibrated_law,
    distance_law,
    erlingsson_c_gap,
    threshold_law,
)
from dpfreq.longitudinal.randomizers import (
    ErlingssonRR,
    FutureRand,
    IndependentRR,
    make_randomizer,
    restore_randomizer,
)

NAMES = ["rr", "futurerand", "calibrated", "threshold", "erlingsson", "auto"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(("length", "k"), [(8, 3), (2, 5), (1, 1), (64, 16)])
def test_interface_gap_and_certificate(name: str, length: int, k: int) -> None:
    r = make_randomizer(name, length=length, max_changes=k, epsilon=1.0, rng=3)
    if name == "erlingsson":
        assert r.c_gap == pytest.approx(math.tanh(0.5) / k, rel=1e-9)
        assert r.c_gap == erlingsson_c_gap(k, 1.0)
    else:
        law = distance_law(name, k, 1.0)
        assert r.name == law.name
        assert r.c_gap == law.c_gap
        assert r.certificate == law.certificate
    assert 0 < r.certificate <= 1.0
    xs = [1, 0, -1, 0, 1, -1, 1, 0][:length] + [0] * max(0, length - 8)
    budget = 1 if name == "erlingsson" else k
    nonzero = 0
    for j, x in enumerate(xs, start=1):
        if x != 0:
            nonzero += 1
            if nonzero > budget:
                x = 0
        assert r.step(j, x) in (-1, 1)
    with pytest.raises(DataError, match="next coordinate"):
        r.step(length + 1, 0)


def test_step_validation() -> None:
    r = FutureRand(length=4, max_changes=2, epsilon=1.0, variant="paper", rng=1)
    with pytest.raises(DataError, match="next coordinate"):
        r.step(2, 0)  # out of order
    with pytest.raises(DataError, match="one of -1, 0, 1"):
        r.step(1, 2)
    with pytest.raises(DataError, match="one of -1, 0, 1"):
        r.step(1, True)
    r.step(1, 1)
    r.step(2, -1)
    with pytest.raises(DataError, match="more than max_changes"):
        r.step(3, 1)  # a third non-zero: the client must freeze it
    e = ErlingssonRR(length=4, max_changes=3, epsilon=1.0, rng=1)
    e.step(1, 1)
    with pytest.raises(DataError, match="more than one non-zero"):
        e.step(2, -1)
    with pytest.raises(ParameterError):
        FutureRand(length=4, max_changes=2, epsilon=1.0, variant="bns", rng=1)
    with pytest.raises(ParameterError):
        make_randomizer("nope", length=4, max_changes=2, epsilon=1.0)
    with pytest.raises(ParameterError):
        IndependentRR(length=0, max_changes=2, epsilon=1.0)
    with pytest.raises(ParameterError):
        IndependentRR(length=4, max_changes=2, epsilon=0.0)


@pytest.mark.parametrize("variant", ["paper", "calibrated", "threshold"])
def test_online_map_uses_precomputed_vector(variant: str) -> None:
    """The c-th non-zero input x gets v[c]·x; zeros never touch v (Property III)."""
    k = 4
    for seed in range(5):
        r = FutureRand(length=10, max_changes=k, epsilon=1.0, variant=variant, rng=seed)
        v = list(r.v)
        assert len(v) == k
        assert set(v) <= {-1, 1}
        xs = [0, 1, 0, 0, -1, -1, 0, 1, 0, 0]
        ys = [r.step(j, x) for j, x in enumerate(xs, start=1)]
        nz = [(y, x) for y, x in zip(ys, xs, strict=True) if x != 0]
        assert [y * x for y, x in nz] == v  # support 4 = k uses all of v, in order
        assert r.v == v  # never redrawn


def test_restore_gives_the_same_keyed_outputs() -> None:
    for name in ["threshold", "rr", "erlingsson"]:
        r = make_randomizer(name, length=8, max_changes=3, epsilon=1.0, rng=4)
        assert r.key.seeded
        r.step(1, 1)
        s = r.state()
        r2 = restore_randomizer(r.name, length=8, max_changes=3, epsilon=1.0, state=s,
                                key=r.key)
        assert r2.state() == s
        assert r2.c_gap == r.c_gap
        assert getattr(r2, "v", None) == getattr(r, "v", None)
        xs = (0, -1, 0, 0, 1, 0, 0) if name != "erlingsson" else (0, 0, 0, 0, 0, 0, 0)
        assert [r2.step(j, x) for j, x in enumerate(xs, start=2)] == [
            r.step(j, x) for j, x in enumerate(xs, start=2)]
    with pytest.raises(ParameterError):
        make_randomizer("rr", length=8, max_changes=3, epsilon=1.0, key="secret")  # type: ignore[arg-type]


def test_construction_refuses_certificate_above_epsilon(monkeypatch: pytest.MonkeyPatch) -> None:
    """A law whose exact loss exceeds ε is refused by the law builder and by the randomizer."""
    k, eps = 16, 1.0
    log_q, _ = _futurerand_ideal(k, eps, 0.5)  # ε' four times too large
    assert float(log_q.max() - log_q.min()) > eps
    with pytest.raises(ParameterError, match="exceeds epsilon"):
        laws._build("futurerand", k, eps, log_q, {})
    # a law whose sampled weights exceed e^ε is refused even if its ideal law is fine
    good = laws.distance_law("threshold", k, eps)
    too_loose = dataclasses.replace(good, weights=(good.weights[0] + 2**40, *good.weights[1:]))
    with pytest.raises(ParameterError, match="exceeds epsilon"):
        laws._certify(too_loose)
    monkeypatch.setattr(
        "dpfreq.longitudinal.randomizers.distance_law", lambda mode, kk, e: too_loose
    )
    with pytest.raises(ParameterError, match="exceeds epsilon"):
        FutureRand(length=8, max_changes=k, epsilon=eps, variant="paper", rng=1)
    # a law without a positive gap is refused too
    with pytest.raises(ParameterError, match="c_gap"):
        laws._build("flat", 3, 1.0, np.zeros(4), {})


@pytest.mark.parametrize("k", [2, 3, 8, 16, 64])
def test_calibrated_is_smallest_feasible_on_grid(k: int) -> None:
    """Calibration at the boundary: feasible at the chosen c, every grid c below fails."""
    law = calibrated_law(k, 1.0)
    c = law.params["c"]
    assert law.certificate <= 1.0
    below = [g / 100 for g in range(10, 501) if g / 100 < c - 1e-12]
    assert below
    assert all(np.ptp(_futurerand_ideal(k, 1.0, g)[0]) > 1.0 for g in below)
    assert law.c_gap >= distance_law("futurerand", k, 1.0).c_gap


def test_threshold_is_best_integer_threshold() -> None:
    """The O(k) search equals the brute-force maximum over every threshold m."""
    for eps in (0.5, 1.0, 2.0):
        for k in (1, 2, 3, 7, 20, 41):
            ell = np.arange(k + 1, dtype=float)
            binom = np.array([math.comb(k, i) for i in range(k + 1)], dtype=float)

            def gap(m: int) -> float:
                p = binom * np.where(ell < m, math.exp(eps), 1.0)  # noqa: B023
                return float(np.sum(p * (1 - 2 * ell / k)) / p.sum())  # noqa: B023

            brute = max(gap(m) for m in range(1, k + 1))
            # the sampled law rounds the ideal one to 62-bit weights: equal to ~1e-15
            assert threshold_law(k, eps).c_gap == pytest.approx(brute, rel=1e-9)


@pytest.mark.parametrize("k", [1, 2, 4, 16, 64, 256])
def test_auto_picks_largest_gap(k: int) -> None:
    auto = distance_law("auto", k, 1.0)
    gaps = {m: distance_law(m, k, 1.0).c_gap for m in ("rr", "futurerand", "calibrated",
                                                        "threshold")}
    assert auto.c_gap == max(gaps.values())
    assert auto.c_gap >= erlingsson_c_gap(k, 1.0)
    r = make_randomizer("auto", length=32, max_changes=k, epsilon=1.0, rng=0)
    assert r.name == auto.name


def test_public_names() -> None:
    import dpfreq.longitudinal as lon

    assert list(lon.__all__) == sorted(lon.__all__)
    namespace: dict = {}
    exec("from dpfreq.longitudinal import *", namespace)
    assert set(lon.__all__) <= set(namespace)
