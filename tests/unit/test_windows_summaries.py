"""Window summaries (``dpfreq.windows.data.summaries``): exactness, chunking, persistence.

The oracles built from the summed per-item summaries must answer exactly as the oracles built
from the point multisets of the whole log (the pre-summary construction), however the log is
cut into chunks of whole items (driver chunks, Spark partitions, Arrow batches).
"""

from __future__ import annotations

import numpy as np
import pytest

from dpfreq.engines._common import bucket_events, reduce_events, reduce_sorted, sum_entries
from dpfreq.engines.base import TimeBuckets
from dpfreq.windows import WindowCountsRelease, release_window_counts
from dpfreq.windows.data.dominance_count import DominanceCounter
from dpfreq.windows.data.reductions import block_points, cumulative_points, time_window_points
from dpfreq.windows.data.summaries import SummarySpec, WindowReducer, WindowSummaries, summary_specs


def random_log(rng: np.random.Generator, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    n_items = int(rng.integers(1, 12))
    n = int(rng.integers(0, 60))
    return rng.integers(0, n_items, n), rng.integers(1, horizon + 1, n)


def sorted_log(item: np.ndarray, times: np.ndarray, horizon: int) -> tuple[np.ndarray,
                                                                           np.ndarray]:
    dense, periods, _, _ = bucket_events(item, times, TimeBuckets(horizon), drop=False)
    return dense, periods


def test_summary_oracles_equal_point_oracles(rng):
    """Random logs (seeded): every exact answer from the summaries equals the answer from the
    points of the whole log (sorted cumulative points, block points, unit-weight 2d points)."""
    for _ in range(300):
        horizon = int(rng.integers(1, 14))
        width = int(rng.integers(1, horizon + 1))
        item, times = sorted_log(*random_log(rng, horizon), horizon)
        specs = summary_specs(["cumulative", width, "all"], [1, 2, 3])
        s, k, w = reduce_sorted(item, times, WindowReducer(horizon, specs),
                                chunk=int(rng.integers(1, 8)))
        summ = WindowSummaries(horizon, specs, s, k, w)
        assert summ.period_counts().tolist() == np.bincount(
            times, minlength=horizon + 1).tolist()
        t1, t2 = np.triu_indices(horizon)
        t1, t2 = t1 + 1, t2 + 1
        ts = np.arange(1, horizon + 1)
        for kk in (1, 2, 3):
            pts = np.sort(cumulative_points(item, times, kk))
            cum = summ.oracle(SummarySpec("cumulative", kk))
            assert cum[ts].tolist() == np.searchsorted(pts, ts, side="right").tolist()
            bp = block_points(item, times, kk, width, horizon)
            assert summ.oracle(SummarySpec("fixed", kk, width)).exact(ts).tolist() \
                == bp.exact(ts).tolist()
            x1, y1, x2, y2 = time_window_points(item, times, kk, horizon)
            ref = DominanceCounter(np.concatenate((x1, x2)), np.concatenate((y1, y2)),
                                   np.r_[np.ones(x1.size, np.int64), -np.ones(x2.size, np.int64)],
                                   horizon + 1, horizon)
            dom = summ.oracle(SummarySpec("all", kk))
            assert dom.count(t1 - 1, t2).tolist() == ref.count(t1 - 1, t2).tolist()


def test_summaries_do_not_depend_on_chunking(rng):
    horizon = 9
    specs = summary_specs(["cumulative", 4, "all"], [1, 2])
    reducer = WindowReducer(horizon, specs)
    item, times = sorted_log(rng.integers(0, 30, 400), rng.integers(1, horizon + 1, 400),
                             horizon)
    ref = reduce_sorted(item, times, reducer, chunk=1 << 20)
    for chunk in (1, 2, 5, 17, 64):
        got = reduce_sorted(item, times, reducer, chunk=chunk)
        for a, b in zip(got, ref, strict=True):
            assert np.array_equal(a, b)


def test_sum_entries():
    s, k, w = sum_entries(np.array([2, 0, 2, 1, 0]), np.array([5, 3, 5, 1, 3]),
                          np.array([1, 2, -1, 4, 3]))
    assert (s.tolist(), k.tolist(), w.tolist()) == ([0, 1], [3, 1], [5, 4])


def test_spark_partition_reducer_equals_whole_log_reduction(rng):
    """The executor-side function: one partition's Arrow batches of (key, period) in any
    order, an item's events spread over batches, string or integer keys: its output equals
    the reduction of the whole partition by the driver-side code."""
    pytest.importorskip("pyspark")
    pa = pytest.importorskip("pyarrow")
    from dpfreq.engines.spark import _partition_reducer

    horizon = 8
    reducer = WindowReducer(horizon, summary_specs(["cumulative", 3, "all"], [1, 2]))
    ids = rng.integers(0, 25, 300)
    ids[:40] = 3  # one heavy item
    periods = rng.integers(1, horizon + 1, ids.size)
    dense, per = sorted_log(ids, periods, horizon)
    ref = reduce_sorted(dense, per, reducer)
    run = _partition_reducer(reducer, horizon)
    assert list(run(iter([]))) == []
    for keys in (np.array([f"u{i:02d}" for i in ids]), ids * 10**12 - 7):
        perm = rng.permutation(ids.size)
        for batch in (1, 7, 300):
            batches = [pa.RecordBatch.from_arrays([pa.array(keys[perm][i:i + batch]),
                                                   pa.array(periods[perm][i:i + batch])],
                                                  names=["k", "p"])
                       for i in range(0, ids.size, batch)]
            (out,) = list(run(iter(batches)))
            got = [out.column(i).to_numpy() for i in range(3)]
            for a, b in zip(got, ref, strict=True):
                assert np.array_equal(a, b)


def _release(item, times, **over):
    kw = {"horizon": 12, "epsilon": 1.0, "k_values": [1, 2], "windows": ["cumulative", 4, "all"],
          "rng": 7, "unit": "event"}
    kw.update(over)
    return release_window_counts((item, times), **kw)


def test_saved_file_holds_summaries_not_the_log(tmp_path, rng):
    from dpfreq.artifacts import read_artifact
    from dpfreq.windows.persist import ARTIFACT_VERSION

    item, times = rng.integers(0, 40, 300), rng.integers(1, 13, 300)
    rel = _release(item, times)
    path = rel.save(tmp_path / "r.dpfreq")
    version, meta, arrays = read_artifact(path, kind="window-release",
                                          versions=(ARTIFACT_VERSION,))
    assert version == ARTIFACT_VERSION
    assert set(arrays) == {"summary_slots", "summary_keys", "summary_weights"}
    assert set(meta) == {"build", "key", "summaries"}
    loaded = WindowCountsRelease.load(path)
    t1, t2 = np.triu_indices(12)
    for k in (1, 2):
        assert np.array_equal(loaded.window(t1 + 1, t2 + 1, k).estimate,
                              rel.window(t1 + 1, t2 + 1, k).estimate)
    assert loaded.to_dict() == rel.to_dict()


def test_reduce_events_drop_and_error_counts():
    b = TimeBuckets(5)
    red = reduce_events(np.array([0, 1, 1]), np.array([6, 0, 2]), buckets=b,
                        reducer=WindowReducer(5, ()), drop_out_of_range=False)
    assert (red.n_out_of_range, red.first_out_of_range, red.n_events, red.slots.size) == (
        2, 6, 0, 0)
    red = reduce_events(np.array([0, 1, 1]), np.array([6, 0, 2]), buckets=b,
                        reducer=WindowReducer(5, ()), drop_out_of_range=True)
    assert (red.n_out_of_range, red.n_events) == (2, 1)
    assert red.keys.tolist() == [2]
    assert red.weights.tolist() == [1]
