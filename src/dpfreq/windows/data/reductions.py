"""Reductions from an event log to point multisets (Ghazi, Kumar, Manurangsi and Nelson
(2023), "Private counting of distinct and k-occurring items in time windows", ITCS).

The log is given as ``item`` codes and integer ``times`` sorted by (item, time). For each item
``i`` with ``m_i`` events, the *padded reach sequence* is ``k`` virtual occurrences at time 0, the
real occurrence times, and ``k`` virtual occurrences at ``H+1`` (``H`` the horizon of the
instance). With 1-based padded index ``j``:

* cumulative: one point per item, the time of its k-th real occurrence (items with fewer
  than ``k`` events make no point); ``f≥k(X[1,t]) = #{p ≤ t}``;
* rolling window: for ``j = k..k+m_i``, ``a = τ_j + W``, ``c = min(τ_{j+1}+W, τ_{j+k})``,
  kept when ``a < c``; ``f≥k(X[t−W+1,t]) = |U| − (#{a ≤ t} − #{c ≤ t})`` for ``t ∈ [W, H]``;
* time window: for ``j = k..k+m_i``, ``P1 ∋ (τ_j, τ_{j+k})``, ``P2 ∋ (τ_{j+1}, τ_{j+k})``;
  included form ``f≥k(X[t1,t2]) = #{P1: x ≤ t1−1, y ≤ t2} − #{P2: x ≤ t1−1, y ≤ t2}``.

All functions are vectorized over the whole log; every identity is checked against brute-force
counting in the tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "BlockCounts",
    "BlockPoints",
    "block_points",
    "cumulative_points",
    "group_bounds",
    "padded",
    "rolling_window_points",
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
    """Padded occurrence time ``τ_j`` (1-based ``j``) of the groups ``(start, m)``."""
    pos = start + j - k - 1
    real = (j > k) & (j <= k + m)
    safe = np.clip(pos, 0, max(times.size - 1, 0))
    vals = times[safe] if times.size else np.zeros_like(pos)
    return np.where(j <= k, 0, np.where(real, vals, high))


def _rows(starts: IntArray, sizes: IntArray, times: IntArray, k: int,
          high: int) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """``(τ_j, τ_{j+1}, τ_{j+k}, group)`` for the rows ``j = k..k+m_g`` of every group.

    The padded sequence of group ``g`` is ``k`` zeros, its ``m_g`` times, ``k`` copies of
    ``high``; row ``j = k + r`` (``r = 0..m_g``) reads ``τ_j`` = 0 (r = 0) or the r-th time,
    ``τ_{j+1}`` = the (r+1)-th time or ``high`` (r = m_g), and ``τ_{j+k}`` = the (r+k)-th
    time or ``high`` (r + k > m_g): gathers straight from the log, in memory proportional to
    the rows whatever k.
    """
    n_groups = starts.size
    if n_groups == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z.copy(), z.copy(), z.copy()
    per = sizes + 1
    group = np.repeat(np.arange(n_groups, dtype=np.int64), per)
    r = np.arange(int(per.sum()), dtype=np.int64) - np.repeat(np.cumsum(per) - per, per)
    st = np.repeat(starts, per)
    m = np.repeat(sizes, per)
    last = max(times.size - 1, 0)

    def take(offset: IntArray, real: NDArray[np.bool_], fill: int) -> IntArray:
        vals = times[np.clip(st + offset, 0, last)] if times.size else np.zeros_like(offset)
        out: IntArray = np.where(real, vals, fill)
        return out

    tj = take(r - 1, r >= 1, 0)
    tj1 = take(r, r < m, high)
    tjk = take(r + k - 1, r + k <= m, high)
    return tj, tj1, tjk, group


def cumulative_points(item: Any, times: Any, k: int) -> IntArray:
    """Cumulative: the time of each item's k-th occurrence (items with < k events make no point)."""
    t = np.asarray(times, dtype=np.int64)
    starts, sizes = group_bounds(item)
    ok = sizes >= k
    return t[starts[ok] + k - 1]


def time_window_points(item: Any, times: Any, k: int, horizon: int, *,
                       drop_unused: bool = True) -> tuple[IntArray, IntArray, IntArray,
                                                          IntArray]:
    """Time windows: the two 2d point multisets ``(x1, y1)`` and ``(x2, y2)``.

    With ``drop_unused`` the points with ``y = horizon+1`` (never counted by a query) are
    dropped; the sensitivity tests use ``drop_unused=False`` to see every point.
    """
    starts, sizes = group_bounds(item)
    tj, tj1, tjk, _group = _rows(starts, sizes, np.asarray(times, dtype=np.int64), k,
                                 horizon + 1)
    if drop_unused:
        keep = tjk <= horizon
        return tj[keep], tjk[keep], tj1[keep], tjk[keep]
    return tj, tjk, tj1, tjk


def rolling_window_points(item: Any, times: Any, k: int, width: int,
                        horizon: int) -> tuple[IntArray, IntArray, IntArray]:
    """Fixed window: points ``a`` (P1) and ``c`` (P2) of one instance (local ``horizon``).

    Returns ``(a, c, group)`` with ``group`` the index of the item's run in the (sorted) log.
    Only pairs with ``a < c`` are kept (a pair with ``a >= c`` never counts).
    """
    starts, sizes = group_bounds(item)
    tj, tj1, tjk, group = _rows(starts, sizes, np.asarray(times, dtype=np.int64), k,
                                horizon + 1)
    a = tj + width
    c = np.minimum(tj1 + width, tjk)
    keep = a < c
    return a[keep], c[keep], group[keep]


@dataclass(frozen=True)
class BlockCounts:
    """The rolling-window oracle (blocks of width W), aggregated: what :meth:`exact` needs.

    ``hist_a[b, v]`` (``hist_c[b, v]``) is the number of P1 (P2) points of block ``b`` with
    value ``v`` (local time minus ``W``, in ``[0, W+1]``); ``n_present[b]`` the number of items
    with an event in block ``b``'s time range. A union over items is a sum of these arrays, so
    they can be computed per chunk of items (or per Spark partition) and added up.
    """

    hist_a: IntArray
    hist_c: IntArray
    n_present: IntArray
    width: int
    _tables: tuple[IntArray, IntArray] | None = None

    @property
    def n_blocks(self) -> int:
        return int(self.n_present.size)

    def _count_tables(self) -> tuple[IntArray, IntArray]:
        """Per block, the number of P1 (P2) values ``<= x`` for ``x = 0..W+1``."""
        if self._tables is None:
            tabs = (np.cumsum(self.hist_a, axis=1, dtype=np.int64),
                    np.cumsum(self.hist_c, axis=1, dtype=np.int64))
            object.__setattr__(self, "_tables", tabs)
        assert self._tables is not None
        return self._tables

    def exact(self, t: Any) -> IntArray:
        """Exact ``f≥k`` of the window ``[max(1, t−W+1), t]`` for each ``t``."""
        tt = np.asarray(t, dtype=np.int64)
        w = self.width
        b = tt // w
        x = tt - b * w  # local time minus W, in [0, W−1]
        ta, tc = self._count_tables()
        out: IntArray = self.n_present[b] - (ta[b, x] - tc[b, x])
        return out


@dataclass(frozen=True)
class BlockPoints:
    """Fixed-window points of every block, local times shifted by ``−W``.

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
    _counts: BlockCounts | None = None

    def histograms(self) -> tuple[IntArray, IntArray]:
        """``(hist_a, hist_c)``: the P1 and P2 values per block, shape ``(n_blocks, W+2)``."""
        span = self.width + 2
        size = self.n_blocks * span
        ha, hc = (np.bincount(blk * span + v, minlength=size).reshape(self.n_blocks, span)
                  .astype(np.int64) for blk, v in ((self.block_a, self.a),
                                                   (self.block_c, self.c)))
        return ha, hc

    def counts(self) -> BlockCounts:
        """The aggregated oracle (:class:`BlockCounts`) of these points."""
        if self._counts is None:
            ha, hc = self.histograms()
            object.__setattr__(self, "_counts", BlockCounts(hist_a=ha, hist_c=hc,
                                                            n_present=self.n_present,
                                                            width=self.width))
        assert self._counts is not None
        return self._counts

    def exact(self, t: Any) -> IntArray:
        """Exact ``f≥k`` of the window ``[max(1, t−W+1), t]`` for each ``t`` (from the points)."""
        return self.counts().exact(t)


def block_points(item: Any, times: Any, k: int, width: int, horizon: int,
                 chunk: int = 1 << 16) -> BlockPoints:
    """The rolling-window reduction on blocks ``b = 0..⌊T/W⌋``.

    Block ``b`` sees times ``[(b−1)W+1, (b+1)W]``.

    Every event lies in blocks ``⌊(t−1)/W⌋`` and ``⌊(t−1)/W⌋ + 1`` (when that block exists).
    The log is sorted by (item, time), so the events of one item inside one block are a
    contiguous slice of it: the block instances are read as slices (no re-sort), in chunks of
    about ``chunk`` events cut at item boundaries (the chunking changes speed and memory only).
    """
    it = np.asarray(item, dtype=np.int64)
    t = np.asarray(times, dtype=np.int64)
    w = int(width)
    n_blocks = horizon // w + 1
    if it.size > 1 and bool(np.any((np.diff(it) < 0) | ((np.diff(it) == 0)
                                                        & (np.diff(t) < 0)))):
        order = np.lexsort((t, it))
        it, t = it[order], t[order]
    starts, _ = group_bounds(it)
    pos = np.searchsorted(starts, np.arange(0, it.size, chunk))
    cut = np.where(pos < starts.size, starts[np.minimum(pos, max(starts.size - 1, 0))], it.size)
    cuts = np.unique(np.concatenate((cut, [it.size]))).astype(np.int64)
    parts = [_block_chunk(it[lo:hi], t[lo:hi], k, w, n_blocks)
             for lo, hi in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True)]
    if parts:
        a, c, ga, present = (np.concatenate(v) for v in zip(*parts, strict=True))
    else:
        a = c = ga = present = np.zeros(0, dtype=np.int64)
    n_present = np.bincount(present, minlength=n_blocks).astype(np.int64)
    return BlockPoints(a=a, c=c, block_a=ga, block_c=ga.copy(), n_present=n_present,
                       n_blocks=n_blocks, width=w)


def _block_chunk(it: IntArray, t: IntArray, k: int, w: int,
                 n_blocks: int) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """Block points ``(a−W, c−W, block)`` and the block of every (item, block) run of a chunk."""
    n = it.size
    b1 = (t - 1) // w
    # segments: maximal slices of equal (item, ⌊(t−1)/W⌋)
    new = np.ones(n, dtype=np.bool_)
    new[1:] = (it[1:] != it[:-1]) | (b1[1:] != b1[:-1])
    s_lo = np.flatnonzero(new)
    s_hi = np.append(s_lo[1:], n)
    s_it, s_b = it[s_lo], b1[s_lo]
    adj = np.zeros(s_lo.size, dtype=np.bool_)  # segment continues the previous one's next block
    adj[1:] = (s_it[1:] == s_it[:-1]) & (s_b[1:] == s_b[:-1] + 1)
    # run "A" of segment s: block s_b, previous segment (if adjacent) + s;
    # run "B": block s_b + 1 holding s alone, unless the next segment is adjacent
    lo_a = np.where(adj, np.concatenate(([0], s_lo[:-1])), s_lo)
    has_b = np.ones(s_lo.size, dtype=np.bool_)
    has_b[:-1] = ~adj[1:]
    has_b &= s_b + 1 < n_blocks
    lo = np.stack((lo_a, s_lo), axis=1).ravel()
    hi = np.stack((s_hi, s_hi), axis=1).ravel()
    blk = np.stack((s_b, s_b + 1), axis=1).ravel()
    ok = np.stack((np.ones(s_lo.size, dtype=np.bool_), has_b), axis=1).ravel()
    lo, hi, blk = lo[ok], hi[ok], blk[ok]  # runs in (item, block) order
    size = hi - lo
    r_start = np.cumsum(size) - size
    idx = np.arange(int(size.sum()), dtype=np.int64) + np.repeat(lo - r_start, size)
    local = t[idx] - (np.repeat(blk, size) - 1) * w  # local time in [1, 2W]
    tj, tj1, tjk, group = _rows(r_start, size, local, k, 2 * w + 1)
    a = tj + w
    c = np.minimum(tj1 + w, tjk)
    keep = a < c
    return a[keep] - w, c[keep] - w, blk[group[keep]], blk
