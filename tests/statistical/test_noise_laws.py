"""Statistical tests of the exact samplers against their exact laws (chi-square and proportion
tests at α ≤ 1e-6).

Every assertion has false-alarm probability <= 1e-6 (chi-square p-value or a Wilson interval at
level 1 - 1e-6). Sample sizes come from power calculations written below: each test states the
alternative it must detect (a relative error in the scale γ, or in a probability) with power
0.99, and draws the smallest n that achieves it. Tests are never retried.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
import randomgen
from scipy import stats

import dpfreq._exact_inverse as exact_inverse
import dpfreq._exact_sampling as exact_sampling
from dpfreq.noise import (
    discrete_laplace_cdf,
    discrete_laplace_tail,
    discrete_laplace_tail_bound,
    epsilon_to_fraction,
    geometric_cdf,
    randomized_response,
    randomized_response_keep_probability,
    sample_bernoulli_exp,
    sample_discrete_laplace,
    sample_geometric,
)

pytestmark = pytest.mark.statistical

ALPHA = 1e-6  # false-alarm probability of each assertion
POWER = 0.99  # probability of detecting the stated alternative
N_MIN, N_MAX = 10**5, 8 * 10**6  # keeps the tier fast; a test fails loudly if n would exceed it

Cdf = Callable[[np.ndarray], np.ndarray]

# ---------------------------------------------------------------------------------------------
# power calculations


def _bins(cdf: Cdf, n: int, lo: int, hi: int, width: int = 1) -> np.ndarray:
    """Edges e_0 < … < e_m of the bins (-inf, e_0], (e_0, e_1], …, (e_m, inf) over [lo, hi].

    Bins of ``width`` integers (unit bins by default) where every expected count is >= 5, the
    tails merged into the two end bins until their expected counts are >= 5 too.
    """
    grid = np.arange(lo, hi + 1, width)
    mass = np.diff(np.concatenate(([0.0], cdf(grid))))
    first = int(np.argmax(np.cumsum(mass) * n >= 5))  # left tail bin (-inf, grid[first]]
    upper = 1.0 - cdf(grid)
    last = int(np.nonzero(upper * n >= 5)[0][-1])  # right tail bin (grid[last], inf)
    edges = [grid[first]]
    for k in range(first + 1, last + 1):
        if mass[k] * n >= 5:
            edges.append(grid[k])
    return np.array(edges, dtype=np.int64)


def _probabilities(cdf: Cdf, edges: np.ndarray) -> np.ndarray:
    c = cdf(edges)
    return np.diff(np.concatenate(([0.0], c, [1.0])))


def _chi_square_n(
    cdf: Cdf, alt_cdf: Cdf, lo: int, hi: int, width: int = 1
) -> tuple[int, np.ndarray]:
    """Smallest n (and its bins) for which the chi-square test at level ALPHA rejects the
    alternative law ``alt_cdf`` with probability >= POWER (noncentral chi-square power)."""
    n = N_MIN
    for _ in range(6):  # bins depend on n: iterate to a fixed point
        edges = _bins(cdf, n, lo, hi, width)
        p, q = _probabilities(cdf, edges), _probabilities(alt_cdf, edges)
        lam = float(np.sum((q - p) ** 2 / p))  # noncentrality per draw
        df = len(p) - 1
        crit = stats.chi2.isf(ALPHA, df)
        lo_n, hi_n = 1, 1
        while stats.ncx2.sf(crit, df, hi_n * lam) < POWER:
            hi_n *= 2
        while lo_n < hi_n:
            mid = (lo_n + hi_n) // 2
            if stats.ncx2.sf(crit, df, mid * lam) >= POWER:
                hi_n = mid
            else:
                lo_n = mid + 1
        new = max(N_MIN, hi_n)
        if new <= n:
            break
        n = new
    assert n <= N_MAX, f"power calculation asks for n = {n}"
    return n, _bins(cdf, n, lo, hi, width)


def _assert_chi_square(sample: np.ndarray, cdf: Cdf, edges: np.ndarray) -> None:
    p = _probabilities(cdf, edges)
    counts = np.bincount(np.searchsorted(edges, sample, side="left"), minlength=len(p))
    expected = p * sample.size
    assert expected.min() >= 5
    stat = float(np.sum((counts - expected) ** 2 / expected))
    pvalue = stats.chi2.sf(stat, len(p) - 1)
    assert pvalue >= ALPHA, f"chi-square p-value {pvalue:.3g} (stat {stat:.1f}, {len(p)} bins)"


def _proportion_n(p: float, rel: float) -> int:
    """Smallest n for which a two-sided level-ALPHA test of Pr = p detects Pr = p(1+rel) with
    probability >= POWER (normal approximation)."""
    q = min(1.0, p * (1 + rel))
    za, zb = stats.norm.isf(ALPHA / 2), stats.norm.isf(1 - POWER)
    n = ((za * math.sqrt(p * (1 - p)) + zb * math.sqrt(q * (1 - q))) / (q - p)) ** 2
    n = max(N_MIN, math.ceil(n))
    assert n <= N_MAX, f"power calculation asks for n = {n}"
    return n


def _assert_wilson(successes: int, n: int, p: float) -> None:
    """p lies in the Wilson score interval at level 1 - ALPHA."""
    z = stats.norm.isf(ALPHA / 2)
    phat = successes / n
    centre = (phat + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(phat * (1 - phat) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    assert centre - half <= p <= centre + half, (successes, n, p, centre - half, centre + half)


def _dlap_cdf(gamma: Fraction | float) -> Cdf:
    return lambda z: discrete_laplace_cdf(z, gamma)


def _geo_cdf(gamma: Fraction | float) -> Cdf:
    return lambda k: geometric_cdf(k, gamma)


def _span(gamma: float, two_sided: bool) -> tuple[int, int]:
    m = int(40 / gamma) + 64
    return (-m if two_sided else 0), m


# ---------------------------------------------------------------------------------------------
# discrete Laplace (the production path: inverse cdf on 64-bit words)

# (ε, relative error of γ to detect). 1 %; ε = 10 has only 3 populated bins at
# feasible n, so there the alternative is a 5 % error. For ε = 0.001 the table is capped at
# 4096 thresholds and the rejection sampler (Canonne, Kamath & Steinke 2020, Algorithm 2)
# draws |Z| >= 4096 (1.7 % of draws): bins 64 wide reach far beyond that, and the
# alternative is a 3 % error.
DLAP_CASES = [
    (0.05, 0.01, 1), (0.5, 0.01, 1), (1, 0.01, 1), (3, 0.01, 1), (10, 0.05, 1), (0.1, 0.01, 1),
    (Fraction(1, 3), 0.01, 1), (0.7, 0.01, 1), (0.01, 0.05, 1), (0.001, 0.03, 64),
]


@pytest.mark.parametrize(("eps", "rel", "width"), DLAP_CASES)
def test_discrete_laplace_chi_square(eps, rel, width, seed):
    gamma = eps if isinstance(eps, Fraction) else epsilon_to_fraction(eps)
    g = float(gamma)
    lo, hi = _span(g, True)
    n, edges = _chi_square_n(_dlap_cdf(gamma), _dlap_cdf(g * (1 - rel)), lo, hi, width)
    gen = np.random.Generator(randomgen.ChaCha(key=seed, rounds=20))  # the production one
    _assert_chi_square(sample_discrete_laplace(gamma, n, rng=gen), _dlap_cdf(gamma), edges)


def test_discrete_laplace_zero_and_tail_wilson(rng):
    gamma = epsilon_to_fraction(0.5)
    bound = discrete_laplace_tail_bound(0.05, gamma)
    p_zero = 1 - float(discrete_laplace_tail(0, gamma))
    p_tail = float(discrete_laplace_tail(bound, gamma))
    n = max(_proportion_n(p_zero, 0.02), _proportion_n(p_tail, 0.05))
    z = sample_discrete_laplace(gamma, n, rng=rng)
    _assert_wilson(int(np.count_nonzero(z == 0)), n, p_zero)
    _assert_wilson(int(np.count_nonzero(np.abs(z) > bound)), n, p_tail)
    # symmetry: Pr[Z > 0] = Pr[|Z| > 0] / 2
    _assert_wilson(int(np.count_nonzero(z > 0)), n, float(discrete_laplace_tail(0, gamma)) / 2)


def test_discrete_laplace_huge_gamma_is_zero(rng):
    # ε = 30: Pr[Z != 0] = 2e^{-30}/(1+e^{-30}) < 2e-13, so n = 10^6 draws are all 0 except
    # with probability < 2e-7 <= ALPHA
    z = sample_discrete_laplace(30, 10**6, rng=rng)
    assert np.count_nonzero(z) == 0


# ---------------------------------------------------------------------------------------------
# geometric


@pytest.mark.parametrize("gamma", [Fraction(1, 20), Fraction(1, 3), Fraction(7, 10), 1,
                                   Fraction(5, 2)])
def test_geometric_chi_square(gamma, rng):
    g = float(gamma)
    lo, hi = _span(g, False)
    n, edges = _chi_square_n(_geo_cdf(gamma), _geo_cdf(g * 0.99), lo, hi)
    _assert_chi_square(sample_geometric(gamma, n, rng=rng), _geo_cdf(gamma), edges)


# ---------------------------------------------------------------------------------------------
# the Canonne–Kamath–Steinke (2020) rejection sampler (tail path of the table; its pending
# loops need t > 1)


@pytest.mark.parametrize("gamma", [Fraction(1, 3), Fraction(7, 10), Fraction(1), Fraction(5, 2),
                                   epsilon_to_fraction(0.1)])
@pytest.mark.parametrize("signed", [True, False])
def test_rejection_sampler_chi_square(gamma, signed, rng):
    g = float(gamma)
    cdf, alt = (_dlap_cdf(gamma), _dlap_cdf(g * 0.98)) if signed else (_geo_cdf(gamma),
                                                                          _geo_cdf(g * 0.98))
    lo, hi = _span(g, signed)
    n, edges = _chi_square_n(cdf, alt, lo, hi)
    sample = exact_sampling.discrete_laplace_chunk(gamma.numerator, gamma.denominator, n, rng,
                                           signed=signed)
    _assert_chi_square(sample, cdf, edges)


# ---------------------------------------------------------------------------------------------
# the inverse-cdf sampler with tiny words: ties (W = D_k) and the tail hand-off become common,
# so their exactness is tested by the law of the whole output


@pytest.mark.parametrize("w", [4, 6, 8])
@pytest.mark.parametrize("gamma", [Fraction(1, 3), Fraction(7, 10), Fraction(1)])
@pytest.mark.parametrize("signed", [True, False])
def test_small_word_table_sampler_chi_square(w, gamma, signed, rng, monkeypatch):
    calls = []
    original = exact_inverse.InverseTable.resolve

    def counting(self, word, k, gen):
        calls.append(k)
        return original(self, word, k, gen)

    monkeypatch.setattr(exact_inverse.InverseTable, "resolve", counting)
    g = float(gamma)
    cdf, alt = (_dlap_cdf(gamma), _dlap_cdf(g * 0.98)) if signed else (_geo_cdf(gamma),
                                                                          _geo_cdf(g * 0.98))
    lo, hi = _span(g, signed)
    n, edges = _chi_square_n(cdf, alt, lo, hi)
    sample = exact_sampling.table_sample(gamma, n, rng, signed=signed, w=w)
    _assert_chi_square(sample, cdf, edges)
    assert len(calls) > 0  # ties were resolved (about n·K/2^w of them)


def test_tie_resolution_probability(rng):
    # W = D_k: Pr[resolve is True] = frac(2^w S(k)), here w = 4, γ = 1, two-sided, k = 0:
    # 2^4 · 2e^{-1}/(1+e^{-1}) = 8.606…, computed to 100 digits with Decimal
    tab = exact_inverse.InverseTable(Fraction(1), True, 4)
    with localcontext() as ctx:
        ctx.prec = 100
        a = Decimal(-1).exp()
        s0 = 16 * 2 * a / (1 + a)
        frac = float(s0 - int(s0))
    assert int(tab.table[0]) == 8
    n = _proportion_n(frac, 0.05)
    hits = sum(tab.resolve(8, 0, rng) for _ in range(n))
    _assert_wilson(hits, n, frac)


# ---------------------------------------------------------------------------------------------
# Bernoulli(exp(-γ)) and randomized response


@pytest.mark.parametrize("gamma", [0, Fraction(3, 10), 1, Fraction(5, 2), 7])
def test_bernoulli_exp_wilson(gamma, rng):
    p = math.exp(-float(gamma))
    if p == 1.0:
        assert sample_bernoulli_exp(gamma, 10**4, rng=rng).all()  # exact: no randomness
        return
    n = _proportion_n(p, 0.25 if p < 0.01 else 0.01)  # γ = 7: a 25 % error at p ≈ 9e-4
    draws = sample_bernoulli_exp(gamma, n, rng=rng)
    _assert_wilson(int(np.count_nonzero(draws)), n, p)


@pytest.mark.parametrize("gamma", [Fraction(3, 10), Fraction(1), Fraction(5, 2), Fraction(7)])
def test_bernoulli_exp_loop_wilson(gamma, rng):
    # the Bernoulli(exp(−γ)) loop of Canonne, Kamath & Steinke (2020), used inside the tail sampler
    p = math.exp(-float(gamma))
    n = _proportion_n(p, 0.25 if p < 0.01 else 0.01)
    draws = exact_sampling.bernoulli_exp(gamma, n, rng)
    _assert_wilson(int(np.count_nonzero(draws)), n, p)


@pytest.mark.parametrize("eps", [0.1, 1.0, Fraction(7, 3)])
def test_randomized_response_keep_probability(eps, rng):
    keep = randomized_response_keep_probability(eps)
    n = _proportion_n(keep, 0.01)
    bits = (np.arange(n) % 2).astype(np.int8)
    out = randomized_response(bits, eps, rng=rng)
    # both input values are kept with the same probability
    for value in (0, 1):
        sel = bits == value
        _assert_wilson(int(np.count_nonzero(out[sel] == value)), int(sel.sum()), keep)
