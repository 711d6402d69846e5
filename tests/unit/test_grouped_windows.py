"""Grouped window counts: exact sensitivity after bounding, bad input, outputs, save/load."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpfreq.budget import Accountant, PrivacyBudget
from dpfreq.engines import get_engine
from dpfreq.engines.base import TimeBuckets
from dpfreq.errors import DataError, ParameterError
from dpfreq.windows import plan_window_counts, release_window_counts
from dpfreq.windows.data.summaries import WindowReducer, WindowSummaries, summary_specs
from dpfreq.windows.grouped.result import GroupedWindowRelease

KEY = bytes(range(32))
GROUPS = ("a", "b", "c")
T = 2
SPECS = summary_specs(("cumulative",), (1, 2))


def _first_seen(rows: list[tuple[int, str, int]], m: int) -> dict[str, dict[int, np.ndarray]]:
    """Per group and k: the histogram over periods of the items' k-th occurrence (bounded)."""
    if not rows:
        return {}
    red = get_engine("memory").grouped_reduce_items(
        {"u": [r[0] for r in rows], "g": [r[1] for r in rows], "t": [r[2] for r in rows]},
        item="u", time="t", group="g", groups=GROUPS, max_groups_per_item=m, hash_key=KEY,
        buckets=TimeBuckets(T), reducer=WindowReducer(T, SPECS))
    out = {}
    for gi, name in enumerate(GROUPS):
        s = WindowSummaries(T, SPECS, *red.entries(gi))
        out[name] = {k: s.cumulative_histogram(k) for k in (1, 2)}
    return out


def _l1(x: dict[int, np.ndarray] | None, y: dict[int, np.ndarray] | None, k: int) -> int:
    zero = np.zeros(T + 1, dtype=np.int64)
    return int(np.abs((x or {}).get(k, zero) - (y or {}).get(k, zero)).sum())


@pytest.mark.parametrize("m", [1, 2])
def test_exact_sensitivity_by_enumeration(m: int) -> None:
    """Every log of item 1 (any subset of the 3 groups × 2 periods, one or two rows per cell)
    beside fixed backgrounds, and its remove-one-item neighbours: at most m groups move, and in
    each the per-period k-th-occurrence counts (k = 1, 2: the cumulative summaries) move by ℓ1
    <= 1, the item-level sensitivity of the cumulative structures per group."""
    cells = [(g, t) for g in GROUPS for t in range(1, T + 1)]
    backgrounds = [[], [(2, "a", 1), (2, "b", 2), (2, "c", 2)], [(2, "b", 1), (3, "a", 2)]]
    for bg in backgrounds:
        for counts in itertools.product(range(3), repeat=len(cells)):
            rows = [(1, g, t) for (g, t), c in zip(cells, counts, strict=True) for _ in range(c)]
            full = _first_seen(rows + bg, m)
            for drop in {r[0] for r in rows + bg}:
                nb = _first_seen([r for r in rows + bg if r[0] != drop], m)
                moved = [max(_l1(full.get(g), nb.get(g), k) for k in (1, 2)) for g in GROUPS]
                assert sum(x > 0 for x in moved) <= m
                assert max(moved) <= 1


def _log() -> pd.DataFrame:
    gen = np.random.default_rng(7)
    n = 3000
    return pd.DataFrame({"u": gen.integers(0, 400, n), "g": gen.choice(["a", "b", "c", "x"], n),
                         "t": gen.integers(1, 11, n)})


BASE = {"item": "u", "time": "t", "horizon": 10, "epsilon": 1.0, "k_values": [1],
        "windows": ["cumulative", "total"]}


@pytest.mark.parametrize(("kwargs", "param"), [
    ({"group": "g", "groups": ["a"], "unit": "item"}, "max_groups_per_item"),
    ({"group": "g", "groups": ["a"], "max_groups_per_item": 0, "unit": "item"},
     "max_groups_per_item"),
    ({"group": "g", "groups": ["a"], "max_groups_per_item": True, "unit": "item"},
     "max_groups_per_item"),
    ({"group": "g", "groups": [], "max_groups_per_item": 1, "unit": "item"}, "groups"),
    ({"group": "g", "max_groups_per_item": 1, "unit": "item"}, "groups"),
    ({"max_groups_per_item": 1, "groups": ["a"], "unit": "item"}, "group"),
    ({"group": "g", "groups": ["a"], "max_groups_per_item": 2, "unit": "event"},
     "max_groups_per_item"),
    ({"group": "g", "groups": ["a"], "max_groups_per_item": 2, "unit": "item_replace"},
     "unit"),
])
def test_bad_parameters_spend_nothing(kwargs: dict, param: str) -> None:
    acct = Accountant(PrivacyBudget(5.0))
    with pytest.raises(ParameterError, match=rf"^{param} of release_window_counts must") as info:
        release_window_counts(_log(), accountant=acct, **BASE, **kwargs)
    assert "\n" not in str(info.value)
    assert acct.remaining.epsilon == 5.0


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
@pytest.mark.parametrize("group_col", ["g", "missing"])
def test_bad_group_column_spends_nothing(engine: str, group_col: str) -> None:
    df = pd.DataFrame({"u": [1, 2], "t": [1, 2], "g": [None, None]})
    acct = Accountant(PrivacyBudget(5.0))
    with pytest.raises(DataError) as info:
        release_window_counts(df, group=group_col, groups=["a"], max_groups_per_item=1,
                              unit="item", accountant=acct, engine=engine, **BASE)
    assert "\n" not in str(info.value)
    assert acct.remaining.epsilon == 5.0


def test_pair_source_and_out_of_range_spend_nothing() -> None:
    acct = Accountant(PrivacyBudget(5.0))
    with pytest.raises(ParameterError, match=r"^source of release_window_counts must"):
        release_window_counts(([1], [1]), group="g", groups=["a"], max_groups_per_item=1,
                              unit="item", accountant=acct, **{**BASE, "item": None,
                                                               "time": None})
    df = pd.DataFrame({"u": [1, 2], "t": [1, 99], "g": ["a", "a"]})
    with pytest.raises(DataError, match=r"^time of release_window_counts must"):
        release_window_counts(df, group="g", groups=["a"], max_groups_per_item=1, unit="item",
                              accountant=acct, **BASE)
    assert acct.remaining.epsilon == 5.0
    # an out-of-range row of an unlisted group is dropped with its group, not an error
    df = pd.DataFrame({"u": [1, 2], "t": [1, 99], "g": ["a", "z"]})
    rel = release_window_counts(df, group="g", groups=["a"], max_groups_per_item=1,
                                unit="item", accountant=acct, rng=1, **BASE)
    assert acct.remaining.epsilon == pytest.approx(4.0)
    assert rel.n_dropped == 0


def test_item_level_outputs_and_one_charge() -> None:
    acct = Accountant(PrivacyBudget(5.0))
    rel = release_window_counts(_log(), group="g", groups=["a", "b", "c", "none"],
                                max_groups_per_item=2, unit="item", rng=3, accountant=acct,
                                **BASE)
    assert acct.remaining.epsilon == pytest.approx(4.0)
    assert isinstance(rel, GroupedWindowRelease)
    assert rel.groups == ("a", "b", "c", "none")
    one = rel["b"]
    assert one.epsilon == pytest.approx(0.5)
    assert one.unit == "item"
    assert one.mechanism_params["group"] == "b"
    a = one.cumulative(np.arange(1, 11), 1)
    assert np.all(np.asarray(a.lower) <= np.asarray(a.estimate))
    assert rel.mechanism_params["epsilon_per_group"] == pytest.approx(0.5)
    assert "Bonferroni" in rel.simultaneous.description
    assert rel.simultaneous.value > 0
    tab = rel.to_pandas()
    assert list(tab.columns[:3]) == ["g", "window", "k"]
    assert set(tab["g"]) == {"a", "b", "c", "none"}
    assert len(tab) == 4 * (10 + 1)
    doc = json.loads(rel.to_json())
    assert list(doc["groups"]) == ["a", "b", "c", "none"]
    import matplotlib

    matplotlib.use("Agg")
    assert sum(ax.get_visible() for ax in rel.plot(max_panels=2).axes) == 2


def test_event_level_full_epsilon_per_group() -> None:
    rel = release_window_counts(_log(), group="g", groups=["a", "b"], unit="event", rng=3,
                                **BASE)
    assert rel["a"].epsilon == 1.0
    assert rel.mechanism_params["max_groups_per_item"] is None
    assert "parallel composition" in rel.mechanism_params["split"]


def test_groups_are_independent_and_equal_to_ungrouped_summaries() -> None:
    """m large enough to keep everything: each group's exact answers are those of the
    ungrouped release of that group's rows (same structures, different noise)."""
    df = _log()
    rel = release_window_counts(df, group="g", groups=["a", "b"], max_groups_per_item=4,
                                unit="item", rng=3, **{**BASE, "windows": ["all"]})
    for name in ("a", "b"):
        sub = df[df["g"] == name]
        st = rel[name]._state
        exact = st.exact(st.structures[("all", 1)], np.array([2]), np.array([7]))
        assert int(exact[0]) == sub[(sub.t >= 2) & (sub.t <= 7)]["u"].nunique()


def test_save_load_round_trip(tmp_path: Path) -> None:
    rel = release_window_counts(_log(), group="g", groups=["a", "b", "c"],
                                max_groups_per_item=2, unit="item", rng=5,
                                **{**BASE, "windows": ["cumulative", 3, "all"]})
    path = rel.save(tmp_path / "grouped.dpfreq")
    back = GroupedWindowRelease.load(path)
    assert back.groups == rel.groups
    assert back.epsilon == rel.epsilon
    assert back.simultaneous == rel.simultaneous
    for g in rel:
        for fam, per_k in rel[g].value.items():
            assert np.array_equal(per_k[1], back[g].value[fam][1])
        t1, t2 = np.array([1, 2, 4]), np.array([5, 9, 4])
        assert np.array_equal(rel[g].window(t1, t2, 1).estimate,
                              back[g].window(t1, t2, 1).estimate)
    rel["a"].save(tmp_path / "one.dpfreq")
    with pytest.raises(DataError):
        GroupedWindowRelease.load(tmp_path / "one.dpfreq")


def test_plan_predicts_each_group() -> None:
    plan = plan_window_counts(horizon=10, epsilon=1.0, unit="item", k_values=[1],
                              windows=["cumulative", "total"], group="g", groups=["a", "b"],
                              max_groups_per_item=2)
    rel = release_window_counts(_log(), group="g", groups=["a", "b"], max_groups_per_item=2,
                                unit="item", rng=3, **BASE)
    assert plan.per_group.epsilon == pytest.approx(0.5)
    want = rel["a"].error.upper["cumulative"][1] - rel["a"].value["cumulative"][1]
    assert np.allclose(plan.per_group.halfwidth["cumulative"][1], want)
    assert plan.lines()[0].startswith("2 groups, epsilon=1 spent once")
    assert plan.epsilon_for(plan.per_group.max_halfwidth["total"][1], family="total") == \
        pytest.approx(1.0, rel=0.02)


def test_delta_split_over_groups() -> None:
    rel = release_window_counts(_log(), group="g", groups=["a", "b"], max_groups_per_item=2,
                                unit="item", rng=3, **{**BASE, "delta": 1e-6})
    assert rel.delta == 1e-6
    assert rel["a"].delta == pytest.approx(5e-7)
    assert rel["a"].epsilon == pytest.approx(0.5)


@pytest.mark.parametrize(("unit", "extra", "windows"), [
    ("item", {"max_groups_per_item": 2}, ["cumulative", 3, "total"]),
    ("item", {"max_groups_per_item": 2}, ["all"]),
    ("event", {}, ["cumulative", 3, "all"]),
])
def test_each_group_equals_its_own_release_at_its_counters(unit: str, extra: dict,
                                                          windows: list) -> None:
    """The groups share one calibrated plan (shallow copies), one band cache and one keyed
    noise source per tree, but every group's noise is its own: each group answers exactly as a
    release built alone from its summaries, a fresh plan and group g's view of the shared
    source (nodes v at counters v·G + g), also for windows asked later; no two groups share
    noise arrays."""
    from dpfreq.windows.grouped.noise import GroupNoise
    from dpfreq.windows.grouped.result import calibrated_plan
    from dpfreq.windows.result import WindowCountsRelease
    from dpfreq.windows.state import attach_state

    rel = release_window_counts(_log(), group="g", groups=["a", "b", "c"], unit=unit, rng=6,
                                **{**BASE, "windows": windows}, **extra)
    t1, t2 = np.array([1, 2, 5, 3]), np.array([10, 9, 5, 3])
    for g, name in enumerate(rel):
        st = rel[name]._state
        plan = calibrated_plan(st.build)
        view = GroupNoise(rel._noise_key, 3).for_group(g)  # fresh: nothing cached
        for s in plan.structures.values():
            s.node_noise = view
        alone = WindowCountsRelease.from_state(attach_state(
            st.summaries, key=st.key, build=st.build, plan=plan))
        for fam, per_k in alone.value.items():
            assert np.array_equal(per_k[1], rel[name].value[fam][1])
        if "all" in windows:
            got, want = rel[name].window(t1, t2, 1), alone.window(t1, t2, 1)
            assert np.array_equal(got.estimate, want.estimate)
            assert np.array_equal(got.lower, want.lower)
    structs = [rel[g]._state.structures for g in rel]
    for label in structs[0]:
        impls = [vars(s[label]).get("_impl") for s in structs]
        assert len({id(x) for x in impls}) == len(impls)
        assert all(s[label]._band_c is structs[0][label]._band_c for s in structs)
