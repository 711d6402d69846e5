"""Reductions from an event log to point multisets (spec ``time_windows.md`` §2.1, §3.1–§3.4).

The log is given as ``item`` codes and integer ``times`` sorted by (item, time). For each item
``i`` with ``m_i`` events, the *padded reach sequence* is ``k`` virtual occurrences at time 0, the
real occurrence times, and ``k`` virtual occurrences at ``H+1`` (``H`` the horizon of the
instance). With 1-based padded index ``j``:

* cumulative (§3.1): one point per item, the time of its k-th real occurrence (items with fewer
  than ``k`` events make no point); ``f≥k(X[1,t]) = #{p ≤ t}``;
* fixed window (§3.2): for ``j = k..k+m_i``, ``a = τ_j + W``, ``c = min(τ_{j+1}+W, τ_{j+k})``,
  kept when ``a < c``; ``f≥k(X[t−W+1,t]) = |U| − (#{a ≤ t} − #{c ≤ t})`` for ``t ∈ [W, H]``;
* time window (§3.4): for ``j = k..k+m_i``, ``P1 ∋ (τ_j, τ_{j+k})``, ``P2 ∋ (τ_{j+1}, τ_{j+k})``;
  included form ``f≥k(X[t1,t2]) = #{P1: x ≤ t1−1, y ≤ t2} − #{P2: x ≤ t1−1, y ≤ t2}``.

All functions are vectorized over the whole log; every identity is checked against brute-force
counting in the tests (spec §4, §7.1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "BlockPoints",
    "block_points",
    "cumulative_points",
    "fixed_window_points",
    "group_bounds",
    "padded",
    "time_window_points",
]

IntArray = NDArray[np.int64]


def group_bounds(item: Any) -> tuple[IntArray, IntArray]:
    """Start offset and size of each run of equal ``item`` codes (the log is sorted by item)."""
    it = np.asarray(item, dtype=np.int64)
    if it.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.concatenate(([True], it[1:] != it[:-1])))
    sizes = np.diff(np.concatenate((starts, [it.size])))
    return starts.astype(np.int64), sizes.astype(np.int64)


def padded(times: IntArray, start: IntArray, m: IntArray, j: IntArray, k: int,
           high: int) -> IntArray:
    """Padded occurrence time ``τ_j`` (1-based ``j``) of the groups ``(start, m)`` (§2.1)."""
    pos = start + j - k - 1
    real = (j > k) & (j <= k + m)
    safe = np.clip(pos, 0, max(times.size - 1, 0))
    vals = times[safe] if times.size else np.zeros_like(pos)
    return np.where(j <= k, 0, np.where(real, vals, high))


def _loop(item: Any, times: Any, k: int) -> tuple[IntArray, IntArray, IntArray, IntArray,
                                                      IntArray]:
    """Rows of the loop ``j = k..k+m_i`` for every item: (group, start, m, j, times)."""
    t = np.asarray(times, dtype=np.int64)
    starts, sizes = group_bounds(item)
    reps = sizes + 1
    group = np.repeat(np.arange(starts.size, dtype=np.int64), reps)
    offset = np.arange(group.size, dtype=np.int64) - np.repeat(np.cumsum(reps) - reps, reps)
    j = k + offset
    return group, starts[group], sizes[group], j, t


def cumulative_points(item: Any, times: Any, k: int) -> IntArray:
    """§3.1: the time of each item's k-th occurrence (items with < k events make no point)."""
    t = np.asarray(times, dtype=np.int64)
    starts, sizes = group_bounds(item)
    ok = sizes >= k
    return t[starts[ok] + k - 1]


def time_window_points(item: Any, times: Any, k: int, horizon: int, *,
                       drop_unused: bool = True) -> tuple[IntArray, IntArray, IntArray,
                                                          IntArray]:
    """§3.4: the two 2d point multisets ``(x1, y1)`` and ``(x2, y2)``.

    With ``drop_unused`` the points with ``y = horizon+1`` (never counted by a query) are
    dropped; the sensitivity tests use ``drop_unused=False`` to see every point.
    """
    _group, start, m, j, t = _loop(item, times, k)
    hi = horizon + 1
    tj = padded(t, start, m, j, k, hi)
    tj1 = padded(t, start, m, j + 1, k, hi)
    tjk = padded(t, start, m, j + k, k, hi)
    if drop_unused:
        keep = tjk <= horizon
        return tj[keep], tjk[keep], tj1[keep], tjk[keep]
    return tj, tjk, tj1, tjk


def fixed_window_points(item: Any, times: Any, k: int, width: int,
                        horizon: int) -> tuple[IntArray, IntArray, IntArray]:
    """§3.2: points ``a`` (P1) and ``c`` (P2) of one instance with local horizon ``horizon``.

    Returns ``(a, c, group)`` with ``group`` the index of the item's run in the (sorted) log.
    Only pairs with ``a < c`` are kept (pitfall 1).
    """
    group, start, m, j, t = _loop(item, times, k)
    hi = horizon + 1
    tj = padded(t, start, m, j, k, hi)
    tj1 = padded(t, start, m, j + 1, k, hi)
    tjk = padded(t, start, m, j + k, k, hi)
    a = tj + width
    c = np.minimum(tj1 + width, tjk)
    keep = a < c
    return a[keep], c[keep], group[keep]


@dataclass(frozen=True)
class BlockPoints:
    """Fixed-window points of every block (§3.3), local times shifted by ``−W``.

    ``a``, ``c`` are the P1/P2 values minus ``W`` (in ``[0, W+1]``), ``block`` their block,
    ``n_present[b]`` the number of items with at least one event in block ``b``'s time range.
    """

    a: IntArray
    c: IntArray
    block_a: IntArray
    block_c: IntArray
    n_present: IntArray
    n_blocks: int
    width: int
    _keys: tuple[IntArray, IntArray] | None = None

    def _sorted_keys(self) -> tuple[IntArray, IntArray]:
        if self._keys is None:
            span = self.width + 2
            keys = (np.sort(self.block_a * span + self.a), np.sort(self.block_c * span + self.c))
            object.__setattr__(self, "_keys", keys)
        assert self._keys is not None
        return self._keys

    def exact(self, t: Any) -> IntArray:
        """Exact ``f≥k`` of the window ``[max(1, t−W+1), t]`` for each ``t`` (from the points)."""
        tt = np.asarray(t, dtype=np.int64)
        w = self.width
        b = tt // w
        x = tt - (b - 1) * w - w
        span = w + 2
        ka, kc = self._sorted_keys()
        q = b * span + x
        n1 = np.searchsorted(ka, q, side="right") - np.searchsorted(ka, b * span, side="left")
        n2 = np.searchsorted(kc, q, side="right") - np.searchsorted(kc, b * span, side="left")
        return self.n_present[b] - (n1 - n2)


def block_points(item: Any, times: Any, k: int, width: int, horizon: int) -> BlockPoints:
    """§3.3: run §3.2 on blocks ``b = 0..⌊T/W⌋``; block ``b`` sees times ``[(b−1)W+1, (b+1)W]``.

    Every event lies in blocks ``⌊(t−1)/W⌋`` and ``⌊(t−1)/W⌋ + 1`` (when that block exists).
    """
    it = np.asarray(item, dtype=np.int64)
    t = np.asarray(times, dtype=np.int64)
    w = width
    n_blocks = horizon // w + 1
    b1 = (t - 1) // w
    blocks = np.concatenate((b1, b1 + 1))
    items = np.concatenate((it, it))
    tt = np.concatenate((t, t))
    keep = blocks < n_blocks
    blocks, items, tt = blocks[keep], items[keep], tt[keep]
    local = tt - (blocks - 1) * w
    # sort by (block, item, local time) through one combined int64 key
    n_it = int(it.max()) + 1 if it.size else 1
    span = 2 * w + 1
    key = np.sort((blocks * n_it + items) * span + local)
    local = key % span
    run_key = key // span  # one run per (block, item)
    blocks = run_key // n_it
    a, c, group = fixed_window_points(run_key, local, k, w, 2 * w)
    starts, _ = group_bounds(run_key)
    run_block = blocks[starts] if starts.size else np.zeros(0, dtype=np.int64)
    n_present = np.bincount(run_block, minlength=n_blocks).astype(np.int64)
    ga = run_block[group] if group.size else np.zeros(0, dtype=np.int64)
    return BlockPoints(a=a - w, c=c - w, block_a=ga, block_c=ga.copy(), n_present=n_present,
                       n_blocks=n_blocks, width=w)
