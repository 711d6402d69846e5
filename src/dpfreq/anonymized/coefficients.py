"""Coefficient functions and Lipschitz constants of the symmetric properties.

A symmetric property estimated linearly from a histogram is ``Σ_r φ_r f(r, n)`` (prevalences
``φ_r``, sample size ``n``). Its sensitivity to the error of an anonymized histogram is governed
by the Lipschitz constant of ``f`` in ``r`` (Suresh 2019, §5), computed here for every property
of :mod:`dpfreq.anonymized.properties` (which re-exports :func:`lipschitz_constant` and
:func:`sgt_poisson_parameter`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.special import pdtrc

from dpfreq._validate import check_choice, check_int, check_positive_float, message
from dpfreq.errors import ParameterError, public_errors

__all__ = ["PROPERTY_NAMES", "lipschitz_constant", "sgt_poisson_parameter"]

_F64 = NDArray[np.float64]

PROPERTY_NAMES = (
    "distance-to-uniformity",
    "entropy",
    "miller-madow-entropy",
    "power-sum",
    "support-coverage",
    "support-size",
    "unseen-species",
)


# ----------------------------------------------------------------------------------------------
# coefficient functions f(r, n) for r >= 1 (vectorized over r) and Lipschitz constants


def entropy_coef(r: _F64, n: float) -> _F64:
    return (r / n) * np.log(n / r)


def _entropy_step(r: float, n: float) -> float:
    """``f(r, n) − f(r−1, n)`` for the entropy coefficients (``f(0) = 0``)."""
    prev = 0.0 if r <= 1 else (r - 1) / n * math.log(n / (r - 1))
    return r / n * math.log(n / r) - prev


def entropy_lipschitz(n: float, max_count: int, miller_madow: bool) -> float:
    # f is concave on [0, ∞) with f(0) = 0, so its steps decrease in r: the extreme steps are at
    # r = 1 and r = R.
    first = math.log(n) / n + (0.5 / n if miller_madow else 0.0)
    last = abs(_entropy_step(max_count, n)) if max_count >= 2 else 0.0
    return max(abs(first), last)


def sgt_poisson_parameter(sample_size: float, extrapolation_ratio: float) -> float | None:
    """λ of the smoothed Good–Toulmin estimator; ``None`` for ``t ≤ 1`` (plain GT).

    ``λ = ln(n (t+1)² / (t−1)) / (2t)`` (Orlitsky–Suresh–Wu 2016, as in the INSPECTRE code).
    """
    t = extrapolation_ratio
    if t <= 1:
        return None
    # in logs: (t + 1)² overflows a float for t beyond ~1e154
    return (math.log(sample_size) + 2.0 * math.log1p(t) - math.log(t - 1.0)) / (2.0 * t)


def sgt_unseen_coef(r: _F64, n: float, t: float) -> _F64:
    """``−(−t)^r Pr[Poisson(λ) ≥ r]`` evaluated in log space (no overflow for huge r)."""
    sign = np.where(r % 2 == 1, 1.0, -1.0)  # −(−1)^r
    lam = sgt_poisson_parameter(n, t)
    if lam is None:
        log_tail = np.zeros_like(r)
    elif lam <= 0:  # n (t+1)²/(t−1) <= 1: Pr[L >= r] = 0 for r >= 1
        return np.zeros_like(r)
    else:
        # Pr[Poisson(λ) >= r] = pdtrc(r − 1, λ), the function scipy.stats.poisson.sf calls;
        # scipy.special instead of scipy.stats, whose import costs ~0.5 s per CLI run
        with np.errstate(divide="ignore"):  # a tail below the float range: log 0 = −inf
            log_tail = np.log(pdtrc(r - 1, lam))
    with np.errstate(under="ignore", over="ignore"):
        return np.asarray(sign * np.exp(r * math.log(t) + log_tail), dtype=np.float64)


def _sgt_scan_limit(n: float, t: float, max_count: int) -> tuple[int, float]:
    """Where to stop scanning SGT steps, and a bound on every step beyond it."""
    lam = sgt_poisson_parameter(n, t)
    if lam is None:
        # |step r| = t^{r−1}(1+t) for r >= 2: non-increasing in r when t <= 1.
        return min(max_count, 3), 0.0
    if lam <= 0:
        return min(max_count, 1), 0.0
    # Pr[L >= r] <= λ^r / r!, so |coef r| <= (tλ)^r / r! <= (e tλ / r)^r, tiny past e² tλ.
    stop = min(max_count, math.ceil(math.e**2 * t * lam) + 64)
    if stop == max_count:
        return stop, 0.0
    log_tail = stop * (1.0 + math.log(t * lam) - math.log(stop))
    return stop, 2.0 * math.exp(log_tail)  # |step| <= |coef r| + |coef r−1|


def _steps_lipschitz(coef: Callable[[_F64], _F64], upto: int, tail: float) -> float:
    r = np.arange(1, upto + 1, dtype=np.float64)
    f = coef(r)
    steps = np.diff(f, prepend=0.0)
    return max(float(np.max(np.abs(steps))) if steps.size else 0.0, tail)


def falling_ratio(r: _F64, n: float, order: int) -> _F64:
    """``r^{(a)} / n^{(a)}`` as a product of ratios (no overflow); 0 for integer r < a."""
    out = np.ones_like(r)
    for j in range(order):
        out = out * ((r - j) / (n - j))
    return out


def uniformity_coef(r: _F64, n: float, k: int) -> _F64:
    return np.abs(r / n - 1.0 / k) - 1.0 / k


@public_errors("lipschitz_constant")
def lipschitz_constant(
    property_name: str,
    sample_size: int,
    *,
    max_count: int | None = None,
    domain_size: int | None = None,
    extrapolation_ratio: float | None = None,
    order: int | None = None,
    normalized: bool = False,
) -> float:
    """Lipschitz constant of a linear plug-in estimator with respect to the sorted-ℓ1 distance.

    ``L = max_{1≤r≤R} |f(r, n) − f(r−1, n)|`` with ``f(0, n) = 0``, so that
    ``|f̂(h1) − f̂(h2)| ≤ L · ℓ1(h1, h2)`` for all histograms ``h1, h2`` with counts ``≤ R``,
    both evaluated at the same ``n`` (module docstring).

    Parameters
    ----------
    property_name : str
        One of :data:`PROPERTY_NAMES`.
    sample_size : int
        ``n`` (>= 1).
    max_count : int, optional
        ``R``, the largest count the two histograms may have (default ``n``: any histogram of
        total ``n``).
    domain_size : int, optional
        ``k`` (required for ``"distance-to-uniformity"``; normalizes ``"support-size"``).
    extrapolation_ratio : float, optional
        ``t`` (required for ``"unseen-species"`` and ``"support-coverage"``).
    order : int, optional
        ``a >= 2`` (required for ``"power-sum"``).
    normalized : bool
        ``"support-coverage"`` divided by ``n (1 + t)``.

    Returns
    -------
    float
        ``L`` (``inf`` for the power sum when ``n < order``).

    Raises
    ------
    ParameterError
        Unknown property or missing / invalid parameter.

    Examples
    --------
    >>> round(lipschitz_constant("entropy", 1000), 6)  # ln(1000)/1000
    0.006908
    """
    check_choice(property_name, "property_name", PROPERTY_NAMES)
    n = check_int(sample_size, "sample_size", minimum=1)
    big_r = n if max_count is None else check_int(max_count, "max_count", minimum=1)
    return lipschitz_for(property_name, n, big_r, domain_size=domain_size,
                      extrapolation_ratio=extrapolation_ratio, order=order, normalized=normalized)


def lipschitz_for(name: str, n: int, big_r: int, *, domain_size: Any = None,
               extrapolation_ratio: Any = None, order: Any = None,
               normalized: bool = False) -> float:
    if name in ("entropy", "miller-madow-entropy"):
        return entropy_lipschitz(float(n), big_r, name == "miller-madow-entropy")
    if name == "support-size":
        if domain_size is None:
            return 1.0
        return 1.0 / check_int(domain_size, "domain_size", minimum=1)
    if name in ("unseen-species", "support-coverage"):
        t = need(extrapolation_ratio, "extrapolation_ratio", name)
        t = check_positive_float(t, "extrapolation_ratio")
        upto, tail = _sgt_scan_limit(float(n), t, big_r)
        extra = 1.0 if name == "support-coverage" else 0.0
        scale = n * (1.0 + t) if normalized and name == "support-coverage" else 1.0

        def coef(r: _F64) -> _F64:
            return (extra + sgt_unseen_coef(r, float(n), t)) / scale

        return _steps_lipschitz(coef, upto, tail / scale)
    if name == "distance-to-uniformity":
        k = check_int(need(domain_size, "domain_size", name), "domain_size",
                      minimum=1)
        # steps beyond r = 3 are at most 1/n, and one of r = 2, 3 reaches 1/n when R >= 3
        return _steps_lipschitz(lambda r: uniformity_coef(r, float(n), k), min(big_r, 3), 0.0)
    a = check_int(need(order, "order", name), "order", minimum=2)
    if n < a:
        return math.inf
    # steps a (r−1)^{(a−1)} / n^{(a)} = (a/n) Π_{j<a−1} (r−1−j)/(n−1−j) are >= 0 and increase
    # with r: the largest is at r = R (product form, no cancellation for huge R)
    step = a / n
    for j in range(a - 1):
        step *= max(big_r - 1 - j, 0) / (n - 1 - j)
    return float(step)


def need(value: Any, param: str, name: str) -> Any:
    if value is None:
        raise ParameterError(message(param, f"given for property {name!r}", None))
    return value
