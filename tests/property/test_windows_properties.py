"""Hypothesis invariants of the deterministic parts of dpfreq.windows (STYLE.md rule 21)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dpfreq.windows.data.dominance_count import DominanceCounter
from dpfreq.windows.data.reductions import block_points, cumulative_points, time_window_points
from dpfreq.windows.layouts.dyadic import node_counts, prefix_cover
from dpfreq.windows.layouts.least_squares import consistent_tree


@st.composite
def logs(draw):
    horizon = draw(st.integers(1, 12))
    n_items = draw(st.integers(1, 4))
    events = draw(st.lists(st.tuples(st.integers(0, n_items - 1), st.integers(1, horizon)),
                           max_size=25))
    events.sort()
    item = np.array([e[0] for e in events], dtype=np.int64)
    times = np.array([e[1] for e in events], dtype=np.int64)
    return horizon, item, times


def brute(item, times, t1, t2, k):
    sel = (times >= t1) & (times <= t2)
    if not sel.any():
        return 0
    return int((np.bincount(item[sel]) >= k).sum())


@settings(max_examples=150, deadline=None)
@given(logs(), st.integers(1, 4), st.data())
def test_reductions_equal_direct_counts(log, k, data):
    horizon, item, times = log
    t2 = data.draw(st.integers(1, horizon))
    t1 = data.draw(st.integers(1, t2))
    x1, y1, x2, y2 = time_window_points(item, times, k, horizon)
    included = int(((x1 <= t1 - 1) & (y1 <= t2)).sum() - ((x2 <= t1 - 1) & (y2 <= t2)).sum())
    assert included == brute(item, times, t1, t2, k)
    assert int((cumulative_points(item, times, k) <= t2).sum()) == brute(item, times, 1, t2, k)
    width = data.draw(st.integers(1, horizon))
    bp = block_points(item, times, k, width, horizon)
    assert int(bp.exact(np.array([t2]))[0]) == brute(item, times, max(1, t2 - width + 1), t2, k)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 5), st.lists(st.integers(0, 31), max_size=40), st.data())
def test_tree_prefix_equals_prefix_count(h, pts, data):
    domain = 1 << h
    p = np.array([v % domain for v in pts], dtype=np.int64)
    counts = node_counts(p, domain)
    x = data.draw(st.integers(-1, domain - 1))
    total = sum(int(counts[ids[0]]) for used, ids in prefix_cover([x], domain) if used[0])
    assert total == int((p <= x).sum())


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 4), st.integers(1, 4), st.data())
def test_consistency_is_consistent_and_idempotent(b, height, data):
    sizes = [b ** (height - 1 - i) for i in range(height)]
    noisy = [np.array(data.draw(st.lists(st.floats(-50, 50), min_size=n, max_size=n)))
             for n in sizes]
    out = consistent_tree(noisy, b)
    for i in range(1, height):
        assert np.allclose(out[i], out[i - 1].reshape(-1, b).sum(axis=1), atol=1e-7)
    again = consistent_tree(out, b)
    for a, c in zip(out, again, strict=True):
        assert np.allclose(a, c, atol=1e-7)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9), st.integers(-2, 2)),
                max_size=30), st.integers(-1, 11), st.integers(-1, 11))
def test_dominance_counter_modes_agree(points, qx, qy):
    x = np.array([p[0] for p in points], dtype=np.int64)
    y = np.array([p[1] for p in points], dtype=np.int64)
    w = np.array([p[2] for p in points], dtype=np.int64)
    table = DominanceCounter(x, y, w, 9, 9)
    tree = DominanceCounter(x, y, w, 9, 9, table_limit=0)
    want = int(w[(x <= qx) & (y <= qy)].sum()) if len(points) else 0
    assert int(table.count(qx, qy)) == want
    assert int(tree.count(qx, qy)) == want
