"""Continual counters for cumulative curves: layered ``B``-ary block designs over ``T`` periods.

A cumulative curve ``[1, t]`` is the prefix sums of a per-period histogram. The structures here
release noisy sums of the histogram over fixed blocks of periods (:func:`layer_layout`) and
answer a prefix from them: by a cover (:func:`layer_prefix_cover`, or the signed cover of
balanced digits, :func:`layer_signed_cover`) or by least squares over every block
(:func:`layer_prefix_weights`). The simple counter (one block per period) and the binary tree
(``B = 2`` with a root) are special cases; :mod:`dpfreq.windows.structures.base` calibrates them.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "layer_incidence",
    "layer_layout",
    "layer_prefix_cover",
    "layer_prefix_weights",
    "layer_signed_cover",
    "layer_signed_ranges",
]

IntArray = NDArray[np.int64]


def layer_layout(n_values: int, branching: int, top: bool) -> tuple[tuple[int, ...], IntArray]:
    """``(sizes, offsets)`` of the layered ``B``-ary counter over ``{0, …, T−1}``.

    Level ``ℓ`` cuts the periods into blocks of ``sizes[ℓ] = B^ℓ`` (the last one clipped at
    ``T``): every level with ``B^ℓ < T``, and with ``top`` one more level holding the single
    block of all ``T`` periods (a tree's root). Level ``ℓ``'s blocks have the flat ids
    ``offsets[ℓ] .. offsets[ℓ+1] − 1`` (leaves first). Every point lies in one block per level.
    """
    sizes = [1]
    while sizes[-1] * branching < n_values:
        sizes.append(sizes[-1] * branching)
    if top and n_values > 1:
        sizes.append(sizes[-1] * branching)
    counts = [-(-n_values // size) for size in sizes]
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    return tuple(sizes), offsets


def layer_incidence(n_values: int, branching: int, top: bool) -> NDArray[np.float64]:
    """Dense block × period incidence of :func:`layer_layout` (row ``v``: block ``v``'s
    periods)."""
    sizes, offsets = layer_layout(n_values, branching, top)
    out = np.zeros((int(offsets[-1]), n_values))
    pts = np.arange(n_values)
    for lev, size in enumerate(sizes):
        out[offsets[lev] + pts // size, pts] = 1.0
    return out


def layer_prefix_cover(x: Any, n_values: int, branching: int, top: bool
                       ) -> list[tuple[NDArray[np.bool_], IntArray]]:
    """Covers of the prefixes ``{p ≤ x}`` (``x ∈ [−1, T−1]``) by the blocks of
    :func:`layer_layout`, as ``(used, flat ids)`` slots: the digits of ``x + 1`` in base ``B``
    below the top level (digit ``d_ℓ``: the ``d_ℓ`` blocks ``⌊(x+1)/B^{ℓ+1}⌋·B + i``,
    ``i < d_ℓ``), and ``⌊(x+1)/B^top⌋`` whole blocks of the top level."""
    sizes, offsets = layer_layout(n_values, branching, top)
    xs = np.asarray(x, dtype=np.int64) + 1
    out = []
    for lev, size in enumerate(sizes):
        last = lev == len(sizes) - 1
        digit = xs // size if last else (xs // size) % branching
        base = 0 if last else (xs // (size * branching)) * branching
        for i in range(-(-n_values // size) if last else branching - 1):
            used = digit > i
            out.append((used, np.where(used, offsets[lev] + base + i, 0)))
    return out


def _signed_digits(x: Any, n_values: int, branching: int, top: bool
                   ) -> tuple[tuple[int, ...], IntArray, IntArray, IntArray]:
    """``(sizes, offsets, digits, above)`` of the signed covers of :func:`layer_signed_cover`:
    the digit of every level (``digits[ℓ]``, one per prefix) and ``above[ℓ] = Σ_{m >= ℓ}
    d_m·sizes[m]`` (what the levels from ``ℓ`` up cover)."""
    sizes, offsets = layer_layout(n_values, branching, top)
    n = np.asarray(x, dtype=np.int64) + 1
    plain = np.zeros((len(sizes), *n.shape), dtype=np.int64)
    signed = np.zeros_like(plain)
    r_plain, r_signed = n.copy(), n.copy()
    for lev in range(len(sizes) - 1):
        plain[lev] = r_plain % branching
        r_plain //= branching
        d = r_signed % branching
        d = np.where(2 * d > branching, d - branching, d)
        signed[lev] = d
        r_signed = (r_signed - d) // branching
    plain[-1], signed[-1] = r_plain, r_signed
    size = np.asarray(sizes, dtype=np.int64).reshape((-1,) + (1,) * n.ndim)
    reach = np.cumsum((signed * size)[::-1], axis=0).max(axis=0)  # furthest block end
    digits = np.where(reach <= n_values, signed, plain)
    above = np.cumsum((digits * size)[::-1], axis=0)[::-1]  # P_l = Σ_{m >= l} d_m s_m
    return sizes, offsets, digits, above


def layer_signed_cover(x: Any, n_values: int, branching: int, top: bool
                       ) -> list[tuple[NDArray[np.bool_], IntArray, IntArray]]:
    """Signed covers of the prefixes ``{p ≤ x}`` by the blocks of :func:`layer_layout`:
    ``(used, flat ids, signs)`` slots with ``Σ sign · block = prefix``.

    Below the top level the digits of ``x + 1`` are balanced (``d > B/2`` becomes ``d − B``
    with a carry: ``|d|`` blocks added after, or subtracted before, what the levels above
    cover), which about halves the blocks per level; where a carry would reach past ``T``
    the plain digits of :func:`layer_prefix_cover` are kept.
    """
    sizes, offsets, digits, above = _signed_digits(x, n_values, branching, top)
    out = []
    for lev, sz in enumerate(sizes):
        d = digits[lev]
        last = lev == len(sizes) - 1
        base = (above[lev + 1] // sz) if not last else np.zeros_like(d)
        for i in range(-(-n_values // sz) if last else branching - 1):
            used = np.abs(d) > i
            ids = np.where(d > 0, base + i, base - 1 - i)
            out.append((used, np.where(used, offsets[lev] + ids, 0),
                        np.where(d > 0, 1, -1).astype(np.int64)))
    return out


def layer_signed_ranges(x: Any, n_values: int, branching: int, top: bool
                        ) -> tuple[IntArray, IntArray, IntArray]:
    """The covers of :func:`layer_signed_cover` as one run of flat block ids per level:
    ``(lo, hi, sign)``, each of shape ``(levels, *x.shape)``, with the blocks of level ``ℓ``
    the ids ``lo[ℓ] .. hi[ℓ] − 1`` (none where they are equal), all of sign ``sign[ℓ]``. A
    prefix's noise is then ``Σ_ℓ sign·(S[hi] − S[lo])`` over the running sums ``S`` of the
    blocks: a few look-ups per level instead of one per block."""
    sizes, offsets, digits, above = _signed_digits(x, n_values, branching, top)
    size = np.asarray(sizes, dtype=np.int64).reshape((-1,) + (1,) * (digits.ndim - 1))
    base = np.zeros_like(digits)
    base[:-1] = above[1:] // size[:-1]
    start = offsets[:-1].reshape(size.shape) + base
    lo = np.where(digits > 0, start, start + digits)
    hi = np.where(digits > 0, start + digits, start)
    return lo, hi, np.where(digits > 0, 1, -1).astype(np.int64)


@functools.lru_cache(maxsize=64)
def layer_prefix_weights(n_values: int, branching: int, top: bool) -> NDArray[np.float64]:
    """Least-squares prefix weights of :func:`layer_layout`: ``A = C (MᵀM)^{-1} Mᵀ`` with
    ``M`` the incidence and ``C`` the prefix sums, so ``A[x] · noisy blocks`` is the best
    linear unbiased estimate of the prefix ``x`` (equal block variances; for a complete tree
    the Hay et al. consistency pass, :func:`consistent_tree`). ``A M = C`` exactly, so an
    answer is the exact prefix plus ``Σ_v A[x, v] Z_v``. Memory ``O(T · blocks)``.
    """
    sizes, _ = layer_layout(n_values, branching, top)
    pts = np.arange(n_values)
    # MᵀM[p, q] = number of levels where p and q share a block (built without the incidence)
    gram = sum((pts[:, None] // size == pts[None, :] // size).astype(np.float64)
               for size in sizes)
    upper = np.triu(np.ones((n_values, n_values)))  # column x: the indicator of {p <= x}
    solved = np.linalg.solve(gram, upper)  # (MᵀM)^{-1} Cᵀ (MᵀM ⊇ I: well conditioned)
    # M · solved: each block's row is the sum of its periods' rows (level by level)
    rows = [np.add.reduceat(solved, np.arange(0, n_values, size), axis=0) for size in sizes]
    out: NDArray[np.float64] = np.ascontiguousarray(np.concatenate(rows).T)
    out.setflags(write=False)
    return out
