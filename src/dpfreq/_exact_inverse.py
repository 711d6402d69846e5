"""Exact integer thresholds for inverse-cdf sampling of the geometric and discrete Laplace laws.

Rigorous integer bounds on ``e^{-x}`` (rational x) and the tables ``D_k = ⌊2^w S(k)⌋`` of the
survival function ``S``, used by the exact samplers of :mod:`dpfreq.noise`
(``dpfreq._exact_sampling.table_sample``) and of the windows' keyed node noise
(:mod:`dpfreq.windows.noise.keyed`), and the exact Bernoulli(``e^{-n c}``) decision on a random
word (:func:`exp_neg_multiple_floor`, :func:`exp_neg_multiple_resolve`) used by the keyed
discrete Gaussian. Pure integer arithmetic; no floating point decides a threshold (see
``dpfreq._exact_sampling.table_sample`` for how a table yields exact draws).
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "WORD_BITS",
    "InverseTable",
    "exp_neg_bounds",
    "exp_neg_multiple_bounds",
    "exp_neg_multiple_floor",
    "exp_neg_multiple_resolve",
    "half_logistic_bounds",
    "half_logistic_floor",
    "half_logistic_resolve",
    "inverse_table",
    "survival_bounds",
]


def exp_neg_taylor(y: Fraction, prec: int) -> tuple[int, int]:
    """Integers ``lo <= 2^prec e^{-y} <= hi`` for rational 0 <= y <= 1 (rigorous).

    The Taylor series of e^{-y} alternates with terms ``y^j/j!`` that never increase for y <= 1,
    so any two consecutive partial sums bracket the limit; we stop once the last term is below
    2^-(prec+2) and round the lower partial sum down and the upper one up.
    """
    total = Fraction(1)
    term = Fraction(1)
    stop = Fraction(1, 1 << (prec + 2))
    j = 0
    while True:
        j += 1
        term = term * y / j
        prev = total
        total = total - term if j % 2 else total + term
        if term < stop:
            break
    lo, hi = min(prev, total), max(prev, total)
    return (lo.numerator << prec) // lo.denominator, -((-hi.numerator << prec) // hi.denominator)


def mul_bounds(a: tuple[int, int], b: tuple[int, int], prec: int) -> tuple[int, int]:
    """Product of two fixed-point intervals (non-negative, scaled by 2^prec), rounded outwards."""
    return (a[0] * b[0]) >> prec, -((-a[1] * b[1]) >> prec)


def _times_power(
    acc: tuple[int, int], base: tuple[int, int], n: int, guard: int, prec: int
) -> tuple[int, int]:
    """``acc · base^n`` (intervals at ``guard`` bits) by square-and-multiply, rounded outwards
    at every product, then rounded outwards to ``prec`` bits."""
    while n:
        if n & 1:
            acc = mul_bounds(acc, base, guard)
        n >>= 1
        if n:
            base = mul_bounds(base, base, guard)
    shift = guard - prec
    return acc[0] >> shift, -((-acc[1]) >> shift)


def exp_neg_bounds(x: Fraction, prec: int) -> tuple[int, int]:
    """Integers ``lo <= 2^prec e^{-x} <= hi`` for rational x >= 0, with ``hi - lo`` a few units.

    ``e^{-x} = (e^{-1})^n e^{-f}`` with n = ⌊x⌋ and f = x - n; each factor is bracketed by
    :func:`exp_neg_taylor` and every product is rounded outwards, so the bounds are rigorous;
    ``2·bitlen(n) + 16`` guard bits keep them tight.
    """
    n = x.numerator // x.denominator
    guard = prec + 2 * n.bit_length() + 16
    acc = exp_neg_taylor(x - n, guard)
    base = exp_neg_taylor(Fraction(1), guard) if n else acc  # unused when n = 0
    return _times_power(acc, base, n, guard, prec)


@functools.lru_cache(maxsize=4096)
def survival_bounds(gamma: Fraction, k: int, two_sided: bool, prec: int) -> tuple[int, int]:
    """Integers bracketing ``2^prec · S(k)``, the survival function of the table's law.

    ``S(k) = Pr[G > k] = α^{k+1}`` for the geometric, ``S(k) = Pr[|Z| > k] = 2α^{k+1}/(1+α)`` for
    the magnitude of the discrete Laplace (α = e^{-γ}).
    """
    p = prec + 8
    el, eh = exp_neg_bounds(gamma * (k + 1), p)
    if two_sided:
        al, ah = exp_neg_bounds(gamma, p)
        one = 1 << p
        el, eh = (2 * el << p) // (one + ah), -((-2 * eh << p) // (one + al))
    return el >> 8, -((-eh) >> 8)


WORD_BITS = 63  # bits of the uniform W compared with the table (the 64th bit is the sign)
#: at most this many thresholds; the rest of the tail is drawn by the geometric samplers. With
#: 2^14, ``γ = 1/1156`` (the arbitrary-window trees at ``T = 2^16``, ε = 1) leaves ~1e-6 of the
#: draws to a tail, each about ten more keyed words (2^12 left 3%); a table costs ~20 ms to
#: build, once per ``γ`` in a process
TABLE_MAX = 1 << 14
TABLE_TAIL = 48  # stop the table once S(k) < 2^-48 (the tail path then almost never runs)


class InverseTable:
    """Exact integer thresholds ``D_k = ⌊2^w S(k)⌋`` (strictly decreasing) for k < K.

    See :func:`dpfreq._exact_sampling.table_sample` for how they are used and why the result is
    exact.
    """

    def __init__(self, gamma: Fraction, two_sided: bool, w: int) -> None:
        self.gamma, self.two_sided, self.w = gamma, two_sided, w
        q = w + 64  # working precision of the iterated products
        alpha = exp_neg_bounds(gamma, q)
        one = 1 << q
        # factor c with S(k) = c · α^{k+1}: 1 (geometric) or 2/(1+α) (magnitude of DLap)
        if two_sided:
            factor = ((2 << (2 * q)) // (one + alpha[1]), -((-2 << (2 * q)) // (one + alpha[0])))
        else:
            factor = (one, one)
        # power = α^{k+1} and S(k) = c·power as intervals, rounded outwards (mul_bounds,
        # inlined: up to 2·TABLE_MAX products per table; c = 1 needs no product)
        p_lo, p_hi = alpha
        a_lo, a_hi = alpha
        f_lo, f_hi = factor
        shift = q - w
        thresholds: list[int] = []
        tail_stop = 1 << max(0, w - TABLE_TAIL)
        for k in range(TABLE_MAX):
            if two_sided:
                lo, hi = (p_lo * f_lo) >> q, -((-p_hi * f_hi) >> q)
            else:
                lo, hi = p_lo, p_hi
            d_lo, d_hi = lo >> shift, hi >> shift
            if d_lo != d_hi:  # too close to an integer for this precision: refine this entry
                prec = q
                while d_lo != d_hi:
                    prec += 64
                    lo2, hi2 = survival_bounds(gamma, k, two_sided, prec)
                    d_lo, d_hi = lo2 >> (prec - w), hi2 >> (prec - w)
            if (thresholds and d_lo >= thresholds[-1]) or d_lo == 0:
                break  # thresholds must stay strictly decreasing and positive
            thresholds.append(d_lo)
            if d_lo < tail_stop:
                break
            p_lo, p_hi = (p_lo * a_lo) >> q, -((-p_hi * a_hi) >> q)
        size = len(thresholds)
        self.size = size
        self.table = np.array(thresholds, dtype=np.uint64)
        # above[m] = D_{m-1} (above[0] = +inf), at[m] = D_m (at[K] = 0)
        self.above = np.full(size + 1, np.iinfo(np.uint64).max, dtype=np.uint64)
        self.above[1:] = self.table
        self.at = np.zeros(size + 1, dtype=np.uint64)
        self.at[:size] = self.table
        self.ascending = self.table[::-1].copy()
        a = math.exp(-float(gamma))
        log_c = w * math.log(2.0) - float(gamma) + (math.log(2.0 / (1.0 + a)) if two_sided else 0)
        self.log_c = log_c  # ln(2^w c α): s_k = e^{log_c - γ k}
        self.inv_gamma = 1.0 / float(gamma)
        # one look-up per word where buckets fit in 2^15 per binade (γ above ~2^-14)
        self._buckets = (_Buckets(self.table, a) if size and w == WORD_BITS
                         and 1.0 - a > 2.0**-14 else None)

    def bucket_arrays(self) -> tuple[Any, ...] | None:
        """``(shift, key0, thr, base, ascending, at, size)``: the one-look-up tables of
        :meth:`count_and_ties` for a compiled pass (None where it uses the logarithm guess)."""
        b = self._buckets
        if b is None:
            return None
        return (b.shift, b.key0, b.thr, b.base, self.ascending, self.at, self.size)

    def count_above(self, w_words: NDArray[np.uint64]) -> NDArray[np.int64]:
        """``#{k < K : D_k > W}`` per W, exactly."""
        if self._buckets is not None:
            return self._buckets.count_above(w_words, self)[0]
        return self._count_above_log(w_words)

    def count_and_ties(self, w_words: NDArray[np.uint64]
                       ) -> tuple[NDArray[np.int64], NDArray[np.intp]]:
        """``m = count_above(W)`` and the positions where ``m < K`` and ``W = D_m`` (a tie,
        settled by :meth:`resolve`)."""
        if self._buckets is not None:
            return self._buckets.count_above(w_words, self)
        m = self._count_above_log(w_words)
        return m, np.flatnonzero((m < self.size) & (self.at[m] == w_words))

    def _count_above_log(self, w_words: NDArray[np.uint64]) -> NDArray[np.int64]:
        """:meth:`count_above` by a float logarithm guess checked by integer compares."""
        x = np.log(w_words.astype(np.float64) + 1.0)
        guess = (self.log_c - x) * self.inv_gamma
        np.clip(guess, -1.0, float(self.size - 1), out=guess)
        np.floor(guess, out=guess)
        m = guess.astype(np.int64)
        m += 1
        bad = (self.above[m] <= w_words) | (self.at[m] > w_words)
        if bad.any():
            idx = np.flatnonzero(bad)
            m[idx] = self.size - np.searchsorted(self.ascending, w_words[idx], side="right")
        return m

    def resolve(self, word: int, k: int, gen: np.random.Generator) -> bool:
        """Whether ``W + R <= 2^w S(k)`` for ``W = D_k`` and a fresh uniform R in [0, 1).

        R is drawn 64 bits at a time and compared with ever tighter rigorous bounds on
        ``2^w S(k)`` (irrational, so the loop ends with probability 1).
        """
        r, bits = 0, 0
        while True:
            r = (r << 64) | int(gen.integers(0, 2**64, dtype=np.uint64))
            bits += 64
            lo, hi = survival_bounds(self.gamma, k, self.two_sided, self.w + bits)
            n = (word << bits) | r  # W + R lies in [n, n + 1) / 2^bits
            if n + 1 <= lo:
                return True
            if n >= hi:
                return False


class _Buckets:
    """Exact ``#{k : D_k > W}`` by one look-up per word, for 63-bit words.

    Bucket of W: the float64 bits of ``W'`` (W with its 11 low bits cleared, so exactly
    representable) shifted right by ``52 − b``, i.e. the exponent and ``b`` mantissa bits: a
    bucket spans a relative width of ``2^-b``, chosen below the relative gap ``1 − α`` of
    consecutive thresholds, so a bucket holds at most one threshold (the rest are marked).
    Clearing the low bits changes no bucket at or above ``2^{11+b}``; below ``2^{E0}``
    (``E0 >= 11 + b``) everything falls into bucket 0. Per bucket: ``base`` = thresholds in
    higher buckets and ``thr`` = its threshold (0 if none), so ``count = base + [W < thr]``
    and a tie is ``W = thr``. Buckets with two or more thresholds carry a negative base and are
    answered by binary search; a bucket-0 word equal to 0 is checked as a tie and discarded.
    Only integer comparisons decide; the float is an index.
    """

    LOW_BITS = 11

    def __init__(self, table: NDArray[np.uint64], alpha: float) -> None:
        bits = max(1, math.ceil(-math.log2(1.0 - alpha)) + 1)
        self.shift = np.int64(52 - bits)
        e0 = max(self.LOW_BITS + bits, int(table[-1]).bit_length() - 1)
        self.key0 = np.int64(((1023 + e0) << bits) - 1)  # bucket 0: every W below 2^e0
        n_slots = (63 - e0) * (1 << bits) + 1
        slot = self.slots(table)
        cnt = np.bincount(slot, minlength=n_slots)
        self.thr = np.zeros(n_slots, dtype=np.uint64)
        self.thr[slot] = table
        above = np.concatenate((np.cumsum(cnt[::-1])[::-1][1:], [0])).astype(np.int64)
        self.base = np.where(cnt >= 2, np.int64(-(1 << 40)), above)

    def slots(self, w: NDArray[np.uint64]) -> NDArray[np.int64]:
        low = w & np.uint64(~((1 << self.LOW_BITS) - 1) & ((1 << 64) - 1))
        key = low.astype(np.float64).view(np.int64) >> self.shift
        key -= self.key0
        np.maximum(key, 0, out=key)
        return key

    def count_above(self, w: NDArray[np.uint64], tab: InverseTable
                    ) -> tuple[NDArray[np.int64], NDArray[np.intp]]:
        slot = self.slots(w)
        thr = self.thr[slot]
        m = self.base[slot]
        m += w < thr
        if m.min() < 0:  # words in buckets with several thresholds: binary search
            idx = np.flatnonzero(m < 0)
            m[idx] = tab.size - np.searchsorted(tab.ascending, w[idx], side="right")
            thr[idx] = tab.at[m[idx]]
        ties = np.flatnonzero(w == thr)
        if ties.size:  # empty buckets have thr = 0: keep the true ties only
            mt = m[ties]
            ties = ties[(mt < tab.size) & (tab.at[mt] == w[ties])]
        return m, ties


@functools.lru_cache(maxsize=128)
def inverse_table(gamma: Fraction, two_sided: bool, w: int = WORD_BITS) -> InverseTable:
    return InverseTable(gamma, two_sided, w)


@functools.lru_cache(maxsize=256)
def _exp_neg_bounds_cached(x: Fraction, prec: int) -> tuple[int, int]:
    return exp_neg_bounds(x, prec)


def exp_neg_multiple_bounds(c: Fraction, n: int, prec: int) -> tuple[int, int]:
    """Integers ``lo <= 2^prec e^{-n·c} <= hi`` for rational ``c >= 0`` and integer ``n >= 0``.

    ``e^{-nc} = (e^{-c})^n``: one rigorous bracket of ``e^{-c}`` (cached per ``c``) raised to
    the n-th power by square-and-multiply with outward rounding, at ``prec + 2·bitlen(n) + 16``
    working bits. Much cheaper than bracketing ``e^{-nc}`` afresh for each n when many
    multiples of one ``c`` are needed (the acceptance test of the discrete Gaussian).
    """
    guard = prec + 2 * max(1, n.bit_length()) + 16
    one = (1 << guard, 1 << guard)
    return _times_power(one, _exp_neg_bounds_cached(c, guard), n, guard, prec)


@functools.lru_cache(maxsize=1 << 16)
def exp_neg_multiple_floor(c: Fraction, n: int, w: int = WORD_BITS) -> int:
    """``⌊2^w e^{-n·c}⌋`` exactly (rational ``c > 0``, integer ``n >= 0``).

    ``n = 0`` gives ``2^w``. When ``n·c >= 0.7·(w + 1) > w ln 2`` the value is below 1 and the
    floor is 0 without computing. Otherwise the precision of the bracket grows until both ends
    have the same floor; for ``n·c > 0`` the number is transcendental (Lindemann), never an
    integer, so this ends.
    """
    if n == 0:
        return 1 << w
    if n * c >= Fraction(7 * (w + 1), 10):
        return 0
    prec = w + 64
    while True:
        lo, hi = exp_neg_multiple_bounds(c, n, prec)
        a, b = lo >> (prec - w), hi >> (prec - w)
        if a == b:
            return a
        prec += 64


def exp_neg_multiple_resolve(c: Fraction, n: int, word: int, w: int,
                             gen: np.random.Generator) -> bool:
    """Whether ``W + R < 2^w e^{-n·c}`` for ``W = word = ⌊2^w e^{-n·c}⌋`` and a fresh uniform R.

    R in [0, 1) is drawn 64 bits at a time and compared with ever tighter rigorous brackets;
    the number is irrational for ``n·c > 0`` so the loop ends with probability 1.
    """
    r, bits = 0, 0
    while True:
        r = (r << 64) | int(gen.integers(0, 2**64, dtype=np.uint64))
        bits += 64
        lo, hi = exp_neg_multiple_bounds(c, n, w + bits)
        m = (word << bits) | r  # W + R lies in [m, m + 1) / 2^bits
        if m + 1 <= lo:
            return True
        if m >= hi:
            return False


def half_logistic_bounds(x: Fraction, prec: int) -> tuple[int, int]:
    """Integers ``lo <= 2^prec · e^{-x}/(1 + e^{-x}) <= hi`` for rational ``x >= 0``.

    ``E/(1+E)`` increases with ``E``, so the bracket of ``E = e^{-x}`` maps to one of the ratio;
    used for the independent binary digits of a truncated geometric law.
    """
    p = prec + 8
    lo, hi = exp_neg_bounds(x, p)
    one = 1 << p
    return (lo << prec) // (one + lo), -((-(hi << prec)) // (one + hi))


@functools.lru_cache(maxsize=4096)
def half_logistic_floor(x: Fraction, w: int = WORD_BITS) -> int:
    """``⌊2^w e^{-x}/(1 + e^{-x})⌋`` exactly (rational ``x > 0``: the value is irrational)."""
    prec = w + 64
    while True:
        lo, hi = half_logistic_bounds(x, prec)
        a, b = lo >> (prec - w), hi >> (prec - w)
        if a == b:
            return a
        prec += 64


def half_logistic_resolve(x: Fraction, word: int, w: int, gen: np.random.Generator) -> bool:
    """Whether ``W + R < 2^w e^{-x}/(1 + e^{-x})`` for ``W = word`` equal to its floor."""
    r, bits = 0, 0
    while True:
        r = (r << 64) | int(gen.integers(0, 2**64, dtype=np.uint64))
        bits += 64
        lo, hi = half_logistic_bounds(x, w + bits)
        m = (word << bits) | r
        if m + 1 <= lo:
            return True
        if m >= hi:
            return False
