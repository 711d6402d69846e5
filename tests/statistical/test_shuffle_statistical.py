"""Statistical tests of the shuffle (α ≤ 1e-6 per assertion, never retried, sizes from power
calculations written here).

* The dummy counts follow their exact law (chi-square against the pmf, tails merged until
  every expected count is at least 5).
* A share alone is uniform: the vector share of adversarially structured registers, each of
  its words' top and bottom bytes, and jointly with the register value it hides (a share that
  leaked the value would differ by value); the words one worker sends the aggregator too.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpfreq.crossparty import Coverage
from dpfreq.crossparty.shuffle import (
    ShuffleParams,
    calibrate_dummies,
    run_protocol,
    sample_dummies,
    share_registers,
)
from dpfreq.crossparty.shuffle.aggregate import read_output

ALPHA = 1e-6
POWER = 0.99
pytestmark = pytest.mark.statistical


def _sample_size(p: np.ndarray, q: np.ndarray) -> int:
    """Smallest n at which the level-ALPHA chi-square test on bins with probabilities ``p``
    rejects draws from ``q`` with probability >= POWER (noncentral chi-square)."""
    lam = float(np.sum((q - p) ** 2 / p))
    df = p.size - 1
    crit = stats.chi2.isf(ALPHA, df)
    lo, hi = 1, 1
    while stats.ncx2.sf(crit, df, hi * lam) < POWER:
        hi *= 2
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if stats.ncx2.sf(crit, df, mid * lam) < POWER else (lo, mid)
    return hi


def _assert_chi_square(counts: np.ndarray, p: np.ndarray) -> None:
    expected = p * counts.sum()
    assert expected.min() >= 5
    stat = float(np.sum((counts - expected) ** 2 / expected))
    pvalue = stats.chi2.sf(stat, p.size - 1)
    assert pvalue >= ALPHA, f"chi-square p-value {pvalue:.3g} ({p.size} bins)"


def _merged(pmf: np.ndarray, n: int) -> np.ndarray:
    """Bin edges over 0..len(pmf)-1 with the tails merged until n·p >= 5 in every bin."""
    keep = np.flatnonzero(pmf * n >= 5)
    return np.arange(keep[0], keep[-1] + 1)


def _binned(pmf: np.ndarray, inner: np.ndarray) -> np.ndarray:
    lo, hi = inner[0], inner[-1]
    return np.concatenate([[pmf[:lo + 1].sum()], pmf[lo + 1:hi], [pmf[hi:].sum()]])


@pytest.mark.parametrize(("epsilon", "delta"), [(math.log(3), 1e-10), (0.25, 1e-6)])
def test_dummy_counts_follow_their_exact_law(epsilon, delta, rng) -> None:
    """Power: the sample size detects, with probability 0.99, a law whose γ is 10 % smaller
    (the noise of a calibration off by 10 %)."""
    law = calibrate_dummies(epsilon, delta)
    d = np.arange(2 * law.shift + 1)
    pmf = law.pmf(d)
    alt = calibrate_dummies(epsilon, delta)
    a = math.exp(-0.9 * float(law.gamma))
    alt_pmf = a ** np.abs(d - law.shift)
    alt_pmf = alt_pmf / alt_pmf.sum()
    n = 10_000
    for _ in range(4):  # the bins depend on n: iterate to a fixed point
        inner = _merged(pmf, n)
        n = max(10_000, _sample_size(_binned(pmf, inner), _binned(alt_pmf, inner)))
    assert n <= 2_000_000, n
    assert alt.shift == law.shift
    inner = _merged(pmf, n)
    draws = sample_dummies(law, n, rng=rng)
    counts = np.bincount(draws, minlength=d.size)
    _assert_chi_square(_binned(counts.astype(float), inner), _binned(pmf, inner))


def _uniform_bins(bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Uniform probabilities and the alternative: two bins off by ±0.005 (TV distance 0.005)."""
    p = np.full(bins, 1.0 / bins)
    q = p.copy()
    q[0] += 0.005
    q[1] -= 0.005
    return p, q


def test_a_vector_share_alone_is_uniform_whatever_it_hides(rng) -> None:
    """Registers alternating 0 and K (maximally structured). Power: n words detect a byte law
    at total-variation distance 0.005 from uniform with probability 0.99; the joint table
    (register value × top nibble) detects a nibble law differing by 0.02 for one value."""
    p, q = _uniform_bins(256)
    n = _sample_size(p, q)
    K = 3
    params = ShuffleParams(
        measurement="m", registers=n, sampling_start=0, sampling_width=1, max_frequency=K,
        epsilon=1.0, delta=1e-9, parties=["tv"], per_party=False, coverage=Coverage(),
        deadline="2030-01-01", hash="sha256-prefix/v1", key_id="0" * 32)
    x = np.where(np.arange(n) % 2 == 0, 0, K)
    words = share_registers(x, params=params, party="tv", rng=rng).vector
    _assert_chi_square(np.bincount(words >> 24, minlength=256).astype(float), p)
    _assert_chi_square(np.bincount(words & 0xFF, minlength=256).astype(float), p)
    joint = np.zeros((2, 16))
    np.add.at(joint, (x // K, (words >> 28).astype(np.int64)), 1)
    share_of_value = joint.sum(axis=1, keepdims=True) / n
    p2 = (share_of_value * np.full((1, 16), 1 / 16)).ravel()
    q2 = p2.copy().reshape(2, 16)
    q2[0, 0] += 0.01
    q2[0, 1] -= 0.01
    assert _sample_size(p2, q2.ravel()) <= n
    _assert_chi_square(joint.ravel(), p2)


def test_one_workers_output_alone_is_uniform(rng) -> None:
    """The words one worker sends the aggregator (registers and dummies, permuted, masked):
    top byte uniform. Power as above (TV 0.005 with probability 0.99)."""
    p, q = _uniform_bins(256)
    n = _sample_size(p, q)
    params = ShuffleParams(
        measurement="m", registers=n, sampling_start=0, sampling_width=1, max_frequency=2,
        epsilon=1.0, delta=1e-9, parties=["tv", "web"], per_party=False,
        coverage=Coverage(), deadline="2030-01-01", hash="sha256-prefix/v1", key_id="0" * 32)
    x = rng.poisson(0.5, (2, n)).clip(0, 2)
    run = run_protocol(x, params=params, confidence=0.95, rng=rng)
    for message in run.aggregator_inbox:
        words = np.frombuffer(read_output(message, params).payload, dtype="<u4")
        _assert_chi_square(np.bincount(words >> 24, minlength=256).astype(float), p)
