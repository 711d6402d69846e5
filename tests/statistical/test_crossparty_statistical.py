"""Statistical tests of the cross-party estimators (α ≤ 1e-6 per assertion, never retried).

The noise is drawn by the library's own mechanism (:func:`draw_noise`, :func:`draw_sketch`);
the true registers are fixed (unbiasedness, variance) or drawn afresh per trial (coverage:
users placed uniformly in the registers, as the keyed hash places them, with fresh impression
counts and VID sampling).
"""

from __future__ import annotations

import itertools
import math
from statistics import NormalDist

import numpy as np
import pytest
from scipy import stats

from dpfreq.crossparty import CrossPartyParams, merge_sketches
from dpfreq.crossparty.frequency import class_estimates, inverse_filter
from dpfreq.crossparty.local_noise import calibrate, draw_noise
from dpfreq.crossparty.reach import empty_estimate, flip_moments
from dpfreq.crossparty.sketch import draw_sketch
from dpfreq.noise import discrete_laplace_pmf
from dpfreq.rng import resolve_rng
from power import coverage_trials

ALPHA = 1e-6
Z = NormalDist().inv_cdf(1 - ALPHA / 2)  # two-sided: 4.89
pytestmark = pytest.mark.statistical


def make_params(**changes: object) -> CrossPartyParams:
    fields = {"measurement": "m", "registers": 2048, "sampling_start": 0, "sampling_width": 1,
              "max_frequency": 3, "epsilon_reach": math.log(3), "epsilon_frequency": 6.0,
              "hash": "sha256-prefix/v1", "key_id": "0" * 32}
    return CrossPartyParams(**{**fields, **changes})  # type: ignore[arg-type]


def _mean_and_variance_tests(draws: np.ndarray, mean: float, var: float) -> None:
    """The sample mean within Z standard errors of the exact mean; the sample variance within
    the two-sided chi-square range of the exact variance (each at α/2)."""
    n = draws.size
    assert abs(draws.mean() - mean) <= Z * math.sqrt(var / n)
    stat = (n - 1) * draws.var(ddof=1) / var
    assert stats.chi2.ppf(ALPHA / 2, n - 1) <= stat <= stats.chi2.ppf(1 - ALPHA / 2, n - 1)


def test_emptiness_estimate_unbiased_with_its_exact_variance(rng: np.random.Generator) -> None:
    """Three parties, fixed bits, 400 noise draws of each sketch.

    Power: the mean test (z = 4.89 over 400 draws) detects a bias of 0.35 sd of one estimate
    with probability 0.9; the variance test (chi-square on 399 df) detects a variance off by a
    factor outside about [0.7, 1.4]. Ê sums 4096 independent bounded terms: nearly normal.
    """
    params = make_params(registers=4096, epsilon_frequency=None)
    noise = calibrate(params)
    truth = (rng.random((3, 4096)) < np.array([[0.3], [0.5], [0.2]])).astype(np.int64)
    m = flip_moments(noise.keep_probability)
    ones = truth.sum(axis=0)
    exact_var = float(np.where(ones == 0, m.second**3 - 1,
                               m.second ** (3 - ones) * (m.second - 1) ** ones).sum())
    draws = np.empty(400)
    for i in range(draws.size):
        bits = sum(draw_noise(truth[p], noise, rng)[0].astype(np.int64) for p in range(3))
        draws[i] = empty_estimate(np.bincount(bits, minlength=4), 3, noise.keep_probability)[0]
    _mean_and_variance_tests(draws, float((ones == 0).sum()), exact_var)


def _exact_class_variance(s: np.ndarray, t: int, alpha: float, parties: int) -> float:
    """Σ_r Var φ_t(s_r + N) from the exact law of N (a sum of ``parties`` DLap(α))."""
    h = inverse_filter(alpha, parties)
    z = np.arange(-80, 81)
    pmf = np.array([1.0])
    for _ in range(parties):
        pmf = np.convolve(pmf, discrete_laplace_pmf(z, -math.log(alpha)))
    support = np.arange(-80 * parties, 80 * parties + 1)
    total = 0.0
    for value, count in zip(*np.unique(s, return_counts=True), strict=True):
        w = value + support - t
        phi = np.where(np.abs(w) <= parties, h[np.clip(w + parties, 0, 2 * parties)], 0.0)
        mean = float((pmf * phi).sum())
        total += count * (float((pmf * phi**2).sum()) - mean**2)
    return total


def test_class_estimates_unbiased_with_their_exact_variance(rng: np.random.Generator) -> None:
    """Two parties' frequency registers (K = 3, ε_f = 6: α = e^{-2}), 400 noise draws.

    Power as in the emptiness test (400 draws; each Ĉ_t sums 2048 independent terms).
    """
    params = make_params()
    noise = calibrate(params)
    alpha = float(noise.frequency_alpha)  # type: ignore[arg-type]
    truth = rng.choice(4, size=(2, 2048), p=[0.6, 0.2, 0.1, 0.1]).astype(np.int64)
    s = truth.sum(axis=0)
    draws = np.empty((400, 3))
    for i in range(draws.shape[0]):
        sums = sum(draw_noise(truth[p], noise, rng)[1] for p in range(2))
        draws[i] = class_estimates(sums, parties=2, max_frequency=3, alpha=alpha)[0]
    for t in range(3):
        _mean_and_variance_tests(draws[:, t], float((s == t).sum()),
                                 _exact_class_variance(s, t, alpha, 2))


TRIALS = coverage_trials(0.95, 0.05, ALPHA, 0.9)  # 950: detects a coverage of 0.90


def _trial(params: CrossPartyParams, parties: int, users: int,
           gen: np.random.Generator) -> tuple[np.ndarray, object]:
    """Fresh users (half of each party's shared with the first), impressions, sampling and
    placement; returns the true k+ reach and the merge of the parties' sketches."""
    K, R, rate = params.max_frequency, params.registers, float(params.sampling_rate)
    half = users // 2
    union = users + (parties - 1) * (users - half)
    counts = np.zeros((parties, union), dtype=np.int64)
    for p in range(parties):
        idx = np.arange(users) if p == 0 else np.concatenate(
            [np.arange(half), users + (p - 1) * (users - half) + np.arange(users - half)])
        counts[p, idx] = 1 + gen.poisson(0.8, idx.size)
    total = counts.sum(axis=0)
    truth = np.array([(total >= k).sum() for k in range(1, K + 1)])
    sampled = gen.random(union) < rate
    place = gen.integers(0, R, union)
    sketches = []
    for p in range(parties):
        values = np.bincount(place[sampled], weights=np.minimum(counts[p, sampled], K),
                             minlength=R)
        sketches.append(draw_sketch(np.minimum(values, K).astype(np.int64), params=params,
                                    party=f"p{p}", rng=resolve_rng(gen), engine="simulation"))
    return truth, merge_sketches(sketches, confidence=0.95)


@pytest.mark.parametrize(("parties", "rate"), [(2, "1"), (3, "1/2")])
def test_intervals_cover_at_their_confidence(parties: int, rate: str,
                                             rng: np.random.Generator) -> None:
    """Coverage of the 95% intervals of the union's k+ reach (k = 1, 2, 3), over fresh data.

    One-sided exact binomial test of coverage >= 0.95 at α = 1e-6 per k; 950 trials detect a
    coverage of 0.90 with probability 0.9 (``tests/power.py``).
    """
    params = make_params(sampling_width=rate)
    hits = np.zeros(3, dtype=np.int64)
    for _ in range(TRIALS):
        truth, rel = _trial(params, parties, 1500, rng)
        err = rel.error  # type: ignore[attr-defined]
        hits += (err.lower <= truth) & (truth <= err.upper)
    for k, h in zip(itertools.count(1), hits, strict=False):
        assert stats.binom.cdf(int(h), TRIALS, 0.95) >= ALPHA, (k, int(h), TRIALS)
