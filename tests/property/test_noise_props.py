"""Hypothesis invariants of the deterministic parts of dpfreq.noise."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpfreq._exact_inverse as exact_inverse
from dpfreq.errors import ParameterError
from dpfreq.noise import (
    MAX_DENOMINATOR,
    discrete_laplace_tail,
    discrete_laplace_tail_bound,
    epsilon_to_fraction,
)

positive_eps = st.floats(min_value=1e-9, max_value=1e6, allow_nan=False, allow_infinity=False)
gammas = st.fractions(min_value=Fraction(1, 1000), max_value=40, max_denominator=10**6).filter(
    lambda g: g > 0
)


@given(positive_eps)
@settings(max_examples=300, deadline=None)
def test_rounding_down_rule(eps):
    f = epsilon_to_fraction(eps)
    x = Fraction(eps)
    assert f <= x
    assert x - f < Fraction(1, MAX_DENOMINATOR)
    assert 0 < f.denominator <= MAX_DENOMINATOR


@given(st.floats(min_value=0.05, max_value=20.0), st.integers(min_value=1, max_value=40))
@settings(max_examples=200, deadline=None)
def test_rounding_down_matches_brute_force(eps, max_den):
    x = Fraction(eps)
    brute = max(Fraction(math.floor(x * q), q) for q in range(1, max_den + 1))
    if brute == 0:  # rounds down to 0: refused, never a zero-noise-scale fraction
        with pytest.raises(ParameterError):
            epsilon_to_fraction(eps, max_denominator=max_den)
    else:
        assert epsilon_to_fraction(eps, max_denominator=max_den) == brute


@given(st.fractions(min_value=0, max_value=60, max_denominator=2**32),
       st.integers(min_value=53, max_value=200))
@settings(max_examples=150, deadline=None)
def test_exp_bounds_bracket_float_exp(x, prec):
    lo, hi = exact_inverse.exp_neg_bounds(x, prec)
    assert 0 <= lo <= hi <= lo + 4
    approx = math.exp(-float(x))
    scale = 2.0**prec
    assert lo / scale <= approx * (1 + 1e-12) + 1e-300
    assert hi / scale >= approx * (1 - 1e-12)


@given(st.fractions(min_value=0, max_value=30, max_denominator=10**4),
       st.fractions(min_value=0, max_value=30, max_denominator=10**4))
@settings(max_examples=100, deadline=None)
def test_exp_bounds_multiplicative(x, y):
    # intervals for e^{-x}·e^{-y} and e^{-(x+y)} must overlap (both contain the true value)
    p = 120
    (a, b), (c, d) = exact_inverse.exp_neg_bounds(x, p), exact_inverse.exp_neg_bounds(y, p)
    lo, hi = exact_inverse.exp_neg_bounds(x + y, p)
    assert (a * c) >> p <= hi
    assert -((-b * d) >> p) >= lo


@given(gammas, st.booleans(), st.lists(st.integers(min_value=0, max_value=2**63 - 1),
                                        min_size=1, max_size=50))
@settings(max_examples=100, deadline=None)
def test_count_above_is_exact(gamma, two_sided, words):
    tab = exact_inverse.inverse_table(gamma, two_sided)
    w = np.array(words, dtype=np.uint64)
    if tab.size:
        w = np.concatenate((w, tab.table[: min(5, tab.size)], tab.table[:5] - np.uint64(1)))
    expected = np.array([sum(int(d) > int(v) for d in tab.table) for v in w])
    np.testing.assert_array_equal(tab.count_above(w), expected)


@given(gammas, st.floats(min_value=1e-12, max_value=0.999))
@settings(max_examples=200, deadline=None)
def test_tail_bound_minimal(gamma, eta):
    b = discrete_laplace_tail_bound(eta, gamma)
    assert float(discrete_laplace_tail(b, gamma)) <= eta
    assert b == 0 or float(discrete_laplace_tail(b - 1, gamma)) > eta
