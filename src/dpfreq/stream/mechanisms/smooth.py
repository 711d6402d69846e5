"""The smooth binary mechanism (Andersson and Pagh, NeurIPS 2023), in the project's own terms.

A binary tree over ``2^h`` leaves (numbered ``0 … 2^h − 1``) answers the exclusive prefix
``[0, i)`` of its leaves by one node per 1-bit of ``i``: the left-child node at height ``b``
whose leaves start at ``i`` with its bits ``0 … b`` cleared. The binary mechanism answers step
``t`` at leaf ``i = t``, so the number of nodes — and the variance — follows the number of
1-bits of ``t``, from 1 to ``h``.

The smooth mechanism answers only at leaves whose index has exactly ``k`` 1-bits: step ``t`` is
answered at ``i_t``, the ``t``-th smallest integer in ``[1, 2^h)`` with ``k`` 1-bits, and the
count of step ``t`` is placed at leaf ``i_t − 1``. The prefix ``[0, i_t)`` holds the counts of
steps ``1 … t`` and nothing else, and is the sum of exactly ``k`` nodes: **every step has the
same variance**. A count at leaf ``ℓ`` lies in the left-child nodes above it where ``ℓ`` has a
0-bit, so the released nodes holding one count number at most ``h − k + 1`` (the leaf index
``i_t − 1`` of an odd ``i_t`` has ``k − 1`` 1-bits); choosing ``k`` near ``h/2`` balances the
two, and ``T <= C(h, k)`` steps fit. Under zCDP (node ``σ² ∝`` the ℓ2² sensitivity) the
variance per step is ``k·(h − k + 1)/(2ρ)``, about ``log²T/(8ρ)``, against up to
``log T·(log T + 1)/(2ρ)`` for the binary tree at its worst steps.

Each node is a sum over a range of steps (the steps whose leaves it holds), so the layout is an
:class:`~dpfreq.stream.mechanisms.intervals.IntervalLayout`: its exact sensitivity is computed
over the nodes actually used, and a node is measured at the first step whose cover uses it.

References
----------
J. D. Andersson and R. Pagh, "A smooth binary mechanism for efficient private continual
observation", NeurIPS 2023.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.stream.mechanisms.intervals import IntervalLayout

__all__ = ["SmoothLayout", "output_leaves", "smooth_shapes"]

IntArray = NDArray[np.int64]

#: tallest tree considered above the smallest that fits (more height: more nodes per count)
_EXTRA_HEIGHT = 6


def output_leaves(horizon: int, height: int, ones: int) -> IntArray:
    """The ``T`` smallest integers in ``[1, 2^h)`` with exactly ``k`` 1-bits, increasing
    (the next one by Gosper's step: the next larger integer with as many 1-bits)."""
    if math.comb(height, ones) < horizon or ones < 1:
        raise ValueError("C(height, ones) must be at least the horizon")
    out = np.empty(horizon, dtype=np.int64)
    v = (1 << ones) - 1
    for t in range(horizon):
        out[t] = v
        c = v & -v
        r = v + c
        v = (((r ^ v) >> 2) // c) | r
    return out


def smooth_shapes(horizon: int) -> list[tuple[int, int]]:
    """The ``(h, k)`` a plan compares for ``T`` steps: every ``k`` with ``C(h, k) >= T``, for
    the smallest ``h`` that fits and a few taller ones."""
    h0 = max(1, math.ceil(math.log2(horizon + 1)))
    return [(h, k) for h in range(h0, h0 + _EXTRA_HEIGHT + 1) for k in range(1, h + 1)
            if math.comb(h, k) >= horizon]


class SmoothLayout(IntervalLayout):
    """The smooth binary mechanism over ``T`` steps with height ``h`` and ``k`` 1-bits.

    Node ids: height ``b`` holds the ``2^{h−b}`` nodes ``offset_b + a/2^b`` (``a`` the first
    leaf), ``offset_b = Σ_{b' < b} 2^{h−b'}``.
    """

    name = "smooth"

    def __init__(self, horizon: int, height: int, ones: int) -> None:
        self.height, self.ones = height, ones
        self.outputs = output_leaves(horizon, height, ones)
        self.offsets = np.concatenate(([0], np.cumsum([1 << (height - b)
                                                       for b in range(height)])))
        super().__init__(horizon)

    def _covers(self) -> tuple[IntArray, IntArray]:
        i = self.outputs[:, None]
        bits = np.arange(self.height - 1, -1, -1, dtype=np.int64)[None, :]  # high to low
        used = ((i >> bits) & 1).astype(bool)
        start = (i >> (bits + 1)) << (bits + 1)
        ids = self.offsets[bits] + (start >> bits)
        ptr = np.concatenate(([0], np.cumsum(used.sum(axis=1)))).astype(np.int64)
        return ptr, ids[used].astype(np.int64)

    def _range(self, ids: IntArray) -> tuple[IntArray, IntArray]:
        b = np.searchsorted(self.offsets, ids, side="right") - 1
        lo = (ids - self.offsets[b]) << b
        hi = lo + (np.int64(1) << b)
        leaves = self.outputs - 1  # the leaf of each step's count
        first = np.searchsorted(leaves, lo, side="left") + 1
        last = np.searchsorted(leaves, hi, side="left")
        return first.astype(np.int64), last.astype(np.int64)

    def describe(self) -> str:
        return (f"smooth binary mechanism (height {self.height}, {self.ones} nodes per step, "
                f"{self.horizon} steps)")

    def record(self) -> dict[str, Any]:
        return {"layout": "smooth binary", "horizon": self.horizon, "height": self.height,
                "nodes_per_step": self.ones, "released_nodes": int(self.ids.size)}

    def spec(self) -> dict[str, Any]:
        """What rebuilds this layout (:func:`~dpfreq.stream.mechanisms.saved.rebuild_counter`)."""
        return {"layout": "smooth", "horizon": self.horizon, "height": self.height,
                "ones": self.ones}
