"""Compiled (numba) passes of the windows' keyed node noise and exact dominance counts; imported by
:mod:`dpfreq.windows.node_kernel` only, and only when numba is installed (extra ``fast``).

A hand-written loop instead of numpy calls: the per-node work of the keyed discrete Laplace
(bucket look-up, the comparisons that decide the magnitude, the sign) is a chain of about twenty
numpy passes over short arrays, each costing more than the arithmetic; one compiled pass per
chunk does it all. Every decision is an integer comparison with the thresholds of
:class:`dpfreq._exact_inverse.InverseTable`, exactly as the numpy path decides it; the float is
only a bucket index. Cached on disk (``cache=True``) and run without the GIL (``nogil=True``) so
the exact counts of an ask overlap on another core.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["dominance_counts", "fill_blocks", "geometric_words", "laplace_sums", "laplace_words",
           "lower_blocks"]

_CLEAR_LOW = np.uint64(0x7FFFFFFFFFFFF800)  # a 63-bit word with its 11 low bits cleared
_LANES = 64  # searches run in lockstep by dominance_counts


@numba.njit(cache=True, nogil=True)
def fill_blocks(ids, tags, buf):
    """``buf[2(i·len(tags) + j)] = ids[i]``, ``buf[2(i·len(tags) + j) + 1] = tags[j]``: the AES
    input blocks ``(id ‖ tag)`` (uint64 words; little-endian hosts only, checked by the
    caller)."""
    nt = tags.size
    for i in range(ids.size):
        for j in range(nt):
            at = 2 * (i * nt + j)
            buf[at] = ids[i]
            buf[at + 1] = tags[j]


@numba.njit(cache=True, nogil=True)
def laplace_words(ct, n, shift, key0, thr, base, ascending, at, size, out,
                  flagged):
    """Signed magnitudes of the first ``n`` keyed words (``ct[2i]``: 63 bits + sign bit).

    ``out[i] = ±#{k < K : D_k > W}`` with ``W = ct[2i] >> 1``. Positions the numpy path
    would not decide from this word go to ``flagged``: a tie (``W = D_m``, ``out[i] = 0``) or
    a magnitude beyond the table (``m = K``, ``out[i] = ±K``, the sign kept for the caller to
    add the geometric tail). Returns the number of flagged positions.
    """
    fbuf = np.empty(1, np.float64)
    kbuf = fbuf.view(np.int64)  # the float's bits: exponent and leading mantissa bits
    n_flag = 0
    one = np.uint64(1)
    for i in range(n):
        raw = ct[2 * i]
        w = raw >> one
        # #{k < K : D_k > w}: the bucket look-up of InverseTable (written out here, in
        # geometric_words and in laplace_sums: a call passing arrays costs reference counting
        # per word; one inlined function made this pass 2.3x slower)
        fbuf[0] = np.float64(np.int64(w & _CLEAR_LOW))  # exact: <= 52 significant bits
        key = (kbuf[0] >> shift) - key0
        if key < 0:
            key = 0
        m = base[key] + np.int64(w < thr[key])
        if m < 0:  # a bucket holding several thresholds: binary search
            lo, hi = 0, size
            while lo < hi:  # first position with ascending[pos] > w
                mid = (lo + hi) >> 1
                if ascending[mid] <= w:
                    lo = mid + 1
                else:
                    hi = mid
            m = size - lo
        tie = m < size and at[m] == w
        if tie or m == size:
            flagged[n_flag] = i
            n_flag += 1
        neg = -np.int64(raw & one)  # −1 where the sign bit is set, else 0 (no branch)
        out[i] = 0 if tie else (m ^ neg) - neg
    return n_flag


@numba.njit(cache=True, nogil=True)
def geometric_words(ct, n, m, digits, shift, key0, thr, base, ascending, at, size,
                    out, flagged):
    """``G = (A << m) + B`` per id from ``m + 1`` words per id (``ct[2((m+1)i + j)]``): word 0
    gives ``A`` by the table of ``γ·2^m``, word ``1 + j`` the digit ``j`` of ``B`` (``W <
    digits[j]``), as ``_NodePRF.geometric`` in :mod:`dpfreq.windows.lazy_noise` decides them.
    Ids whose ``A`` word ties or lies beyond the table, or whose digit word ties, go to
    ``flagged``. Returns the number of flagged positions."""
    fbuf = np.empty(1, np.float64)
    kbuf = fbuf.view(np.int64)
    n_flag = 0
    one = np.uint64(1)
    for i in range(n):
        row = 2 * (m + 1) * i
        w = ct[row] >> one
        fbuf[0] = np.float64(np.int64(w & _CLEAR_LOW))  # exact: <= 52 significant bits
        key = (kbuf[0] >> shift) - key0
        if key < 0:
            key = 0
        a = base[key] + np.int64(w < thr[key])
        if a < 0:  # a bucket holding several thresholds: binary search
            lo, hi = 0, size
            while lo < hi:  # first position with ascending[pos] > w
                mid = (lo + hi) >> 1
                if ascending[mid] <= w:
                    lo = mid + 1
                else:
                    hi = mid
            a = size - lo
        bad = a == size or at[a] == w
        g = a << m
        for j in range(m):  # no branch on the random digits (mispredictions cost most)
            d = ct[row + 2 + 2 * j] >> one
            bad |= d == digits[j]
            g += np.int64(d < digits[j]) << j
        out[i] = g
        if bad:
            flagged[n_flag] = i
            n_flag += 1
    return n_flag


@numba.njit(cache=True, nogil=True)
def dominance_counts(lines, samples, shift, start, before, node_off, xs1, ys, out):
    """``out[q] += Σ_ℓ`` (the weight of node ``(xs1[q] >> ℓ) − 1``'s points with ``y ≤
    ys[q]``) over the set bits ``ℓ`` of ``xs1[q]``: the merge-sort tree of
    :class:`dpfreq.windows.dominance_count.DominanceCounter`. Per level, ``lines`` holds the
    pairs ``(y, cumulative weight)`` of the points, ``2^shift`` pairs per 64-byte line, and
    ``samples`` the ``y`` of every line's first pair; a node's points are ``start[node] ..
    start[node + 1]``. Each query searches its node's samples, then counts in the one line they
    point to. The searches of ``_LANES`` queries advance in lockstep without branches on the
    values, and every lane's line is read before any lane counts in it, so the cache misses of
    the lanes overlap."""
    block = np.int64(1) << shift
    mask = block - 1
    pos = np.empty(_LANES, np.int64)  # per lane: first candidate sample, samples left,
    left = np.empty(_LANES, np.int64)  # target y, query, node, first sample of the node,
    target = np.empty(_LANES, np.int64)  # first pair to count from, end of the count,
    query = np.empty(_LANES, np.int64)  # the y of that first pair
    nodes = np.empty(_LANES, np.int64)
    first = np.empty(_LANES, np.int64)
    a_at = np.empty(_LANES, np.int64)
    e_at = np.empty(_LANES, np.int64)
    y_at = np.empty(_LANES, np.int64)
    for lev in range(node_off.size - 1):
        ln, sp, nb = lines[lev], samples[lev], node_off[lev]
        q = 0
        while q < xs1.size:
            k = widest = 0
            while k < _LANES and q < xs1.size:  # the next queries with a non-empty node
                x = xs1[q] >> lev
                if x & 1:
                    node = nb + x - 1
                    lo, hi = start[node], start[node + 1]
                    if hi > lo:
                        s0 = (lo + mask) >> shift  # the node's samples: s0 .. s1
                        nodes[k], first[k], pos[k] = node, s0, s0
                        left[k] = ((hi + mask) >> shift) - s0
                        target[k], query[k] = ys[q], q
                        widest = max(widest, left[k])
                        k += 1
                q += 1
            while widest > 1:  # the first sample > target stays in pos .. pos + left
                widest = 0
                for j in range(k):
                    half = left[j] >> 1
                    pos[j] += half * np.int64(sp[pos[j] + half] <= target[j])
                    left[j] -= half
                    widest = max(widest, left[j])
            for j in range(k):  # the line holding the last y <= target; read it now
                t = target[j]
                s = pos[j] + np.int64(left[j] == 1) * np.int64(sp[pos[j]] <= t)
                lo, hi = start[nodes[j]], start[nodes[j] + 1]
                a = (s - 1) << shift if s > first[j] else lo
                a_at[j], e_at[j] = a, min((a | mask) + 1, hi)
                y_at[j] = ln[2 * a]
            for j in range(k):  # one past the last y <= target (pairs a .. e, a < e)
                a, e, t = a_at[j], e_at[j], target[j]
                c = a + np.int64(y_at[j] <= t)
                for i in range(1, block):
                    c += np.int64(a + i < e) * np.int64(ln[2 * (a + i)] <= t)
                if c > start[nodes[j]]:
                    out[query[j]] += ln[2 * c - 1] - before[nodes[j]]


@numba.njit(cache=True, nogil=True)
def lower_blocks(xs, ys, q0, split, levels, domain, buf, stride, cap, starts):
    """Node ids of the lower level pairs ``ℓx + ℓy < split`` of the dominance covers of the
    queries ``q0, q0 + 1, …``, query-major, ``ℓx`` then ``ℓy`` increasing (the order of
    :meth:`dpfreq.windows.dominance_noise.DominanceNoise._lower`): id ``i`` at
    ``buf[stride·i]``, as many whole queries as ``cap`` ids hold; ``starts[j]`` the first id
    of query ``q0 + j`` (and one past the last). With ``stride = 2`` these are the AES input
    blocks ``(id ‖ 0)`` (the tag words of ``buf`` must be zero already). Returns the first
    query not listed."""
    width = 2 * domain
    most = levels * max(0, min(levels, split))  # blocks of one query at most
    y_lev = np.empty(levels, np.int64)
    y_node = np.empty(levels, np.int64)
    at = 0
    q = q0
    starts[0] = 0
    while q < xs.size and at + most <= cap:
        x1, y1 = xs[q], ys[q]
        n_y = 0
        for ly in range(levels):
            if (y1 >> ly) & 1:
                y_lev[n_y] = ly
                y_node[n_y] = (y1 >> ly) + (domain >> ly) - 1
                n_y += 1
        for lx in range(levels):
            if (x1 >> lx) & 1:
                hx = ((x1 >> lx) + (domain >> lx) - 1) * width
                for j in range(n_y):
                    if y_lev[j] >= split - lx:
                        break
                    buf[stride * at] = hx + y_node[j]
                    at += 1
        q += 1
        starts[q - q0] = at
    return q


@numba.njit(cache=True, nogil=True)
def laplace_sums(ct, starts, n_q, sign, shift, key0, thr, base, ascending, at, size, sums,
                 flagged):
    """``sums[q] += sign · Σ`` of the signed discrete Laplace values of the blocks
    ``starts[q] .. starts[q + 1]`` (words ``ct[2i]``, decided as :func:`laplace_words` decides
    them), leaving out the blocks it flags (a tie or a magnitude beyond the table: the caller
    adds their values). Returns the number of flagged blocks."""
    fbuf = np.empty(1, np.float64)
    kbuf = fbuf.view(np.int64)
    n_flag = 0
    one = np.uint64(1)
    for q in range(n_q):
        acc = np.int64(0)
        for i in range(starts[q], starts[q + 1]):
            raw = ct[2 * i]
            w = raw >> one
            # the bucket look-up of laplace_words, written out for the same reason
            fbuf[0] = np.float64(np.int64(w & _CLEAR_LOW))  # exact: <= 52 significant bits
            key = (kbuf[0] >> shift) - key0
            if key < 0:
                key = 0
            m = base[key] + np.int64(w < thr[key])
            if m < 0:  # a bucket holding several thresholds: binary search
                lo, hi = 0, size
                while lo < hi:  # first position with ascending[pos] > w
                    mid = (lo + hi) >> 1
                    if ascending[mid] <= w:
                        lo = mid + 1
                    else:
                        hi = mid
                m = size - lo
            if m == size or at[m] == w:
                flagged[n_flag] = i
                n_flag += 1
                continue
            neg = -np.int64(raw & one)
            acc += (m ^ neg) - neg
        sums[q] += sign * acc
    return n_flag
