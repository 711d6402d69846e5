"""Coverage of a stream's intervals and band over many seeded streams.

Each counter (the simple counter, the best tree, the smooth binary mechanism, the online
factorization, the horizon-free epochs across their boundaries) measures ``N`` independent
streams at once: ``N`` groups of one stream, whose node noises are drawn at distinct keyed
counters (independent given an ideal PRF, as groups are). For every stream the noise of its
answers is ``published − exact prefix``.

* Per-answer interval: each stream contributes the answer of one period drawn uniformly, so the
  ``N`` hits are independent, each covered with probability at least ``1 − β``.
* Band: each stream is covered when every answer of all its periods is in its band.

One-sided exact binomial test of ``coverage >= 0.95`` at α = 1e-6 per assertion;
``N = 6970`` from :func:`power.coverage_trials`: a coverage of 0.93 is rejected with
probability 0.99.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpfreq.accounting.zcdp import zcdp_rho
from dpfreq.stream.measure import measure_periods
from dpfreq.stream.mechanisms import BOUNDED_METHODS, Budget, EpochCounter, best_counters
from dpfreq.stream.publish import curve, halfwidths
from power import coverage_trials

pytestmark = pytest.mark.statistical

ALPHA = 1e-6
CONFIDENCE = 0.95
TRIALS = coverage_trials(CONFIDENCE, 0.02, ALPHA, 0.99)


def _noise(counter, horizon: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(answers − exact prefixes, allowances) of TRIALS independent streams, (N, T) each."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 50, size=(TRIALS, 1, horizon))
    key = rng.bytes(32)
    noisy = measure_periods(counter, key, (1,), x, np.zeros((1, TRIALS, 0), dtype=np.int64),
                            0, horizon, True)
    answers, allow = curve(counter, noisy[0], horizon)
    return answers - np.cumsum(x[:, 0, :], axis=1), allow


def _covered(hits: int) -> bool:
    return stats.binom.cdf(hits, TRIALS, CONFIDENCE) >= ALPHA


def _counters():
    pure, zcdp = Budget(Fraction(1)), Budget(Fraction(1), zcdp_rho(1.0, 1e-6))
    out = {}
    for budget in (pure, zcdp):
        for label, counter, _ in best_counters(40, "event", budget, BOUNDED_METHODS):
            out[label] = (counter, 40)
    # the exact discrete Gaussian at the factorization's large σ² costs ~0.1 ms a node: fewer
    # periods (the epochs still cross the boundary after period 16)
    for label, counter, _ in best_counters(10, "event", zcdp, ("factorization",)):
        out[label] = (counter, 10)
    out["epochs"] = (EpochCounter("item", pure), 90)
    out["epochs/zcdp"] = (EpochCounter("item", zcdp), 20)
    return out


COUNTERS = _counters()


@pytest.mark.parametrize("name", sorted(COUNTERS))
def test_intervals_and_band_cover(name: str, seed: int) -> None:
    counter, horizon = COUNTERS[name]
    noise, allow = _noise(counter, horizon, seed)
    beta = 1.0 - CONFIDENCE
    half = halfwidths(counter, horizon, beta)[None, :] + allow
    band = halfwidths(counter, horizon, beta, band=1)[None, :] + allow
    pick = np.random.default_rng(seed + 1).integers(0, horizon, TRIALS)
    rows = np.arange(TRIALS)
    per_answer = int(np.sum(np.abs(noise[rows, pick]) <= half[rows, pick]))
    simultaneous = int(np.sum(np.all(np.abs(noise) <= band, axis=1)))
    assert _covered(per_answer), (name, per_answer / TRIALS)
    assert _covered(simultaneous), (name, simultaneous / TRIALS)
    assert np.all(band >= half)  # the band is never narrower than an interval
