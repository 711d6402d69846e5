"""Every checker of dpfreq._validate: rejects NaN, ±inf, 0/negative, bools, strings and wrong
types, always with the message shape of STYLE.md rule 7 (each test runs as the public call
``f``, whose name the messages carry)."""

from __future__ import annotations

import re
import warnings
from fractions import Fraction

import numpy as np
import pytest

from dpfreq._validate import (
    check_choice,
    check_count_array,
    check_delta,
    check_epsilon,
    check_int,
    check_max_count,
    check_open_unit,
    check_positive_float,
    message,
    warn_large_delta,
)
from dpfreq.errors import DataError, DPFreqWarning, ParameterError, PrivacyWarning, public_call

SHAPE = re.compile(r"^(\w+) of (\w+) must be (.+); got (.+)\.$")

NAN, INF = float("nan"), float("inf")
NOT_NUMBERS = [True, False, np.bool_(True), "1", "nan", None, [1.0], (1.0,), {1.0}, b"1", 1j]


@pytest.fixture(autouse=True)
def _inside_public_call_f():
    with public_call("f"):
        yield


def _assert_shape(exc: BaseException, param: str = "x", func: str = "f") -> None:
    m = SHAPE.match(str(exc))
    assert m, str(exc)
    assert m.group(1) == param
    assert m.group(2) == func


def test_message_shape():
    assert message("epsilon", "a finite number > 0", -1.0) == (
        "epsilon of f must be a finite number > 0; got -1.0."
    )
    long = message("x", "small", np.zeros(100))
    assert "array of shape (100,) and dtype float64" in long


@pytest.mark.parametrize("bad", [NAN, INF, -INF, 0.0, -0.0, -1.0, -1, 0, *NOT_NUMBERS])
@pytest.mark.parametrize("checker", [check_positive_float, check_epsilon])
def test_positive_float_rejects(checker, bad):
    with pytest.raises(ParameterError) as info:
        checker(bad, "x")
    _assert_shape(info.value)


def test_positive_float_accepts_and_normalizes():
    assert check_positive_float(2, "x") == 2.0
    assert type(check_positive_float(np.float32(0.5), "x")) is float
    assert check_positive_float(Fraction(1, 4), "x") == 0.25
    assert check_positive_float(INF, "x", allow_inf=True) == INF
    with pytest.raises(ParameterError, match=r"must be a number > 0"):
        check_positive_float(NAN, "x", allow_inf=True)


@pytest.mark.parametrize("bad", [NAN, INF, -INF, -1e-9, 1.0, 2.0, 0.5, 1.01e-3, *NOT_NUMBERS])
def test_delta_rejects(bad):
    with pytest.raises(ParameterError) as info:
        check_delta(bad, "x")
    _assert_shape(info.value)


def test_delta_accepts_zero():
    assert check_delta(0, "x") == 0.0
    assert check_delta(1e-9, "x") == 1e-9
    assert check_delta(1e-3, "x") == 1e-3  # the ceiling itself is accepted


@pytest.mark.parametrize("bad", [NAN, INF, -INF, 0.0, 1.0, -0.5, 1.5, *NOT_NUMBERS])
def test_open_unit_rejects(bad):
    with pytest.raises(ParameterError) as info:
        check_open_unit(bad, "x")
    _assert_shape(info.value)


@pytest.mark.parametrize("bad", [NAN, INF, -INF, 2.5, 2.0**60, *NOT_NUMBERS])
def test_int_rejects_non_integers(bad):
    with pytest.raises(ParameterError) as info:
        check_int(bad, "x")
    _assert_shape(info.value)


def test_int_accepts_integral_floats_like_the_command_line():
    assert check_int(1e6, "domain_size", minimum=1) == 1_000_000
    assert type(check_int(np.float64(3.0), "x")) is int
    with pytest.raises(ParameterError):
        check_int(0.0, "x", minimum=1)


def test_int_bounds():
    assert check_int(np.int64(5), "x", minimum=1) == 5
    assert type(check_int(np.int32(5), "x")) is int
    with pytest.raises(ParameterError, match=r"^x of f must be an integer >= 1; got 0\.$"):
        check_int(0, "x", minimum=1)
    with pytest.raises(ParameterError, match=r"^x of f must be an integer >= 1 and <= 3; got 4"):
        check_int(4, "x", minimum=1, maximum=3)
    with pytest.raises(ParameterError, match=r"^x of f must be an integer <= 3; got -?\d+"):
        check_int(7, "x", maximum=3)


def test_choice():
    assert check_choice("duckdb", "x", ["memory", "duckdb"]) == "duckdb"
    for bad in ["DuckDB", None, 1, [1], {"a": 1}]:
        with pytest.raises(ParameterError) as info:
            check_choice(bad, "x", ["memory", "duckdb"])
        _assert_shape(info.value)
        assert "one of 'memory', 'duckdb'" in str(info.value)


@pytest.mark.parametrize(
    "bad",
    [
        [1.0, NAN],
        [1.0, INF],
        [-INF],
        [1.5],
        [-1],
        [True, False],
        ["a", "b"],
        [[1, 2]],
        5,
        [2.0**64],
        np.array([2**63], dtype=np.uint64),
        [object()],
        [1j],
    ],
)
def test_count_array_rejects(bad):
    with pytest.raises(DataError) as info:
        check_count_array(bad, "x")
    _assert_shape(info.value)


def test_count_array_accepts():
    out = check_count_array([1.0, 2.0, 0.0], "x")
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, [1, 2, 0])
    np.testing.assert_array_equal(check_count_array(np.array([3], np.uint8), "x"), [3])
    assert check_count_array([], "x").shape == (0,)
    assert check_count_array([[1, 2]], "x", ndim=2).shape == (1, 2)
    np.testing.assert_array_equal(check_count_array([-2, 0], "x", minimum=-2), [-2, 0])
    with pytest.raises(DataError) as info:
        check_count_array([], "x", allow_empty=False)
    _assert_shape(info.value)


def test_count_array_errors_quote_values_only_in_debug_mode(monkeypatch):
    monkeypatch.delenv("DPFREQ_DEBUG", raising=False)
    for bad, rule in (([4, -1234], "an entry below 0"), ([1.0, 1234.5], "a non-integral entry")):
        with pytest.raises(DataError, match=rule) as info:
            check_count_array(bad, "x")
        assert "1234" not in str(info.value)
        _assert_shape(info.value)
    monkeypatch.setenv("DPFREQ_DEBUG", "1")
    with pytest.raises(DataError, match=r"\[debug: -1234\]"):
        check_count_array([4, -1234], "x")


def test_errors_are_builtin_subclasses():
    assert issubclass(ParameterError, ValueError)
    assert issubclass(DataError, ParameterError)


def test_float16_and_float32_counts_are_checked_without_overflow_warnings():
    import warnings

    from dpfreq._validate import check_count_array

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = check_count_array(np.array([60000, 1, 2], dtype=np.float16), "counts")
        assert out.tolist() == [60000, 1, 2]
        assert check_count_array(np.array([3.0], dtype=np.float32), "counts").tolist() == [3]


@pytest.mark.parametrize(("delta", "size"), [(1e-3, 1000), (1e-3, 10**6), (1e-6, 10**6)])
def test_delta_at_least_one_over_the_public_size_warns(delta, size):
    with pytest.warns(PrivacyWarning, match=rf"delta of f is {delta:g}, at least 1/{size:,} "
                                            r"\(one over the domain size\)") as caught:
        warn_large_delta(delta, size, "the domain size")
    assert len(caught) == 1
    assert issubclass(PrivacyWarning, DPFreqWarning)


@pytest.mark.parametrize(("delta", "size"), [(0.0, 10**9), (1e-7, 10**6), (1e-3, 999)])
def test_delta_below_one_over_the_public_size_is_silent(delta, size):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn_large_delta(delta, size, "the domain size")
    assert caught == []


@pytest.mark.parametrize("bad", [0, -1, 0.5, True, "1"])
def test_max_count_below_one_is_refused(bad):
    with pytest.raises(ParameterError, match=r"^max_count of f must be an integer >= 1"):
        check_max_count(bad)
    assert check_max_count(1e3) == 1000
