"""The law of the auto bound's measurement (``max_groups_per_item="auto"``, issue 47): the
noisy histogram of groups per item minus the exact one is i.i.d. discrete Laplace at
``γ <= ε_c`` (what the privacy argument and the intervals assume), and the dropped-fraction
interval computed from it covers the true fraction at least at its confidence.

Both are seeded and tested at a false-alarm rate α <= 1e-6 per assertion, with the sample sizes
from the power calculations in each test's docstring.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.stats import binom, chi2

from dpfreq._noise_laws import discrete_laplace_pmf, discrete_laplace_tail
from dpfreq.errors import DPFreqWarning
from dpfreq.grouped.bound_choice import AUTO_MAX_GROUPS, measure_histogram
from dpfreq.grouped.dropped import dropped_from_histogram
from dpfreq.noise import discrete_laplace_gamma

pytestmark = pytest.mark.statistical


def test_histogram_noise_follows_its_exact_law() -> None:
    """The noisy histogram minus the exact one is i.i.d. DLap(e^{−γ}), γ <= ε_c (what the
    privacy argument and the interval assume): chi-square against the exact pmf, tails merged
    until every expected count is >= 5, α = 1e-6. Power: 2,000 releases × 16 bins = 32,000
    draws detect a 10 % change of γ (a shift of ~0.02 in Pr[Z = 0], ~6 σ) with power > 0.99."""
    eps_c = 0.5
    gen = np.random.default_rng(11)
    h = np.arange(1, AUTO_MAX_GROUPS + 1, dtype=np.int64) * 10
    z = np.concatenate([measure_histogram(h, eps_c, gen)[0] - h for _ in range(2000)])
    gamma = discrete_laplace_gamma(eps_c)
    lo, hi = -60, 60
    support = np.arange(lo, hi + 1)
    expected = discrete_laplace_pmf(support, gamma) * z.size
    observed = np.bincount(np.clip(z, lo, hi) - lo, minlength=support.size).astype(float)
    expected[0] += float(discrete_laplace_tail(-lo, gamma)) / 2 * z.size  # below lo
    expected[-1] += float(discrete_laplace_tail(hi, gamma)) / 2 * z.size  # above hi
    keep = expected >= 5
    first, last = int(np.argmax(keep)), int(keep.size - np.argmax(keep[::-1]) - 1)
    obs = np.concatenate([[observed[:first + 1].sum()], observed[first + 1:last],
                          [observed[last:].sum()]])
    exp = np.concatenate([[expected[:first + 1].sum()], expected[first + 1:last],
                          [expected[last:].sum()]])
    stat = float(((obs - exp) ** 2 / exp).sum())
    assert stat < chi2.ppf(1 - 1e-6, obs.size - 1)




def test_histogram_interval_covers_the_true_dropped_fraction() -> None:
    """A skewed exact histogram (items holding 1..16 groups, log-uniform-like), m = 3,
    ε_c = 0.05, confidence 0.95: binomial test of coverage >= 0.95 at α <= 1e-6 with 5,000
    seeded runs (the assertion fails only when fewer than ``min_hits`` cover, probability
    below 1e-6 under Binomial(5000, 0.95)). Power: a coverage of 0.92 passes with probability
    below 1e-3 (asserted)."""
    trials, conf, m, eps_c = 5000, 0.95, 3, 0.05
    v = np.arange(1, AUTO_MAX_GROUPS + 1)
    h = np.round(4000 / v).astype(np.int64)
    truth = float(h @ np.maximum(v - m, 0)) / float(h @ v)
    min_hits = int(binom.ppf(1e-6, trials, conf))
    assert binom.cdf(min_hits - 1, trials, conf) <= 1e-6
    assert binom.sf(min_hits - 1, trials, 0.92) <= 1e-3
    gen = np.random.default_rng(12)
    hits = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DPFreqWarning)  # the fraction is large: it warns
        for _ in range(trials):
            noisy, gamma = measure_histogram(h, eps_c, gen)
            d = dropped_from_histogram(noisy, gamma, epsilon=eps_c, m=m, confidence=conf)
            hits += d.lower <= truth <= d.upper
    assert hits >= min_hits
