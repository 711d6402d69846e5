"""Dyadic decomposition of the time axis and the server's estimator.

Periods ``1..d`` (``d`` a power of two) are covered by the intervals ``I_{h,j} =
((j−1)·2^h, j·2^h]`` of orders ``h = 0..log d``; a device of order h reports once per interval
of its order, on the partial sum ``S[h, j] = X[j·2^h] − X[(j−1)·2^h]``. Every prefix ``[1, t]``
is the disjoint union of the intervals ``C(t) = {(h, ⌊t/2^h⌋) : bit h of t is set}``, so
``X[t] = Σ_{(h,j)∈C(t)} S[h, j]`` and the estimator sums rescaled report sums over ``C(t)``.

Sums are kept flat: order ``h`` occupies ``offset(h) .. offset(h) + d/2^h − 1`` with
``offset(h) = Σ_{g<h} d/2^g`` (``2d − 1`` counters in all).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["estimate_from_sums", "offsets", "partial_sums", "prefix_decomposition"]


def offsets(d: int) -> NDArray[np.int64]:
    """Flat offset of each order ``h = 0..log d`` (length ``log d + 2``; last = 2d − 1)."""
    lg = d.bit_length() - 1
    sizes = [d >> h for h in range(lg + 1)]
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def prefix_decomposition(t: int) -> list[tuple[int, int]]:
    """``C(t)`` as (h, j) pairs, one per set bit h of t, ``j = ⌊t/2^h⌋``."""
    return [(h, t >> h) for h in range(t.bit_length()) if (t >> h) & 1]


def partial_sums(x: NDArray[Any], h: int) -> NDArray[np.int8]:
    """``S[h, j] = X[j·2^h] − X[(j−1)·2^h]`` for rows of a 0/1 matrix ``x`` (n, d)."""
    x = np.asarray(x, dtype=np.int8)
    ends = x[:, (1 << h) - 1 :: 1 << h]
    starts = np.concatenate([np.zeros((x.shape[0], 1), np.int8), ends[:, :-1]], axis=1)
    return (ends - starts).astype(np.int8)


def estimate_from_sums(
    sums: NDArray[Any], d: int, scale: float | NDArray[Any]
) -> NDArray[np.float64]:
    """``f̂_t = Σ_{(h,j) ∈ C(t)} scale_h · sums[h, j]`` for t = 1..d.

    ``scale`` is ``(log d + 1)/c_gap`` (scalar) or one value per order.
    """
    lg = d.bit_length() - 1
    off = offsets(d)
    sc = np.broadcast_to(np.asarray(scale, dtype=np.float64), (lg + 1,))
    t = np.arange(1, d + 1)
    out = np.zeros(d)
    sums = np.asarray(sums, dtype=np.float64)
    for h in range(lg + 1):
        bit = ((t >> h) & 1).astype(bool)
        j = t[bit] >> h
        out[bit] += sc[h] * sums[off[h] + j - 1]
    return out
