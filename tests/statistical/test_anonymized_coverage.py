"""Coverage of the simulated error statements of anonymized-histogram releases.

The sorted-ℓ1 bound and the band on the items with count ``>= r`` come from simulating the known
noise law around the released histogram (a parametric bootstrap), so their coverage is measured,
not proved: ``benchmarks/bench_anonymized.py --only coverage`` measured 0.94–0.99 at 200
releases per setting. This test guards against a gross failure: with 60 seeded releases, if the
true coverage were at least 0.93, fewer than 44 hits would have probability below 1e-6
(Binomial(60, 0.93): mean 55.8; the exact tail Pr[X <= 43] is 4.8e-7).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from dpfreq.anonymized import release_anonymized_histogram, sorted_l1_distance
from dpfreq.anonymized.distance import cumulative_sup_between
from dpfreq.anonymized.histogram_input import as_prevalences

pytestmark = pytest.mark.statistical

TRIALS = 60
MIN_HITS = 44


def zipf_sample(n: int, seed: int) -> dict[int, int]:
    k = n // 2
    p = 1.0 / np.arange(1, k + 1)
    counts = np.random.Generator(np.random.PCG64(seed)).multinomial(n, p / p.sum())
    values, prev = np.unique(counts[counts > 0], return_counts=True)
    return dict(zip(values.tolist(), prev.tolist(), strict=True))


def test_threshold_has_the_stated_alpha() -> None:
    assert binom.cdf(MIN_HITS - 1, TRIALS, 0.93) < 1e-6


def test_simulated_statements_cover() -> None:
    hist = zipf_sample(1_000, 7)
    counts, prev = as_prevalences(hist)
    hits_l1 = hits_band = 0
    for seed in range(TRIALS):
        rel = release_anonymized_histogram(hist, epsilon=1.0, rng=500 + seed, unit="event")
        hits_l1 += sorted_l1_distance(rel, hist) <= rel.error.value
        sup = cumulative_sup_between(rel.counts, rel.prevalences, counts, prev)
        hits_band += sup <= rel.items_at_least_band
    assert hits_l1 >= MIN_HITS
    assert hits_band >= MIN_HITS
