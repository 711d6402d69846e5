"""Least-squares prefix weights of the tree structures and the public laws built on them.

A consistent (least-squares) answer is ``Σ_v a_v Y_v`` over the noisy node counts ``Y_v =
(B x)_v + Z_v`` (integers: the measurement) with the weights ``a`` of its prefix. The weights
are exact dyadic rationals ``a = M / 2^s`` (:data:`SCALE_BITS`), the least-squares weights
rounded and then corrected on the leaves so that ``M B = 2^s C`` holds exactly in integers
(``C`` the prefix sums): the answer equals ``exact prefix + Σ_v a_v Z_v`` as real numbers, and
it is computed from the measurement alone, exactly (:func:`consistent_estimates`: one integer
product, then one correctly rounded division by ``2^s``). Its variance factor
(:func:`row_squares`), its Chernoff bound (:func:`weighted_log_mgf`) and its certified laws
(:func:`consistent_laws`) depend on the layout and the node law only, so they are cached per
process.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import message
from dpfreq.errors import ParameterError, public_errors
from dpfreq.windows.layouts.layered import layer_layout, layer_prefix_weights
from dpfreq.windows.layouts.least_squares import consistent_tree

__all__ = [
    "SCALE_BITS",
    "Layout",
    "consistent_estimates",
    "consistent_prefix_weights",
    "layout_weights",
    "row_squares",
    "scaled_weights",
]


#: ``("heap", D)``: the binary tree over ``D`` leaves in heap order (per-start trees);
#: ``("layer", T, B, top)``: a layered counter (:mod:`dpfreq.windows.layouts.layered`)
Layout = tuple[Any, ...]
IntArray = NDArray[np.int64]


@functools.lru_cache(maxsize=8)
@public_errors("consistent_prefix_weights")
def consistent_prefix_weights(domain: int) -> NDArray[np.float64]:
    """Weights ``A`` with ``consistent prefix(x) = Σ_v A[x, v] · noisy(v)`` (binary tree).

    ``A`` has shape ``(D, 2D)`` indexed by heap id (column 0 unused). Computed by running the
    consistency pass on every unit vector at once; memory ``O(D²)``, so use for ``D <= 2048``.
    The exact noise variance of a consistent prefix is ``Var[node] · Σ_v A[x, v]²``.
    """
    if domain < 1 or domain & (domain - 1):
        raise ParameterError(message("domain", "a power of two",
                                     domain))
    h = domain.bit_length() - 1
    n_nodes = 2 * domain
    eye = np.eye(n_nodes, dtype=np.float64)
    levels = [eye[(domain >> lev):(domain >> lev) * 2] for lev in range(h + 1)]
    leaves = consistent_tree(levels, 2)[0]  # (D, 2D): leaf estimate as a function of nodes
    out: NDArray[np.float64] = np.cumsum(leaves, axis=0)
    out.setflags(write=False)
    return out


#: the consistent weights are multiples of ``2^−SCALE_BITS`` (each within a few ``10^−6`` of
#: the least-squares weight after the leaf correction: the variance grows by a relative
#: ``10^−10`` or so, and the stated laws are those of the weights used)
SCALE_BITS = 20


def _least_squares_weights(layout: Layout) -> NDArray[np.float64]:
    """The least-squares prefix weights in floating point (rounded by :func:`scaled_weights`)."""
    if layout[0] == "heap":
        return consistent_prefix_weights(int(layout[1]))
    return layer_prefix_weights(int(layout[1]), int(layout[2]), bool(layout[3]))


def _leaf_ancestors(layout: Layout) -> tuple[IntArray, list[IntArray]]:
    """``(leaves, blocks)``: the node id of each value's leaf, and per level the node id of the
    block holding each value (the incidence ``B``, one column index per level)."""
    if layout[0] == "heap":
        d = int(layout[1])
        leaf = d + np.arange(d, dtype=np.int64)
        return leaf, [leaf >> j for j in range(d.bit_length())]
    t, b, top = int(layout[1]), int(layout[2]), bool(layout[3])
    sizes, offsets = layer_layout(t, b, top)
    pts = np.arange(t, dtype=np.int64)
    blocks = [offsets[lev] + pts // size for lev, size in enumerate(sizes)]
    return blocks[0], blocks


@functools.lru_cache(maxsize=8)
def scaled_weights(layout: Layout) -> IntArray:
    """``M`` (int64, prefixes × nodes) with the consistent weights ``M / 2^SCALE_BITS``.

    The least-squares weights scaled by ``2^s`` and rounded; the residual ``2^s C − M B``
    (a few units) is then added to each value's leaf, so that ``M B = 2^s C`` exactly: the
    estimate of a prefix is unbiased as an exact rational, whatever the rounding.
    """
    m = np.rint(np.ldexp(_least_squares_weights(layout), SCALE_BITS)).astype(np.int64)
    leaves, blocks = _leaf_ancestors(layout)
    covered = np.zeros((m.shape[0], leaves.size), dtype=np.int64)
    for cols in blocks:
        covered += m[:, cols]
    target = np.tri(m.shape[0], leaves.size, dtype=np.int64) << SCALE_BITS
    m[:, leaves] += target - covered
    m.setflags(write=False)
    return m


def layout_weights(layout: Layout) -> NDArray[np.float64]:
    """Prefix weights of a layout (exact dyadic rationals, :func:`scaled_weights`):
    ``("heap", D)`` the binary tree of :func:`consistent_prefix_weights`, ``("layer", T, B,
    top)`` :func:`layer_prefix_weights`."""
    out: NDArray[np.float64] = np.ldexp(scaled_weights(layout).astype(np.float64), -SCALE_BITS)
    out.setflags(write=False)
    return out


def consistent_estimates(layout: Layout, noisy: IntArray, rows: Any = None
                         ) -> NDArray[np.float64]:
    """The consistent estimates ``M[rows] · noisy / 2^s`` of the noisy node counts ``noisy``
    (int64, one per node, or nodes × columns): the product in exact integers (float64 while
    every partial sum stays below ``2^53``, int64 while it cannot overflow, else Python
    integers), then one correctly rounded conversion — a deterministic function
    of the measurement alone, the same bits on every machine."""
    m = scaled_weights(layout) if rows is None else scaled_weights(layout)[rows]
    v = np.asarray(noisy, dtype=np.int64)
    big = int(np.abs(v).max(initial=0)) * int(np.abs(m).sum(axis=-1).max(initial=0))
    if big < 1 << 53:  # every partial sum is an integer below 2^53: float64 is exact in any order
        return np.ldexp(m.astype(np.float64) @ v.astype(np.float64), -SCALE_BITS)
    if big < 1 << 62:
        prod: NDArray[Any] = m @ v
        return np.ldexp(prod.astype(np.float64), -SCALE_BITS)
    exact = m.astype(object) @ v.astype(object)
    return np.array([math.ldexp(float(q), -SCALE_BITS) for q in np.ravel(exact)],
                    dtype=np.float64).reshape(np.shape(exact))


@functools.lru_cache(maxsize=64)
def row_squares(layout: Layout) -> NDArray[np.float64]:
    """``Σ_v A[x, v]²`` per prefix ``x`` of the layout's weights (the variance factor)."""
    out: NDArray[np.float64] = (layout_weights(layout) ** 2).sum(axis=1)
    out.setflags(write=False)
    return out
