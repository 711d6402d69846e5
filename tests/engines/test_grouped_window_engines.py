"""Grouped window summaries: every engine gives the same per-(group, item, period) reduction
and the same seeded grouped window release (the conformance suite's rule)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpfreq.engines import Grouping, SummaryRequest, TimeBuckets, get_engine
from dpfreq.windows import release_window_counts
from dpfreq.windows.data.summaries import summary_specs

KEY = bytes(range(1, 33))
GROUPS = ["a", "b", "c", "d'q", "none"]


def _log(text_items: bool = False, timestamps: bool = False) -> pd.DataFrame:
    gen = np.random.default_rng(9)
    n = 4000
    items = gen.integers(0, 300, n)
    df = pd.DataFrame({"u": items.astype(str) if text_items else items,
                       "g": gen.choice(["a", "b", "c", "x", "d'q"], n),
                       "t": gen.integers(0, 14, n)})  # period 0 and 13 fall outside 1..12
    if timestamps:
        df["t"] = pd.Timestamp("2026-01-01") + pd.to_timedelta(df["t"] * 6, unit="h")
    return df


def _reduce(engine: Any, df: pd.DataFrame, m: int | None, timestamps: bool,
            checked: bool = False) -> tuple:
    specs = summary_specs(("cumulative", 4, "all", 5), (1, 2, 3))
    buckets = (TimeBuckets(12, start_us=int(pd.Timestamp("2026-01-01").value // 1000) + 1,
                           period_us=6 * 3600 * 10**6) if timestamps else TimeBuckets(12))
    r = engine.summaries(df, SummaryRequest("u", "t", buckets, specs, drop_out_of_range=True,
                                            grouping=Grouping("g", tuple(GROUPS), m, KEY),
                                            checked=checked))
    return (r.group_index.tolist(), r.slots.tolist(), r.keys.tolist(), r.weights.tolist(),
            r.n_events, r.n_out_of_range, r.n_pairs, r.n_pairs_kept)


def _release(engine: Any, df: pd.DataFrame, unit: str) -> list[Any]:
    rel = release_window_counts(df, item="u", time="t", horizon=12, epsilon=1.0, unit=unit,
                                k_values=[1, 2], windows=["cumulative", 4, "all"],
                                group="g", groups=GROUPS,
                                max_groups_per_item=2 if unit == "item" else None,
                                out_of_range="drop", rng=4, engine=engine)
    t1, t2 = np.array([1, 3, 5]), np.array([12, 8, 5])
    return [(g, {f: {k: v.tolist() for k, v in per.items()} for f, per in rel[g].value.items()},
             rel[g].window(t1, t2, 2).estimate.tolist()) for g in rel]


@pytest.mark.parametrize("checked", [False, True])
@pytest.mark.parametrize("m", [None, 1, 2])
@pytest.mark.parametrize(("text_items", "timestamps"), [(False, False), (True, True)])
def test_duckdb_matches_memory(m: int | None, text_items: bool, timestamps: bool,
                               checked: bool) -> None:
    df = _log(text_items, timestamps)
    want = _reduce(get_engine("memory"), df, m, timestamps, checked)
    assert want[0]
    assert 4 not in want[0]
    assert _reduce(get_engine("duckdb"), df, m, timestamps, checked) == want


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
def test_slot_zero_counts_the_rows_before_the_bounding(engine: str) -> None:
    """Slot 0 of a bounded request is every listed group's events per period before the
    bounding (what the grouped release's check counted before its spend); ``checked=True``
    leaves it, and the counts of events, out."""
    df = _log()
    inside = df[df["g"].isin(GROUPS) & (df["t"] >= 1) & (df["t"] <= 12)]
    want = inside.groupby(["g", "t"]).size()
    g, s, k, w, n_events, n_out, n_pairs, n_kept = _reduce(get_engine(engine), df, 1, False)
    got = {(GROUPS[gi], key): wt for gi, sl, key, wt in zip(g, s, k, w, strict=True) if sl == 0}
    assert got == {key: int(v) for key, v in want.items()}
    assert n_events == len(inside)
    assert n_out == int((df["g"].isin(GROUPS)).sum()) - len(inside)
    assert n_kept < n_pairs  # the bound dropped pairs, and slot 0 still counts their events
    g, s, k, w, n_events, n_out, *_ = _reduce(get_engine(engine), df, 1, False, checked=True)
    assert 0 not in s
    assert (n_events, n_out) == (0, 0)


@pytest.mark.parametrize("unit", ["item", "event"])
def test_seeded_releases_identical(unit: str) -> None:
    df = _log()
    assert _release("duckdb", df, unit) == _release("memory", df, unit)


@pytest.mark.spark
def test_spark_matches_memory(spark: Any) -> None:
    df = _log(text_items=True)
    eng = get_engine(spark)
    for m, checked in ((None, False), (2, False), (2, True)):
        assert _reduce(eng, df, m, False, checked) == _reduce(get_engine("memory"), df, m,
                                                              False, checked)
    assert _release(eng, df, "item") == _release("memory", df, "item")


def _selected(engine: Any, df: pd.DataFrame, unit: str) -> list[Any]:
    """A grouped window release whose groups are selected privately (delta=, no list)."""
    rel = release_window_counts(df, item="u", time="t", horizon=12, epsilon=2.0, delta=1e-6,
                                unit=unit, k_values=[1], windows=["cumulative", "all"],
                                group="g", max_groups_per_item=2 if unit == "item" else None,
                                out_of_range="drop", rng=8, engine=engine)
    t1, t2 = np.array([1, 3, 5]), np.array([12, 8, 5])
    return [rel.groups, rel.mechanism_params["split"]] + [
        (g, rel[g].value["cumulative"][1].tolist(), rel[g].window(t1, t2, 1).estimate.tolist())
        for g in rel]


@pytest.mark.parametrize("unit", ["item", "event"])
def test_selected_releases_identical_duckdb_memory(unit: str) -> None:
    """Private partition selection: the same seeded selected groups and values (a lone item's
    group is in the data; the common groups pass at ε = 2)."""
    df = pd.concat([_log(), pd.DataFrame({"u": [10**6], "g": ["lone"], "t": [3]})],
                   ignore_index=True)
    want = _selected("memory", df, unit)
    assert set(want[0]) >= {"a", "b", "c"}
    assert _selected("duckdb", df, unit) == want


@pytest.mark.spark
def test_spark_selected_release_matches_memory_and_duckdb(spark: Any) -> None:
    df = pd.concat([_log(text_items=True), pd.DataFrame({"u": ["lone-item"], "g": ["lone"],
                                                         "t": [3]})], ignore_index=True)
    want = _selected("memory", df, "item")
    assert _selected("duckdb", df, "item") == want
    assert _selected(get_engine(spark), df, "item") == want


def test_checked_must_be_true_or_false() -> None:
    from dpfreq.errors import ParameterError

    req = SummaryRequest("u", "t", TimeBuckets(12), (), checked="yes")  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match=r"^checked of MemoryEngine.summaries must be "
                                             r"True or False; got 'yes'\.$"):
        get_engine("memory").summaries(_log(), req)


@pytest.mark.spark
def test_spark_auto_bound_matches_memory(spark: Any) -> None:
    """``max_groups_per_item="auto"`` on Spark, with a public list and under private
    selection: the same noisy histogram of groups per item, the same chosen m and the same
    released values as the memory engine under one seed."""
    df = _log(text_items=True)

    def run(engine: Any, groups: list[str] | None) -> tuple[Any, list[Any]]:
        rel = release_window_counts(df, item="u", time="t", horizon=12, epsilon=2.0,
                                    unit="item", k_values=[1], windows=["total"], group="g",
                                    groups=groups, delta=0.0 if groups else 1e-6,
                                    max_groups_per_item="auto", capping_epsilon=0.25,
                                    out_of_range="drop", rng=4, engine=engine)
        values = [(g, {f: {k: v.tolist() for k, v in per.items()}
                       for f, per in rel[g].value.items()}) for g in rel]
        return rel.mechanism_params["bound_choice"], values

    for groups in (GROUPS, None):
        assert run(get_engine(spark), groups) == run("memory", groups)
