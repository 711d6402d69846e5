"""The exact integer samplers behind :mod:`dpfreq.noise`: Bernoulli(exp(-γ)), geometric and
discrete Laplace draws on resolved generators (no validation here: :mod:`dpfreq.noise` checks
its inputs and calls these).

After Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential Privacy" (NeurIPS
2020): Algorithm 1 (:func:`bernoulli_exp`), Algorithm 2 (:func:`discrete_laplace_chunk`) and
the fast inverse-cdf sampler on 64-bit words (:func:`table_sample`). Given ideal uniform
integers, every function's output law *is* the stated pmf.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._exact_inverse import WORD_BITS, inverse_table

__all__ = [
    "bernoulli_exp",
    "bernoulli_exp_le1",
    "discrete_laplace_chunk",
    "geometric_exp_minus_one",
    "table_sample",
    "uniform_below",
]

INT64_SAFE = 1 << 62  # largest bound drawn with one int64 ``Generator.integers`` call



def bernoulli_exp_le1(num: NDArray[np.int64], den: int, gen: np.random.Generator) -> NDArray[Any]:
    """Bernoulli(exp(-num/den)) per entry, 0 <= num <= den (Canonne et al. Algorithm 1, γ <= 1)."""
    out = np.empty(num.shape[0], dtype=np.bool_)
    alive = np.arange(num.shape[0])
    nums = num
    k = 1
    while alive.size:
        if den * k > INT64_SAFE:  # reached with probability < 1/(2^30)!: exact big-int path
            for i in alive:
                out[i] = bernoulli_exp_le1_scalar(int(num[i]), den, k, gen)
            break
        a = gen.integers(0, den * k, size=alive.size) < nums
        stopped = alive[~a]
        out[stopped] = k % 2 == 1
        alive = alive[a]
        nums = nums[a]
        k += 1
    return out


def uniform_below(bound: int, gen: np.random.Generator) -> int:
    """Exact uniform integer in [0, bound) for arbitrary Python ints (rejection on 64-bit words)."""
    nbits = bound.bit_length()
    nwords = (nbits + 63) // 64
    while True:
        words = gen.integers(0, 2**64, size=nwords, dtype=np.uint64, endpoint=False)
        value = 0
        for w in words:
            value = (value << 64) | int(w)
        value >>= nwords * 64 - nbits
        if value < bound:
            return value


def bernoulli_exp_le1_scalar(num: int, den: int, k: int, gen: np.random.Generator) -> bool:
    while True:
        if uniform_below(den * k, gen) >= num:
            return k % 2 == 1
        k += 1


def bernoulli_exp_minus_one(n: int, gen: np.random.Generator) -> NDArray[Any]:
    """n independent Bernoulli(e^{-1}) draws."""
    return bernoulli_exp_le1(np.ones(n, dtype=np.int64), 1, gen)


def bernoulli_exp(gamma: Fraction, n: int, gen: np.random.Generator) -> NDArray[Any]:
    """n independent Bernoulli(exp(-γ)) draws for any rational γ >= 0 (Algorithm 1, γ > 1 case)."""
    whole = gamma.numerator // gamma.denominator
    rest = gamma - whole
    out = np.ones(n, dtype=np.bool_)
    alive = np.arange(n)
    for _ in range(whole):
        if not alive.size:
            break
        ok = bernoulli_exp_minus_one(alive.size, gen)
        out[alive[~ok]] = False
        alive = alive[ok]
    if alive.size and rest > 0:
        ok = bernoulli_exp_le1(
            np.full(alive.size, rest.numerator, dtype=np.int64), rest.denominator, gen
        )
        out[alive[~ok]] = False
    return out


def geometric_exp_minus_one(n: int, gen: np.random.Generator) -> NDArray[np.int64]:
    """n draws of V ~ Geometric(e^{-1}) on {0, 1, ...}: count successes of Bernoulli(e^{-1})."""
    v = np.zeros(n, dtype=np.int64)
    alive = np.arange(n)
    while alive.size:
        ok = bernoulli_exp_minus_one(alive.size, gen)
        alive = alive[ok]
        v[alive] += 1
    return v


def discrete_laplace_chunk(
    s: int, t: int, n: int, gen: np.random.Generator, *, signed: bool
) -> NDArray[np.int64]:
    """Algorithm 2 of Canonne et al. for n outputs with γ = s/t; ``signed=False``: the geometric Y.

    Rounds: U uniform on {0..t-1}, kept with probability exp(-U/t); V ~ Geometric(e^{-1});
    Y = ⌊(U + tV)/s⌋ ~ Geometric(e^{-s/t}); a fair sign, rejecting the negative zero.
    """
    out = np.empty(n, dtype=np.int64)
    pending = np.arange(n)
    while pending.size:
        m = pending.size
        if t == 1:
            u = np.zeros(m, dtype=np.int64)
            idx = pending
            retry = pending[:0]
        else:
            u = gen.integers(0, t, size=m, dtype=np.int64)
            d = bernoulli_exp_le1(u, t, gen)
            idx = pending[d]
            retry = pending[~d]
            u = u[d]
        v = geometric_exp_minus_one(idx.size, gen)
        y = (u + t * v) // s
        if signed:
            b = gen.integers(0, 2, size=idx.size, dtype=np.int64)
            reject = (b == 1) & (y == 0)
            acc = ~reject
            out[idx[acc]] = (1 - 2 * b[acc]) * y[acc]
            retry = np.concatenate((retry, idx[reject]))
        else:
            out[idx] = y
        pending = retry
    return out


# ----------------------------------------------------------------------------------------------
# fast exact inverse-CDF sampler on 64-bit words (the hot path of the geometric / discrete Laplace)


def table_sample(
    gamma: Fraction, n: int, gen: np.random.Generator, *, signed: bool, w: int = WORD_BITS
) -> NDArray[np.int64]:
    """n exact draws of the geometric (``signed=False``) or the discrete Laplace, by inversion.

    Notes
    -----
    Let X ~ law with survival function S(k) = Pr[X > k] (``α^{k+1}`` for the geometric,
    ``2α^{k+1}/(1+α)`` for |Z| of the discrete Laplace). With V uniform on (0, 1),
    ``X = #{k >= 0 : S(k) >= V}`` has exactly that law (inversion). Write ``2^w V = W + R`` with
    W uniform on {0, …, 2^w − 1} (one random word) and R uniform on [0, 1) independent of W, and
    let ``s_k = 2^w S(k)`` and ``D_k = ⌊s_k⌋``, computed exactly with rigorous integer bounds
    (:func:`dpfreq._exact_inverse.exp_neg_bounds`; s_k is transcendental, so never an integer). Then
    ``s_k >= W + R`` is *certain* when ``D_k > W`` and *impossible* when ``D_k < W``; only
    ``W = D_k`` leaves it open, and it is then settled by drawing R lazily, 64 bits at a time,
    against ever tighter bounds on s_k (``InverseTable.resolve`` in :mod:`dpfreq._exact_inverse`).
    No rounding decides an output: ``InverseTable.count_above`` uses floats only to pick a
    bucket or a first guess, and integer comparisons decide (by binary search where a bucket
    holds several thresholds or the guess is off). Since the D_k are strictly
    decreasing, at most one k is open per word.

    The table stops at K thresholds. The event {X >= K} is decided exactly as above, and on it X
    is replaced by ``K + G'`` with G' an independent exact Geometric(α) draw
    (:func:`discrete_laplace_chunk`).
    This keeps the law: for K >= 1 the shape ``Pr[X = K + j] = S(K-1)(1-α)α^j`` is memoryless in
    both cases, and the replacement does not look at W. For the discrete Laplace the 64th bit of
    the word is an independent fair sign (the sign of 0 is irrelevant, so no rejection is needed).
    Given ideal uniform words the output law is therefore exactly the pmf.
    """
    tab = inverse_table(gamma, signed, w)
    if tab.size == 0:  # only for tiny test word sizes: the rejection sampler alone
        return discrete_laplace_chunk(gamma.numerator, gamma.denominator, n, gen, signed=signed)
    raw = gen.integers(0, 1 << (w + 1), size=n, dtype=np.uint64)
    words = raw >> np.uint64(1)
    m = tab.count_above(words)
    open_ = tab.at[m] == words
    if open_.any():
        for i in np.flatnonzero(open_):
            k = int(m[i])
            if k < tab.size and tab.resolve(int(words[i]), k, gen):
                m[i] = k + 1
    tail = m == tab.size
    if tail.any():
        idx = np.flatnonzero(tail)
        m[idx] += discrete_laplace_chunk(
            gamma.numerator, gamma.denominator, idx.size, gen, signed=False
        )
    if signed:
        neg = (raw & np.uint64(1)).astype(np.bool_)
        np.negative(m, out=m, where=neg)
    return m
