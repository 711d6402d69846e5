"""The weighted set-union partition selection: certified threshold, exact privacy of the
common and new groups, the engines' per-item group counts and the ``auto`` choice."""

from __future__ import annotations

import decimal
import itertools
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpfreq.engines import CountRequest, Grouping, get_engine
from dpfreq.errors import ParameterError
from dpfreq.grouped.selection import group_weights, plan_partition_selection, plan_selection
from dpfreq.grouped.set_union import plan_set_union, set_union_scale
from dpfreq.noise import discrete_laplace_pmf
from dpfreq.windows import plan_window_counts, release_window_counts

KEY = bytes(range(3, 35))


def _tail(j: int, gamma: Fraction) -> decimal.Decimal:
    """``Pr[Z >= j]`` of ``DLap(e^{-γ})`` to 60 digits."""
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        alpha = (-decimal.Decimal(gamma.numerator) / gamma.denominator).exp()
        if j >= 1:
            return alpha ** j / (1 + alpha)
        return 1 - alpha ** (1 - j) / (1 + alpha)


def _new_groups_bound(tau: int, plan: Any) -> decimal.Decimal:
    """``max_s s·Pr[Z >= τ − ⌊L/s⌋]``: the chance one item's own groups are released."""
    return max(s * _tail(tau - plan.scale // s, plan.gamma)
               for s in range(1, plan.max_groups_per_item + 1))


@pytest.mark.parametrize(("epsilon", "delta", "m"),
                         [(0.5, 1e-6, 8), (0.25, 1e-6, 8), (2.0, 1e-6, 8), (1.0, 1e-5, 3),
                          (0.1, 1e-8, 2), (4.0, 1e-6, 20)])
def test_threshold_is_certified_and_smallest(epsilon: float, delta: float, m: int) -> None:
    plan = plan_set_union(epsilon, delta, m)
    assert plan.scale * plan.gamma <= Fraction(epsilon)
    assert plan.bad_probability <= Fraction(delta)
    assert _new_groups_bound(plan.threshold, plan) <= decimal.Decimal(delta)
    # one less would break δ (or fall to the scale, below which the bound is not stated)
    below = plan.threshold - 1
    assert below <= plan.scale or _new_groups_bound(below, plan) > decimal.Decimal(delta)


def test_scale_and_weights() -> None:
    assert [set_union_scale(m) for m in (1, 2, 3, 4, 8, 12, 13)] == [
        1, 2, 6, 12, 840, 27720, 27720]
    plan = plan_set_union(1.0, 1e-6, 8)
    assert all(s * plan.weight(s) <= plan.scale for s in range(1, 9))
    assert plan.weight(1) == 840
    assert plan.weight(8) == 105


def test_common_groups_are_epsilon_dp_exactly() -> None:
    """Adding one item shifts its groups' weights by ``⌊L/s⌋`` each (ℓ1 <= L): the worst
    ratio of the product of discrete Laplace pmfs over a grid of noisy values is ``e^{γ·L}``
    at most, computed exactly from the pmf."""
    eps, m = 0.75, 3
    plan = plan_set_union(eps, 1e-6, m)
    for s in range(1, m + 1):
        shift = plan.weight(s)
        grid = np.arange(-3 * plan.scale, 3 * plan.scale + 1, 7)
        p = discrete_laplace_pmf(grid, plan.gamma)
        q = discrete_laplace_pmf(grid - shift, plan.gamma)
        worst_one = float(np.max(np.abs(np.log(p) - np.log(q))))
        assert s * worst_one <= float(plan.scale * plan.gamma) * (1 + 1e-12) <= eps * (1 + 1e-12)


@pytest.mark.parametrize("m", [2, 3])
def test_hockey_stick_of_one_new_item_is_at_most_delta(m: int) -> None:
    """Exact (ε, δ) of the released set for neighbours that differ by one item holding
    ``s`` groups, one common (weight ``c`` vs ``c + w_s``) and the others new: the
    hockey-stick divergence over all output sets, from the exact per-group release
    probabilities, is at most δ in both directions."""
    eps, delta = 0.5, 1e-4
    plan = plan_set_union(eps, delta, m)
    e_eps = decimal.Decimal(eps).exp()
    for s in range(1, m + 1):
        w = plan.weight(s)
        for c in (1, plan.threshold - w, plan.threshold, 3 * plan.threshold):
            # D: one common group of weight c; D': the same + w, and s - 1 new groups of w
            p_common = _tail(plan.threshold - c, plan.gamma)
            q_common = _tail(plan.threshold - c - w, plan.gamma)
            q_new = _tail(plan.threshold - w, plan.gamma)
            outs_d, outs_dp = {}, {}
            for bits in itertools.product((0, 1), repeat=s):
                common, new = bits[0], bits[1:]
                pd_ = (p_common if common else 1 - p_common) * (0 if any(new) else 1)
                pq = q_common if common else 1 - q_common
                for b in new:
                    pq *= q_new if b else 1 - q_new
                outs_d[bits], outs_dp[bits] = decimal.Decimal(pd_), pq
            for a, b in ((outs_d, outs_dp), (outs_dp, outs_d)):
                div = sum(max(decimal.Decimal(0), a[o] - e_eps * b[o]) for o in a)
                assert div <= decimal.Decimal(delta)


def test_engines_count_each_items_kept_groups() -> None:
    gen = np.random.default_rng(4)
    df = pd.DataFrame({"u": gen.integers(0, 200, 3000),
                       "g": np.char.add("g", gen.integers(0, 30, 3000).astype(str))})
    req = CountRequest("u", Grouping("g", None, 3, KEY), per_item="groups")
    got = []
    for name in ("memory", "duckdb"):
        gp = get_engine(name).grouped_count_of_counts(df, req)
        got.append((gp.groups, gp.group_index.tolist(), gp.counts.tolist(),
                    gp.prevalences.tolist()))
    assert got[0] == got[1]
    # by hand: every item's kept groups (the rows one engine keeps), counted per item
    rows = get_engine("memory").grouped_count_of_counts(df, CountRequest("u", req.grouping))
    assert sum(got[0][3]) == int(rows.prevalences.sum())  # same (item, group) pairs
    assert set(got[0][2]) <= {1, 2, 3}
    plan = plan_set_union(1.0, 1e-6, 3)
    gp = get_engine("memory").grouped_count_of_counts(df, req)
    weights = group_weights(gp, plan, True)
    expect = np.zeros(len(gp.groups), dtype=np.int64)
    for g, s, n in zip(gp.group_index, gp.counts, gp.prevalences, strict=True):
        expect[g] += n * (plan.scale // s)
    assert weights.tolist() == expect.tolist()


def test_per_item_groups_needs_a_bound() -> None:
    with pytest.raises(ParameterError, match="per_item"):
        get_engine("memory").grouped_count_of_counts(
            {"u": [1], "g": ["a"]}, CountRequest("u", Grouping("g", None, None), per_item="groups"))


def test_auto_chooses_from_public_parameters_and_says_why() -> None:
    one = plan_partition_selection(0.5, 1e-6, 1)
    assert one.mechanism == "truncated_geometric"
    assert "one group per unit" in one.why
    many = plan_partition_selection(0.5, 1e-6, 8)
    assert many.mechanism == "weighted_set_union"
    assert "break-even" in many.why
    forced = plan_partition_selection(0.5, 1e-6, 8, "truncated_geometric")
    assert forced.threshold == plan_selection(0.5, 1e-6, 8).threshold
    # the break-even: items holding one group need far fewer under the set union, items
    # holding m more
    tg = plan_selection(0.5, 1e-6, 8)
    assert many.count_for(0.5, 1) < tg.count_for(0.5) < many.count_for(0.5, 8)


def test_window_release_states_the_mechanism_and_is_reproducible() -> None:
    gen = np.random.default_rng(8)
    n = 20_000
    df = pd.DataFrame({"u": gen.integers(0, 4000, n), "day": gen.integers(1, 8, n),
                       "g": np.char.add("g", (gen.zipf(1.5, n) % 60).astype(str))})
    kw: dict[str, Any] = {"item": "u", "time": "day", "horizon": 7, "epsilon": 2.0, "delta": 1e-6,
                              "unit": "item", "k_values": [1], "windows": ["total"], "group": "g",
                              "max_groups_per_item": 4, "rng": 3, "selection": "set_union"}
    a, b = release_window_counts(df, **kw), release_window_counts(df, **kw)
    assert a.groups == b.groups
    assert len(a.groups) >= 1
    sel = a.mechanism_params["selection"]
    assert sel["mechanism"].startswith("weighted set union")
    assert sel["scale"] == 12
    assert "weighted set union" in a.mechanism_params["groups"]
    assert set(a.groups) <= set(df["g"])
    plan = plan_window_counts(horizon=7, epsilon=2.0, delta=1e-6, unit="item", k_values=[1],
                              windows=["total"], group="g", max_groups_per_item=4,
                              selection="set_union")
    assert plan.selection.threshold == sel["threshold"]
    with pytest.raises(ParameterError, match="selection of release_window_counts"):
        release_window_counts(df, **{**kw, "selection": "policy"})
    with pytest.raises(ParameterError, match="selection of release_window_counts"):
        release_window_counts(df, item="u", time="day", horizon=7, epsilon=1.0,
                              unit="item", k_values=[1], windows=["total"],
                              selection="set_union")
