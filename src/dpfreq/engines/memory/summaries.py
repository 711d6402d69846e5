"""The summaries of :class:`~dpfreq.engines.base.SummarySpec` in numpy: the reference.

Input: the events of the request (after the grouped bounding) as ``(pair, period)`` with
``pair`` a code of (item, group) that holds the group index, and the events slot 0 counts
(a grouped request's rows before the bounding); everything is vectorised over
all pairs and all groups at once — one sort of the combined key, then per-spec array
arithmetic on the runs of equal pairs (no Python loop over items or groups). The SQL engines
compute the same sums with window functions (:mod:`dpfreq.engines.sql`); the conformance suite
demands equal results.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from dpfreq.engines.requests import SummarySpec

__all__ = ["summarize_events"]

IntArray = NDArray[np.int64]
_EMPTY = np.zeros(0, dtype=np.int64)


def _runs(codes: IntArray) -> tuple[IntArray, IntArray]:
    """``(rank, size)`` of each element within its run of equal (sorted) codes: rank 1-based."""
    n = codes.size
    new = np.ones(n, dtype=np.bool_)
    new[1:] = codes[1:] != codes[:-1]
    starts = np.flatnonzero(new)
    sizes = np.diff(np.append(starts, n))
    rank = np.arange(n, dtype=np.int64) - np.repeat(starts, sizes) + 1
    return rank, np.repeat(sizes, sizes)


def _shift(values: IntArray, rank: IntArray, size: IntArray, by: int, fill: int) -> IntArray:
    """``values`` ``by`` places later (``by > 0``, lead) or earlier (``by < 0``, lag) within
    each run, ``fill`` where that leaves the run."""
    n = values.size
    idx = np.arange(n, dtype=np.int64) + by
    inside = (rank + by >= 1) & (rank + by <= size)
    out = np.full(n, fill, dtype=np.int64)
    out[inside] = values[idx[inside]]
    return out


def _cumulative(gi: IntArray, p: IntArray, rank: IntArray, size: IntArray,
                k: int) -> tuple[IntArray, IntArray, IntArray]:
    """The period of each pair's k-th event: keys per group."""
    at = (rank == k) & (size >= k)
    return gi[at], p[at], np.ones(int(at.sum()), dtype=np.int64)


def _all(gi: IntArray, p: IntArray, rank: IntArray, size: IntArray, k: int,
         horizon: int) -> tuple[IntArray, IntArray, IntArray]:
    """Points (τ_{s−k}, τ_s) with +1 and (τ_{s−k+1}, τ_s) with −1 for each event s >= k."""
    x1 = _shift(p, rank, size, -k, 0)
    x2 = _shift(p, rank, size, -(k - 1), 0)
    on = rank >= k
    y = p[on]
    span = horizon + 2
    keys = np.concatenate((x1[on] * span + y, x2[on] * span + y))
    w = np.concatenate((np.ones(y.size, dtype=np.int64), -np.ones(y.size, dtype=np.int64)))
    return np.concatenate((gi[on], gi[on])), keys, w


def _rolling(pair: IntArray, gi: IntArray, p: IntArray, k: int, width: int,
           horizon: int) -> tuple[IntArray, IntArray, IntArray]:
    """Block points of every (pair, block) run (see :class:`SummarySpec`)."""
    nb = horizon // width + 1
    high = 2 * width + 1
    b1 = (p - 1) // width
    second = b1 + 1 < nb
    blk = np.concatenate((b1, b1[second] + 1))
    loc = np.concatenate((p - (b1 - 1) * width, p[second] - b1[second] * width))
    pr = np.concatenate((pair, pair[second]))
    g = np.concatenate((gi, gi[second]))
    order = np.lexsort((loc, blk, pr))
    blk, loc, pr, g = blk[order], loc[order], pr[order], g[order]
    run = pr * nb + blk
    rank, size = _runs(run)
    l1 = _shift(loc, rank, size, 1, high)
    lk = _shift(loc, rank, size, k, high)
    lk1 = _shift(loc, rank, size, k - 1, high)
    first = rank == 1
    tj = np.concatenate((loc, np.zeros(int(first.sum()), dtype=np.int64)))
    tj1 = np.concatenate((l1, loc[first]))
    tjk = np.concatenate((lk, lk1[first]))
    bb = np.concatenate((blk, blk[first]))
    gg = np.concatenate((g, g[first]))
    keep = (tj < tj1) & (tj + width < tjk)
    span = width + 2
    a_key = bb[keep] * span + tj[keep]
    c_key = (nb + bb[keep]) * span + np.minimum(tj1[keep], tjk[keep] - width)
    present = 2 * nb * span + blk[first]
    keys = np.concatenate((a_key, c_key, present))
    groups = np.concatenate((gg[keep], gg[keep], g[first]))
    return groups, keys, np.ones(keys.size, dtype=np.int64)


def summarize_events(pair: IntArray, periods: IntArray, n_groups: int,
                     specs: tuple[SummarySpec, ...], horizon: int,
                     counted: tuple[IntArray, IntArray] | None = None
                     ) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """``(group, slot, key, weight)`` summed, sorted by (group, slot, key), zero sums left out.

    ``pair = item code · n_groups + group index`` (non-negative; the same for all events of
    an (item, group) pair); ``periods`` in ``1..horizon``. Slot 0 counts the events
    ``counted`` (their group indexes and periods: a grouped request's rows before the
    bounding), or, if None, these events.
    """
    pair = np.asarray(pair, dtype=np.int64)
    p = np.asarray(periods, dtype=np.int64)
    if counted is None:
        counted = (pair % max(1, int(n_groups)), p)
    slot0 = (np.asarray(counted[0], dtype=np.int64), np.zeros(counted[0].size, dtype=np.int64),
             np.asarray(counted[1], dtype=np.int64), np.ones(counted[0].size, dtype=np.int64))
    if pair.size == 0:
        return sum_grouped(*slot0)
    span = horizon + 1
    if (int(pair.max()) + 1) * span < 1 << 62:  # one int64 sort of the combined key
        key = np.sort(pair * span + p)
        pair, p = key // span, key % span
    else:
        order = np.lexsort((p, pair))
        pair, p = pair[order], p[order]
    gi = pair % max(1, int(n_groups))
    rank, size = _runs(pair)
    parts = [slot0]
    for slot, spec in enumerate(specs, start=1):
        if spec.family == "cumulative":
            g, k, w = _cumulative(gi, p, rank, size, spec.k)
        elif spec.family == "all":
            g, k, w = _all(gi, p, rank, size, spec.k, horizon)
        else:
            g, k, w = _rolling(pair, gi, p, spec.k, spec.width, horizon)
        parts.append((g, np.full(g.size, slot, dtype=np.int64), k, w))
    g, s, k, w = (np.concatenate(v) for v in zip(*parts, strict=True))
    return sum_grouped(g, s, k, w)


def sum_grouped(g: IntArray, s: IntArray, k: IntArray,
                w: IntArray) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """Sum weights per (group, slot, key), sorted, zero sums left out."""
    if s.size == 0:
        return _EMPTY, _EMPTY.copy(), _EMPTY.copy(), _EMPTY.copy()
    order = np.lexsort((k, s, g))
    g, s, k, w = g[order], s[order], k[order], w[order]
    new = np.ones(g.size, dtype=np.bool_)
    new[1:] = (g[1:] != g[:-1]) | (s[1:] != s[:-1]) | (k[1:] != k[:-1])
    starts = np.flatnonzero(new)
    sums = np.add.reduceat(w, starts)
    nz = sums != 0
    return g[starts][nz], s[starts][nz], k[starts][nz], sums[nz].astype(np.int64)
