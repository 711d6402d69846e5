"""Window summaries (``dpfreq.windows.data.summaries`` read what the engines sum): exactness,
grouping, persistence.

The oracles built from the summed summaries (the memory engine's numpy reference,
:mod:`dpfreq.engines.memory.summaries`) must answer exactly as the oracles built from the point
multisets of the whole log (the reductions of :mod:`dpfreq.windows.data.reductions`), for one log
and for every group of a grouped log at once.
"""

from __future__ import annotations

import numpy as np

from dpfreq.engines import SummaryRequest, SummarySpec, TimeBuckets, get_engine
from dpfreq.engines.memory.summaries import sum_grouped, summarize_events
from dpfreq.windows import WindowCountsRelease, release_window_counts
from dpfreq.windows.data.dominance_count import DominanceCounter
from dpfreq.windows.data.reductions import block_points, cumulative_points, time_window_points
from dpfreq.windows.data.summaries import WindowSummaries, summary_specs


def random_log(rng: np.random.Generator, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    n_items = int(rng.integers(1, 12))
    n = int(rng.integers(0, 60))
    return rng.integers(0, n_items, n), rng.integers(1, horizon + 1, n)


def sorted_log(item: np.ndarray, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dense item codes and times sorted by (item, time) (what the reductions read)."""
    order = np.lexsort((times, item))
    item, times = item[order], times[order]
    return np.unique(item, return_inverse=True)[1].reshape(-1).astype(np.int64), times


def _check_group(summ: WindowSummaries, item: np.ndarray, times: np.ndarray, width: int,
                 horizon: int) -> None:
    """Every oracle of ``summ`` equals the one built from the points of (item, times)."""
    assert summ.period_counts().tolist() == np.bincount(times, minlength=horizon + 1).tolist()
    t1, t2 = np.triu_indices(horizon)
    t1, t2 = t1 + 1, t2 + 1
    ts = np.arange(1, horizon + 1)
    for kk in (1, 2, 3):
        pts = np.sort(cumulative_points(item, times, kk))
        cum = summ.oracle(SummarySpec("cumulative", kk))
        assert cum[ts].tolist() == np.searchsorted(pts, ts, side="right").tolist()
        bp = block_points(item, times, kk, width, horizon)
        assert summ.oracle(SummarySpec("rolling", kk, width)).exact(ts).tolist() \
            == bp.exact(ts).tolist()
        x1, y1, x2, y2 = time_window_points(item, times, kk, horizon)
        ref = DominanceCounter(np.concatenate((x1, x2)), np.concatenate((y1, y2)),
                               np.r_[np.ones(x1.size, np.int64), -np.ones(x2.size, np.int64)],
                               horizon + 1, horizon)
        dom = summ.oracle(SummarySpec("all", kk))
        assert dom.count(t1 - 1, t2).tolist() == ref.count(t1 - 1, t2).tolist()


def test_summary_oracles_equal_point_oracles(rng):
    """Random logs (seeded): every exact answer from the summaries equals the answer from the
    points of the whole log (sorted cumulative points, block points, unit-weight 2d points)."""
    for _ in range(300):
        horizon = int(rng.integers(1, 14))
        width = int(rng.integers(1, horizon + 1))
        item, times = sorted_log(*random_log(rng, horizon))
        specs = summary_specs(["cumulative", width, "all"], [1, 2, 3])
        g, s, k, w = summarize_events(item, times, 1, specs, horizon)
        assert not g.any()
        _check_group(WindowSummaries(horizon, specs, s, k, w), item, times, width, horizon)


def test_grouped_summaries_equal_each_group_alone(rng):
    """All groups summarized at once (one vectorised pass) equal each group summarized alone
    (items shared between groups, every group's points from its own events)."""
    for _ in range(60):
        horizon = int(rng.integers(1, 12))
        width = int(rng.integers(1, horizon + 1))
        n_groups = int(rng.integers(1, 5))
        item, times = random_log(rng, horizon)
        gi = rng.integers(0, n_groups, item.size)
        specs = summary_specs(["cumulative", width, "all"], [1, 2, 3])
        g, s, k, w = summarize_events(item * n_groups + gi, times, n_groups, specs, horizon)
        for x in range(n_groups):
            on = (g == x)
            own = gi == x
            it, tt = sorted_log(item[own], times[own])
            _check_group(WindowSummaries(horizon, specs, s[on], k[on], w[on]), it, tt, width,
                         horizon)


def test_sum_grouped():
    g, s, k, w = sum_grouped(np.array([0, 0, 0, 0, 0]), np.array([2, 0, 2, 1, 0]),
                             np.array([5, 3, 5, 1, 3]), np.array([1, 2, -1, 4, 3]))
    assert (g.tolist(), s.tolist(), k.tolist(), w.tolist()) == ([0, 0], [0, 1], [3, 1], [5, 4])


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
    # the summaries, and the noisy measurement of each eagerly measured (cumulative) structure
    assert {"summary_slots", "summary_keys", "summary_weights"} <= set(arrays)
    stored = sorted(set(arrays) - {"summary_slots", "summary_keys", "summary_weights"})
    assert stored == sorted(f"measurement/{label}/{k}" for (label, k), s
                            in rel._state.structures.items() if s.measurement is not None)
    assert set(meta) == {"build", "key", "summaries"}
    loaded = WindowCountsRelease.load(path)
    t1, t2 = np.triu_indices(12)
    for k in (1, 2):
        assert np.array_equal(loaded.window(t1 + 1, t2 + 1, k).estimate,
                              rel.window(t1 + 1, t2 + 1, k).estimate)
    assert loaded.to_dict() == rel.to_dict()


def test_out_of_range_drop_and_error_counts():
    req = SummaryRequest("i", "t", TimeBuckets(5), ())
    log = {"i": np.array([0, 1, 1]), "t": np.array([6, 0, 2])}
    red = get_engine("memory").summaries(log, req)
    assert (red.n_out_of_range, red.n_events, red.slots.size) == (2, 0, 0)
    red = get_engine("memory").summaries(log, SummaryRequest("i", "t", TimeBuckets(5), (),
                                                             drop_out_of_range=True))
    assert (red.n_out_of_range, red.n_events) == (2, 1)
    assert red.keys.tolist() == [2]
    assert red.weights.tolist() == [1]
