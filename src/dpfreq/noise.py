"""Exact integer noise: Bernoulli(exp(-γ)), geometric, discrete Laplace, randomized response.

After Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential Privacy" (NeurIPS
2020), Algorithm 1 (Bernoulli(exp(-γ))) and Algorithm 2 (discrete Laplace). Given ideal uniform
integers, every sampler's output law *is* the stated pmf: no floating point touches a sampled
value. The parameter γ (so that α = e^{-γ}) is an exact
:class:`fractions.Fraction` ``s/t``; :func:`epsilon_to_fraction` rounds a float ε **down** to the
largest fraction with denominator ≤ 2^32, so the noise is never smaller than asked for.

Calibration (ε and sensitivity → γ, error bounds) is separate from sampling:
``discrete_laplace_gamma`` → ``sample_discrete_laplace``; ``discrete_laplace_tail`` and
``discrete_laplace_tail_bound`` give the error statements.

Vectorization: each rejection loop runs as rounds over the still-pending subset of an
array, drawing bounded integers with ``Generator.integers`` (unbiased) for the whole subset at
once. Within one round every pending entry of the Bernoulli(exp(-γ)) loop shares the same K, so a
round is a single ``integers(0, t·K)`` call.

Speed: the geometric and discrete-Laplace samplers invert the exact cdf on one 64-bit word per
draw, against integer thresholds ``⌊2^63 Pr[X > k]⌋`` computed with rigorous integer bounds on
e^{-x} (:func:`dpfreq._exact_sampling.table_sample`, whose Notes give the exactness
argument). A word landing exactly on a threshold (probability about 2^-63 per threshold) is
settled by drawing further bits, and the far tail is handed to Algorithm 2 of Canonne, Kamath &
Steinke, so the law stays exactly the pmf.

Notes
-----
Why the discrete Laplace is ε-DP: with ``Pr[Z = z] ∝ α^{|z|}`` and α = e^{-γ}, shifting the
centre by at most Δ changes every probability by a factor at most e^{γΔ}; with γ ≤ ε/Δ that is
≤ e^ε (Ghosh, Roughgarden & Sundararajan 2009).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Hashable
from fractions import Fraction
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from dpfreq._docstrings import fill_doc
from dpfreq._exact_sampling import table_sample
from dpfreq._noise_laws import (
    discrete_gaussian_variance,
    discrete_laplace_cdf,
    discrete_laplace_mean_abs,
    discrete_laplace_pmf,
    discrete_laplace_tail,
    discrete_laplace_tail_bound,
    discrete_laplace_variance,
    gaussian_sigma2,
    geometric_cdf,
    geometric_pmf,
    geometric_variance,
    randomized_response_keep_probability,
)
from dpfreq._validate import check_int, check_positive_float, message
from dpfreq.errors import ParameterError, public_errors
from dpfreq.rng import RNGLike, resolve_rng

__all__ = [
    "MAX_DENOMINATOR",
    "discrete_gaussian_variance",
    "discrete_laplace_cdf",
    "discrete_laplace_gamma",
    "discrete_laplace_mean_abs",
    "discrete_laplace_pmf",
    "discrete_laplace_tail",
    "discrete_laplace_tail_bound",
    "discrete_laplace_variance",
    "epsilon_to_fraction",
    "gaussian_sigma2",
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


@public_errors("epsilon_to_fraction")
def epsilon_to_fraction(
    epsilon: float | Fraction, *, max_denominator: int = MAX_DENOMINATOR
) -> Fraction:
    """Round ε down to the largest fraction with denominator ≤ ``max_denominator``.

    The float is taken at its exact binary value. The result never exceeds ε and is within
    ``1/max_denominator`` of it, so the noise calibrated from it is at least as large as asked.

    Parameters
    ----------
    epsilon : float or Fraction
        ε > 0.
    max_denominator : int, keyword-only, default 2^32
        Largest denominator allowed.

    Returns
    -------
    fractions.Fraction
        The largest fraction ``p/q <= ε`` with ``q <= max_denominator``.

    Raises
    ------
    ParameterError
        If ε is not a finite number > 0, or so small that it rounds down to 0.

    Examples
    --------
    >>> epsilon_to_fraction(0.5), epsilon_to_fraction(0.1)
    (Fraction(1, 2), Fraction(1, 10))
    >>> epsilon_to_fraction(math.pi, max_denominator=1000)
    Fraction(2818, 897)
    """
    try:
        return _epsilon_fraction(cast(Hashable, type(epsilon)), epsilon, max_denominator)
    except TypeError:  # unhashable input: refused below with the usual message
        return _epsilon_fraction.__wrapped__(type(epsilon), epsilon, max_denominator)


# Cached: planners and error simulations convert the same few ε values many thousands of times
# (Fractions are immutable; the type is part of the key so that True is not taken for 1.0;
# typeshed does not declare type objects Hashable, hence the cast at the call).
@functools.lru_cache(maxsize=4096)
def _epsilon_fraction(_kind: Hashable, epsilon: Any, max_denominator: int) -> Fraction:
    if isinstance(epsilon, Fraction):
        x = epsilon
        if x <= 0:
            raise ParameterError(message("epsilon", "> 0", epsilon))
    else:
        x = Fraction(check_positive_float(epsilon, "epsilon"))
    out = _floor_fraction(x, max_denominator)
    if out <= 0:
        raise ParameterError(
            message("epsilon", f">= 1/{max_denominator}", epsilon)
        )
    return out


@public_errors("discrete_laplace_gamma")
def discrete_laplace_gamma(epsilon: float | Fraction, sensitivity: int = 1) -> Fraction:
    """γ = ε/Δ as an exact fraction (rounded down), for α = e^{-γ} discrete Laplace noise.

    Adding ``DLap(e^{-γ})`` independently to each coordinate of an integer query with ℓ1
    sensitivity Δ is ε-DP. The result has denominator ≤ 2^32.

    Parameters
    ----------
    epsilon : float or Fraction
        ε > 0 (rounded down by :func:`epsilon_to_fraction`).
    sensitivity : int, default 1
        ℓ1 sensitivity Δ >= 1 of the integer query.

    Returns
    -------
    fractions.Fraction
        The exact γ used for the noise, at most ε/Δ.

    Raises
    ------
    ParameterError
        If ε is not a finite number > 0 (or rounds to 0), or Δ is not an integer >= 1.

    Examples
    --------
    >>> discrete_laplace_gamma(1.0, sensitivity=2)
    Fraction(1, 2)
    >>> z = sample_discrete_laplace(discrete_laplace_gamma(0.5), 4, rng=0)
    >>> z.shape
    (4,)
    """
    delta = check_int(sensitivity, "sensitivity", minimum=1)
    return epsilon_to_fraction(epsilon_to_fraction(epsilon) / delta)


def _as_gamma(gamma: Any, *, allow_zero: bool = False) -> Fraction:
    if isinstance(gamma, Fraction | int) and not isinstance(gamma, bool):
        g = Fraction(gamma)
        if g < 0 or (g == 0 and not allow_zero):
            rule = "a fraction >= 0" if allow_zero else "a fraction > 0"
            raise ParameterError(message("gamma", rule, gamma))
        return _floor_fraction(g, MAX_DENOMINATOR) if g > 0 else g
    if allow_zero and isinstance(gamma, float) and gamma == 0.0:
        return Fraction(0)
    return epsilon_to_fraction(check_positive_float(gamma, "gamma"))


def _sample_chunked(gamma: Fraction, size: Shape, gen: np.random.Generator, *, signed: bool):
    shape = (size,) if isinstance(size, int | np.integer) else tuple(size)
    total = math.prod(shape)
    out = np.empty(total, dtype=np.int64)
    for start in range(0, total, _CHUNK):
        stop = min(total, start + _CHUNK)
        out[start:stop] = table_sample(gamma, stop - start, gen, signed=signed)
    return out.reshape(shape)


def _sampler_inputs(
    gamma: Any, size: Any, rng: RNGLike, *, allow_zero: bool = False
) -> tuple[Fraction, Shape, np.random.Generator]:
    """γ, the output shape and the generator of the public sampler called, validated in that
    order."""
    g = _as_gamma(gamma, allow_zero=allow_zero)
    shape: Shape
    if isinstance(size, tuple):
        for dim in size:
            check_int(dim, "size", minimum=0)
        shape = size
    else:
        shape = check_int(size, "size", minimum=0)
    return g, shape, resolve_rng(rng).generator


# ----------------------------------------------------------------------------------------------
# public samplers


# The numpydoc blocks the exact samplers share (see dpfreq._docstrings).
_SIZE_RNG = """size : int or tuple of int
    Output shape.
rng : None, int or numpy.random.Generator, keyword-only
    Random source (None: the secure default of :mod:`dpfreq.rng`)."""
_SAMPLER_DOC = "\n".join([
    "Parameters", "----------", "gamma : Fraction, int or float",
    "    γ > 0 (a float is rounded down to a fraction with denominator <= 2^32).", _SIZE_RNG, "",
    "Returns", "-------", "numpy.ndarray of int64", "    Independent draws, of shape ``size``.", "",
    "Raises", "------", "ParameterError",
    "    If γ is not > 0, ``size`` is not a non-negative int (or tuple of them), or ``rng`` is",
    "    invalid."])


@fill_doc(size_rng=_SIZE_RNG)
@public_errors("sample_bernoulli_exp")
def sample_bernoulli_exp(
    gamma: Fraction | int | float, size: Shape, *, rng: RNGLike = None
) -> NDArray[np.bool_]:
    """Exact Bernoulli(exp(-γ)) draws for a rational γ >= 0.

    Parameters
    ----------
    gamma : Fraction, int or float
        γ >= 0; a float is rounded down to a fraction with denominator <= 2^32.
    [[size_rng]]

    Returns
    -------
    numpy.ndarray of bool
        True with probability exactly e^{-γ}, independently per entry.

    Raises
    ------
    ParameterError
        If γ < 0, ``size`` is not a non-negative int (or tuple of them), or ``rng`` is invalid.

    Notes
    -----
    Returned as ``G >= 1`` for an exact geometric draw G with parameter α = e^{-γ}
    (:func:`sample_geometric`): ``Pr[G >= 1] = α`` exactly. This is faster than the coin loop of
    Algorithm 1 of Canonne, Kamath & Steinke (2020) (kept as ``bernoulli_exp``, which the
    rejection sampler of the far tail uses) and just as exact.

    Examples
    --------
    >>> sample_bernoulli_exp(0, 3, rng=0)
    array([ True,  True,  True])
    >>> b = sample_bernoulli_exp(math.log(2), 10_000, rng=0)  # Pr[True] = 1/2
    >>> bool(abs(b.mean() - 0.5) < 0.05)
    True
    """
    g, shape, gen = _sampler_inputs(gamma, size, rng, allow_zero=True)
    if g == 0:
        return np.ones(shape, dtype=np.bool_)
    return _sample_chunked(g, shape, gen, signed=False) > 0


@fill_doc(sampler=_SAMPLER_DOC)
@public_errors("sample_geometric")
def sample_geometric(
    gamma: Fraction | int | float, size: Shape, *, rng: RNGLike = None
) -> NDArray[np.int64]:
    """Exact geometric draws on {0, 1, ...}: ``Pr[G = k] = (1-α) α^k`` with α = e^{-γ}.

    Same exact inverse-cdf method as :func:`sample_discrete_laplace` (thresholds
    ``⌊2^63 α^{k+1}⌋``), without the sign.

    [[sampler]]

    Examples
    --------
    >>> g = sample_geometric(math.log(2), 10_000, rng=0)  # α = 1/2: mean α/(1-α) = 1
    >>> bool(g.min() >= 0), bool(abs(g.mean() - 1) < 0.1)
    (True, True)
    """
    g, shape, gen = _sampler_inputs(gamma, size, rng)
    return _sample_chunked(g, shape, gen, signed=False)


@fill_doc(sampler=_SAMPLER_DOC)
@public_errors("sample_discrete_laplace")
def sample_discrete_laplace(
    gamma: Fraction | int | float, size: Shape, *, rng: RNGLike = None
) -> NDArray[np.int64]:
    """Exact discrete Laplace draws: ``Pr[Z = z] = (1-α)/(1+α) α^{|z|}`` with α = e^{-γ}.

    Use :func:`discrete_laplace_gamma` to obtain γ from ε and the ℓ1 sensitivity.

    [[sampler]]

    Notes
    -----
    Exact: one 64-bit word per draw is compared with integer thresholds ``⌊2^63 Pr[|Z| > k]⌋``
    computed with rigorous bounds on e^{-x}; ties are settled with further random bits and the
    far tail with the rejection sampler of Canonne, Kamath & Steinke (2020), Algorithm 2 (see
    ``dpfreq._exact_sampling.table_sample`` for the argument). Given ideal uniform words the
    output law is exactly the pmf; about 30 M draws/s on the reference machine
    (``benchmarks/bench_noise.py``).

    Examples
    --------
    >>> z = sample_discrete_laplace(Fraction(1), size=(2, 3), rng=0)
    >>> z.shape, z.dtype
    ((2, 3), dtype('int64'))
    >>> z = sample_discrete_laplace(1.0, 100_000, rng=1)  # variance 2α/(1-α)^2 ≈ 1.84
    >>> bool(abs(z.mean()) < 0.1), bool(abs(z.var() - discrete_laplace_variance(1.0)) < 0.1)
    (True, True)
    """
    g, shape, gen = _sampler_inputs(gamma, size, rng)
    return _sample_chunked(g, shape, gen, signed=True)


@public_errors("randomized_response")
def randomized_response(
    bits: Any, gamma: Fraction | int | float, *, rng: RNGLike = None
) -> NDArray[np.int8]:
    """Exact randomized response: keep each bit with probability ``1/(1+e^{-γ})``, else flip.

    With γ = ε this is ε-local-DP for one bit: the output probabilities for inputs 0 and 1
    differ by the factor ``(1/(1+α)) / (α/(1+α)) = e^γ``.

    Parameters
    ----------
    bits : array_like of 0/1 (int or bool)
        The true bits.
    gamma : Fraction, int or float
        γ > 0 (a float is rounded down to a fraction with denominator <= 2^32).
    rng : None, int or numpy.random.Generator, keyword-only
        Random source (None: the secure default of :mod:`dpfreq.rng`).

    Returns
    -------
    numpy.ndarray of int8
        The reported bits, of the shape of ``bits``.

    Raises
    ------
    ParameterError
        If ``bits`` holds anything but 0 and 1, γ is not > 0, or ``rng`` is invalid.

    Notes
    -----
    A textbook sampler gets the keep-probability ``1/(1+α)`` from a loop of fair coins and
    Bernoulli(α) draws. Here each bit is kept iff an exact geometric draw G with parameter α
    (:func:`sample_geometric`) is even: ``Pr[G even] = Σ_k (1-α) α^{2k} = (1-α)/(1-α²) =
    1/(1+α)``, exactly the same law, one 64-bit word per bit instead of several rounds.

    Examples
    --------
    >>> out = randomized_response(np.ones(10_000, dtype=np.int8), math.log(3), rng=0)
    >>> out.dtype, bool(abs(out.mean() - 0.75) < 0.05)  # kept with probability 3/4
    (dtype('int8'), True)
    """
    g = _as_gamma(gamma)
    arr = np.asarray(bits)
    if arr.dtype == np.bool_:
        arr = arr.astype(np.int8)
    if arr.dtype.kind not in "iu" or (arr.size and not np.isin(arr, (0, 1)).all()):
        raise ParameterError(message("bits", "an array of 0/1", bits))
    gen = resolve_rng(rng).generator
    flat = arr.astype(np.int8).ravel()
    flip = (_sample_chunked(g, flat.size, gen, signed=False) & 1).astype(np.int8)
    return (flat ^ flip).reshape(arr.shape)
