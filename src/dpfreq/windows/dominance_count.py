"""Exact weighted dominance counts ``Σ w [x ≤ X, y ≤ Y]`` of integer points (window oracles).

:class:`DominanceCounter` answers from a 2d prefix-sum table when the domain is small, else from
a merge-sort tree: for every dyadic level of ``x``, the points sorted by ``(x-node, y)`` with
their cumulative weights. A query ``(X, Y)`` splits ``[0, X]`` into one node per set bit of
``X + 1`` and counts, in each, the points with ``y ≤ Y`` by one binary search.

Each node's first position is stored too, so the optional compiled pass of
:mod:`dpfreq.windows.node_kernel` (extra ``fast``) can search each query's node range alone (a
few keys at the low levels instead of all points); without it numpy's binary searches run over
each level's whole key array. Both give the same integers: the count is exact either way. The
levels are separate arrays: one allocation per level costs far less on a process's first
release than one for all levels (fresh pages), measured at 10^6 points.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.windows import node_kernel
from dpfreq.windows.dyadic import domain_size

__all__ = ["DominanceCounter"]

IntArray = NDArray[np.int64]

#: every ``2^SAMPLE_SHIFT``-th ``y`` of each level is kept apart: the compiled search runs over
#: these first (an eighth of a level, mostly cached), then over the one cache line of
#: ``(y, weight before)`` pairs between two samples, which also holds the count
SAMPLE_SHIFT = 3
_I32 = 1 << 31


def _aligned_pairs(n: int) -> NDArray[np.int32]:
    """An ``(n, 2)`` int32 array whose rows ``8i .. 8i + 7`` share one 64-byte cache line."""
    raw = np.empty(2 * n + 16, dtype=np.int32)
    skip = (-raw.ctypes.data % 64) // 4
    out: NDArray[np.int32] = raw[skip:skip + 2 * n].reshape(n, 2)
    return out


def _stable_order(keys: IntArray, bits: int) -> IntArray:
    """Stable argsort of non-negative integers ``< 2^bits`` (LSD radix over 16-bit digits)."""
    order: IntArray = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
    for shift in range(16, bits, 16):
        digit = ((keys[order] >> shift) & 0xFFFF).astype(np.uint16)
        order = order[np.argsort(digit, kind="stable")]
    return order


class DominanceCounter:
    """Exact weighted dominance counts ``Σ_i w_i [x_i ≤ X, y_i ≤ Y]`` for integer points.

    Uses a 2d prefix-sum table when ``(x_max+1)(y_max+1) <= table_limit``; otherwise a
    merge-sort tree (per dyadic x level, points sorted by (x-node, y) with cumulative weights),
    answering each query with one binary search per x-prefix node.

    Examples
    --------
    >>> import numpy as np
    >>> dc = DominanceCounter(np.array([0, 2]), np.array([1, 3]), np.array([1, 1]), 3, 3)
    >>> dc.count(np.array([2, 1]), np.array([3, 3])).tolist()
    [2, 1]
    """

    def __init__(self, x: Any, y: Any, weights: Any, x_max: int, y_max: int,
                 table_limit: int = 1 << 24) -> None:
        xs = np.asarray(x, dtype=np.int64)
        ys = np.asarray(y, dtype=np.int64)
        ws = np.asarray(weights, dtype=np.int64)
        self.x_max, self.y_max = int(x_max), int(y_max)
        nx, ny = self.x_max + 1, self.y_max + 1
        self.mode = "table" if nx * ny <= table_limit else "mergesort"
        if self.mode == "table":
            flat = np.bincount(xs * ny + ys, weights=ws, minlength=nx * ny)
            tab = np.rint(flat).astype(np.int64).reshape(nx, ny)
            self._table = tab.cumsum(axis=0).cumsum(axis=1)
        else:
            self._build_tree(xs, ys, ws, nx, ny)

    def _build_tree(self, xs: IntArray, ys: IntArray, ws: IntArray, nx: int, ny: int) -> None:
        """The merge-sort tree: per level ``ℓ`` the keys ``node·ny + y`` (sorted; int64, or int32
        ``(y, weight before)`` pairs and every 8th ``y`` when they fit) and the weight
        before each position; per node (from ``node_off[ℓ]``, flat over the levels) its first
        position ``start`` and the weight before it ``before``."""
        self._domain = domain_size(nx)
        self._ny = ny
        n_lev = self._domain.bit_length()
        node_off = np.zeros(n_lev + 1, dtype=np.int64)
        node_off[1:] = np.cumsum((self._domain >> np.arange(n_lev)) + 1)
        self._start = np.empty(int(node_off[-1]), dtype=np.int64)
        self._before = np.empty(int(node_off[-1]), dtype=np.int64)
        self._node_off = node_off
        self._typed: tuple[Any, Any] | None = None  # the levels as the compiled pass takes them
        # the order by (x-node, y, index) of every level: one stable order by y, then a
        # stable order by x >> level (16-bit radix passes instead of an int64 sort per level)
        y_order = _stable_order(ys, ny.bit_length())
        x_by_y, y_by_y, w_by_y = xs[y_order], ys[y_order], ws[y_order]
        # the compiled pass reads (y, weight before) pairs as int32: both fit when the total
        # weight and the y range do (else the numpy path answers)
        self._compact = int(np.abs(ws).sum()) < _I32 and ny < _I32
        self._levels: list[tuple[Any, Any, Any, Any, Any]] = []
        for lev in range(n_lev):
            node = x_by_y >> lev
            perm = _stable_order(node, nx.bit_length() - lev)
            # the int64 keys only without the compact pairs (else built if the numpy path
            # ever runs: :meth:`_level_keys`)
            key = None if self._compact else (node * ny + y_by_y)[perm]
            # each node's first position (the keys of the nodes before it) and the weight
            # before it: no search for the start of a node's keys at query time
            at = slice(int(node_off[lev]), int(node_off[lev + 1]))
            first = self._start[at]
            first[0] = 0
            np.cumsum(np.bincount(node, minlength=first.size)[:-1], out=first[1:])
            w_perm = w_by_y[perm]
            pairs = samples = None
            if self._compact:
                pairs = _aligned_pairs(perm.size + 1)
                pairs[0, 1] = 0
                np.cumsum(w_perm, dtype=np.int32, out=pairs[1:, 1])  # exact: Σ|w| < 2^31
                pairs[:-1, 0] = y_by_y[perm]
                pairs[-1, 0] = _I32 - 1  # past every y: the end of the last node
                cw: Any = pairs[:, 1]  # the int32 column serves the numpy path too
                samples = np.ascontiguousarray(pairs[::1 << SAMPLE_SHIFT, 0])
            else:
                cw = np.zeros(perm.size + 1, dtype=np.int64)
                np.cumsum(w_perm, out=cw[1:])
            self._before[at] = cw[first]
            self._levels.append((key, cw, self._before[at], pairs, samples))

    def count(self, x: Any, y: Any) -> IntArray:
        """Exact dominance count per query (``x < 0`` or ``y < 0`` gives 0)."""
        xq = np.minimum(np.asarray(x, dtype=np.int64), self.x_max)
        yq = np.minimum(np.asarray(y, dtype=np.int64), self.y_max)
        xq, yq = np.broadcast_arrays(xq, yq)
        empty = (xq < 0) | (yq < 0)
        if self.mode == "table":
            out = self._table[np.maximum(xq, 0), np.maximum(yq, 0)]
            return np.where(empty, 0, out)
        # queries in (x, y) order: the binary searches then walk the keys forward (cache friendly)
        ok = np.flatnonzero(~empty.ravel())
        xo, yo = xq.ravel()[ok], yq.ravel()[ok]
        order = np.lexsort((yo, xo))
        xs1, ys = xo[order] + 1, yo[order]
        kern = node_kernel.loaded() if self._compact else None
        if kern is not None:
            if self._typed is None:
                self._typed = (node_kernel.level_list([lv[3] for lv in self._levels], None),
                               node_kernel.level_list([lv[4] for lv in self._levels], None))
            acc = node_kernel.dominance_counts(kern, *self._typed, SAMPLE_SHIFT, self._start,
                                               self._before, self._node_off, xs1, ys)
        else:
            acc = self._count_numpy(xs1, ys)
        out = np.zeros(xq.size, dtype=np.int64)
        out[ok[order]] = acc
        return out.reshape(xq.shape)

    def _count_numpy(self, xs1: IntArray, ys: IntArray) -> IntArray:
        """One binary search per level over the level's whole key array (numpy)."""
        acc = np.zeros(xs1.size, dtype=np.int64)
        for lev, (_, cw, before, _, _) in enumerate(self._levels):
            keys = self._level_keys(lev)
            sel = np.flatnonzero((xs1 >> lev) & 1)
            node = (xs1[sel] >> lev) - 1
            hi = np.searchsorted(keys, node * self._ny + ys[sel], side="right")
            acc[sel] += cw[hi] - before[node]
        return acc

    def _level_keys(self, lev: int) -> IntArray:
        """The sorted keys ``node·ny + y`` of level ``lev``, rebuilt from the compact pairs on
        first use where only those were kept (then kept too)."""
        keys, cw, before, pairs, samples = self._levels[lev]
        if keys is None:
            first = self._start[int(self._node_off[lev]):int(self._node_off[lev + 1])]
            counts = np.diff(np.append(first, pairs.shape[0] - 1))
            keys = (np.repeat(np.arange(first.size, dtype=np.int64) * self._ny, counts)
                    + pairs[:-1, 0])
            self._levels[lev] = (keys, cw, before, pairs, samples)
        out: IntArray = keys
        return out
