"""Window reductions (cumulative, sliding, tumbling and interval counts): worked vectors,
brute-force exactness, sensitivity."""

from __future__ import annotations

import numpy as np
import pytest

from dpfreq.windows.data.reductions import (
    block_points,
    cumulative_points,
    rolling_window_points,
    time_window_points,
)

# a worked example: 1:a 2:b 3:a 4:c 5:a 6:b 7:d 8:a  (a=0, b=1, c=2, d=3; e never occurs)
ITEM_41 = np.array([0, 0, 0, 0, 1, 1, 2, 3])
TIME_41 = np.array([1, 3, 5, 8, 2, 6, 4, 7])

F1_41 = [[1, 2, 2, 3, 3, 3, 4, 4], [1, 2, 3, 3, 3, 4, 4], [1, 2, 2, 3, 4, 4], [1, 2, 3, 4, 4],
         [1, 2, 3, 3], [1, 2, 3], [1, 2], [1]]
F2_41 = [[0, 0, 1, 1, 1, 2, 2, 2], [0, 0, 0, 1, 2, 2, 2], [0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 1],
         [0, 0, 0, 1], [0, 0, 0], [0, 0], [0]]


def brute(item, times, horizon, k):
    """f≥k(X[t1,t2]) for all 1 <= t1 <= t2 <= T by direct counting (index [t1, t2])."""
    n = int(np.max(item)) + 1 if len(item) else 0
    counts = np.zeros((n, horizon + 1), dtype=np.int64)
    np.add.at(counts, (np.asarray(item), np.asarray(times)), 1)
    cum = counts.cumsum(axis=1)
    out = np.zeros((horizon + 2, horizon + 2), dtype=np.int64)
    for t1 in range(1, horizon + 1):
        for t2 in range(t1, horizon + 1):
            out[t1, t2] = int(((cum[:, t2] - cum[:, t1 - 1]) >= k).sum())
    return out


def included(points, t1, t2):
    x1, y1, x2, y2 = points
    return int(((x1 <= t1 - 1) & (y1 <= t2)).sum() - ((x2 <= t1 - 1) & (y2 <= t2)).sum())


def test_brute_matches_worked_example():
    for k, table in ((1, F1_41), (2, F2_41)):
        f = brute(ITEM_41, TIME_41, 8, k)
        for t1, row in enumerate(table, start=1):
            assert list(f[t1, t1:9]) == row


def test_cumulative_points_41():
    assert sorted(cumulative_points(ITEM_41, TIME_41, 1)) == [1, 2, 4, 7]
    assert sorted(cumulative_points(ITEM_41, TIME_41, 2)) == [3, 6]
    p = cumulative_points(ITEM_41, TIME_41, 1)
    assert [int((p <= t).sum()) for t in range(1, 9)] == [1, 2, 2, 3, 3, 3, 4, 4]


def test_time_window_points_41_k2():
    x1, y1, x2, y2 = time_window_points(ITEM_41, TIME_41, 2, 8, drop_unused=False)
    # item a rows come first (log sorted by item); a has 5 loop rows, b 3, c 2, d 2
    assert list(zip(x1[:5], y1[:5], strict=False)) == [(0, 3), (1, 5), (3, 8), (5, 9), (8, 9)]
    assert list(zip(x2[:5], y2[:5], strict=False)) == [(1, 3), (3, 5), (5, 8), (8, 9), (9, 9)]
    assert list(zip(x1[5:8], y1[5:8], strict=False)) == [(0, 6), (2, 9), (6, 9)]
    assert list(zip(x2[5:8], y2[5:8], strict=False)) == [(2, 6), (6, 9), (9, 9)]
    pts = time_window_points(ITEM_41, TIME_41, 2, 8)
    assert included(pts, 3, 6) == 1


def test_time_window_points_41_k1():
    x1, y1, x2, y2 = time_window_points(ITEM_41, TIME_41, 1, 8, drop_unused=False)
    assert list(zip(x1[:5], y1[:5], strict=False)) == [(0, 1), (1, 3), (3, 5), (5, 8), (8, 9)]
    assert list(zip(x2[:5], y2[:5], strict=False)) == [(1, 1), (3, 3), (5, 5), (8, 8), (9, 9)]


def test_fixed_single_block_42():
    # W = 4, horizon 2W = 8, universe {a..e}: e contributes the pair (W, 2W+1) = (4, 9)
    a, c, g = rolling_window_points(ITEM_41, TIME_41, 1, 4, 8)
    a = np.concatenate((a, [4]))
    c = np.concatenate((c, [9]))
    assert [int((a <= t).sum()) for t in range(4, 9)] == [2, 2, 2, 2, 3]
    assert [int((c <= t).sum()) for t in range(4, 9)] == [0, 0, 0, 1, 1]
    assert [5 - int((a <= t).sum() - (c <= t).sum()) for t in range(4, 9)] == [3, 3, 3, 4, 3]
    a, c, g = rolling_window_points(ITEM_41, TIME_41, 2, 4, 8)
    assert sorted(a[g == 0]) == [7]
    assert sorted(c[g == 0]) == [8]
    assert sorted(a[g == 1]) == [4, 6]
    assert sorted(c[g == 1]) == [6, 9]
    assert sorted(a[g == 2]) == [4, 8]
    assert sorted(c[g == 2]) == [8, 9]
    assert sorted(a[g == 3]) == [4]
    assert sorted(c[g == 3]) == [9]
    a = np.concatenate((a, [4]))
    c = np.concatenate((c, [9]))
    assert [int((a <= t).sum()) for t in range(4, 9)] == [4, 4, 5, 6, 7]
    assert [int((c <= t).sum()) for t in range(4, 9)] == [0, 0, 1, 1, 3]


def test_rolling_window_41_w3_and_block_layout_43():
    bp = block_points(ITEM_41, TIME_41, 1, 3, 8)
    assert list(bp.exact(np.arange(1, 9))) == [1, 2, 2, 3, 2, 3, 3, 3]
    bp = block_points(ITEM_41, TIME_41, 2, 3, 8)
    assert list(bp.exact(np.arange(1, 9))) == [0, 0, 1, 0, 1, 0, 0, 0]
    # T = 8, W = 2: five blocks, t -> b mapping, truth 1 2 2 2 2 2 2 2
    bp = block_points(ITEM_41, TIME_41, 1, 2, 8)
    assert bp.n_blocks == 5
    assert [t // 2 for t in range(1, 9)] == [0, 1, 1, 2, 2, 3, 3, 4]
    assert list(bp.exact(np.arange(1, 9))) == [1, 2, 2, 2, 2, 2, 2, 2]


def test_bundle_45():
    item = np.array([0, 0, 0, 1, 1, 1, 2])  # a, b, c
    time = np.array([1, 1, 3, 1, 4, 4, 4])
    assert list(cumulative_points(item, time, 2)) == [1, 4]
    x1, y1, x2, y2 = time_window_points(item, time, 2, 4, drop_unused=False)
    assert list(zip(x1[:4], y1[:4], strict=False)) == [(0, 1), (1, 3), (1, 5), (3, 5)]
    assert list(zip(x2[:4], y2[:4], strict=False)) == [(1, 1), (1, 3), (3, 5), (5, 5)]
    f = brute(item, time, 4, 2)
    assert [list(f[t1, t1:5]) for t1 in range(1, 5)] == [[1, 1, 1, 2], [0, 0, 1], [0, 1], [1]]


def random_log(rng, horizon, n_items, max_events, singleton):
    if singleton:
        n = int(rng.integers(0, horizon + 1))
        times = np.sort(rng.choice(np.arange(1, horizon + 1), size=n, replace=False))
        item = rng.integers(0, n_items, size=n)
    else:
        n = int(rng.integers(0, max_events + 1))
        times = rng.integers(1, horizon + 1, size=n)
        item = rng.integers(0, n_items, size=n)
    order = np.lexsort((times, item))
    return item[order].astype(np.int64), times[order].astype(np.int64)


def test_exactness_bruteforce_1000_logs(rng):
    for case in range(1000):
        horizon = int(rng.integers(1, 15))
        k = int(rng.integers(1, 5))
        width = int(rng.integers(1, horizon + 1))
        item, times = random_log(rng, horizon, int(rng.integers(1, 6)), 20, case % 2 == 0)
        f = brute(item, times, horizon, k)
        cp = cumulative_points(item, times, k)
        ts = np.arange(1, horizon + 1)
        assert np.array_equal((cp[None, :] <= ts[:, None]).sum(axis=1), f[1, 1:horizon + 1])
        pts = time_window_points(item, times, k, horizon)
        for t1 in range(1, horizon + 1):
            for t2 in range(t1, horizon + 1):
                assert included(pts, t1, t2) == f[t1, t2]
        bp = block_points(item, times, k, width, horizon)
        want = [f[max(1, t - width + 1), t] for t in ts]
        assert list(bp.exact(ts)) == want
        # single instance over the whole horizon, times shifted by W (the alternative construction)
        a, c, _g = rolling_window_points(item, times + width, k, width, horizon + width)
        present = np.unique(item).size
        got = [present - int((a <= t + width).sum() - (c <= t + width).sum()) for t in ts]
        assert got == want


def symdiff(p, q):
    """Size of the multiset symmetric difference of two lists of hashable points."""
    from collections import Counter

    cp, cq = Counter(p), Counter(q)
    return sum(((cp - cq) + (cq - cp)).values())


def neighbours(rng, item, times, horizon, level, n_items):
    """One random neighbour: remove/add one event (event level) or replace one item's pattern."""
    if level == "event":
        if len(item) and rng.random() < 0.5:
            drop = int(rng.integers(len(item)))
            return np.delete(item, drop), np.delete(times, drop)
        it = np.append(item, rng.integers(0, n_items))
        tt = np.append(times, rng.integers(1, horizon + 1))
    else:
        victim = int(rng.integers(0, n_items))
        keep = item != victim
        n_new = int(rng.integers(0, 2 * horizon + 1))
        it = np.concatenate((item[keep], np.full(n_new, victim)))
        tt = np.concatenate((times[keep], rng.integers(1, horizon + 1, size=n_new)))
    order = np.lexsort((tt, it))
    return it[order].astype(np.int64), tt[order].astype(np.int64)


def pts2(x, y):
    return list(zip(x.tolist(), y.tolist(), strict=False))


@pytest.mark.parametrize("level", ["event", "item"])
def test_sensitivity_search_within_calibrated_bounds(rng, level):
    """Brute-force search over random neighbours never exceeds the calibrated Δ."""
    seen = {"cum": 0, "tw": 0, "block": 0, "single": 0}
    for _ in range(1500):
        horizon = int(rng.integers(2, 13))
        k = int(rng.integers(1, 4))
        width = int(rng.integers(1, horizon + 1))
        n_items = int(rng.integers(1, 5))
        item, times = random_log(rng, horizon, n_items, 16, False)
        it2, tt2 = neighbours(rng, item, times, horizon, level, n_items)
        d = symdiff(cumulative_points(item, times, k).tolist(),
                    cumulative_points(it2, tt2, k).tolist())
        assert d <= 2
        seen["cum"] = max(seen["cum"], d)
        # block instances: keep the (block, item) structure by using the item codes directly
        b1 = block_points(item, times, k, width, horizon)
        b2 = block_points(it2, tt2, k, width, horizon)
        # all items of the universe [0, n_items) contribute; absent ones add (0, W+1) per block
        for blk in range(b1.n_blocks):
            p1 = pts2(np.full((b1.block_a == blk).sum(), 0), b1.a[b1.block_a == blk])
            q1 = pts2(np.full((b2.block_a == blk).sum(), 0), b2.a[b2.block_a == blk])
            p2 = b1.c[b1.block_c == blk].tolist()
            q2 = b2.c[b2.block_c == blk].tolist()
            pad = n_items - b1.n_present[blk]
            pad2 = n_items - b2.n_present[blk]
            p1 += [(0, 0)] * pad
            q1 += [(0, 0)] * pad2
            p2 += [width + 1] * pad
            q2 += [width + 1] * pad2
            dj = symdiff(p1, q1) + symdiff(p2, q2)
            assert dj <= 4 * k
            seen["block"] = max(seen["block"], dj)
        if level == "event":
            x1, y1, x2, y2 = time_window_points(item, times, k, horizon, drop_unused=False)
            u1, v1, u2, v2 = time_window_points(it2, tt2, k, horizon, drop_unused=False)
            absent = n_items - np.unique(item).size
            absent2 = n_items - np.unique(it2).size
            p1 = pts2(x1, y1) + [(0, horizon + 1)] * absent
            q1 = pts2(u1, v1) + [(0, horizon + 1)] * absent2
            p2 = pts2(x2, y2) + [(horizon + 1, horizon + 1)] * absent
            q2 = pts2(u2, v2) + [(horizon + 1, horizon + 1)] * absent2
            d1, d2 = symdiff(p1, q1), symdiff(p2, q2)
            assert d1 <= 2 * k + 1
            assert d2 <= 2 * k - 1
            assert d1 + d2 <= 4 * k
            seen["tw"] = max(seen["tw"], d1 + d2)
            a, c, _ = rolling_window_points(item, times + width, k, width, horizon + width)
            a2, c2, _ = rolling_window_points(it2, tt2 + width, k, width, horizon + width)
            ds = (symdiff(a.tolist() + [width] * absent, a2.tolist() + [width] * absent2)
                  + symdiff(c.tolist() + [horizon + width + 1] * absent,
                            c2.tolist() + [horizon + width + 1] * absent2))
            assert ds <= 4 * k + 2
            seen["single"] = max(seen["single"], ds)
    assert seen["cum"] == 2  # the bound is reached: it is tight


def test_event_level_neighbour_44():
    """Removing a@3 from the worked log changes item a's points by the listed amounts."""
    item2 = np.array([0, 0, 0, 1, 1, 2, 3])
    time2 = np.array([1, 5, 8, 2, 6, 4, 7])
    for k, want1, want2, rows, rows2 in ((1, 3, 1, 5, 4), (2, 5, 3, 5, 4)):
        x1, y1, x2, y2 = time_window_points(ITEM_41, TIME_41, k, 8, drop_unused=False)
        u1, v1, u2, v2 = time_window_points(item2, time2, k, 8, drop_unused=False)
        p1, q1 = pts2(x1[:rows], y1[:rows]), pts2(u1[:rows2], v1[:rows2])
        p2, q2 = pts2(x2[:rows], y2[:rows]), pts2(u2[:rows2], v2[:rows2])
        assert symdiff(p1, q1) == want1
        assert symdiff(p2, q2) == want2
    x1, y1, _, _ = time_window_points(item2, time2, 1, 8, drop_unused=False)
    assert pts2(x1[:4], y1[:4]) == [(0, 1), (1, 5), (5, 8), (8, 9)]
    x1, y1, x2, y2 = time_window_points(item2, time2, 2, 8, drop_unused=False)
    assert pts2(x1[:4], y1[:4]) == [(0, 5), (1, 8), (5, 9), (8, 9)]
    assert pts2(x2[:4], y2[:4]) == [(1, 5), (5, 8), (8, 9), (9, 9)]
