"""The dyadic node layout over a time domain, its prefix covers and product-tree dominance covers.

Node ``(ℓ, j)`` of the binary layout over ``{0, …, D−1}``, ``D = 2^h``, covers
``[j·2^ℓ, (j+1)·2^ℓ − 1]`` and has heap id ``(D >> ℓ) + j`` (root 1, leaves ``D..2D−1``). The
prefix ``{p ≤ x}`` is covered by the ``popcount(x+1)`` nodes ``(ℓ, ⌊(x+1)/2^ℓ⌋ − 1)`` for every
bit ``ℓ`` set in ``x+1``; the dominance region ``{(p, q): p ≤ x, q ≤ y}`` of a product tree by
the pairs of the two prefix covers. The trees built on them are in
:mod:`dpfreq.windows.noise.trees`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import check_int
from dpfreq.errors import public_errors

__all__ = [
    "domain_size",
    "dominance_pairs",
    "node_counts",
    "popcount",
    "prefix_cover",
]

IntArray = NDArray[np.int64]


@public_errors("domain_size")
def domain_size(n_values: int) -> int:
    """The smallest power of two ``D >= n_values`` (at least 1)."""
    n = check_int(n_values, "n_values", minimum=1)
    return 1 << (n - 1).bit_length()


def popcount(x: Any) -> IntArray:
    """Number of set bits of each non-negative integer (vectorized)."""
    v = np.asarray(x, dtype=np.int64)
    count = getattr(np, "bitwise_count", None)  # numpy >= 2.0
    if count is not None:
        return np.asarray(count(v), dtype=np.int64)
    v = v.copy()
    out = np.zeros(v.shape, dtype=np.int64)
    while np.any(v):
        out += v & 1
        v >>= 1
    return out


def prefix_cover(x: Any, domain: int) -> list[tuple[NDArray[np.bool_], IntArray]]:
    """Prefix covers of ``{p ≤ x}`` for an array of ``x ∈ [−1, D−1]``, level by level.

    Returns a list over levels ``ℓ = 0..h`` of ``(used, heap_ids)``: ``used[i]`` says whether
    level ``ℓ`` contributes a node to the cover of ``x[i]``, and ``heap_ids[i]`` is its heap id.
    """
    xs = np.asarray(x, dtype=np.int64) + 1
    h = domain.bit_length() - 1
    out = []
    for lev in range(h + 1):
        used = ((xs >> lev) & 1).astype(np.bool_)
        ids = (domain >> lev) + (xs >> lev) - 1
        out.append((used, np.where(used, ids, 0)))
    return out


def node_counts(points: Any, domain: int, weights: Any = None) -> IntArray:
    """Exact count of every dyadic node, heap-indexed (index 0 unused), for points in [0, D)."""
    p = np.asarray(points, dtype=np.int64)
    w = None if weights is None else np.asarray(weights, dtype=np.int64)
    leaves = np.bincount(p, weights=w, minlength=domain).astype(np.int64)
    out = np.zeros(2 * domain, dtype=np.int64)
    out[domain:] = leaves
    for i in range(domain - 1, 0, -1):
        out[i] = out[2 * i] + out[2 * i + 1]
    return out


def _cover_entries(x: IntArray, domain: int) -> tuple[IntArray, IntArray, IntArray]:
    """Prefix covers of many ``x`` as flat entries grouped by query: (query, heap id), sizes."""
    cover = prefix_cover(x, domain)
    used = np.stack([u for u, _ in cover], axis=1)
    ids = np.stack([i for _, i in cover], axis=1)
    q, lev = np.nonzero(used)
    return q.astype(np.int64), ids[q, lev], used.sum(axis=1).astype(np.int64)


def dominance_pairs(x: IntArray, y: IntArray, domain: int) -> tuple[IntArray, IntArray]:
    """Every (query, node id) of the dominance covers of flat query arrays ``x, y`` in the
    product tree over ``domain × domain`` (node ``(u, v)`` of 1d heap ids has id ``u·2D + v``)."""
    qx, ix, _ = _cover_entries(x, domain)
    _, iy, ny = _cover_entries(y, domain)
    # every (x node, y node) pair of each query's two prefix covers, without a loop over
    # level pairs: each x entry is repeated once per y entry of its query
    y_start = np.cumsum(ny) - ny
    reps = ny[qx]
    total = int(reps.sum())
    offs = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(reps) - reps, reps)
    y_pos = np.repeat(y_start[qx], reps) + offs
    nids = np.repeat(ix, reps) * (2 * domain) + iy[y_pos]
    return np.repeat(qx, reps), nids
