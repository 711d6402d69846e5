"""Private partition selection: exact threshold, exact release probabilities, exact privacy of
the selection alone and composed with a per-group release, bad input with nothing spent."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from dpfreq.budget import Accountant, PrivacyBudget
from dpfreq.engines import CountRequest, Grouping, get_engine
from dpfreq.errors import ParameterError
from dpfreq.grouped.selection import plan_selection, truncated_tail
from dpfreq.noise import discrete_laplace_pmf, discrete_laplace_tail
from dpfreq.profile import release_profile

CASES = [(0.5, 1e-6, 1), (0.5, 1e-6, 2), (1.0, 1e-5, 1), (0.1, 1e-3, 5), (4.0, 1e-9, 20),
         (2.0, 1e-3, 3)]


def _p1(k: int, gamma: Fraction) -> float:
    """Pr[Z = k] of the discrete Laplace law truncated to [−k, k] (an independent formula: the
    library's two-sided tail Pr[|Z| > k] and pmf, renormalised)."""
    inside = 1.0 - float(discrete_laplace_tail(k, gamma))
    return float(discrete_laplace_pmf(np.array([k]), gamma)[0]) / inside


@pytest.mark.parametrize(("epsilon", "delta", "m"), CASES)
def test_threshold_is_the_smallest_valid_one(epsilon: float, delta: float, m: int) -> None:
    plan = plan_selection(epsilon, delta, m)
    assert plan.gamma <= Fraction(epsilon) / m
    k = plan.truncation
    p1 = _p1(k, plan.gamma)
    assert math.isclose(p1, plan.single_item_probability, rel_tol=1e-9)
    assert m * p1 <= delta  # a key held by one item: released with probability <= δ/m
    assert 1 - (1 - p1) ** m <= delta  # one item's m private keys: any released, <= δ
    assert k == 0 or m * _p1(k - 1, plan.gamma) > delta  # k - 1 would not do


@pytest.mark.parametrize(("epsilon", "delta", "m"), CASES)
def test_release_probability_is_the_exact_law(epsilon: float, delta: float, m: int) -> None:
    plan = plan_selection(epsilon, delta, m)
    z = np.arange(-plan.truncation, plan.truncation + 1)
    pmf = discrete_laplace_pmf(z, plan.gamma)
    pmf = pmf / pmf.sum()  # the truncated law
    for count in (1, 2, plan.threshold - 3, plan.threshold, plan.threshold + 7):
        if count < 1:
            continue
        summed = float(pmf[count + z >= plan.threshold].sum())
        assert math.isclose(plan.release_probability(count), summed, rel_tol=1e-9,
                            abs_tol=1e-300)
    assert plan.release_probability(0) == 0.0


@pytest.mark.parametrize(("epsilon", "delta", "m"), CASES)
def test_selection_bit_privacy_exact(epsilon: float, delta: float, m: int) -> None:
    """Per group: counts c and c + 1 (c >= 0, c = 0 the group absent) give bit laws that are
    (γ, p₁)-close both ways, the optimal mechanism's recurrence holding with equality below
    the threshold."""
    plan = plan_selection(epsilon, delta, m)
    e = math.exp(float(plan.gamma))
    p1 = plan.single_item_probability
    k = plan.truncation

    def kept_out(c: int) -> float:  # Pr[c + Z < τ] = Pr[Z >= c + 1 - τ], without cancellation
        return truncated_tail(c + 1 - plan.threshold, plan.gamma, k) if c >= 1 else 1.0

    for c in range(min(2 * k + 3, 3000)):
        p, q = plan.release_probability(c), plan.release_probability(c + 1)
        assert q <= (e * p + p1) * (1 + 1e-9)  # float rounding of the exact law only
        assert p <= e * q + 1e-300
        assert kept_out(c) <= (e * kept_out(c + 1) + p1) * (1 + 1e-9)
        assert kept_out(c + 1) <= e * kept_out(c) + 1e-300
        if 1 <= c <= k:  # optimal: the largest release probability (γ, p₁)-DP allows
            assert math.isclose(q, e * p + p1, rel_tol=1e-9)


def _hockey(p: np.ndarray, q: np.ndarray, eps: float) -> float:
    return float(np.maximum(p - math.exp(eps) * q, 0).sum())


@pytest.mark.parametrize("m", [1, 2, 3])
def test_selection_composes_to_epsilon_delta_exactly(m: int) -> None:
    """One item touching m groups, each new (0 → 1 items) or existing (c → c + 1): the exact
    hockey-stick divergence of the m selection bits at ε_sel is at most δ, both directions."""
    eps, delta = 0.7, 1e-4
    plan = plan_selection(eps, delta, m)
    tau = plan.threshold
    for before in itertools.product([0, 1, tau - 2, tau - 1, tau, tau + 3], repeat=m):
        p_without = [plan.release_probability(c) for c in before]
        p_with = [plan.release_probability(c + 1) for c in before]
        laws = []
        for probs in (p_without, p_with):
            joint = np.array([math.prod(pr if b else 1 - pr for pr, b in zip(probs, bits,
                                                                              strict=True))
                              for bits in itertools.product([0, 1], repeat=m)])
            laws.append(joint)
        assert _hockey(laws[1], laws[0], eps) <= delta + 1e-15
        assert _hockey(laws[0], laws[1], eps) <= delta + 1e-15


def test_selection_with_release_composes_exactly() -> None:
    """m = 1, the group's output is (selected?, its noisy count of items at ε_r) as in the
    direct profile with d = n = 1: the exact divergence at ε = ε_s + ε_r is at most δ, and
    exactly p₁ for the new group."""
    eps, delta = 1.0, 1e-5
    plan = plan_selection(eps / 2, delta, 1)
    gamma_r = Fraction(1, 2)
    z = np.arange(-3000, 3001)
    pmf_r = discrete_laplace_pmf(z, gamma_r)

    def law(c: int) -> np.ndarray:
        sel = plan.release_probability(c)
        # outcomes: not selected, then selected with noisy count c + z for every z
        return np.concatenate([[1 - sel], sel * pmf_r]) if c else \
            np.concatenate([[1.0], np.zeros(z.size)])

    def shifted(c: int) -> np.ndarray:  # the same law indexed by the released value
        out = law(c)
        body = np.zeros(z.size + plan.threshold + 8)
        body[c:c + z.size] = out[1:]
        return np.concatenate([[out[0]], body])

    for c in [0, 1, 2, plan.threshold - 1, plan.threshold, plan.threshold + 4]:
        a, b = shifted(c), shifted(c + 1)
        d_ab, d_ba = _hockey(b, a, eps), _hockey(a, b, eps)
        if c == 0:
            assert math.isclose(d_ab, plan.single_item_probability, rel_tol=1e-9)
        assert d_ab <= delta + 1e-15
        assert d_ba <= delta + 1e-15


def _log(extra: bool) -> pd.DataFrame:
    gen = np.random.default_rng(5)
    df = pd.DataFrame({"u": gen.integers(0, 3000, 20_000),
                       "g": gen.choice(["a", "b", "c"], 20_000)})
    if extra:
        df = pd.concat([df, pd.DataFrame({"u": [10**6], "g": ["only-one-item"]})])
    return df


def test_selection_release_on_every_engine_is_identical() -> None:
    df = _log(True)
    rels = [release_profile(df, item="u", group="g", max_groups_per_item=2, delta=1e-6,
                            domain_size=10**5, max_count=8, epsilon=1.0, unit="item", rng=3,
                            engine=e) for e in ("memory", "duckdb")]
    assert rels[0].groups == rels[1].groups
    for name in rels[0]:
        assert rels[0][name].value.tolist() == rels[1][name].value.tolist()
    rel = rels[0]
    assert rel.delta == 1e-6
    assert rel.epsilon == 1.0
    assert rel.mechanism_params["selection"]["epsilon"] == 0.5
    assert rel.mechanism_params["epsilon_per_group"] == 0.25
    # the lone item's group: released with probability p₁ <= 5e-7, so this fails with
    # probability at most 5e-7 (a stated false-alarm rate, not a fixed output)
    assert "only-one-item" not in rel.groups
    # ~6,700 items per group, threshold near 60: each released except with probability < 1e-300
    assert rel.groups == ("a", "b", "c")


def test_all_groups_engine_aggregate_matches() -> None:
    df = _log(True)
    outs = []
    for e in ("memory", "duckdb"):
        gp = get_engine(e).grouped_count_of_counts(df, CountRequest(
            "u", Grouping("g", None, 1, bytes(range(32))), max_count=5))
        outs.append((gp.groups, gp.group_index.tolist(), gp.counts.tolist(),
                     gp.prevalences.tolist()))
    assert outs[0] == outs[1]
    assert outs[0][0] == ("a", "b", "c", "only-one-item")


BAD = [
    ({"max_groups_per_item": 2}, "groups of release_profile must be a public list of group "
     "names, or give delta= > 0"),
    ({"max_groups_per_item": 2, "delta": 0.0}, "delta of release_profile must be a number in "
     "(0, 1e-3]"),
    ({"max_groups_per_item": 2, "delta": 0.01}, "delta of release_profile must be a number in "
     "(0, 1e-3]"),
    ({"max_groups_per_item": 2, "delta": float("nan")}, "delta of release_profile"),
    ({"max_groups_per_item": 0, "delta": 1e-6}, "max_groups_per_item of release_profile must "
     "be an integer >= 1"),
    ({"max_groups_per_item": 2, "delta": 0.01, "groups": ["a"]}, "delta of release_profile "
     "must be a number in (0, 1e-3] (with a public list: the release's δ"),
    ({"delta": 1e-6}, "max_groups_per_item of release_profile must be given"),
]


@pytest.mark.parametrize(("kwargs", "text"), BAD)
def test_bad_selection_input_is_one_line_and_spends_nothing(kwargs: dict[str, object],
                                                             text: str) -> None:
    acct = Accountant(PrivacyBudget(10.0, 1e-3))
    with pytest.raises(ParameterError) as info:
        release_profile(_log(False), item="u", group="g", domain_size=10**4, max_count=5,
                        epsilon=1.0, unit="item", rng=0, accountant=acct, **kwargs)
    assert text in str(info.value)
    assert "\n" not in str(info.value)
    assert (acct.spent.epsilon, acct.spent.delta) == (0.0, 0.0)


def test_delta_without_group_is_refused() -> None:
    with pytest.raises(ParameterError, match="delta of release_profile must be None without "
                                             "group="):
        release_profile(np.array([1, 2]), domain_size=4, max_count=3, epsilon=1.0,
                        unit="item", delta=1e-6)


def test_accountant_is_charged_epsilon_and_delta_once() -> None:
    acct = Accountant(PrivacyBudget(2.0, 1e-5))
    release_profile(_log(False), item="u", group="g", max_groups_per_item=3, delta=1e-6,
                    domain_size=10**4, max_count=5, epsilon=1.0, unit="item", rng=0,
                    accountant=acct)
    assert (acct.spent.epsilon, acct.spent.delta) == (1.0, 1e-6)


def test_truncated_tail_is_symmetric() -> None:
    g = Fraction(1, 3)
    for j in range(-9, 10):
        assert math.isclose(truncated_tail(j, g, 6) + truncated_tail(1 - j, g, 6), 1.0,
                            rel_tol=1e-12)


def test_no_group_selected_gives_an_empty_release() -> None:
    # three one-item groups, each released with probability <= 1e-7: all stay hidden except
    # with probability <= 3e-7 (the stated false-alarm rate)
    rel = release_profile({"u": [1, 2, 3], "g": ["a", "b", "c"]}, item="u", group="g",
                          max_groups_per_item=1, delta=1e-7, domain_size=10, max_count=2,
                          epsilon=1.0, unit="item", rng=0)
    assert rel.groups == ()
    assert "No group was released" in rel.simultaneous.description
    assert rel.to_pandas().shape == (0, 3)
    assert '"groups": {}' in rel.to_json()


@pytest.mark.parametrize(("epsilon", "delta", "m"), CASES)
def test_count_for_is_the_smallest_count(epsilon: float, delta: float, m: int) -> None:
    plan = plan_selection(epsilon, delta, m)
    for p in (0.05, 0.5, 0.95, 0.999):
        c = plan.count_for(p)
        assert plan.release_probability(c) >= p
        assert c == 1 or plan.release_probability(c - 1) < p


def test_tiny_epsilon_plans_without_looping() -> None:
    # γ = 1e-9: p₁ ≈ 1/(2(k+1)), so τ ≈ 5·10^5 (the Laplace threshold was above 10^10);
    # found by doubling and bisection (a few dozen steps)
    plan = plan_selection(1e-6, 1e-3, 1000)
    assert 10**5 < plan.threshold < 10**6
    assert plan.count_for(0.95) > plan.threshold
    assert 1000 * plan.single_item_probability <= 1e-3


def _sizes(rows: list[tuple[int, str]], m: int) -> dict[str, int]:
    """Items per group of the data after bounding (groups=None), from the memory engine."""
    if not rows:
        return {}
    gp = get_engine("memory").grouped_count_of_counts(
        {"u": [r[0] for r in rows], "g": [r[1] for r in rows]},
        CountRequest("u", Grouping("g", None, m, bytes(range(32))), max_count=3))
    sizes = np.bincount(gp.group_index, weights=gp.prevalences, minlength=len(gp.groups))
    return {g: int(k) for g, k in zip(gp.groups, sizes, strict=True)}


@pytest.mark.parametrize("m", [1, 2])
def test_selection_counts_move_by_one_in_at_most_m_groups(m: int) -> None:
    """Every data set of items 1 and 2 over groups a, b, c (0..1 rows each) and its
    remove-one-item neighbours: the candidates' item counts (the selection's input) change by
    at most 1 in at most m groups, and a group appears or vanishes only with one item."""
    cells = list(itertools.product([0, 1], repeat=3))
    for a, b in itertools.product(cells, cells):
        rows = [(1, g) for g, k in zip("abc", a, strict=True) if k]
        rows += [(2, g) for g, k in zip("abc", b, strict=True) if k]
        full = _sizes(rows, m)
        for drop in (1, 2):
            fewer = _sizes([r for r in rows if r[0] != drop], m)
            moved = [g for g in set(full) | set(fewer) if full.get(g, 0) != fewer.get(g, 0)]
            assert len(moved) <= m
            for g in moved:
                assert full.get(g, 0) - fewer.get(g, 0) == 1
                assert g in fewer or full[g] == 1
