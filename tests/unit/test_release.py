"""Release base class: frozen keyword-only dataclasses and a JSON round trip."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pytest

from dpfreq.release import ErrorStatement, Release, to_jsonable


@dataclass(frozen=True, kw_only=True)
class _DemoRelease(Release):
    domain_size: int
    histogram: np.ndarray


def _release() -> _DemoRelease:
    return _DemoRelease(
        value=np.array([1.5, -2.0, 3.25]),
        epsilon=0.5,
        unit="event",
        mechanism="discrete-laplace",
        mechanism_params={"gamma": Fraction(1, 2), "sensitivity": np.int64(1),
                          "shape": (3,), "nested": {"f": Fraction(7, 3)}},
        seeded=True,
        error=ErrorStatement(kind="interval", confidence=0.95, value=np.array([2.0, 2.0, 2.0]),
                             lower=np.array([-0.5, -4.0, 1.25]), upper=np.array([3.5, 0.0, 5.25]),
                             description="95% interval per count from the exact noise law"),
        domain_size=3,
        histogram=np.array([[1, 2], [3, 4]], dtype=np.int64),
    )


def test_to_dict_and_json_round_trip():
    rel = _release()
    d = rel.to_dict()
    assert d["type"] == "_DemoRelease"
    assert d["value"] == [1.5, -2.0, 3.25]
    assert d["mechanism_params"]["gamma"] == "1/2"
    assert d["mechanism_params"]["nested"]["f"] == "7/3"
    assert d["mechanism_params"]["sensitivity"] == 1
    assert type(d["mechanism_params"]["sensitivity"]) is int
    assert d["histogram"] == [[1, 2], [3, 4]]
    assert d["error"]["value"] == [2.0, 2.0, 2.0]
    assert d["delta"] == 0.0
    assert d["seeded"] is True
    text = rel.to_json()
    assert json.loads(text) == d
    assert json.loads(rel.to_json(indent=None)) == d
    # values can be rebuilt from the JSON
    back = json.loads(text)
    np.testing.assert_array_equal(np.array(back["histogram"]), rel.histogram)
    assert Fraction(back["mechanism_params"]["gamma"]) == Fraction(1, 2)


def test_non_finite_floats_become_strings():
    assert to_jsonable([float("nan"), float("inf"), -float("inf"), 1.0]) == [
        "nan", "inf", "-inf", 1.0
    ]
    assert to_jsonable(np.float32(0.5)) == 0.5
    assert to_jsonable(np.array([np.nan])) == ["nan"]
    json.dumps(to_jsonable({"a": np.array([np.inf])}), allow_nan=False)


def test_private_fields_are_not_exported():
    @dataclass(frozen=True, kw_only=True)
    class WithPrivate(Release):
        _cache: int = 0

    rel = WithPrivate(value=1, epsilon=1.0, unit="item", mechanism="m", seeded=False,
                      error=ErrorStatement(kind="sd", confidence=None, value=1.0,
                                           description="sd"))
    assert "_cache" not in rel.to_dict()


def test_frozen_and_keyword_only():
    rel = _release()
    with pytest.raises(dataclasses.FrozenInstanceError):
        rel.epsilon = 2.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        Release(1, 1.0, 0.0, "m", {}, False, None)  # type: ignore[misc]


def test_base_plot_not_implemented():
    with pytest.raises(NotImplementedError):
        _release().plot()


def test_error_statement_kinds_and_confidence():
    with pytest.raises(ValueError, match="kind"):
        ErrorStatement(kind="scale", confidence=None, value=1.0, description="x")
    with pytest.raises(ValueError, match="confidence"):
        ErrorStatement(kind="bound", confidence=None, value=1.0, description="x")
    err = ErrorStatement(kind="bound", confidence=0.9, value=3.0, description="l1 <= 3",
                         vacuous=True)
    assert err.vacuous
    assert err.lower is None


def test_table_is_abstract_and_to_pandas_uses_it():
    with pytest.raises(NotImplementedError):
        _release().table()

    @dataclass(frozen=True, kw_only=True)
    class Tabled(_DemoRelease):
        def table(self):
            return {"t": np.arange(3), "estimate": self.value, "lower": self.error.lower,
                    "upper": self.error.upper}

    rel = Tabled(**{f.name: getattr(_release(), f.name)
                    for f in dataclasses.fields(_DemoRelease)})
    frame = rel.to_pandas()
    assert list(frame.columns) == ["t", "estimate", "lower", "upper"]
    assert frame.attrs["unit"] == "event"
    assert frame.attrs["epsilon"] == 0.5
    assert (frame["lower"] <= frame["estimate"]).all()
