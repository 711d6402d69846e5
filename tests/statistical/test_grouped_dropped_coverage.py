"""Coverage of the dropped-fraction interval of grouped releases (``capping_epsilon=``).

The interval holds the true fraction whenever both sums' noises lie within ±q, which has
probability at least the confidence 0.95 by the exact law (``tests/unit/test_grouped_dropped.py``);
here it is measured on seeded runs of the release's measurement step
(:func:`dpfreq.grouped.dropped.measure_dropped`) on the exact sums the memory engine computes for
a skewed log (items holding 1–17 groups, m = 3, the setting of issue 47).

Binomial test, one-sided, of coverage >= 0.95 at α <= 1e-6: with ``TRIALS = 5000`` runs the
assertion fails only when fewer than ``MIN_HITS`` cover, which has probability below 1e-6 under
Binomial(5000, 0.95) (computed below). Power: a coverage of 0.92 would pass with probability
below 1e-3 (``binom.sf``, asserted below), so the test detects a miscalibrated interval.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.stats import binom

from dpfreq.engines import CountRequest, Grouping, get_engine
from dpfreq.errors import DPFreqWarning
from dpfreq.grouped.dropped import capping_bound, capping_sums, measure_dropped

pytestmark = pytest.mark.statistical

TRIALS = 5000
CONFIDENCE = 0.95
MIN_HITS = int(binom.ppf(1e-6, TRIALS, CONFIDENCE))  # Pr[X < MIN_HITS] <= 1e-6


def test_threshold_has_the_stated_alpha_and_power() -> None:
    assert binom.cdf(MIN_HITS - 1, TRIALS, CONFIDENCE) <= 1e-6
    assert binom.sf(MIN_HITS - 1, TRIALS, 0.92) < 1e-3


@pytest.mark.parametrize(("epsilon", "m"), [(0.1, 3), (1.0, 3), (0.5, 1)])
def test_interval_holds_the_true_fraction(epsilon: float, m: int) -> None:
    gen = np.random.Generator(np.random.PCG64(47))
    n_items, n_groups = 2_000, 40
    held = np.minimum(gen.zipf(1.8, n_items), 17)  # groups per item: 1..17, skewed
    items = np.repeat(np.arange(n_items), held)
    groups = np.concatenate([gen.choice(n_groups, size=h, replace=False) for h in held])
    names = tuple(f"c{g}" for g in range(n_groups))
    gp = get_engine("memory").grouped_count_of_counts(
        {"user": items.tolist(), "campaign": [names[g] for g in groups]},
        CountRequest("user", Grouping("campaign", names, None), per_item="distinct_groups"))
    big = capping_bound(m)
    sums = capping_sums(gp, m, big)
    truth = sums.dropped / sums.total
    assert truth == pytest.approx(np.minimum(np.maximum(held - m, 0), big - m).sum()
                                  / np.minimum(held, big).sum())
    hits = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DPFreqWarning)
        for seed in range(TRIALS):
            out = measure_dropped(sums, epsilon=epsilon, m=m, confidence=CONFIDENCE,
                                  generator=np.random.Generator(np.random.PCG64(seed)))
            hits += out.lower <= truth <= out.upper
    assert hits >= MIN_HITS, (hits, truth)
