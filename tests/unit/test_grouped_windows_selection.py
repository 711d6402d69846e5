"""Grouped window counts without a public group list: private partition selection of the
groups (half of ε and all of δ), exact release probabilities, one charge, engines agree."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpfreq.budget import Accountant, PrivacyBudget
from dpfreq.errors import DataError, ParameterError
from dpfreq.grouped.selection import plan_partition_selection
from dpfreq.windows import plan_window_counts, release_window_counts
from dpfreq.windows.grouped.result import GroupedWindowRelease

BASE = {"item": "u", "time": "t", "horizon": 10, "epsilon": 1.0, "k_values": [1],
        "windows": ["cumulative", "total"]}
DELTA = 1e-6


def _log(lone: bool = True) -> pd.DataFrame:
    gen = np.random.default_rng(11)
    n = 20_000
    df = pd.DataFrame({"u": gen.integers(0, 3000, n), "g": gen.choice(["a", "b", "c"], n),
                       "t": gen.integers(1, 11, n)})
    if lone:  # a group held by one item (two rows)
        df = pd.concat([df, pd.DataFrame({"u": [10**6, 10**6], "g": ["lone", "lone"],
                                          "t": [2, 5]})], ignore_index=True)
    return df


@pytest.mark.parametrize(("epsilon", "delta", "m"), [(1.0, 1e-6, 1), (1.0, 1e-6, 3),
                                                     (0.3, 1e-9, 5), (4.0, 1e-4, 2)])
def test_one_item_group_probability_and_total_budget(epsilon: float, delta: float,
                                                     m: int) -> None:
    """With selection_epsilon = ε/2 the plan's selection is that of grouped profiles at
    (ε/2, δ, m) with the mechanism auto picks: the groups one item alone holds are released
    with probability at most δ (the truncated geometric: each with p₁ <= δ/m), and selection
    plus the m per-group releases add up to the (ε, δ) asked for — also at the share "auto"
    chooses."""
    kw = {"horizon": 10, "epsilon": epsilon, "delta": delta, "unit": "item", "k_values": [1],
          "windows": ["cumulative"], "group": "g", "max_groups_per_item": m}
    auto = plan_window_counts(**kw)
    assert auto.selection.epsilon + m * auto.per_group.epsilon == pytest.approx(epsilon,
                                                                                rel=1e-12)
    assert "share" in auto.budget.selection_why
    plan = plan_window_counts(**kw, selection_epsilon=epsilon / 2)
    sel = plan.selection
    assert sel == plan_partition_selection(epsilon / 2, delta, m)
    p1 = sel.single_item_probability
    if sel.mechanism == "truncated_geometric":
        assert m * p1 <= delta
        assert 1 - (1 - p1) ** m <= delta
    else:  # the set union's bound is on all of one item's groups at once
        assert p1 <= delta
    assert plan.per_group.delta == 0.0
    assert sel.epsilon + m * plan.per_group.epsilon == pytest.approx(epsilon, rel=1e-12)
    assert sel.delta == delta
    assert plan.n_groups is None
    assert plan.to_dict()["selection"]["threshold"] == sel.threshold


@pytest.mark.parametrize("m", [1, 2])
def test_release_selects_and_spends_once(m: int) -> None:
    acct = Accountant(PrivacyBudget(5.0, 1e-3))
    rel = release_window_counts(_log(), group="g", max_groups_per_item=m, delta=DELTA,
                                unit="item", rng=3, accountant=acct, selection_epsilon=0.5,
                                **BASE)
    assert (acct.spent.epsilon, acct.spent.delta) == pytest.approx((1.0, DELTA))
    assert (rel.epsilon, rel.delta) == (1.0, DELTA)
    params = rel.mechanism_params
    sel = params["selection"]
    assert sel["epsilon"] == 0.5
    assert sel["delta"] == DELTA
    chosen = plan_partition_selection(0.5, DELTA, m)  # auto: the set union at m = 2
    assert sel["threshold"] == chosen.threshold
    assert sel["single_item_release_probability"] <= (DELTA / m if m == 1 else DELTA)
    assert params["epsilon_per_group"] == pytest.approx(0.5 / m)
    assert "private partition selection" in params["groups"]
    # the lone item's group is released with probability at most 1e-6: this assertion
    # fails with at most that probability (a stated false-alarm rate, not a fixed output);
    # ~6,600 items per listed group against τ near 60·m: each is released except with
    # probability < 1e-300
    assert rel.groups == ("a", "b", "c")
    one = rel["a"]
    assert one.epsilon == pytest.approx(0.5 / m)
    assert one.delta == 0.0
    assert one.mechanism_params["group"] == "a"
    exact = one._state.exact(one._state.structures[("cumulative", 1)], np.array([1]),
                             np.array([10]))
    assert int(exact[0]) <= _log()[lambda d: d.g == "a"]["u"].nunique()


def test_event_level_counts_rows() -> None:
    rel = release_window_counts(_log(), group="g", delta=DELTA, unit="event", rng=3, **BASE)
    assert rel["a"].epsilon == pytest.approx(0.5)
    assert rel.mechanism_params["selection"]["max_groups_per_item"] == 1
    assert "rows" in rel.mechanism_params["groups"]
    assert rel.groups == ("a", "b", "c")  # lone: p₁ <= 1e-6, as above


@pytest.mark.parametrize(("unit", "extra"), [("item", {"max_groups_per_item": 2}),
                                             ("event", {})])
def test_memory_and_duckdb_agree(unit: str, extra: dict) -> None:
    df = _log()
    rels = [release_window_counts(df, group="g", delta=DELTA, unit=unit, rng=9, engine=e,
                                  **{**BASE, "windows": ["cumulative", 3]}, **extra)
            for e in ("memory", "duckdb")]
    assert rels[0].groups == rels[1].groups
    for g in rels[0]:
        for fam, per_k in rels[0][g].value.items():
            assert np.array_equal(per_k[1], rels[1][g].value[fam][1])
    assert rels[0].simultaneous == rels[1].simultaneous


def test_no_group_selected_and_save_load(tmp_path: Path) -> None:
    acct = Accountant(PrivacyBudget(5.0, 1e-3))
    df = _log()
    lone = release_window_counts(df[df.g == "lone"], group="g", max_groups_per_item=1,
                                 delta=DELTA, unit="item", rng=3, accountant=acct, **BASE)
    assert lone.groups == ()  # p₁ <= 1e-6, as above
    # the selection itself was spent
    assert (acct.spent.epsilon, acct.spent.delta) == pytest.approx((1.0, DELTA))
    assert "No group was released" in lone.simultaneous.description
    assert len(lone.to_pandas()) == 0
    assert list(lone.to_pandas().columns[:2]) == ["g", "window"]
    with pytest.raises(DataError, match=r"^path of GroupedWindowRelease.save must"):
        lone.save(tmp_path / "none.dpfreq")
    rel = release_window_counts(df, group="g", max_groups_per_item=2, delta=DELTA,
                                unit="item", rng=4, **BASE)
    back = GroupedWindowRelease.load(rel.save(tmp_path / "sel.dpfreq"))
    assert back.groups == rel.groups
    assert back.mechanism_params["selection"] == rel.mechanism_params["selection"]
    for g in rel:
        assert np.array_equal(back[g].value["cumulative"][1], rel[g].value["cumulative"][1])


@pytest.mark.parametrize(("kwargs", "text"), [
    ({"max_groups_per_item": 2}, "groups of release_window_counts must be a public list"),
    ({"max_groups_per_item": 2, "delta": 0.01}, "delta of release_window_counts must be a "
     "number in"),
    ({"delta": DELTA}, "max_groups_per_item of release_window_counts must be given"),
    ({"max_groups_per_item": 0, "delta": DELTA}, "max_groups_per_item of "
     "release_window_counts must be an integer >= 1"),
])
def test_bad_selection_input_spends_nothing(kwargs: dict, text: str) -> None:
    acct = Accountant(PrivacyBudget(5.0, 1e-3))
    with pytest.raises(ParameterError) as info:
        release_window_counts(_log(False), group="g", unit="item", rng=0, accountant=acct,
                              **BASE, **kwargs)
    assert text in str(info.value)
    assert "\n" not in str(info.value)
    assert (acct.spent.epsilon, acct.spent.delta) == (0.0, 0.0)


def test_out_of_range_refusal_spends_nothing() -> None:
    acct = Accountant(PrivacyBudget(5.0, 1e-3))
    df = pd.concat([_log(False), pd.DataFrame({"u": [1], "g": ["a"], "t": [99]})])
    with pytest.raises(DataError, match=r"^time of release_window_counts must"):
        release_window_counts(df, group="g", max_groups_per_item=2, delta=DELTA, unit="item",
                              rng=0, accountant=acct, **BASE)
    assert (acct.spent.epsilon, acct.spent.delta) == (0.0, 0.0)
