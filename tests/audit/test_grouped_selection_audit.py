"""Seeded audits of private partition selection: a key held by one item is released with
probability at most δ (Clopper–Pearson), and at exactly the law's rate (binomial test)."""

from __future__ import annotations

import numpy as np
from scipy.stats import beta, binomtest

from dpfreq.grouped.selection import plan_selection, select_groups
from dpfreq.profile import release_profile

ALPHA = 1e-6


def test_single_item_keys_are_released_at_most_delta() -> None:
    # 2·10^6 candidate groups of one item each, one vectorised draw: the released share
    # estimates p₁. Power: at δ = 1e-3 and m = 1 about 2·10^6·p₁ ≈ 1,800 releases, so a rate
    # above δ by 15% would be caught; each assertion's false-alarm rate is at most α = 1e-6.
    plan = plan_selection(2.0, 1e-3, 1)
    n = 2_000_000
    names = [f"g{i}" for i in range(n)]
    chosen = select_groups(names, np.ones(n, dtype=np.int64), plan, np.random.default_rng(11))
    k = len(chosen)
    lower = 0.0 if k == 0 else float(beta.ppf(ALPHA, k, n - k + 1))
    assert lower <= plan.delta  # the audit's lower bound on the release rate stays below δ
    assert binomtest(k, n, plan.single_item_probability).pvalue > ALPHA  # the exact law
    assert k > 0  # the audit is not idle


def test_end_to_end_release_of_a_lone_group_stays_below_delta() -> None:
    # The whole path (engine, bounding, selection) on neighbours "without / with a lone item
    # in its own group": without it the group cannot appear; with it, the release rate's
    # Clopper–Pearson lower bound (α = 1e-6) stays below δ.
    runs, hits = 2_000, 0
    gen = np.random.default_rng(12)
    for _ in range(runs):
        rel = release_profile({"u": [1, 2, 3], "g": ["a", "a", "lone"]}, item="u", group="g",
                              max_groups_per_item=1, delta=1e-3, domain_size=10, max_count=2,
                              epsilon=4.0, unit="item", engine="memory", rng=gen)
        hits += "lone" in rel.groups
    lower = 0.0 if hits == 0 else float(beta.ppf(ALPHA, hits, runs - hits + 1))
    assert lower <= 1e-3
