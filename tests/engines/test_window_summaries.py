"""Window summaries through every engine: ``Summarizing.summaries``.

A window release never holds the event log: each engine reduces it to per-(family, k)
summaries (``dpfreq.windows.summaries``) in one query where the data lives — numpy in memory,
SQL on DuckDB and Spark — only the summed summaries reaching this process. These tests demand,
for memory, DuckDB and Spark:

* identical summaries (the sparse ``(slot, key, weight)`` entries), identical range-check
  results (events outside, dropped events), identical exact oracles (checked
  against plain-Python counting) and identical releases under one seed;
* the same ``DataError`` text for events outside the public range.

Cases: an empty log, a single item, ties in time, items with fewer than k events, events
outside the range (error and drop), timestamps cut into periods (including events before
``start``), string item keys; cumulative, fixed (W = 3) and arbitrary windows, event and item
level. Spark runs on the shared local session (``conftest.spark``), one test per kind of check.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpfreq.engines import SummaryRequest, TimeBuckets, get_engine
from dpfreq.errors import DataError
from dpfreq.windows import release_window_counts
from dpfreq.windows.data.summaries import summary_specs
from dpfreq.windows.params import time_axis

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

HORIZON = 6
WINDOWS = ["cumulative", 3, "all"]
K_VALUES = [1, 2, 3]
DAY = 86_400_000_000  # microseconds

# (items, times, time axis); integer times are periods, timestamps are microseconds
CASES: dict[str, tuple[list[Any], list[int], dict[str, Any]]] = {
    "empty": ([], [], {"horizon": HORIZON}),
    "single_item": ([7] * 5, [3, 1, 2, 2, 6], {"horizon": HORIZON}),
    "ties_in_time": ([4, 5, 4, 5, 6, 4, 6, 5], [2, 2, 2, 2, 2, 5, 5, 5], {"horizon": HORIZON}),
    "fewer_than_k": ([10, 11, 11, 12, 12, 12, 13], [6, 1, 6, 2, 3, 3, 4], {"horizon": HORIZON}),
    "out_of_range": ([3, 1, 1, 2, 2, 2, 1], [2, 9, 1, 0, 6, 6, 7], {"horizon": HORIZON}),
    "strings": (["b", "a", "b", "c", "a", "b", "b"], [1, 2, 2, 6, 6, 3, 4],
                {"horizon": HORIZON}),
    # 2024-01-01 + offsets (days, fractional); start 2024-01-02: day 0.5 is before the start
    # (floor division gives period 0), day 8 is after the end (period 8 > T = 6)
    "timestamps": (["u1", "u2", "u1", "u3", "u1", "u2", "u2"],
                   [int(d * DAY) for d in (1.0, 1.25, 2.5, 3.999, 6.99, 0.5, 8.0)],
                   {"start": "2024-01-02", "end": "2024-01-07", "period": "1d"}),
}
EPOCH_2024 = int(np.datetime64("2024-01-01", "us").astype(np.int64))


def _arrays(case: str) -> dict[str, np.ndarray]:
    items, times, axis = CASES[case]
    it = np.asarray(items, dtype=object if items and isinstance(items[0], str) else np.int64)
    if it.dtype == object:
        it = it.astype(str)
    t = np.asarray(times, dtype=np.int64)
    if "start" in axis:
        t = (t + EPOCH_2024).astype("datetime64[us]")
    return {"item": it, "time": t}


def _arrow(cols: dict[str, np.ndarray]) -> Any:
    it = cols["item"]
    items = pa.array(it.tolist(), type=pa.string() if it.dtype.kind == "U" else pa.int64())
    t = cols["time"]
    times = (pa.array(t, type=pa.timestamp("us")) if t.dtype.kind == "M"
             else pa.array(t, type=pa.int64()))
    return pa.table({"item": items, "time": times})


def _source(backend: str, cols: dict[str, np.ndarray], tmp_path: Path, spark: Any) -> Any:
    if backend == "memory":
        return dict(cols)
    path = tmp_path / "events.parquet"
    pq.write_table(_arrow(cols), path)
    if backend == "duckdb":
        return str(path)
    return spark.read.parquet(str(path))


def _axis(case: str) -> Any:
    axis = CASES[case][2]
    return time_axis(axis.get("horizon"), axis.get("start"), axis.get("end"),
                      axis.get("period"))


def _request(case: str, drop: bool) -> SummaryRequest:
    ax = _axis(case)
    return SummaryRequest("item", "time", ax.buckets(), summary_specs(WINDOWS, K_VALUES),
                          drop_out_of_range=drop)


def _reference(case: str, drop: bool) -> Any:
    """The arrays through the memory engine (the numpy reference)."""
    return get_engine("memory").summaries(_arrays(case), _request(case, drop))


def _reduce(backend: str, case: str, drop: bool, tmp_path: Path, spark: Any) -> Any:
    eng = get_engine("spark", spark=spark) if backend == "spark" else get_engine(backend)
    src = _source(backend, _arrays(case), tmp_path, spark)
    return eng.summaries(src, _request(case, drop))


def _assert_same_reduction(got: Any, want: Any) -> None:
    for name in ("group_index", "slots", "keys", "weights"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
        assert getattr(got, name).dtype == np.int64
    assert (got.n_events, got.n_out_of_range) == (want.n_events, want.n_out_of_range)


def _brute(case: str, t1: int, t2: int, k: int) -> int:
    """Plain Python: items with at least k in-range events in periods t1..t2."""
    cols = _arrays(case)
    ax = _axis(case)
    per: dict[Any, int] = {}
    for a, t in zip(cols["item"].tolist(), cols["time"].tolist(), strict=True):
        if ax.start_us is not None:
            us = int(np.datetime64(t, "us").astype(np.int64))
            t = (us - ax.start_us) // ax.period_us + 1
        if t1 <= t <= t2:
            per[a] = per.get(a, 0) + 1
    return sum(1 for c in per.values() if c >= k)


LOCAL = ["memory", "duckdb"]


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("backend", LOCAL)
def test_summaries_local(backend: str, case: str, tmp_path: Path) -> None:
    for drop in (False, True):
        _assert_same_reduction(_reduce(backend, case, drop, tmp_path, None),
                               _reference(case, drop))


@pytest.mark.spark
def test_summaries_spark(tmp_path: Path, spark: Any) -> None:
    for case in CASES:
        for drop in (False, True):
            sub = tmp_path / f"{case}-{drop}"
            sub.mkdir()
            _assert_same_reduction(_reduce("spark", case, drop, sub, spark),
                                   _reference(case, drop))


def test_reference_counts_what_it_should() -> None:
    """The reference itself: range checks by hand, oracles against plain-Python counting."""
    red = _reference("out_of_range", False)
    # events (item, period) sorted: (1,1) (1,7) (1,9) (2,0) (2,6) (2,6) (3,2): 3 outside
    assert (red.n_out_of_range, red.n_events) == (3, 0)
    assert red.slots.size == 0
    red = _reference("timestamps", True)
    assert (red.n_out_of_range, red.n_events) == (2, 5)
    # events per period (slot 0) by hand: days 1.0, 1.25, 2.5, 3.999, 6.99 from 2024-01-02
    assert red.keys[red.slots == 0].tolist() == [1, 2, 3, 6]
    assert red.weights[red.slots == 0].tolist() == [2, 1, 1, 1]


def _release(source: Any, case: str, engine: Any, level: str, drop: bool) -> Any:
    return release_window_counts(source, item="item", time="time", **CASES[case][2],
                                 epsilon=1.0, k_values=K_VALUES, unit=level, windows=WINDOWS,
                                 out_of_range="drop" if drop else "error", engine=engine,
                                 rng=2026)


def _assert_same_release(got: Any, ref: Any, case: str) -> None:
    a, b = got.to_dict(), ref.to_dict()
    a["mechanism_params"].pop("source")
    b["mechanism_params"].pop("source")
    assert json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True,
                                                                     default=str)
    assert got.n_dropped == ref.n_dropped
    assert got.observed_singleton == ref.observed_singleton
    t1, t2 = np.triu_indices(got.horizon)
    t1, t2 = t1 + 1, t2 + 1
    for k in K_VALUES:
        x, y = got.window(t1, t2, k), ref.window(t1, t2, k)
        np.testing.assert_array_equal(x.estimate, y.estimate)
        np.testing.assert_array_equal(x.upper, y.upper)
        for s in got._state.structures_for(k):
            ok = got._state.can_answer(s, t1, t2)
            exact = got._state.exact(s, t1[ok], t2[ok])
            want = [_brute(case, int(p), int(q), k) for p, q in zip(t1[ok], t2[ok], strict=True)]
            assert exact.tolist() == want, (case, s.family, s.method, k)


RELEASE_CASES = [("empty", "event", False), ("single_item", "item", False),
                 ("ties_in_time", "event", False), ("fewer_than_k", "item", False),
                 ("out_of_range", "event", True), ("strings", "item", False),
                 ("timestamps", "event", True), ("timestamps", "item", True)]


@pytest.mark.parametrize(("case", "level", "drop"), RELEASE_CASES)
@pytest.mark.parametrize("backend", LOCAL)
def test_release_local(backend: str, case: str, level: str, drop: bool,
                       tmp_path: Path) -> None:
    cols = _arrays(case)
    ref = _release(cols, case, None, level, drop)  # arrays path
    got = _release(_source(backend, cols, tmp_path, None), case, backend, level, drop)
    assert got.mechanism_params["source"] == backend
    _assert_same_release(got, ref, case)


@pytest.mark.spark
def test_release_spark(tmp_path: Path, spark: Any) -> None:
    for case, level, drop in RELEASE_CASES[3:]:  # the local test covers the rest
        sub = tmp_path / f"{case}-{level}"
        sub.mkdir()
        cols = _arrays(case)
        ref = _release(cols, case, None, level, drop)
        got = _release(_source("spark", cols, sub, spark), case, None, level, drop)
        assert got.mechanism_params["source"] == "spark"
        _assert_same_release(got, ref, case)


def _range_error(source: Any, case: str, engine: Any) -> str:
    with pytest.raises(DataError) as info:
        _release(source, case, engine, "event", False)
    return str(info.value)


@pytest.mark.parametrize("case", ["out_of_range", "timestamps"])
def test_out_of_range_error_same_everywhere(case: str, tmp_path: Path) -> None:
    cols = _arrays(case)
    msgs = {b: _range_error(_source(b, cols, tmp_path, None), case, b) for b in LOCAL}
    assert msgs["memory"] == msgs["duckdb"]
    assert "outside the public range" in msgs["memory"] or "outside" in msgs["memory"]
    # the message says what is wrong without counts or times of the data: the rule, the
    # public range and how to find the rows (issue 50), its only numbers public bounds
    assert "events outside the range" in msgs["memory"]
    assert not any(ch.isdigit() for ch in msgs["memory"].split("got")[1].split(".")[0])
    assert "out_of_range='drop'" in msgs["memory"]
    assert "SELECT * FROM <source> WHERE" in msgs["memory"]


@pytest.mark.spark
def test_out_of_range_error_spark(tmp_path: Path, spark: Any) -> None:
    for case, first in (("out_of_range", 7), ("timestamps", 0)):
        sub = tmp_path / case
        sub.mkdir()
        cols = _arrays(case)
        want = _range_error(cols | {}, case, "memory")
        got = _range_error(_source("spark", cols, sub, spark), case, None)
        assert got == want
        assert f"first at period {first}" not in got


def test_buckets_time_kind_mismatch_is_data_error(tmp_path: Path) -> None:
    cols = _arrays("single_item")
    with pytest.raises(DataError, match="timestamps or dates"):
        get_engine("duckdb").summaries(_source("duckdb", cols, tmp_path, None),
                                       SummaryRequest("item", "time", TimeBuckets(6, 0, DAY), ()))
