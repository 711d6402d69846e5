"""The method registry: a method defined and registered here, in the test alone, is compared
by ``auto``, planned and released like the built-in ones (adding a method is one class)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from dpfreq.errors import ParameterError
from dpfreq.windows import plan_window_counts, release_window_counts
from dpfreq.windows.params import PlanRequest
from dpfreq.windows.structures.base import (
    METHODS,
    Structure,
    build_structure,
    eager_noise,
    register,
    registry,
)
from dpfreq.windows.structures.chooser import make_plan
from dpfreq.windows.structures.protocol import PerQueryShape, WindowStructure

IntArray = NDArray[np.int64]


class ToyPerQuery(Structure):
    """One independent noise per cumulative answer ``t``: an item changes the answers at every
    ``t`` at or after its k-th occurrence, ℓ1 sensitivity ``T`` (at ``item_replace`` a moved
    point changes at most ``T`` of them by 1 as well)."""

    name = "toy"
    families = ("cumulative",)
    independent_answers = True

    def _shape(self) -> PerQueryShape:
        t = self.horizon
        return PerQueryShape(1, t, math.sqrt(t), windows=t)

    def nodes(self, t1: Any, t2: Any) -> IntArray:
        shape = np.broadcast(np.asarray(t1), np.asarray(t2)).shape
        return np.ones(shape, dtype=np.int64)

    def _draw(self, key: bytes, name: tuple[str | int, ...]) -> None:
        self._impl = eager_noise(self.gamma, self.horizon + 1, key, (*name, 0))

    def noise(self, t1: Any, t2: Any) -> IntArray:
        _, q2 = np.broadcast_arrays(np.asarray(t1, dtype=np.int64),
                                    np.asarray(t2, dtype=np.int64))
        out: IntArray = self._impl[q2]
        return out


@pytest.fixture
def toy() -> Iterator[type[ToyPerQuery]]:
    register(ToyPerQuery)
    try:
        yield ToyPerQuery
    finally:
        del registry()["toy"]


def _data() -> tuple[IntArray, IntArray]:
    rng = np.random.default_rng(11)
    return rng.integers(0, 60, 300), rng.integers(1, 13, 300)


def test_a_registered_method_is_one_of_the_family(toy):
    assert METHODS["cumulative"][-1] == "toy"
    assert "toy" not in METHODS["rolling"]
    s = build_structure("cumulative", "toy", 1, 12, "item", Fraction(1), 0.0)
    assert isinstance(s, ToyPerQuery)
    assert isinstance(s, Structure)
    proto: WindowStructure = s  # the structure is read through the one protocol
    assert proto.detail["windows_per_unit"] == 12
    assert proto.calibration is not None
    assert proto.calibration.l1_sensitivity == 12


def test_a_name_is_registered_once(toy):
    class Other(ToyPerQuery):
        pass

    with pytest.raises(ParameterError, match="not yet registered"):
        register(Other)
    assert registry()["toy"] is ToyPerQuery
    register(ToyPerQuery)  # the same class again: unchanged


def test_auto_compares_the_registered_method(toy):
    for delta in (0.0, 1e-6):
        plan = make_plan(PlanRequest(("cumulative",), (1,), 12, "item", 1.0, delta, "auto", False))
        rec = plan.record["cumulative, k=1"]
        names = list(rec["predicted_rmse"])
        assert any(name.split("/")[0] == "toy" for name in names)
        pick = min(names, key=lambda c: rec["predicted_rmse"][c])
        assert rec["predicted_rmse"][pick] == min(rec["predicted_rmse"].values())
        assert plan.structures[("cumulative", 1)].method == pick.split("/")[0]
    s = build_structure("cumulative", "toy", 1, 12, "item", plan.epsilon_per_structure, 0.0)
    pure = make_plan(PlanRequest(("cumulative",), (1,), 12, "item", 1.0, 0.0, "auto", False))
    assert pure.record["cumulative, k=1"]["predicted_rmse"]["toy"] == float(
        np.sqrt(s.mean_mse()))


def test_a_forced_toy_releases_and_plans_like_the_built_in_per_query(toy):
    """The toy draws what ``per_query`` draws for a curve (same law, same name), so a release
    forcing either is the same, answer for answer: the release, the plan and the band reach
    the toy through the registry and the protocol only."""
    items, times = _data()
    args: dict[str, Any] = {"horizon": 12, "epsilon": 1.0, "unit": "item", "k_values": [1, 2],
                            "windows": ["cumulative"]}
    rels = {name: release_window_counts((items, times), method={"cumulative": name},
                                        rng=5, **args) for name in ("toy", "per_query")}
    ts = np.arange(1, 13)
    for k in (1, 2):
        a, b = (rels[name].cumulative(ts, k) for name in ("toy", "per_query"))
        assert set(a.answered_by.tolist()) == {"cumulative/toy"}
        for field in ("estimate", "sd", "lower", "upper", "band_lower", "band_upper"):
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
        plan = plan_window_counts(method={"cumulative": "toy"}, **args)
        assert plan.methods[f"cumulative, k={k}"] == "toy"
        np.testing.assert_array_equal(plan.halfwidth["cumulative"][k], a.upper - a.estimate)


def test_an_unregistered_method_is_refused(toy):
    del registry()["toy"]
    try:
        assert "toy" not in METHODS["cumulative"]
        with pytest.raises(ParameterError, match="method for cumulative"):
            make_plan(PlanRequest(("cumulative",), (1,), 12, "item", 1.0, 0.0,
                                  {"cumulative": "toy"}, False))
    finally:
        register(ToyPerQuery)
