"""Trial counts of the statistical tests from power calculations (exact binomial laws).

A coverage test draws ``n`` independent hits, each with probability ``p`` (the true coverage),
and fails when the one-sided exact binomial test of ``p >= p0`` rejects at level ``alpha``:
``binom.cdf(hits, n, p0) < alpha``. The false-alarm rate is at most ``alpha`` whatever ``n``;
``n`` only sets the power, so it is chosen as the smallest number of trials that detects a
stated shortfall with a stated probability instead of a round number.
"""

from __future__ import annotations

from scipy import stats


def _rejects_at_most(n: int, p0: float, alpha: float) -> int:
    """The largest hit count the test rejects (``binom.cdf(c, n, p0) < alpha``), or -1."""
    c = int(stats.binom.ppf(alpha, n, p0))
    while c >= 0 and stats.binom.cdf(c, n, p0) >= alpha:
        c -= 1
    return c


def coverage_power(n: int, p0: float, shortfall: float, alpha: float) -> float:
    """Probability that ``n`` trials reject ``p >= p0`` when the coverage is ``p0 - shortfall``."""
    c = _rejects_at_most(n, p0, alpha)
    return float(stats.binom.cdf(c, n, p0 - shortfall)) if c >= 0 else 0.0


def coverage_trials(p0: float, shortfall: float, alpha: float, power: float) -> int:
    """The smallest ``n`` (a multiple of 10) with ``coverage_power(n, ...) >= power``."""
    lo, hi = 1, 1
    while coverage_power(10 * hi, p0, shortfall, alpha) < power:
        lo, hi = hi, 2 * hi
    while lo < hi:  # the power rises with n, up to the lattice wiggles of the binomial law
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if coverage_power(10 * mid, p0, shortfall, alpha) < power \
            else (lo, mid)
    return 10 * hi
