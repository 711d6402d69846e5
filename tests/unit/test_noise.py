"""Deterministic checks of dpfreq.noise: exact arithmetic, helpers, determinism, validation.

The laws of the samplers are tested in ``tests/statistical/test_noise_laws.py``.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest

import dpfreq._exact_inverse as exact_inverse
from dpfreq import noise
from dpfreq.errors import ParameterError
from dpfreq.noise import (
    MAX_DENOMINATOR,
    discrete_laplace_cdf,
    discrete_laplace_gamma,
    discrete_laplace_pmf,
    discrete_laplace_tail,
    discrete_laplace_tail_bound,
    discrete_laplace_variance,
    epsilon_to_fraction,
    geometric_cdf,
    geometric_pmf,
    geometric_variance,
    randomized_response,
    randomized_response_keep_probability,
    sample_bernoulli_exp,
    sample_discrete_laplace,
    sample_geometric,
)

SHAPE = re.compile(r"^\w+ of [\w.]+ must be .+; got .+\.$")

# ---------------------------------------------------------------------------------------------
# ε as a fraction: the rounding-down rule (the certified ε never exceeds the requested one)


def _brute_floor(x: Fraction, max_den: int) -> Fraction:
    """Largest p/q <= x with 1 <= q <= max_den, by trying every denominator."""
    return max(Fraction(math.floor(x * q), q) for q in range(1, max_den + 1))


def test_epsilon_to_fraction_matches_brute_force_for_small_denominators(rng):
    xs = rng.uniform(0.0, 12.0, size=400)
    dens = rng.integers(1, 60, size=400)
    for x, den in zip(xs, dens, strict=True):
        x = float(x)
        if x * int(den) < 1:  # rounds down to 0: rejected, tested below
            continue
        assert epsilon_to_fraction(x, max_denominator=int(den)) == _brute_floor(
            Fraction(x), int(den)
        )


@pytest.mark.parametrize("eps", [0.05, 0.1, 0.3, 0.5, 0.7, 1.0, 1 / 3, math.pi, 10.0, 1e-9, 1e3])
def test_epsilon_to_fraction_rounds_down_within_2_pow_minus_32(eps):
    f = epsilon_to_fraction(eps)
    exact = Fraction(eps)  # the float's exact binary value
    assert f <= exact
    assert exact - f < Fraction(1, 2**32)
    assert f.denominator <= MAX_DENOMINATOR
    # largest such fraction: ⌊x q⌋/q for the denominator of f + 1 (a neighbour) is not larger
    assert f >= Fraction(math.floor(exact * 2**32), 2**32)


def test_epsilon_to_fraction_random_floats_round_down(rng):
    for x in rng.uniform(1e-6, 50.0, size=300):
        f = epsilon_to_fraction(float(x))
        assert f <= Fraction(float(x)) < f + Fraction(1, 2**32)
        assert f.denominator <= MAX_DENOMINATOR


def test_epsilon_to_fraction_keeps_short_fractions_exact():
    assert epsilon_to_fraction(0.5) == Fraction(1, 2)
    assert epsilon_to_fraction(Fraction(1, 3)) == Fraction(1, 3)
    assert epsilon_to_fraction(3.0) == 3
    # the float 0.1 is 3602879701896397/2^55, just above 1/10; no fraction with denominator
    # <= 2^32 lies in between (they are >= 1/(10·2^32) away from 1/10), so 1/10 is the answer
    assert Fraction(0.1) > Fraction(1, 10)
    assert epsilon_to_fraction(0.1) == Fraction(1, 10)
    # the float 0.7 is just below 7/10: the result must be strictly below 7/10
    assert Fraction(0.7) < Fraction(7, 10)
    assert epsilon_to_fraction(0.7) < Fraction(7, 10)


def test_epsilon_to_fraction_too_small_is_rejected():
    with pytest.raises(ParameterError, match=r"^epsilon of epsilon_to_fraction must be >= 1/"):
        epsilon_to_fraction(1e-12)


def test_discrete_laplace_gamma_divides_by_sensitivity():
    assert discrete_laplace_gamma(1.0, 3) == Fraction(1, 3)
    g = discrete_laplace_gamma(0.1, 7)
    assert g <= Fraction(0.1) / 7 < g + Fraction(1, 2**31)
    with pytest.raises(ParameterError):
        discrete_laplace_gamma(1.0, 0)


# ---------------------------------------------------------------------------------------------
# rigorous exponential bounds and the inverse-cdf table (checked against Decimal at 100 digits)


def _decimal_exp_neg(x: Fraction, scale_bits: int = 0) -> Decimal:
    """2^scale_bits · e^{-x} to 110 significant digits (Decimal's exp is correctly rounded)."""
    with localcontext() as ctx:
        ctx.prec = 110
        return (-(Decimal(x.numerator) / Decimal(x.denominator))).exp() * Decimal(2) ** scale_bits


@pytest.mark.parametrize(
    "x", [Fraction(0), Fraction(1, 3), Fraction(1), Fraction(7, 10), Fraction(45, 2),
          Fraction(1, 2**32), Fraction(3141592653, 2**30), Fraction(100)]
)
@pytest.mark.parametrize("prec", [64, 127, 300])
def test_exp_neg_bounds_bracket_and_are_tight(x, prec):
    lo, hi = exact_inverse.exp_neg_bounds(x, prec)
    assert 0 <= lo <= hi <= lo + 4
    with localcontext() as ctx:
        ctx.prec = 110
        ref = _decimal_exp_neg(x, prec)
        slack = ref * Decimal(10) ** -100  # relative error of the Decimal reference
        assert Decimal(lo) - slack <= ref <= Decimal(hi) + slack


@pytest.mark.parametrize("gamma", [Fraction(1, 20), Fraction(1, 10), Fraction(1, 3), Fraction(1),
                                   Fraction(7, 10), Fraction(3), Fraction(10), Fraction(30)])
@pytest.mark.parametrize("two_sided", [True, False])
def test_inverse_table_thresholds_are_exact_floors(gamma, two_sided):
    tab = exact_inverse.InverseTable(gamma, two_sided, 63)
    assert tab.size >= 1
    assert np.all(np.diff(tab.table.astype(object)) < 0)  # strictly decreasing
    a = _decimal_exp_neg(gamma)
    for k in range(0, tab.size, max(1, tab.size // 25)):
        with localcontext() as ctx:
            ctx.prec = 110
            s = _decimal_exp_neg(gamma * (k + 1), 63)
            if two_sided:
                s = 2 * s / (1 + a)
            assert int(tab.table[k]) == math.floor(s)


def test_count_above_equals_binary_search(rng):
    for gamma in (Fraction(1, 10), Fraction(1), Fraction(7, 3)):
        tab = exact_inverse.inverse_table(gamma, True)
        words = rng.integers(0, 2**63, size=20000, dtype=np.uint64)
        # include the thresholds themselves and their neighbours
        words = np.concatenate((words, tab.table, tab.table - np.uint64(1), tab.table + 1))
        expected = (tab.table[None, :] > words[:, None]).sum(axis=1)
        np.testing.assert_array_equal(tab.count_above(words), expected)


@pytest.mark.parametrize("gamma", [Fraction(1, 1156), Fraction(1, 10), Fraction(1), Fraction(30),
                                   Fraction(1, 20000)])
@pytest.mark.parametrize("two_sided", [True, False])
def test_count_and_ties_equal_binary_search(rng, gamma, two_sided):
    """The bucket look-up (one threshold per bucket; γ = 1/10 has a bucket with two, answered
    by binary search; γ = 1/20000 is too fine for buckets: the logarithm guess) gives the exact
    count and exactly the ties ``W = D_m`` with ``m < K``, at every word size."""
    tab = exact_inverse.inverse_table(gamma, two_sided)
    t = tab.table
    small = rng.integers(0, 2**63, size=5000, dtype=np.uint64) >> rng.integers(
        0, 63, size=5000).astype(np.uint64)
    edges = np.array([0, 1, 2**22, 2**23, 2**53, 2**53 + 1, 2**62, 2**63 - 1], dtype=np.uint64)
    words = np.concatenate((rng.integers(0, 2**63, size=20000, dtype=np.uint64), small, edges,
                            t, t - np.uint64(1), t + np.uint64(1)))
    expected = tab.size - np.searchsorted(tab.ascending, words, side="right")
    m, ties = tab.count_and_ties(words)
    np.testing.assert_array_equal(m, expected)
    np.testing.assert_array_equal(
        np.sort(ties), np.flatnonzero((expected < tab.size) & (tab.at[expected] == words)))
    assert ties.size >= t.size  # every threshold itself is a tie


# ---------------------------------------------------------------------------------------------
# analytic helpers


@pytest.mark.parametrize("gamma", [0.05, 0.1, 0.5, 1.0, 3.0, 10.0, Fraction(1, 3)])
def test_pmf_sums_to_one_and_variance_matches(gamma):
    m = int(60 / float(gamma)) + 10
    z = np.arange(-m, m + 1)
    p = discrete_laplace_pmf(z, gamma)
    assert math.fsum(p) == pytest.approx(1.0, rel=1e-12, abs=0)
    assert math.fsum(p * z.astype(float) ** 2) == pytest.approx(
        discrete_laplace_variance(gamma), rel=1e-9
    )
    k = np.arange(0, 2 * m)
    q = geometric_pmf(k, gamma)
    assert math.fsum(q) == pytest.approx(1.0, rel=1e-12, abs=0)
    mean = math.fsum(q * k)
    assert math.fsum(q * (k - mean) ** 2) == pytest.approx(geometric_variance(gamma), rel=1e-9)


@pytest.mark.parametrize("gamma", [0.1, 1.0, 4.0])
def test_cdf_and_tail_consistent_with_pmf(gamma):
    z = np.arange(-40, 41)
    c = discrete_laplace_cdf(z, gamma)
    np.testing.assert_allclose(np.diff(c), discrete_laplace_pmf(z[1:], gamma), rtol=1e-9,
                               atol=1e-15)
    b = np.arange(0, 40)
    tail = discrete_laplace_tail(b, gamma)
    np.testing.assert_allclose(tail, 1 - discrete_laplace_cdf(b, gamma)
                               + discrete_laplace_cdf(-b - 1, gamma), rtol=1e-7, atol=1e-15)
    assert float(discrete_laplace_tail(-1, gamma)) == 1.0
    np.testing.assert_allclose(np.diff(geometric_cdf(b, gamma)), geometric_pmf(b[1:], gamma),
                               rtol=1e-9, atol=1e-15)
    # far arguments neither overflow nor warn (warnings are errors)
    assert discrete_laplace_cdf(-10**6, gamma) == 0.0
    assert discrete_laplace_cdf(10**6, gamma) == 1.0


@pytest.mark.parametrize("gamma", [0.01, 0.1, 0.5, 1.0, 3.0, Fraction(1, 3)])
@pytest.mark.parametrize("eta", [1e-9, 1e-6, 0.01, 0.05, 0.5, 0.99])
def test_tail_bound_is_minimal(gamma, eta):
    b = discrete_laplace_tail_bound(eta, gamma)
    assert b >= 0
    assert float(discrete_laplace_tail(b, gamma)) <= eta
    if b > 0:
        assert float(discrete_laplace_tail(b - 1, gamma)) > eta


@pytest.mark.parametrize("gamma", [Fraction(1, 10), Fraction(1), Fraction(7, 3)])
def test_parity_and_positivity_identities(gamma):
    # randomized_response keeps iff a geometric draw is even; sample_bernoulli_exp is G >= 1
    k = np.arange(0, 4000)
    pmf = geometric_pmf(k, gamma)
    assert math.fsum(pmf[::2]) == pytest.approx(randomized_response_keep_probability(gamma),
                                                rel=1e-12)
    assert 1 - float(pmf[0]) == pytest.approx(math.exp(-float(gamma)), rel=1e-12)


def test_keep_probability():
    assert randomized_response_keep_probability(1.0) == pytest.approx(math.e / (1 + math.e))
    assert randomized_response_keep_probability(Fraction(1, 2)) == pytest.approx(
        1 / (1 + math.exp(-0.5))
    )


# ---------------------------------------------------------------------------------------------
# determinism, shapes and edge cases


@pytest.mark.parametrize(
    "draw",
    [
        lambda r: sample_discrete_laplace(Fraction(1, 3), 5000, rng=r),
        lambda r: sample_discrete_laplace(0.1, 5000, rng=r),
        lambda r: sample_geometric(Fraction(7, 10), 5000, rng=r),
        lambda r: sample_bernoulli_exp(Fraction(3, 10), 5000, rng=r),
        lambda r: randomized_response(np.arange(5000) % 2, 1.0, rng=r),
    ],
)
def test_same_seed_same_output_different_seed_differs(draw, seed):
    a = draw(seed)
    b = draw(seed)
    np.testing.assert_array_equal(a, b)
    c = draw(np.random.Generator(np.random.PCG64(seed)))
    np.testing.assert_array_equal(a, c)
    d = draw(seed + 1)
    assert not np.array_equal(a, d)


def test_shapes_and_dtypes(rng):
    z = sample_discrete_laplace(1, (3, 4), rng=rng)
    assert z.shape == (3, 4)
    assert z.dtype == np.int64
    assert sample_discrete_laplace(1, 0, rng=rng).shape == (0,)
    g = sample_geometric(Fraction(1, 2), 7, rng=rng)
    assert g.shape == (7,)
    assert g.dtype == np.int64
    assert (g >= 0).all()
    b = sample_bernoulli_exp(0, (2, 2), rng=rng)
    assert b.dtype == np.bool_
    assert b.all()
    bits = np.array([[0, 1], [1, 0]], dtype=np.int8)
    out = randomized_response(bits, 2.0, rng=rng)
    assert out.shape == (2, 2)
    assert out.dtype == np.int8
    assert np.isin(out, (0, 1)).all()
    assert randomized_response(np.array([True, False]), 1.0, rng=rng).dtype == np.int8


def test_huge_gamma_gives_zero_noise(rng):
    # ε = 1000: Pr[Z != 0] = 2e^{-1000}/(1+e^{-1000}); the table is empty and the
    # rejection sampler runs alone
    assert exact_inverse.inverse_table(Fraction(1000), True).size == 0
    np.testing.assert_array_equal(sample_discrete_laplace(1000, 1000, rng=rng), 0)
    np.testing.assert_array_equal(sample_geometric(1000, 1000, rng=rng), 0)


def test_chunks_concatenate(rng, monkeypatch):
    monkeypatch.setattr(noise, "_CHUNK", 1000)
    z = sample_discrete_laplace(Fraction(1, 2), 4321, rng=rng)
    assert z.shape == (4321,)
    assert len(np.unique(z)) > 5


def test_default_rng_is_secure():
    # no seed: works, and draws differ between calls (fresh keys from os.urandom)
    a = sample_discrete_laplace(0.5, 1000)
    b = sample_discrete_laplace(0.5, 1000)
    assert not np.array_equal(a, b)


# ---------------------------------------------------------------------------------------------
# validation: one message shape


BAD_GAMMAS = [float("nan"), float("inf"), -float("inf"), 0.0, -1.0, Fraction(-1, 2), True,
              "1", None, [1.0]]


@pytest.mark.parametrize("bad", BAD_GAMMAS)
@pytest.mark.parametrize(
    "call",
    [
        lambda g: sample_discrete_laplace(g, 3, rng=0),
        lambda g: sample_geometric(g, 3, rng=0),
        lambda g: randomized_response([0, 1], g, rng=0),
        lambda g: discrete_laplace_pmf(0, g),
        lambda g: discrete_laplace_cdf(0, g),
        lambda g: discrete_laplace_tail(0, g),
        lambda g: discrete_laplace_variance(g),
        lambda g: discrete_laplace_tail_bound(0.1, g),
        lambda g: geometric_pmf(0, g),
        lambda g: geometric_cdf(0, g),
        lambda g: geometric_variance(g),
        lambda g: randomized_response_keep_probability(g),
    ],
)
def test_gamma_validation(call, bad):
    with pytest.raises(ParameterError) as info:
        call(bad)
    assert SHAPE.match(str(info.value)), str(info.value)
    assert str(info.value).startswith("gamma of ")


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0, True, "0", None])
def test_bernoulli_gamma_validation(bad):
    with pytest.raises(ParameterError, match=r"^gamma of sample_bernoulli_exp must be"):
        sample_bernoulli_exp(bad, 3, rng=0)


@pytest.mark.parametrize("bad", [-1, 2.5, True, "3", (2, -1), None])
def test_size_validation(bad):
    with pytest.raises(ParameterError) as info:
        sample_discrete_laplace(1, bad, rng=0)
    assert SHAPE.match(str(info.value))


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.1, float("nan"), float("inf"), True, "0.1"])
def test_tail_bound_eta_validation(bad):
    with pytest.raises(ParameterError, match=r"^eta of discrete_laplace_tail_bound must be"):
        discrete_laplace_tail_bound(bad, 1.0)


@pytest.mark.parametrize("bad", [[0, 2], [0.0, 1.0], ["a"], [-1]])
def test_randomized_response_bits_validation(bad):
    with pytest.raises(ParameterError, match=r"^bits of randomized_response must be"):
        randomized_response(bad, 1.0, rng=0)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 0.0, -2.0, True, "1", None])
def test_epsilon_to_fraction_validation(bad):
    with pytest.raises(ParameterError) as info:
        epsilon_to_fraction(bad)
    assert SHAPE.match(str(info.value))
