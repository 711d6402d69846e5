"""Compiled (numba) passes of the windows' keyed node noise and exact dominance counts; imported by
:mod:`dpfreq.windows.noise.kernel` only, and only when numba is installed (extra ``fast``).

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

__all__ = ["chernoff_floor", "dirichlet_search", "dominance_counts", "fill_blocks",
           "geometric_words", "grid_ids", "laplace_sums", "laplace_words", "lower_blocks",
           "upper_row", "upper_sums"]

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


@numba.njit(nogil=True, inline="always")
def _count_above(w, fbuf, kbuf, shift, key0, thr, base, ascending, at, size):
    """``(m, tie)``: ``m = #{k < K : D_k > w}`` by the bucket look-up of
    :class:`dpfreq._exact_inverse.InverseTable` (``kbuf`` views ``fbuf``'s float as its bits:
    exponent and leading mantissa bits), and whether ``w`` is a threshold (``w = D_m``).
    Inlined into each pass: a call passing arrays would cost reference counting per word."""
    fbuf[0] = np.float64(np.int64(w & _CLEAR_LOW))  # exact: <= 52 significant bits
    key = (kbuf[0] >> shift) - key0
    if key < 0:
        key = 0
    t = thr[key]
    m = base[key] + np.int64(w < t)
    if m < 0:  # a bucket holding several thresholds: binary search
        lo, hi = 0, size
        while lo < hi:  # first position with ascending[pos] > w
            mid = (lo + hi) >> 1
            if ascending[mid] <= w:
                lo = mid + 1
            else:
                hi = mid
        m = size - lo
        return m, m < size and at[m] == w
    return m, t == w and w > 0  # a threshold has its own bucket: w is one iff it is that one


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
        m, tie = _count_above(raw >> one, fbuf, kbuf, shift, key0, thr, base, ascending, at,
                              size)
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
    digits[j]``), as ``_NodePRF.geometric`` in :mod:`dpfreq.windows.noise.keyed` decides them.
    Ids whose ``A`` word ties or lies beyond the table, or whose digit word ties, go to
    ``flagged``. Returns the number of flagged positions."""
    fbuf = np.empty(1, np.float64)
    kbuf = fbuf.view(np.int64)
    n_flag = 0
    one = np.uint64(1)
    for i in range(n):
        row = 2 * (m + 1) * i
        a, tie = _count_above(ct[row] >> one, fbuf, kbuf, shift, key0, thr, base, ascending,
                              at, size)
        bad = a == size or tie
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
    :class:`dpfreq.windows.data.dominance_count.DominanceCounter`. Per level, ``lines`` holds the
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
    :meth:`dpfreq.windows.noise.dominance.DominanceNoise._lower`): id ``i`` at
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
            m, tie = _count_above(raw >> one, fbuf, kbuf, shift, key0, thr, base, ascending,
                                  at, size)
            if tie or m == size:
                flagged[n_flag] = i
                n_flag += 1
                continue
            neg = -np.int64(raw & one)
            acc += (m ^ neg) - neg
        sums[q] += sign * acc
    return n_flag


@numba.njit(cache=True, nogil=True)
def grid_ids(lxs, lys, domain, out):
    """Node ids of the level pairs ``(lxs[i], lys[i])`` one grid after the other, each grid
    row-major: ``((D >> ℓx) + u)·2D + (D >> ℓy) + v`` (the heap ids of
    :mod:`dpfreq.windows.layouts.dyadic`)."""
    at = 0
    width = 2 * domain
    for i in range(lxs.size):
        nu, nv = domain >> lxs[i], domain >> lys[i]
        for u in range(nu):
            first = (nu + u) * width + nv
            for v in range(nv):
                out[at] = first + v
                at += 1


@numba.njit(cache=True, nogil=True)
def upper_row(vals, offs, levels, domain, lx, b, out):
    """The row table of ``ℓx`` of :class:`~dpfreq.windows.noise.dominance.DominanceNoise`:
    ``out[u·W + c] = Σ_{ℓy >= b, bit ℓy − b of c} grid(ℓx, ℓy)[u, (c >> (ℓy − b)) − 1]``
    with ``W = (D >> b) + 1``; grid ``(ℓx, ℓy)`` is ``vals[offs[ℓy]:]``, row-major with
    ``D >> ℓy`` columns (int64 sums: wrap-around as numpy's)."""
    width = (domain >> b) + 1
    for u in range(domain >> lx):
        for c in range(width):
            acc = np.int64(0)
            for ly in range(b, levels):
                j = ly - b
                if (c >> j) & 1:
                    acc += vals[offs[ly] + u * (domain >> ly) + (c >> j) - 1]
            out[u * width + c] = acc


@numba.njit(cache=True, nogil=True)
def upper_sums(xs, ys, lxs, bs, widths, offs, rows, out):
    """``out[q] = Σ_i rows[offs[i] + ((x >> ℓx_i) − 1)·W_i + (y >> b_i)]`` over the row tables
    ``i`` whose level ``ℓx_i`` is a set bit of ``x = xs[q]`` (``y = ys[q]``): the upper-pair
    noise of every query (int64 sums: wrap-around as numpy's)."""
    for q in range(xs.size):
        x, y = xs[q], ys[q]
        acc = np.int64(0)
        for i in range(lxs.size):
            lx = lxs[i]
            if (x >> lx) & 1:
                acc += rows[offs[i] + ((x >> lx) - 1) * widths[i] + (y >> bs[i])]
        out[q] = acc


@numba.njit(cache=True, nogil=True)
def chernoff_floor(ms, log_m, lam, c, out):
    """``out[i] = floor(min_j (ms[i]·log_m[j] + c) / lam[j])``: the grid minimum of
    ``noise_law._chernoff_radius``, each term with the same operations in the same order.

    Only the terms that can be the minimum are computed: from the previous size's minimizer
    (``λ`` ascending), down while ``min_{j' <= j} c/λ_j' < best`` and up while
    ``ms[i]·min_{j' >= j} log_m_j'/λ_j'·(1 − 1e-13) < best``. Both are lower bounds of every
    rounded term beyond ``j`` when ``log_m >= 0`` and ``c >= 0`` (rounding is monotone, and the
    three roundings of a term lose less than the margin); a term with ``log_m < 0`` lowers
    them to ``−∞`` (scanned), and ``c < 0`` scans the whole grid."""
    nj = lam.size
    down = np.empty(nj)  # prefix minima of c/λ
    up = np.empty(nj)  # suffix minima of log_m/λ, with the margin
    low = np.inf
    for j in range(nj):
        q = c / lam[j] if log_m[j] >= 0.0 and c >= 0.0 else -np.inf
        low = min(low, q)
        down[j] = low
    low = np.inf
    for j in range(nj - 1, -1, -1):
        q = log_m[j] / lam[j] * (1.0 - 1e-13) if log_m[j] >= 0.0 and c >= 0.0 else -np.inf
        low = min(low, q)
        up[j] = low
    at = nj // 2
    for i in range(ms.size):
        m = np.float64(ms[i])
        best = np.inf
        arg = at
        j = at
        while j >= 0 and not down[j] >= best:
            v = (m * log_m[j] + c) / lam[j]
            if v < best:
                best, arg = v, j
            j -= 1
        j = at + 1
        while j < nj and not m * up[j] >= best:
            v = (m * log_m[j] + c) / lam[j]
            if v < best:
                best, arg = v, j
            j += 1
        out[i] = np.floor(best)
        at = arg


@numba.njit(cache=True, nogil=True)
def _dirichlet_excess(w, n, b, slack, target):
    """``(M(b) − slack) − (1 − β)`` of ``noise_law._dirichlet_quantiles`` for one row: certified
    iff ``>= 0`` (the same terms as the numpy sum, reduced modulo ``2n`` before the sine)."""
    odd = 2 * b + 1
    two_n = 2 * n
    s = 0.0
    for k in range(w.size):
        s += w[k] * np.sin(np.pi * np.float64((odd * (k + 1)) % two_n) / np.float64(n))
    return (np.float64(odd) / np.float64(n) + s - slack) - target


@numba.njit(cache=True, nogil=True)
def dirichlet_search(w_flat, offs, ns, rs, slacks, target, guesses, out):
    """Per row ``i``: ``out[i]`` = the ``b`` with ``b`` certified and ``b − 1`` not (``b = 0``
    when ``0`` is), ``−1`` when ``rs[i]`` is not certified. A safeguarded secant search from
    ``guesses[i]`` keeps a bracket ``lo`` (not certified, ``−1`` at first) < ``hi``
    (certified, ``rs[i]`` at first) and stops when ``hi = lo + 1``: the transition a bisection
    of the same bracket finds (the certified set is ``{b >= transition}`` whenever the
    computed mass increases across it)."""
    for i in range(ns.size):
        w = w_flat[offs[i]:offs[i + 1]]
        n = ns[i]
        hi = rs[i]
        f_hi = _dirichlet_excess(w, n, hi, slacks[i], target)
        if not f_hi >= 0.0:
            out[i] = -1
            continue
        lo = -1
        x0 = -1
        f0 = 0.0
        w1 = w2 = hi + 1  # bracket widths one and two steps back
        x = min(max(guesses[i], 0), hi - 1)
        it = 0
        while hi - lo > 1:
            f = _dirichlet_excess(w, n, x, slacks[i], target)
            if f >= 0.0:
                hi = x
            else:
                lo = x
            it += 1
            if x0 < 0:  # second point: a step of 1/64 of the guess toward the root
                est = float(x - max(1, x // 64)) if f >= 0.0 else float(x + max(1, x // 64))
            elif f != f0:  # secant through the last two points
                est = x - f * (x - x0) / (f - f0)
            else:
                est = -2.0
            if (it >= 3 and 2 * (hi - lo) > w2) or not lo < est < hi:
                nxt = (lo + hi) // 2  # no halving in two steps, or no secant step: bisect
            else:
                nxt = min(max(int(np.floor(est) if f >= 0.0 else np.ceil(est)), lo + 1), hi - 1)
            w2, w1 = w1, hi - lo
            x0, f0 = x, f
            x = nxt
        out[i] = hi
