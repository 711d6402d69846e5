"""Online counters whose rows are sums over ranges of periods: the layout and its sensitivity.

A counter of this kind releases, for each of its **nodes**, the noisy count of the points in a
fixed range of periods ``[first, last]``, and answers the prefix ``[1, t]`` by the sum of the
nodes of its **cover** of ``[1, t]``: nodes whose ranges partition ``[1, t]``. The layout —
ranges, covers, the period at which each node is first needed — is public and fixed before any
data. A node is measured (exact count plus its keyed noise) at the first period whose cover
uses it, when every period of its range has passed: the counter is online.

Only the nodes some cover uses are ever measured ("released"); a neighbour's sensitivity counts
those alone (:func:`interval_sensitivity`, exact). The ranges of every layout here are nested or
disjoint (a laminar family), which makes the exact ℓ1 of a moved point a tree computation.

The layouts:

* :class:`SimpleLayout` — one node per period, cover of ``[1, t]`` = the ``t`` nodes.
* :class:`TreeLayout` — the layered ``B``-ary blocks of
  :func:`dpfreq.windows.layouts.layered.layer_layout` (the same flat node ids, so the same keyed
  noise as the offline tree); cover = the plain digit cover
  (:func:`~dpfreq.windows.layouts.layered.layer_prefix_cover`), which uses complete blocks only.
* :class:`~dpfreq.stream.mechanisms.smooth.SmoothLayout` — the smooth binary mechanism.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.windows.layouts.layered import layer_layout, layer_prefix_cover

__all__ = ["IntervalLayout", "SimpleLayout", "TreeLayout", "interval_sensitivity"]

IntArray = NDArray[np.int64]


def _parents(first: IntArray, last: IntArray) -> tuple[IntArray, IntArray]:
    """``(order, parent)``: the (laminar, non-empty) ranges sorted by (first, −last), and the
    position in that order of each one's nearest enclosing range (−1: none)."""
    order = np.lexsort((-last, first))
    firsts, lasts = first[order].tolist(), last[order].tolist()
    parent = np.full(order.size, -1, dtype=np.int64)
    stack: list[int] = []
    for pos in range(order.size):
        while stack and lasts[stack[-1]] < firsts[pos]:
            stack.pop()
        if stack:
            parent[pos] = stack[-1]
        stack.append(pos)
    return order, parent


def _single_maximum(first: IntArray, last: IntArray, horizon: int) -> int:
    """``max_p d(p)``: the most ranges holding one period (vectorized)."""
    diff = np.zeros(horizon + 2, dtype=np.int64)
    np.add.at(diff, first, 1)
    np.add.at(diff, last + 1, -1)
    return int(np.cumsum(diff)[1:horizon + 1].max(initial=0))


def _pair_maximum(first: IntArray, last: IntArray, horizon: int) -> tuple[int, int]:
    """``(max_p d(p), max_{p≠q} |N(p) Δ N(q)|)`` of laminar non-empty ranges over the periods
    ``1..T``, with ``N(p)`` the ranges holding ``p`` and ``d(p) = |N(p)|``.

    Two points in different branches below a range ``v`` (a child range each, or a period of
    ``v`` in no child) share exactly ``v`` and its ancestors, ``depth(v)`` ranges; so the
    maximum is, over every ``v`` and the virtual root (depth 0), the two deepest branches less
    twice ``depth(v)``."""
    n = first.size
    single = _single_maximum(first, last, horizon)
    order, parent = _parents(first, last)
    length = (last - first + 1)[order]
    depth = np.zeros(n, dtype=np.int64)
    for pos in range(n):  # parents come first in this order
        depth[pos] = 1 if parent[pos] < 0 else depth[parent[pos]] + 1
    inner = np.zeros(n, dtype=np.int64)  # periods of each range held by its children
    np.add.at(inner, parent[parent >= 0], length[parent >= 0])
    direct = (length - inner).tolist()
    branches: list[list[int]] = [[int(d)] * min(2, k) for d, k in
                                 zip(depth.tolist(), direct, strict=True)]
    outside = horizon - int(length[parent < 0].sum())
    root = [0] * min(2, outside)
    pair = single
    for pos in range(n - 1, -1, -1):  # children before their parents
        top = sorted(branches[pos], reverse=True)
        if len(top) >= 2:
            pair = max(pair, top[0] + top[1] - 2 * int(depth[pos]))
        deepest = top[0] if top else int(depth[pos])
        par = int(parent[pos])
        (branches[par] if par >= 0 else root).append(deepest)
    root.sort(reverse=True)
    if len(root) >= 2:
        pair = max(pair, root[0] + root[1])
    return single, pair


def interval_sensitivity(first: IntArray, last: IntArray, horizon: int,
                         unit: str) -> tuple[int, int]:
    """``(ℓ1, ℓ2²)`` of the released node counts, exact, for ``unit``.

    At ``unit="item"`` one neighbour adds or removes one point: the rows holding its period
    change by 1, so ``ℓ1 = ℓ2² = max_p |N(p)|``. At ``"event"`` and ``"item_replace"`` a
    point may also move from ``p`` to ``q``: the rows holding exactly one of them change by 1,
    so ``ℓ1 = ℓ2² = max(max_p |N(p)|, max_{p≠q} |N(p) Δ N(q)|)``. Empty ranges (``first >
    last``) hold no period."""
    keep = first <= last
    if unit == "item":  # no point moves: the pairs' walk over the ranges is not needed
        single = _single_maximum(first[keep], last[keep], horizon)
        return single, single
    single, pair = _pair_maximum(first[keep], last[keep], horizon)
    value = max(single, pair)
    return value, value


class IntervalLayout:
    """A released layout: node ranges, keyed ids, covers; measured in order of first use.

    Subclasses compute ``_covers()``: for every period ``t = 1..T`` the keyed ids of its cover
    (a CSR pair ``(ptr, ids)``), and the range ``[first, last]`` of any id.
    """

    name = "intervals"

    def __init__(self, horizon: int) -> None:
        self.horizon = horizon
        ptr, ids = self._covers()
        uniq, first_use = np.unique(ids, return_index=True)
        period_of = np.repeat(np.arange(1, horizon + 1, dtype=np.int64), np.diff(ptr))
        opens = period_of[first_use]
        order = np.lexsort((uniq, opens))
        self.ids: IntArray = uniq[order]
        self.opens: IntArray = opens[order]
        self.first, self.last = self._range(self.ids)
        column = np.empty(uniq.size, dtype=np.int64)
        column[order] = np.arange(uniq.size, dtype=np.int64)
        self.cover_ptr: IntArray = ptr
        self.cover_cols: IntArray = column[np.searchsorted(uniq, ids)]
        self.rows_by: IntArray = np.searchsorted(self.opens, np.arange(horizon + 1), "right")

    def _covers(self) -> tuple[IntArray, IntArray]:
        raise NotImplementedError

    def _range(self, ids: IntArray) -> tuple[IntArray, IntArray]:
        raise NotImplementedError

    @functools.cached_property
    def cover_sizes(self) -> IntArray:
        """Nodes in the cover of each period ``1..T``."""
        out: IntArray = np.diff(self.cover_ptr)
        return out

    def sensitivity(self, unit: str) -> tuple[int, int]:
        """Exact ``(ℓ1, ℓ2²)`` of the released nodes (:func:`interval_sensitivity`), computed
        once per unit (a plan calibrates the same layouts at every ε it tries)."""
        known: dict[str, tuple[int, int]] = self.__dict__.setdefault("_sensitivity", {})
        if unit not in known:
            known[unit] = interval_sensitivity(self.first, self.last, self.horizon, unit)
        return known[unit]

    def rows_through(self, t: int) -> int:
        """Nodes measured by the end of period ``t`` (public)."""
        return int(self.rows_by[t])

    def row_ids(self, t: int) -> IntArray:
        """Keyed ids of the nodes first measured at period ``t``."""
        return self.ids[self.rows_by[t - 1]:self.rows_by[t]]

    def row_values(self, prefix: IntArray, t: int) -> IntArray:
        """Exact counts of the nodes first measured at ``t``: ``prefix`` holds the running
        sums of the exact per-period counts, ``prefix[:, s]`` = periods ``1..s`` (G rows)."""
        lo, hi = self.rows_by[t - 1], self.rows_by[t]
        out: IntArray = prefix[:, self.last[lo:hi]] - prefix[:, self.first[lo:hi] - 1]
        return out

    def answer(self, noisy: IntArray, t: int) -> NDArray[Any]:
        """The published answer at ``t``: the sum of its cover's noisy node counts (integers,
        computed from the measurement alone)."""
        cols = self.cover_cols[self.cover_ptr[t - 1]:self.cover_ptr[t]]
        out: NDArray[Any] = noisy[:, cols].sum(axis=1)
        return out

    def nodes(self, t: int) -> int:
        """Node noises in the answer at ``t``."""
        return int(self.cover_sizes[t - 1])


class SimpleLayout:
    """One node per period (keyed id ``t − 1``); the answer at ``t`` is the running sum of the
    first ``t`` noisy counts. Needs no horizon: every period is in one node."""

    name = "simple"

    def __init__(self, horizon: int | None) -> None:
        self.horizon = horizon

    def sensitivity(self, unit: str) -> tuple[int, int]:
        """One node per period: 1 for an added or removed point, 2 for a moved one."""
        value = 1 if unit == "item" or self.horizon == 1 else 2
        return value, value

    def rows_through(self, t: int) -> int:
        return t

    def row_ids(self, t: int) -> IntArray:
        return np.array([t - 1], dtype=np.int64)

    def row_values(self, prefix: IntArray, t: int) -> IntArray:
        out: IntArray = prefix[:, t:t + 1] - prefix[:, t - 1:t]
        return out

    def answer(self, noisy: IntArray, t: int) -> NDArray[Any]:
        out: NDArray[Any] = noisy[:, :t].sum(axis=1)
        return out

    def nodes(self, t: int) -> int:
        return t

    def describe(self) -> str:
        return "simple counter (one noisy count per period, running sums)"

    def record(self) -> dict[str, Any]:
        return {"layout": "simple", "horizon": self.horizon}

    def spec(self) -> dict[str, Any]:
        """What rebuilds this layout (:func:`~dpfreq.stream.mechanisms.saved.rebuild_counter`)."""
        return {"layout": "simple", "horizon": self.horizon}


class TreeLayout(IntervalLayout):
    """The layered ``B``-ary tree over ``T`` periods, answered online by plain digit covers
    (complete blocks only); ``top`` keeps a last level of whole top blocks."""

    name = "tree"

    def __init__(self, horizon: int, branching: int, top: bool) -> None:
        self.branching, self.top = branching, top
        self.sizes, self.offsets = layer_layout(horizon, branching, top)
        super().__init__(horizon)

    def _covers(self) -> tuple[IntArray, IntArray]:
        slots = layer_prefix_cover(np.arange(self.horizon), self.horizon, self.branching,
                                   self.top)
        used = np.stack([u for u, _ in slots], axis=1)  # (T, slots)
        ids = np.stack([i for _, i in slots], axis=1)
        ptr = np.concatenate(([0], np.cumsum(used.sum(axis=1)))).astype(np.int64)
        return ptr, ids[used].astype(np.int64)

    def _range(self, ids: IntArray) -> tuple[IntArray, IntArray]:
        level = np.searchsorted(self.offsets, ids, side="right") - 1
        size = np.asarray(self.sizes, dtype=np.int64)[level]
        j = ids - self.offsets[level]
        return j * size + 1, np.minimum((j + 1) * size, self.horizon)

    def describe(self) -> str:
        return (f"{self.branching}-ary tree over {self.horizon} periods, blocks "
                f"{list(self.sizes)}, complete blocks only")

    def record(self) -> dict[str, Any]:
        return {"layout": "tree", "horizon": self.horizon, "branching": self.branching,
                "top_level": self.top, "block_sizes": list(self.sizes),
                "released_nodes": int(self.ids.size)}

    def spec(self) -> dict[str, Any]:
        """What rebuilds this layout (:func:`~dpfreq.stream.mechanisms.saved.rebuild_counter`)."""
        return {"layout": "tree", "horizon": self.horizon, "branching": self.branching,
                "top": self.top}
