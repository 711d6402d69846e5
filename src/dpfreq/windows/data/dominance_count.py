"""Exact weighted dominance counts ``Σ w [x ≤ X, y ≤ Y]`` of integer points (window oracles).

:class:`DominanceCounter` answers from a 2d prefix-sum table when the domain is small, else from
a merge-sort tree: for every dyadic level of ``x``, the points sorted by ``(x-node, y)`` with
their cumulative weights. A query ``(X, Y)`` splits ``[0, X]`` into one node per set bit of
``X + 1`` and counts, in each, the points with ``y ≤ Y`` by one binary search.

A level stores the pairs ``(y, weight up to and including the point)`` side by side, 32-bit
when every ``y`` and every partial sum of ``|w|`` fit (8 pairs per 64-byte cache line, the lines
aligned), else 64-bit, and the ``y`` of each line's first pair (a sample 1/16 of the pairs'
size). Each node's first position and the weight before it are stored too, so the optional
compiled pass of :mod:`dpfreq.windows.noise.kernel` (extra ``fast``) searches each query's node
alone: the node's samples first, then the one line they point to, so a search reads one line
of the level's pairs. Without numba, numpy runs the same searches vectorised over the queries,
one halving step at a time. Both give the same integers: the count is exact either way. The
levels are separate arrays: one allocation per level costs far less on a process's first
release than one for all levels (fresh pages), measured at 10^6 points.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.windows.layouts.dyadic import domain_size
from dpfreq.windows.noise import kernel as node_kernel

__all__ = ["DominanceCounter"]

IntArray = NDArray[np.int64]
_LINE = 64  # bytes per cache line: one search of the compiled pass reads one line per level
_INT32_MAX = (1 << 31) - 1


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
        """The merge-sort tree of the levels ``ℓ`` with ``2^ℓ <= nx`` (no query reaches a
        higher one): per level the pairs ``(y, cumulative weight)`` in ``(x-node, y)`` order
        and the ``y`` of each cache line's first pair; per node (from ``node_off[ℓ]``, flat over
        the levels) its first position ``start`` and the weight before it ``before``."""
        self._domain = domain_size(nx)
        self._ny = ny
        n_lev = nx.bit_length()
        node_off = np.zeros(n_lev + 1, dtype=np.int64)
        node_off[1:] = np.cumsum((self._domain >> np.arange(n_lev)) + 1)
        self._start = np.zeros(int(node_off[-1]), dtype=np.int64)
        self._before = np.zeros(int(node_off[-1]), dtype=np.int64)
        self._node_off = node_off
        # 32-bit pairs (8 per cache line) when every y and every partial sum of the weights fit
        small = ny <= _INT32_MAX and int(np.abs(ws).sum()) <= _INT32_MAX
        dtype = np.dtype(np.int32) if small else np.dtype(np.int64)
        self._shift = (_LINE // (2 * dtype.itemsize)).bit_length() - 1  # 2^shift pairs a line
        # the order by (x-node, y, index) of every level: one stable order by y, then a
        # stable order by x >> level (16-bit radix passes instead of an int64 sort per level)
        y_order = _stable_order(ys, ny.bit_length())
        x_by_y, w_by_y = xs[y_order], ws[y_order]
        y_by_y = ys[y_order].astype(dtype)
        counts = [np.bincount(xs, minlength=self._domain)]  # points per node of each level
        while len(counts) < n_lev:
            counts.append(counts[-1].reshape(-1, 2).sum(axis=1))
        levels: dict[int, tuple[NDArray[Any], NDArray[Any]]] = {}
        # the low levels last, so the likeliest still cached at a first ask: their queries
        # read the most distinct lines (one node each)
        for lev in reversed(range(n_lev)):
            perm = _stable_order(x_by_y >> lev, nx.bit_length() - lev)
            start = self._start[node_off[lev]:node_off[lev + 1]]
            np.cumsum(counts[lev], out=start[1:])
            levels[lev] = self._level(y_by_y[perm], w_by_y[perm], start,
                                      self._before[node_off[lev]:node_off[lev + 1]])
        self._levels = [levels[lev] for lev in range(n_lev)]
        kern = node_kernel.loaded()  # else the compiled pass takes the levels on its first count
        self._typed: tuple[Any, Any] | None = None if kern is None else self._level_lists()

    def _level(self, y: NDArray[Any], w: IntArray, start: IntArray, before: IntArray
               ) -> tuple[NDArray[Any], NDArray[Any]]:
        """One level's pairs ``(y, weight up to and including the point)``, flat, starting on a
        cache line, and its samples (the ``y`` of each line's first pair, one to spare); fills
        ``before`` of its nodes."""
        n, block = y.size, 1 << self._shift
        raw = np.empty(2 * (n + 2 * block), dtype=y.dtype)
        skip = (-raw.ctypes.data % _LINE) // y.dtype.itemsize
        pairs = raw[skip:skip + 2 * (n + block)].reshape(-1, 2)
        pairs[:n, 0] = y
        np.cumsum(w, out=pairs[:n, 1])
        pairs[n:] = 0  # read by the last line's count, never counted
        inner = start > 0
        before[inner] = pairs[start[inner] - 1, 1]
        samples = np.zeros(-(-n // block) + 1, dtype=y.dtype)
        samples[:-1] = pairs[:n:block, 0]
        return pairs.reshape(-1), samples

    def _level_lists(self) -> tuple[Any, Any]:
        """The levels' pairs and samples as the typed lists the compiled pass takes."""
        return (node_kernel.level_list([lv[0] for lv in self._levels]),
                node_kernel.level_list([lv[1] for lv in self._levels]))

    def count(self, x: Any, y: Any) -> IntArray:
        """Exact dominance count per query (``x < 0`` or ``y < 0`` gives 0)."""
        xq = np.minimum(np.asarray(x, dtype=np.int64), self.x_max)
        yq = np.minimum(np.asarray(y, dtype=np.int64), self.y_max)
        xq, yq = np.broadcast_arrays(xq, yq)
        empty = (xq < 0) | (yq < 0)
        if self.mode == "table":
            out = self._table[np.maximum(xq, 0), np.maximum(yq, 0)]
            return np.where(empty, 0, out)
        # queries in (x, y) order: the searches then walk each level forward (cache friendly)
        ok = np.flatnonzero(~empty.ravel())
        xo, yo = xq.ravel()[ok], yq.ravel()[ok]
        if (self.x_max + 1) * (self.y_max + 1) < 1 << 62:  # one int64 key: a faster sort
            order = np.argsort(xo * (self.y_max + 1) + yo)
        else:
            order = np.lexsort((yo, xo))
        xs1, ys = xo[order] + 1, yo[order]
        kern = node_kernel.loaded()
        if kern is not None:
            if self._typed is None:
                self._typed = self._level_lists()
            acc = node_kernel.dominance_counts(kern, *self._typed, self._shift, self._start,
                                               self._before, self._node_off, xs1, ys)
        else:
            acc = self._count_numpy(xs1, ys)
        out = np.zeros(xq.size, dtype=np.int64)
        out[ok[order]] = acc
        return out.reshape(xq.shape)

    def _count_numpy(self, xs1: IntArray, ys: IntArray) -> IntArray:
        """Per level, the binary searches of all queries in their nodes' ``y`` at once (numpy:
        one vectorised halving step at a time)."""
        acc = np.zeros(xs1.size, dtype=np.int64)
        for lev, (flat, _) in enumerate(self._levels):
            sel = np.flatnonzero((xs1 >> lev) & 1)
            node = self._node_off[lev] + (xs1[sel] >> lev) - 1
            lo, hi = self._start[node], self._start[node + 1]
            yl, cw = flat[0::2], flat[1::2]
            target = ys[sel]
            while True:  # lo: first position whose y may exceed the target
                live = np.flatnonzero(lo < hi)
                if live.size == 0:
                    break
                mid = (lo[live] + hi[live]) >> 1
                up = yl[mid] <= target[live]
                lo[live] = np.where(up, mid + 1, lo[live])
                hi[live] = np.where(up, hi[live], mid)
            found = lo > self._start[node]
            acc[sel[found]] += cw[lo[found] - 1] - self._before[node[found]]
        return acc

