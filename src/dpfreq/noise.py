"""Exact integer noise: Bernoulli(exp(-γ)), geometric, discrete Laplace, randomized response.

Spec: ``shared/spec/noise.md`` (Canonne, Kamath & Steinke, NeurIPS 2020, Algorithms 1–2).
Given ideal uniform integers, every sampler's output law *is* the stated pmf: no floating point
touches a sampled value. The parameter γ (so that α = e^{-γ}) is an exact
:class:`fractions.Fraction` ``s/t``; :func:`epsilon_to_fraction` rounds a float ε **down** to the
largest fraction with denominator ≤ 2^32, so the noise is never smaller than asked for.

Calibration (ε and sensitivity → γ, error bounds) is separate from sampling (STYLE.md rule 10):
``discrete_laplace_gamma`` → ``sample_discrete_laplace``; ``discrete_laplace_tail`` and
``discrete_laplace_tail_bound`` give the error statements.

Vectorization (spec §6): each rejection loop runs as rounds over the still-pending subset of an
array, drawing bounded integers with ``Generator.integers`` (unbiased) for the whole subset at
once. Within one round every pending entry of the Bernoulli(exp(-γ)) loop shares the same K, so a
round is a single ``integers(0, t·K)`` call.

Speed: the geometric and discrete-Laplace samplers invert the exact cdf on one 64-bit word per
draw, against integer thresholds ``⌊2^63 Pr[X > k]⌋`` computed with rigorous integer bounds on
e^{-x} (:func:`_table_sample`, whose Notes give the exactness argument). A word landing exactly on
a threshold (probability about 2^-63 per threshold) is settled by drawing further bits, and the
far tail is handed to the spec §4 algorithm, so the law stays exactly the pmf.

Notes
-----
Why the discrete Laplace is ε-DP: with ``Pr[Z = z] ∝ α^{|z|}`` and α = e^{-γ}, shifting the
centre by at most Δ changes every probability by a factor at most e^{γΔ}; with γ ≤ ε/Δ that is
≤ e^ε (Ghosh, Roughgarden & Sundararajan 2009).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._exact_inverse import WORD_BITS, inverse_table
from dpfreq._validate import check_int, check_open_unit, check_positive_float, message
from dpfreq.errors import ParameterError
from dpfreq.rng import RNGLike, resolve_rng

__all__ = [
    "MAX_DENOMINATOR",
    "discrete_laplace_cdf",
    "discrete_laplace_gamma",
    "discrete_laplace_pmf",
    "discrete_laplace_tail",
    "discrete_laplace_tail_bound",
    "discrete_laplace_variance",
    "epsilon_to_fraction",
    "geometric_cdf",
    "geometric_pmf",
    "geometric_variance",
    "randomized_response",
    "randomized_response_keep_probability",
    "sample_bernoulli_exp",
    "sample_discrete_laplace",
    "sample_geometric",
]

MAX_DENOMINATOR = 2**32
_CHUNK = 1 << 18  # entries per vectorized chunk: temporaries stay in cache (measured fastest)
_INT64_SAFE = 1 << 62

Shape = int | tuple[int, ...]


# ----------------------------------------------------------------------------------------------
# ε as an exact fraction


def _floor_fraction(x: Fraction, max_denominator: int) -> Fraction:
    """The largest fraction p/q <= x with q <= max_denominator (x >= 0).

    Runs the continued-fraction expansion of x as :meth:`fractions.Fraction.limit_denominator`
    does; the last convergent and the best semiconvergent within the bound are neighbours in the
    Farey sequence of that order and bracket x, so the one on the lower side is the answer.
    """
    if x.denominator <= max_denominator:
        return x
    p0, q0, p1, q1 = 0, 1, 1, 0
    n, d = x.numerator, x.denominator
    while True:
        a = n // d
        q2 = q0 + a * q1
        if q2 > max_denominator:
            break
        p0, q0, p1, q1 = p1, q1, p0 + a * p1, q2
        n, d = d, n - a * d
    k = (max_denominator - q0) // q1
    semi = Fraction(p0 + k * p1, q0 + k * q1)
    conv = Fraction(p1, q1)
    return semi if semi <= x else conv


def epsilon_to_fraction(
    epsilon: float | Fraction, *, max_denominator: int = MAX_DENOMINATOR
) -> Fraction:
    """Round ε down to the largest fraction with denominator ≤ ``max_denominator``.

    The float is taken at its exact binary value. The result never exceeds ε and is within
    ``1/max_denominator`` of it, so the noise calibrated from it is at least as large as asked.

    Raises
    ------
    ParameterError
        If ε is not a finite number > 0, or so small that it rounds down to 0.
    """
    if isinstance(epsilon, Fraction):
        x = epsilon
        if x <= 0:
            raise ParameterError(message("epsilon", "epsilon_to_fraction", "> 0", epsilon))
    else:
        x = Fraction(check_positive_float(epsilon, "epsilon", "epsilon_to_fraction"))
    out = _floor_fraction(x, max_denominator)
    if out <= 0:
        raise ParameterError(
            message("epsilon", "epsilon_to_fraction", f">= 1/{max_denominator}", epsilon)
        )
    return out


def discrete_laplace_gamma(epsilon: float | Fraction, sensitivity: int = 1) -> Fraction:
    """γ = ε/Δ as an exact fraction (rounded down), for α = e^{-γ} discrete Laplace noise.

    Adding ``DLap(e^{-γ})`` independently to each coordinate of an integer query with ℓ1
    sensitivity Δ is ε-DP. The result has denominator ≤ 2^32.
    """
    delta = check_int(sensitivity, "sensitivity", "discrete_laplace_gamma", minimum=1)
    return epsilon_to_fraction(epsilon_to_fraction(epsilon) / delta)


def _as_gamma(gamma: Any, func: str, *, allow_zero: bool = False) -> Fraction:
    if isinstance(gamma, Fraction | int) and not isinstance(gamma, bool):
        g = Fraction(gamma)
        if g < 0 or (g == 0 and not allow_zero):
            rule = "a fraction >= 0" if allow_zero else "a fraction > 0"
            raise ParameterError(message("gamma", func, rule, gamma))
        return _floor_fraction(g, MAX_DENOMINATOR) if g > 0 else g
    if allow_zero and isinstance(gamma, float) and gamma == 0.0:
        return Fraction(0)
    return epsilon_to_fraction(check_positive_float(gamma, "gamma", func))


# ----------------------------------------------------------------------------------------------
# vectorized exact primitives (internal: generators are already resolved)


def _bernoulli_exp_le1(num: NDArray[np.int64], den: int, gen: np.random.Generator) -> NDArray[Any]:
    """Bernoulli(exp(-num/den)) for each entry with 0 <= num <= den (spec §3, γ <= 1)."""
    out = np.empty(num.shape[0], dtype=np.bool_)
    alive = np.arange(num.shape[0])
    nums = num
    k = 1
    while alive.size:
        if den * k > _INT64_SAFE:  # reached with probability < 1/(2^30)!: exact big-int path
            for i in alive:
                out[i] = _bernoulli_exp_le1_scalar(int(num[i]), den, k, gen)
            break
        a = gen.integers(0, den * k, size=alive.size) < nums
        stopped = alive[~a]
        out[stopped] = k % 2 == 1
        alive = alive[a]
        nums = nums[a]
        k += 1
    return out


def _uniform_below(bound: int, gen: np.random.Generator) -> int:
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


def _bernoulli_exp_le1_scalar(num: int, den: int, k: int, gen: np.random.Generator) -> bool:
    while True:
        if _uniform_below(den * k, gen) >= num:
            return k % 2 == 1
        k += 1


def _bernoulli_exp_minus_one(n: int, gen: np.random.Generator) -> NDArray[Any]:
    """n independent Bernoulli(e^{-1}) draws."""
    return _bernoulli_exp_le1(np.ones(n, dtype=np.int64), 1, gen)


def _bernoulli_exp(gamma: Fraction, n: int, gen: np.random.Generator) -> NDArray[Any]:
    """n independent Bernoulli(exp(-γ)) draws for any rational γ >= 0 (spec §3, γ > 1 case)."""
    whole = gamma.numerator // gamma.denominator
    rest = gamma - whole
    out = np.ones(n, dtype=np.bool_)
    alive = np.arange(n)
    for _ in range(whole):
        if not alive.size:
            break
        ok = _bernoulli_exp_minus_one(alive.size, gen)
        out[alive[~ok]] = False
        alive = alive[ok]
    if alive.size and rest > 0:
        ok = _bernoulli_exp_le1(
            np.full(alive.size, rest.numerator, dtype=np.int64), rest.denominator, gen
        )
        out[alive[~ok]] = False
    return out


def _geometric_exp_minus_one(n: int, gen: np.random.Generator) -> NDArray[np.int64]:
    """n draws of V ~ Geometric(e^{-1}) on {0, 1, ...}: count successes of Bernoulli(e^{-1})."""
    v = np.zeros(n, dtype=np.int64)
    alive = np.arange(n)
    while alive.size:
        ok = _bernoulli_exp_minus_one(alive.size, gen)
        alive = alive[ok]
        v[alive] += 1
    return v


def _discrete_laplace_chunk(
    s: int, t: int, n: int, gen: np.random.Generator, *, signed: bool
) -> NDArray[np.int64]:
    """Spec §4 for n outputs with γ = s/t; ``signed=False`` gives the geometric Y."""
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
            d = _bernoulli_exp_le1(u, t, gen)
            idx = pending[d]
            retry = pending[~d]
            u = u[d]
        v = _geometric_exp_minus_one(idx.size, gen)
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


def _table_sample(
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
    No rounding decides an output: the float logarithm in ``InverseTable.count_above`` is only a
    guess that integer comparisons verify (and fix by binary search). Since the D_k are strictly
    decreasing, at most one k is open per word.

    The table stops at K thresholds. The event {X >= K} is decided exactly as above, and on it X
    is replaced by ``K + G'`` with G' an independent exact Geometric(α) draw (spec §4 sampler).
    This keeps the law: for K >= 1 the shape ``Pr[X = K + j] = S(K-1)(1-α)α^j`` is memoryless in
    both cases, and the replacement does not look at W. For the discrete Laplace the 64th bit of
    the word is an independent fair sign (the sign of 0 is irrelevant, so no rejection is needed).
    Given ideal uniform words the output law is therefore exactly the pmf.
    """
    tab = inverse_table(gamma, signed, w)
    if tab.size == 0:  # only for tiny test word sizes: the §4 algorithm alone
        return _discrete_laplace_chunk(gamma.numerator, gamma.denominator, n, gen, signed=signed)
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
        m[idx] += _discrete_laplace_chunk(
            gamma.numerator, gamma.denominator, idx.size, gen, signed=False
        )
    if signed:
        neg = (raw & np.uint64(1)).astype(np.bool_)
        np.negative(m, out=m, where=neg)
    return m


def _sample_chunked(gamma: Fraction, size: Shape, gen: np.random.Generator, *, signed: bool):
    shape = (size,) if isinstance(size, int | np.integer) else tuple(size)
    total = math.prod(shape)
    out = np.empty(total, dtype=np.int64)
    for start in range(0, total, _CHUNK):
        stop = min(total, start + _CHUNK)
        out[start:stop] = _table_sample(gamma, stop - start, gen, signed=signed)
    return out.reshape(shape)


def _check_size(size: Any, func: str) -> Shape:
    if isinstance(size, tuple):
        for dim in size:
            check_int(dim, "size", func, minimum=0)
        return size
    return check_int(size, "size", func, minimum=0)


# ----------------------------------------------------------------------------------------------
# public samplers


def sample_bernoulli_exp(
    gamma: Fraction | int | float, size: Shape, *, rng: RNGLike = None
) -> NDArray[np.bool_]:
    """Exact Bernoulli(exp(-γ)) draws for a rational γ >= 0 (spec §3).

    Parameters
    ----------
    gamma : Fraction, int or float
        γ >= 0; a float is rounded down to a fraction with denominator <= 2^32.
    size : int or tuple of int
        Output shape.
    rng : None, int or numpy.random.Generator, keyword-only
        Random source (None: the secure default of :mod:`dpfreq.rng`).

    Notes
    -----
    Returned as ``G >= 1`` for an exact geometric draw G with parameter α = e^{-γ}
    (:func:`sample_geometric`): ``Pr[G >= 1] = α`` exactly. This is faster than the spec §3 loop
    (kept as ``_bernoulli_exp``, which the spec §4 tail path uses) and just as exact.
    """
    g = _as_gamma(gamma, "sample_bernoulli_exp", allow_zero=True)
    shape = _check_size(size, "sample_bernoulli_exp")
    gen = resolve_rng(rng, "sample_bernoulli_exp").generator
    if g == 0:
        return np.ones(shape, dtype=np.bool_)
    return _sample_chunked(g, shape, gen, signed=False) > 0


def sample_geometric(
    gamma: Fraction | int | float, size: Shape, *, rng: RNGLike = None
) -> NDArray[np.int64]:
    """Exact geometric draws on {0, 1, ...}: ``Pr[G = k] = (1-α) α^k`` with α = e^{-γ}.

    Same exact inverse-cdf method as :func:`sample_discrete_laplace` (thresholds
    ``⌊2^63 α^{k+1}⌋``), without the sign. Parameters as there.
    """
    g = _as_gamma(gamma, "sample_geometric")
    shape = _check_size(size, "sample_geometric")
    gen = resolve_rng(rng, "sample_geometric").generator
    return _sample_chunked(g, shape, gen, signed=False)


def sample_discrete_laplace(
    gamma: Fraction | int | float, size: Shape, *, rng: RNGLike = None
) -> NDArray[np.int64]:
    """Exact discrete Laplace draws: ``Pr[Z = z] = (1-α)/(1+α) α^{|z|}`` with α = e^{-γ}.

    Use :func:`discrete_laplace_gamma` to obtain γ from ε and the ℓ1 sensitivity.

    Parameters
    ----------
    gamma : Fraction, int or float
        γ > 0 (a float is rounded down to a fraction with denominator <= 2^32).
    size : int or tuple of int
        Output shape.
    rng : None, int or numpy.random.Generator, keyword-only
        Random source (None: the secure default of :mod:`dpfreq.rng`).

    Returns
    -------
    numpy.ndarray of int64

    Notes
    -----
    Exact: one 64-bit word per draw is compared with integer thresholds ``⌊2^63 Pr[|Z| > k]⌋``
    computed with rigorous bounds on e^{-x}; ties are settled with further random bits and the
    far tail with the spec §4 rejection algorithm (see ``_table_sample`` for the argument). Given
    ideal uniform words the output law is exactly the pmf; about 30 M draws/s on the reference
    machine (``benchmarks/bench_noise.py``).
    """
    g = _as_gamma(gamma, "sample_discrete_laplace")
    shape = _check_size(size, "sample_discrete_laplace")
    gen = resolve_rng(rng, "sample_discrete_laplace").generator
    return _sample_chunked(g, shape, gen, signed=True)


def randomized_response(
    bits: Any, gamma: Fraction | int | float, *, rng: RNGLike = None
) -> NDArray[np.int8]:
    """Exact randomized response: keep each bit with probability ``1/(1+e^{-γ})``, else flip.

    With γ = ε this is ε-local-DP for one bit: the output probabilities for inputs 0 and 1
    differ by the factor ``(1/(1+α)) / (α/(1+α)) = e^γ``.

    Notes
    -----
    Spec §5 gets the keep-probability ``1/(1+α)`` from a loop of fair coins and
    Bernoulli(α) draws. Here each bit is kept iff an exact geometric draw G with parameter α
    (:func:`sample_geometric`) is even: ``Pr[G even] = Σ_k (1-α) α^{2k} = (1-α)/(1-α²) =
    1/(1+α)``, exactly the same law, one 64-bit word per bit instead of several rounds.
    """
    g = _as_gamma(gamma, "randomized_response")
    arr = np.asarray(bits)
    if arr.dtype == np.bool_:
        arr = arr.astype(np.int8)
    if arr.dtype.kind not in "iu" or (arr.size and not np.isin(arr, (0, 1)).all()):
        raise ParameterError(message("bits", "randomized_response", "an array of 0/1", bits))
    gen = resolve_rng(rng, "randomized_response").generator
    flat = arr.astype(np.int8).ravel()
    flip = (_sample_chunked(g, flat.size, gen, signed=False) & 1).astype(np.int8)
    return (flat ^ flip).reshape(arr.shape)


# ----------------------------------------------------------------------------------------------
# pmfs, variances and tails (floats: for tests and error statements, never for sampling)


def _gamma_value(gamma: Any, func: str) -> float:
    """γ as a float for the analytic helpers, validated (a finite number > 0)."""
    if isinstance(gamma, Fraction):
        if gamma <= 0:
            raise ParameterError(message("gamma", func, "a finite number > 0", gamma))
        return float(gamma)
    return check_positive_float(gamma, "gamma", func)


def _alpha(gamma: Fraction | float, func: str = "dpfreq.noise") -> float:
    return math.exp(-_gamma_value(gamma, func))


def discrete_laplace_pmf(z: Any, gamma: Fraction | float) -> NDArray[np.float64]:
    """``Pr[Z = z] = (1-α)/(1+α) α^{|z|}``."""
    g = _gamma_value(gamma, "discrete_laplace_pmf")
    a = math.exp(-g)
    zz = np.abs(np.asarray(z, dtype=np.float64))
    return (1 - a) / (1 + a) * np.exp(-g * zz)


def discrete_laplace_cdf(z: Any, gamma: Fraction | float) -> NDArray[np.float64]:
    """``Pr[Z <= z]`` for integer z: ``α^{|z|}/(1+α)`` for z < 0, ``1 - α^{z+1}/(1+α)`` else."""
    g = _gamma_value(gamma, "discrete_laplace_cdf")
    a = math.exp(-g)
    zz = np.floor(np.asarray(z, dtype=np.float64))
    lower = np.exp(g * np.minimum(zz, 0.0)) / (1 + a)
    upper = 1 - np.exp(-g * (np.maximum(zz, 0.0) + 1)) / (1 + a)
    return np.where(zz < 0, lower, upper)


def discrete_laplace_variance(gamma: Fraction | float) -> float:
    """``Var[Z] = 2α/(1-α)^2``."""
    g = _gamma_value(gamma, "discrete_laplace_variance")
    a = math.exp(-g)
    return 2 * a / math.expm1(-g) ** 2


def discrete_laplace_tail(bound: Any, gamma: Fraction | float) -> NDArray[np.float64]:
    """``Pr[|Z| > B] = 2 α^{B+1} / (1+α)`` for integer B >= 0 (1 for B < 0)."""
    g = _gamma_value(gamma, "discrete_laplace_tail")
    a = math.exp(-g)
    b = np.floor(np.asarray(bound, dtype=np.float64))
    return np.where(b < 0, 1.0, 2 * np.exp(-g * (np.maximum(b, 0.0) + 1)) / (1 + a))


def discrete_laplace_tail_bound(eta: float, gamma: Fraction | float) -> int:
    """The smallest integer B >= 0 with ``Pr[|Z| > B] <= η``."""
    eta = check_open_unit(eta, "eta", "discrete_laplace_tail_bound")
    g = _gamma_value(gamma, "discrete_laplace_tail_bound")
    a = math.exp(-g)
    # 2 α^{B+1}/(1+α) <= η  <=>  B + 1 >= ln(2/(η(1+α))) / γ
    b = max(0, math.ceil(math.log(2 / (eta * (1 + a))) / g - 1))
    while b > 0 and float(discrete_laplace_tail(b - 1, gamma)) <= eta:
        b -= 1
    while float(discrete_laplace_tail(b, gamma)) > eta:
        b += 1
    return b


def geometric_pmf(k: Any, gamma: Fraction | float) -> NDArray[np.float64]:
    """``Pr[G = k] = (1-α) α^k`` for k >= 0 (0 for k < 0)."""
    g = _gamma_value(gamma, "geometric_pmf")
    kk = np.asarray(k, dtype=np.float64)
    return np.where(kk >= 0, -math.expm1(-g) * np.exp(-g * np.maximum(kk, 0.0)), 0.0)


def geometric_cdf(k: Any, gamma: Fraction | float) -> NDArray[np.float64]:
    """``Pr[G <= k] = 1 - α^{k+1}`` for k >= 0 (0 for k < 0)."""
    g = _gamma_value(gamma, "geometric_cdf")
    kk = np.floor(np.asarray(k, dtype=np.float64))
    return np.where(kk >= 0, -np.expm1(-g * (np.maximum(kk, 0.0) + 1)), 0.0)


def geometric_variance(gamma: Fraction | float) -> float:
    """``Var[G] = α/(1-α)^2``."""
    g = _gamma_value(gamma, "geometric_variance")
    return math.exp(-g) / math.expm1(-g) ** 2


def randomized_response_keep_probability(gamma: Fraction | float) -> float:
    """``e^γ/(1+e^γ) = 1/(1+α)``."""
    return 1.0 / (1.0 + _alpha(gamma, "randomized_response_keep_probability"))
