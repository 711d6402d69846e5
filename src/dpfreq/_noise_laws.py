"""Laws of dpfreq's integer noise — the discrete Laplace, the geometric and the discrete Gaussian:
pmfs, cdfs, variances, tails and the Gaussian's rounded parameter (floats).

These are for tests and error statements, never for sampling: the samplers of :mod:`dpfreq.noise`
draw exactly from these laws without floating point. With α = e^{-γ}, the discrete Laplace
``DLap(α)`` has ``Pr[Z = z] = (1-α)/(1+α) α^{|z|}`` on the integers and the geometric
``Pr[G = k] = (1-α) α^k`` on {0, 1, ...}. Every function here is re-exported by
:mod:`dpfreq.noise`, which is where to import them from.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from dpfreq._docstrings import fill_doc
from dpfreq._validate import check_open_unit, check_positive_float, message
from dpfreq.errors import ParameterError, public_errors

__all__ = [
    "discrete_gaussian_variance",
    "discrete_laplace_cdf",
    "discrete_laplace_mean_abs",
    "discrete_laplace_pmf",
    "discrete_laplace_tail",
    "discrete_laplace_tail_bound",
    "discrete_laplace_variance",
    "gaussian_sigma2",
    "geometric_cdf",
    "geometric_pmf",
    "geometric_variance",
    "randomized_response_keep_probability",
]


# numpydoc blocks shared by the laws below (see dpfreq._docstrings)
_GAMMA = """gamma : Fraction or float
    γ > 0, with α = e^{-γ}."""
_RAISES = """Raises
------
ParameterError
    If γ is not a finite number > 0."""
_ARRAY_OUT = "Returns\n-------\nnumpy.ndarray of float64\n\n" + _RAISES
_FLOAT_OUT = "Returns\n-------\nfloat\n\n" + _RAISES


_F = TypeVar("_F", bound=Callable[..., Any])

#: The numpydoc sections of a number that depends on γ alone (the ``[[sections]]`` marker).
_OF_GAMMA = fill_doc(sections=f"Parameters\n----------\n{_GAMMA}\n\n{_FLOAT_OUT}")


def _at_points(points: str) -> Callable[[_F], _F]:
    """The numpydoc sections of a law evaluated at points: ``points`` (the first parameter's
    entry), γ, the float array returned and the error raised (the ``[[sections]]`` marker)."""
    return fill_doc(sections=f"Parameters\n----------\n{points}\n{_GAMMA}\n\n{_ARRAY_OUT}")


def _gamma_value(gamma: Any) -> float:
    """γ as a float for the analytic helpers, validated (a finite number > 0)."""
    if isinstance(gamma, Fraction):
        if gamma <= 0:
            raise ParameterError(message("gamma", "a finite number > 0", gamma))
        return float(gamma)
    return check_positive_float(gamma, "gamma")


def _alpha(gamma: Fraction | float) -> float:
    return math.exp(-_gamma_value(gamma))


def _log_survival(k: NDArray[np.float64], g: float) -> NDArray[np.float64]:
    """``ln Pr[G > k] = −γ(k+1)``, the geometric's tail at integers ``k >= 0`` (below 0 read as
    0); both laws' tails and cdfs are written with it (``Pr[|Z| > B] = 2 Pr[G > B]/(1+α)``)."""
    return -g * (np.maximum(k, 0.0) + 1)


@_at_points("z : array_like of int\n    Points.")
@public_errors("discrete_laplace_pmf")
def discrete_laplace_pmf(z: Any, gamma: Fraction | float) -> NDArray[np.float64]:
    """``Pr[Z = z] = (1-α)/(1+α) α^{|z|}``: the discrete Laplace pmf.

    [[sections]]

    Examples
    --------
    >>> round(float(discrete_laplace_pmf(0, math.log(3))), 12)  # α = 1/3: (2/3)/(4/3)
    0.5
    >>> round(float(discrete_laplace_pmf(np.arange(-60, 61), 1.0).sum()), 12)
    1.0
    """
    g = _gamma_value(gamma)
    a = math.exp(-g)
    zz = np.abs(np.asarray(z, dtype=np.float64))
    return (1 - a) / (1 + a) * np.exp(-g * zz)


@_at_points("z : array_like\n    Points (non-integers are floored).")
@public_errors("discrete_laplace_cdf")
def discrete_laplace_cdf(z: Any, gamma: Fraction | float) -> NDArray[np.float64]:
    """``Pr[Z <= z]`` for integer z: ``α^{|z|}/(1+α)`` for z < 0, ``1 - α^{z+1}/(1+α)`` else.

    [[sections]]

    Examples
    --------
    >>> np.round(discrete_laplace_cdf([-1, 0], math.log(3)), 12).tolist()  # α = 1/3
    [0.25, 0.75]
    """
    g = _gamma_value(gamma)
    a = math.exp(-g)
    zz = np.floor(np.asarray(z, dtype=np.float64))
    lower = np.exp(_log_survival(-zz - 1, g)) / (1 + a)  # Pr[Z <= z] = Pr[Z > -z-1], z < 0
    upper = 1 - np.exp(_log_survival(zz, g)) / (1 + a)
    return np.where(zz < 0, lower, upper)


@_OF_GAMMA
@public_errors("discrete_laplace_mean_abs")
def discrete_laplace_mean_abs(gamma: Fraction | float) -> float:
    """``E|Z| = 2α/(1 − α²)``: mean absolute value of the discrete Laplace.

    [[sections]]

    Examples
    --------
    >>> round(discrete_laplace_mean_abs(math.log(2)), 12)  # α = 1/2: 1/(3/4)
    1.333333333333
    """
    g = _gamma_value(gamma)
    return 2.0 * math.exp(-g) / -math.expm1(-2.0 * g)


@_OF_GAMMA
@public_errors("discrete_laplace_variance")
def discrete_laplace_variance(gamma: Fraction | float) -> float:
    """``Var[Z] = 2α/(1-α)^2``: variance of the discrete Laplace.

    [[sections]]

    Examples
    --------
    >>> round(discrete_laplace_variance(math.log(2)), 12)  # α = 1/2: 1/(1/4)
    4.0
    """
    g = _gamma_value(gamma)
    a = math.exp(-g)
    return 2 * a / math.expm1(-g) ** 2


@_at_points("bound : array_like\n    B (non-integers are floored).")
@public_errors("discrete_laplace_tail")
def discrete_laplace_tail(bound: Any, gamma: Fraction | float) -> NDArray[np.float64]:
    """``Pr[|Z| > B] = 2 α^{B+1} / (1+α)`` for integer B >= 0 (1 for B < 0).

    [[sections]]

    Examples
    --------
    >>> np.round(discrete_laplace_tail([-1, 0, 1], math.log(3)), 12).tolist()  # α = 1/3
    [1.0, 0.5, 0.166666666667]
    """
    g = _gamma_value(gamma)
    a = math.exp(-g)
    b = np.floor(np.asarray(bound, dtype=np.float64))
    return np.where(b < 0, 1.0, 2 * np.exp(_log_survival(b, g)) / (1 + a))


@fill_doc(gamma=_GAMMA)
@public_errors("discrete_laplace_tail_bound")
def discrete_laplace_tail_bound(eta: float, gamma: Fraction | float) -> int:
    """The smallest integer B >= 0 with ``Pr[|Z| > B] <= η``.

    Parameters
    ----------
    eta : float
        Failure probability η in (0, 1).
    [[gamma]]

    Returns
    -------
    int
        B, so that ``|Z| <= B`` with probability at least ``1 - η``.

    Raises
    ------
    ParameterError
        If η is not in (0, 1) or γ is not a finite number > 0.

    Examples
    --------
    >>> b = discrete_laplace_tail_bound(0.05, 1.0)
    >>> b, bool(discrete_laplace_tail(b, 1.0) <= 0.05 < discrete_laplace_tail(b - 1, 1.0))
    (3, True)
    """
    eta = check_open_unit(eta, "eta")
    g = _gamma_value(gamma)
    a = math.exp(-g)
    # 2 α^{B+1}/(1+α) <= η  <=>  B + 1 >= ln(2/(η(1+α))) / γ
    b = max(0, math.ceil(math.log(2 / (eta * (1 + a))) / g - 1))
    while b > 0 and float(discrete_laplace_tail(b - 1, gamma)) <= eta:
        b -= 1
    while float(discrete_laplace_tail(b, gamma)) > eta:
        b += 1
    return b


@_at_points("k : array_like of int\n    Points.")
@public_errors("geometric_pmf")
def geometric_pmf(k: Any, gamma: Fraction | float) -> NDArray[np.float64]:
    """``Pr[G = k] = (1-α) α^k`` for k >= 0 (0 for k < 0): the geometric pmf.

    [[sections]]

    Examples
    --------
    >>> np.round(geometric_pmf([-1, 0, 1, 2], math.log(2)), 12).tolist()  # α = 1/2
    [0.0, 0.5, 0.25, 0.125]
    """
    g = _gamma_value(gamma)
    kk = np.asarray(k, dtype=np.float64)
    return np.where(kk >= 0, -math.expm1(-g) * np.exp(-g * np.maximum(kk, 0.0)), 0.0)


@_at_points("k : array_like\n    Points (non-integers are floored).")
@public_errors("geometric_cdf")
def geometric_cdf(k: Any, gamma: Fraction | float) -> NDArray[np.float64]:
    """``Pr[G <= k] = 1 - α^{k+1}`` for k >= 0 (0 for k < 0).

    [[sections]]

    Examples
    --------
    >>> np.round(geometric_cdf([-1, 0, 1], math.log(2)), 12).tolist()  # α = 1/2
    [0.0, 0.5, 0.75]
    """
    g = _gamma_value(gamma)
    kk = np.floor(np.asarray(k, dtype=np.float64))
    return np.where(kk >= 0, -np.expm1(_log_survival(kk, g)), 0.0)


@_OF_GAMMA
@public_errors("geometric_variance")
def geometric_variance(gamma: Fraction | float) -> float:
    """``Var[G] = α/(1-α)^2``: variance of the geometric on {0, 1, ...}.

    [[sections]]

    Examples
    --------
    >>> round(geometric_variance(math.log(2)), 12)  # α = 1/2: (1/2)/(1/4)
    2.0
    """
    g = _gamma_value(gamma)
    return math.exp(-g) / math.expm1(-g) ** 2


@_OF_GAMMA
@public_errors("randomized_response_keep_probability")
def randomized_response_keep_probability(gamma: Fraction | float) -> float:
    """``e^γ/(1+e^γ) = 1/(1+α)``: the probability that randomized response keeps a bit.

    [[sections]]

    Examples
    --------
    >>> round(randomized_response_keep_probability(math.log(3)), 12)  # e^γ = 3: 3/4
    0.75
    """
    return 1.0 / (1.0 + _alpha(gamma))


@public_errors("gaussian_sigma2")
def gaussian_sigma2(sigma2_min: float) -> tuple[int, int, int]:
    """Round a target variance parameter up to ``σ² = t·u`` (integers, ``t = ⌊√⌈σ²⌉⌋ + 1``).

    Returns ``(σ², t, u)``. With σ² a multiple of ``t`` the acceptance exponent
    ``(|Y| − σ²/t)²/(2σ²)`` becomes ``(|Y| − u)²/(2tu)``, a fraction with a small denominator.
    Rounding σ² up only adds noise, so the privacy guarantee is kept.

    Examples
    --------
    >>> gaussian_sigma2(50.0)
    (56, 8, 7)
    """
    if not (isinstance(sigma2_min, int | float) and math.isfinite(sigma2_min)
            and sigma2_min > 0 and sigma2_min < 2.0**62):
        raise ParameterError(message("sigma2", "a finite number in "
                                     "(0, 2^62)", sigma2_min))
    t = math.isqrt(math.ceil(sigma2_min)) + 1
    u = max(1, math.ceil(sigma2_min / t))
    return t * u, t, u


def discrete_gaussian_variance(sigma2: int) -> float:
    """Variance of the discrete Gaussian ``Pr[z] ∝ exp(−z²/(2σ²))`` (numerically exact).

    Examples
    --------
    >>> round(discrete_gaussian_variance(1), 6)
    1.0
    """
    if sigma2 >= 10_000:  # the gap to σ² is below e^{−2π²σ²}: far under double precision
        return float(sigma2)
    half = int(40 * math.sqrt(sigma2)) + 10
    z = np.arange(-half, half + 1, dtype=np.float64)
    w = np.exp(-(z**2) / (2.0 * sigma2))
    return float(np.sum(w * z**2) / np.sum(w))
