"""Seeded Clopper–Pearson audits of one grouped profile release and one grouped window release
(item level, m = 2)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import beta

from dpfreq.profile import release_profile
from dpfreq.windows import release_window_counts

ALPHA = 1e-6


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    """One-sided (1 − α/4) Clopper–Pearson bounds; four are used, so the union bound gives a
    false-alarm rate of at most α = 1e-6."""
    lower = 0.0 if k == 0 else float(beta.ppf(ALPHA / 4, k, n - k + 1))
    upper = 1.0 if k == n else float(beta.ppf(1 - ALPHA / 4, k + 1, n - k))
    return lower, upper


def epsilon_lower_bound(k1: int, k2: int, n: int) -> float:
    """The largest privacy loss the two hit counts (of ``n`` runs each) certify at false-alarm
    rate α: the log ratio of Clopper–Pearson bounds of the event and of its complement."""
    lo1, hi1 = clopper_pearson(k1, n)
    lo2, hi2 = clopper_pearson(k2, n)
    return max(math.log(lo2 / hi1) if lo2 > 0 else -math.inf,
               math.log(lo1 / hi2) if lo1 > 0 else -math.inf,
               math.log((1 - hi1) / (1 - lo2)) if lo2 < 1 and hi1 < 1 else -math.inf)


@pytest.mark.slow
def test_grouped_profile_audit_stays_below_epsilon() -> None:
    # Neighbours at unit="item": item 1 with one row in each of groups a and b, or no item 1
    # (item 2 sits in an unlisted group, whose rows are dropped). The event needs both groups to
    # show an item at t = 1, so both of the item's per-group releases (each at ε/m) contribute.
    epsilon, runs = 1.0, 3_000
    with_item = {"u": [1, 1, 2], "g": ["a", "b", "z"]}
    without = {"u": [2], "g": ["z"]}

    def hits(source: dict[str, list[object]], seed: int) -> int:
        gen = np.random.Generator(np.random.PCG64(seed))
        k = 0
        for _ in range(runs):
            rel = release_profile(source, item="u", group="g", groups=["a", "b"],
                                  max_groups_per_item=2, domain_size=2, max_count=1,
                                  epsilon=epsilon, unit="item", engine="memory", rng=gen)
            k += bool(rel["a"].value[1] >= 0.5 and rel["b"].value[1] >= 0.5)
        return k

    k1, k2 = hits(without, 21), hits(with_item, 22)
    bound = epsilon_lower_bound(k1, k2, runs)
    assert bound <= epsilon
    assert k2 > k1  # the event tells the neighbours apart (the audit is not idle)


@pytest.mark.slow
def test_grouped_window_audit_stays_below_epsilon() -> None:
    # Neighbours at unit="item": item 1 with one event in each of groups a and b, or no item 1
    # (item 2 sits in an unlisted group, whose rows are dropped). The event needs both groups'
    # whole-period reach to be >= 1, so both of the item's per-group releases (each at ε/m)
    # contribute: the loss of the event is at most m · ε/m = ε.
    epsilon, runs = 1.0, 4_000
    with_item = {"u": [1, 1, 2], "g": ["a", "b", "z"], "t": [1, 2, 1]}
    without = {"u": [2], "g": ["z"], "t": [1]}

    def hits(source: dict[str, list[object]], seed: int) -> int:
        gen = np.random.Generator(np.random.PCG64(seed))
        k = 0
        for _ in range(runs):
            rel = release_window_counts(source, item="u", time="t", horizon=2,
                                        epsilon=epsilon, unit="item", k_values=[1],
                                        windows=["total"], group="g", groups=["a", "b"],
                                        max_groups_per_item=2, engine="memory", rng=gen)
            k += bool(rel["a"].value["total"][1][0] >= 1 and rel["b"].value["total"][1][0] >= 1)
        return k

    k1, k2 = hits(without, 31), hits(with_item, 32)
    bound = epsilon_lower_bound(k1, k2, runs)
    assert bound <= epsilon
    assert bound > 0.25  # the audit is not idle: it sees a good part of the claimed ε
