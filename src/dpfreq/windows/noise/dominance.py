"""Sums of keyed node noise over the dominance covers of product dyadic trees, fast.

The dominance region ``{(p, q): p < x1, q < y1}`` of a product tree over ``D × D`` (``D = 2^h``,
levels ``0..h``) is covered by one node of level pair ``(ℓx, ℓy)`` for every bit ``ℓx`` set in
``x1`` and ``ℓy`` set in ``y1``: node ``((D >> ℓx) + (x1 >> ℓx) − 1, (D >> ℓy) + (y1 >> ℓy) − 1)``
(1d heap ids, :mod:`dpfreq.windows.layouts.dyadic`). The level pair's node grid has
``2^{2h − ℓx − ℓy}`` cells, so the level pairs split in two:

* **upper pairs** (``ℓx + ℓy >= S``): grids with few cells, each shared by many queries. Every
  cell's noise is computed once, with the same keyed draws as one node at a time (the noise is
  a function of the node id), and kept. For each ``ℓx`` the pairs ``ℓy >= S − ℓx`` are folded
  into a row table indexed by ``(x1 >> ℓx, y1 >> (S − ℓx))``: the sum over those ``ℓy`` depends
  on ``y1`` only through its bits ``>= S − ℓx``. A query then costs one look-up per ``ℓx``.
* **lower pairs** (``ℓx + ℓy < S``): grids with more cells than queries, whose nodes are nearly
  all distinct. They are listed query by query and their noise is computed node by node; the
  per-query sums are differences of one running sum (exact in int64: wrap-around cancels), or,
  with the compiled passes, added per query inside the pass that decides the values.

``S`` is chosen per ask from the number of queries (an upper grid has at most as many cells as
the queries expected to touch it, half as many with the compiled lower pass, and at most
:data:`MAX_CELLS`), and the smallest ``S`` built so far is reused, so later asks look up
more. Both halves give exactly the integers the node by node sum gives: this is a
re-association of the same integer terms.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.windows.noise import kernel as node_kernel

__all__ = ["MAX_CELLS", "DominanceNoise"]

IntArray = NDArray[np.int64]

#: largest grid (cells) of an upper level pair; bounds the memory kept per structure
MAX_CELLS = 1 << 15
_QUERY_CHUNK = 2048  # queries per pass over the lower pairs (temporaries stay in cache)


class DominanceNoise:
    """``Σ_i signs[i] · (node noise of trees[i] over the dominance cover of (x, y))``.

    Parameters
    ----------
    trees : sequence of Tree2DNoise
        Product trees with one domain and element-wise noise (``noise_of(ids)``).
    signs : sequence of int
        One sign per tree.

    Examples
    --------
    >>> from fractions import Fraction
    >>> from dpfreq.windows.layouts.dyadic import dominance_pairs
    >>> from dpfreq.windows.noise.trees import Tree2DNoise
    >>> tree = Tree2DNoise(8, Fraction(1, 2), bytes(32), ("all", 1, 0))
    >>> _, ids = dominance_pairs(np.array([2]), np.array([5]), 8)
    >>> int(DominanceNoise((tree,), (1,))(2, 5)) == int(tree.noise_of(ids).sum())
    True
    """

    def __init__(self, trees: Sequence[Any], signs: Sequence[int]) -> None:
        self.trees = tuple(trees)
        self.signs = tuple(int(s) for s in signs)
        self.domain = int(self.trees[0].domain)
        self.levels = self.domain.bit_length()
        self._grids: dict[tuple[int, int], IntArray] = {}
        self._split = 2 * self.levels  # S of the row tables built (none yet)
        empty = np.zeros(0, dtype=np.int64)  # (ℓx, b, width, offset) per row table, the rows
        self._rows: tuple[IntArray, ...] = (empty, empty, empty, empty, empty)

    def node_values(self, ids: IntArray) -> IntArray:
        """``Σ_i signs[i] · trees[i].noise_of(ids)``."""
        out = np.zeros(ids.size, dtype=np.int64)
        for tree, sign in zip(self.trees, self.signs, strict=True):
            vals = tree.noise_of(ids)
            if sign == 1:
                out += vals
            elif sign == -1:
                out -= vals
            else:
                out += sign * vals
        return out

    def split_for(self, n_queries: int, per_cell: int = 4) -> int:
        """``S`` for an ask of ``n_queries``: upper grids have at most ``n/per_cell`` cells (a
        bit of ``x1`` and one of ``y1`` are both set for about a quarter of random queries) and
        at most :data:`MAX_CELLS`; never above the ``S`` already built. The compiled lower
        pass makes a lower node cheap enough for ``per_cell = 8`` (measured: ~10% less time at
        10^4 and 10^5 queries over ``D = 2^16``)."""
        cells = min(max(n_queries // per_cell, 1), MAX_CELLS)
        s = 2 * (self.levels - 1) - (cells.bit_length() - 1)
        return min(max(s, 0), self._split)

    def __call__(self, x: Any, y: Any) -> IntArray:
        """The signed noise sum over the dominance cover of ``{p <= x, q <= y}`` per query."""
        xs = np.asarray(x, dtype=np.int64).ravel() + 1
        ys = np.asarray(y, dtype=np.int64).ravel() + 1
        kern = node_kernel.loaded()
        passes = self._word_passes() if kern is not None else None
        split = self.split_for(xs.size, 4 if passes is None else 8)
        self._build(split, kern)
        out = self._upper(xs, ys, kern)
        if passes is not None:
            out += self._lower_words(kern, passes, xs, ys, split)
            return out.reshape(np.shape(x))
        chunk = _QUERY_CHUNK if kern is None else 4 * _QUERY_CHUNK
        for lo in range(0, xs.size, chunk):
            hi = min(lo + chunk, xs.size)
            out[lo:hi] += self._lower(xs[lo:hi], ys[lo:hi], split, kern)
        return out.reshape(np.shape(x))

    # ------------------------------------------------------------------ upper level pairs
    def _build(self, split: int, kern: Any) -> None:
        """Row tables of every ``ℓx`` for the upper pairs ``ℓx + ℓy >= split`` (kept)."""
        if split >= self._split:
            return
        d, top = self.domain, self.levels - 1
        new = [(lx, ly) for lx in range(top + 1) for ly in range(max(0, split - lx), top + 1)
               if (lx, ly) not in self._grids]
        if new:
            vals = self.node_values(
                node_kernel.grid_ids(kern, new, d) if kern is not None else np.concatenate(
                    [(((d >> lx) + np.arange(d >> lx, dtype=np.int64))[:, None] * (2 * d)
                      + ((d >> ly) + np.arange(d >> ly, dtype=np.int64))[None, :]).ravel()
                     for lx, ly in new]))
            at = 0
            for lx, ly in new:
                self._grids[(lx, ly)] = vals[at:at + (d >> lx) * (d >> ly)].reshape(
                    d >> lx, d >> ly)
                at += (d >> lx) * (d >> ly)
        lxs = np.array([lx for lx in range(top + 1) if split - lx <= top], dtype=np.int64)
        bs = np.maximum(split - lxs, 0)
        rows = [node_kernel.upper_row(kern, self._grids, self.levels, d, lx, b)
                if kern is not None else self._row(lx, b).ravel()
                for lx, b in zip(lxs.tolist(), bs.tolist(), strict=True)]
        offs = np.cumsum([0] + [r.size for r in rows[:-1]]).astype(np.int64)
        flat = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
        self._rows = (lxs, bs, (d >> bs) + 1, offs, flat)
        self._split = split

    def _row(self, lx: int, b: int) -> IntArray:
        """``R[u, c] = Σ_{ℓy >= b, bit ℓy − b of c} grid(ℓx, ℓy)[u, (c >> (ℓy − b)) − 1]`` for
        ``c = y1 >> b``: the upper-pair noise of row ``ℓx`` of every query."""
        c = np.arange((self.domain >> b) + 1, dtype=np.int64)
        row = np.zeros((self.domain >> lx, c.size), dtype=np.int64)
        for ly in range(b, self.levels):
            cols = np.flatnonzero((c >> (ly - b)) & 1)
            row[:, cols] += self._grids[(lx, ly)][:, (cols >> (ly - b)) - 1]
        return row

    def _upper(self, xs: IntArray, ys: IntArray, kern: Any) -> IntArray:
        """The upper-pair noise of every query: one look-up per row table whose ``ℓx`` is a
        set bit of ``x1``."""
        out = np.zeros(xs.size, dtype=np.int64)
        if kern is not None:
            kern.upper_sums(xs, ys, *self._rows, out)
            return out
        lxs, bs, widths, offs, flat = self._rows
        for lx, b, width, off in zip(lxs.tolist(), bs.tolist(), widths.tolist(), offs.tolist(),
                                     strict=True):
            sel = np.flatnonzero((xs >> lx) & 1)
            out[sel] += flat[off + ((xs[sel] >> lx) - 1) * width + (ys[sel] >> b)]
        return out

    # ------------------------------------------------------------------ lower level pairs
    def _word_passes(self) -> list[tuple[Any, tuple[Any, ...], int]] | None:
        """``(cipher, tables, sign)`` of every tree for :func:`node_kernel.lower_sums`, or None
        if a tree's values are not decided from one word by the compiled pass (a Gaussian, a
        very large γ)."""
        passes = []
        for tree, sign in zip(self.trees, self.signs, strict=True):
            word_pass = getattr(getattr(tree, "source", None), "word_pass", None)
            got = word_pass() if word_pass is not None else None
            if got is None:
                return None
            passes.append((*got, sign))
        return passes

    def _lower_words(self, kern: Any, passes: list[tuple[Any, tuple[Any, ...], int]],
                     xs: IntArray, ys: IntArray, split: int) -> IntArray:
        """Lower-pair sums by the compiled listing and Laplace passes (values decided from
        the first word of each node in the pass; ties and tails by ``noise_of``, the same
        values, added afterwards: the sums are the same integers)."""
        sums, left, total = node_kernel.lower_sums(kern, xs, ys, split, self.levels,
                                                   self.domain, passes)
        for tree, sign, (ids, queries) in zip(self.trees, self.signs, left, strict=True):
            tree.source.n_drawn += total
            if ids.size:
                np.add.at(sums, queries, sign * tree.noise_of(ids))
        return sums

    def _lower(self, xs: IntArray, ys: IntArray, split: int, kern: Any) -> IntArray:
        """Noise sums over the lower pairs ``ℓx + ℓy < split``, listed query by query.

        Each query's ``y1`` bits are listed by increasing level, so the lower pairs of one of
        its ``x1`` bits ``ℓx`` are the first ``#{set ℓy < split − ℓx}`` of them."""
        n_lev, d = self.levels, self.domain
        if kern is not None:  # the same ids in the same order, listed by a compiled pass
            ids, starts = node_kernel.lower_pairs(kern, xs, ys, split, n_lev, d)
            run = np.zeros(ids.size + 1, dtype=np.int64)
            np.cumsum(self.node_values(ids), out=run[1:])
            return run[starts[1:]] - run[starts[:-1]]
        lev = np.arange(n_lev, dtype=np.int64)
        sx, sy = xs[:, None] >> lev, ys[:, None] >> lev
        bx, by = (sx & 1).astype(np.bool_), (sy & 1).astype(np.bool_)
        heap = (d >> lev) - 1
        qx, lx = np.nonzero(bx)  # query-major, levels increasing
        hx = (sx[qx, lx] + heap[lx]) * (2 * d)
        hy = (sy + heap)[by]  # the same order as np.nonzero(by)
        y_count = np.zeros((xs.size, n_lev + 1), dtype=np.int64)
        np.cumsum(by, axis=1, out=y_count[:, 1:])  # set y bits below each level
        cnt = y_count[qx, np.clip(split - lx, 0, n_lev)]
        y_start = y_count[:, -1].cumsum() - y_count[:, -1]
        first = np.cumsum(cnt) - cnt
        pos = np.repeat(y_start[qx] - first, cnt)
        pos += np.arange(pos.size, dtype=np.int64)
        ids = np.repeat(hx, cnt) + hy[pos]
        run = np.zeros(ids.size + 1, dtype=np.int64)
        np.cumsum(self.node_values(ids), out=run[1:])
        ends = np.cumsum(np.bincount(qx, weights=cnt, minlength=xs.size).astype(np.int64))
        return run[ends] - run[np.concatenate(([0], ends[:-1]))]
