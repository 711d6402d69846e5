"""Coverage of a stream's dropped-fraction interval (``capping_epsilon=``).

The interval of period ``t`` holds the true fraction ``D(t)/T(t)`` whenever both counters'
answers lie within their certified half-widths at ``β/2`` (union bound: probability at least
the confidence 0.95). Here it is measured on seeded runs of the stream's measurement step
(:func:`dpfreq.stream.measure.measure_periods` under ``TRIALS`` different keys) on fixed exact
increments of ``T`` and ``D``, for the counter a 6-period stream plans, and published exactly as
the stream publishes it (:func:`dpfreq.stream.capping.dropped_fractions`).

Binomial test, one-sided, of coverage >= 0.95 at α <= 1e-6 per period: with ``TRIALS = 3000``
runs the assertion fails only when fewer than ``MIN_HITS`` cover, which has probability below
1e-6 under Binomial(3000, 0.95) (computed below). Power: a coverage of 0.90 would pass with
probability below 1e-6 (``binom.sf``, asserted below). About 2 s.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from dpfreq.stream import ReachStream
from dpfreq.stream.capping import dropped_fractions
from dpfreq.stream.measure import measure_periods
from dpfreq.stream.publish import halfwidths

pytestmark = pytest.mark.statistical

TRIALS = 3000
CONFIDENCE = 0.95
MIN_HITS = int(binom.ppf(1e-6, TRIALS, CONFIDENCE))  # Pr[X < MIN_HITS] <= 1e-6
#: exact increments of T and D over 6 periods (an empty period 5)
EXACT = np.array([[[300, 200, 100, 50, 0, 25], [40, 120, 90, 50, 0, 25]]], dtype=np.int64)


def test_threshold_has_the_stated_alpha_and_power() -> None:
    assert binom.cdf(MIN_HITS - 1, TRIALS, CONFIDENCE) <= 1e-6
    assert binom.sf(MIN_HITS - 1, TRIALS, 0.90) < 1e-6


def test_interval_holds_the_true_fraction(tmp_path) -> None:
    s = ReachStream.create(tmp_path / "s", item="u", time="t", horizon=6, k_values=[1],
                           unit="item", epsilon=4.0, delta=0.0, method="auto", late="error",
                           engine="memory", group="g", groups=list("abcdef"),
                           max_groups_per_item=1, capping_epsilon=0.5, rng=5)
    cap = s.capping
    widths = halfwidths(cap, 6, (1.0 - CONFIDENCE) / 2)
    truth = EXACT[0, 1].cumsum() / EXACT[0, 0].cumsum()
    hits = np.zeros(6, dtype=np.int64)
    for i in range(TRIALS):
        noisy = measure_periods(cap, i.to_bytes(32, "big"), (1, 2), EXACT,
                                np.zeros((2, 1, 0), dtype=np.int64), 0, 6, False)
        for j, d in enumerate(dropped_fractions(s.params, cap, noisy, widths, 1, 6,
                                                CONFIDENCE)):
            hits[j] += d.lower <= truth[j] <= d.upper
    assert np.all(hits >= MIN_HITS), hits.tolist()
