"""Deduplicated reach from the noisy reach bits of any set of parties (pure post-processing).

A register is empty in the union of ``P`` parties when every party's true bit ``x_p`` is 0.
With keep probability ``q``, the factor ``(q − y)/(2q − 1)`` of an observed bit ``y`` is an
unbiased estimate of ``1 − x_p``; the parties' noise is independent, so the product over the
parties is an unbiased estimate of ``∏(1 − x_p)``, the union's emptiness. Summed over registers:

    Ê = Σ_j N_j a0^{P−j} a1^j,   a0 = q/(2q−1),  a1 = (q−1)/(2q−1),

with ``N_j`` the number of registers where ``j`` of the ``P`` observed bits are 1 — only these
counts are needed, so a merge is a sum of bits per register and one histogram. The variance of
one register's product is ``M^P − 1`` when empty and at most ``M^{P−1}(M − 1)`` otherwise,
with ``M = ((1−q)^3 + q^3)/(2q−1)^2`` (the second moment of a factor on an empty register;
``M − 1`` is that of an occupied one): it grows like ``M^P``, which is why local noise limits
how many parties can be merged.

The number of sampled users follows from the linear-counting relation ``E[empty] =
R (1 − 1/R)^n``; the reach divides by the sampling rate ``ρ``. The interval is a normal
interval for ``Ê`` (noise variance at the estimate, plus the variance of the hash's collisions,
``R e^{−λ}(1 − (1 + λ)e^{−λ})``), mapped through that monotone relation, then widened for the
VID sampling (``Var = n (1 − ρ)/ρ``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["FlipMoments", "ReachEstimate", "empty_estimate", "flip_moments",
           "reach_from_empty", "users_from_empty"]


@dataclass(frozen=True)
class FlipMoments:
    """The factors of the emptiness estimator for keep probability ``q``.

    Examples
    --------
    >>> m = flip_moments(0.75)
    >>> m.a0, m.a1, m.second
    (1.5, -0.5, 1.75)
    """

    a0: float
    a1: float
    second: float


def flip_moments(q: float) -> FlipMoments:
    """``a0 = q/(2q−1)``, ``a1 = (q−1)/(2q−1)`` and ``M = ((1−q)^3 + q^3)/(2q−1)^2``."""
    d = 2.0 * q - 1.0
    return FlipMoments(a0=q / d, a1=(q - 1.0) / d, second=((1.0 - q) ** 3 + q**3) / d**2)


def empty_estimate(ones_histogram: NDArray[np.int64], parties: int, q: float
                   ) -> tuple[float, float]:
    """``(Ê, noise variance of Ê at the estimate)`` from ``N_j`` (registers with ``j`` ones).

    Examples
    --------
    Two parties, four registers: observed bit pairs 00, 01, 11, 00 at q = 3/4:

    >>> Ehat, var = empty_estimate(np.array([2, 1, 1]), 2, 0.75)
    >>> Ehat, round(var, 4)
    (4.0, 8.25)
    """
    m = flip_moments(q)
    R = float(np.sum(ones_histogram))
    j = np.arange(parties + 1, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        factors = m.a0 ** (parties - j) * np.sign(m.a1) ** j * abs(m.a1) ** j
        empty = float(np.dot(np.asarray(ones_histogram, dtype=np.float64), factors))
        occupied = min(max(R - empty, 0.0), R) if math.isfinite(empty) else R
        var = ((R - occupied) * (m.second**parties - 1.0)
               + occupied * m.second ** (parties - 1) * (m.second - 1.0))
    if not (math.isfinite(empty) and math.isfinite(var)):
        return math.nan, math.inf
    return empty, float(var)


def users_from_empty(empty: float, registers: int) -> float:
    """Sampled users ``n`` with ``R (1 − 1/R)^n = empty``: 0 at ``empty >= R``, inf at
    ``empty <= 0`` (every register looks occupied).

    Examples
    --------
    >>> R = 1000
    >>> round(users_from_empty(R * (1 - 1 / R) ** 250, R), 6)
    250.0
    """
    if not math.isfinite(empty) or empty <= 0:
        return math.inf
    if empty >= registers:
        return 0.0
    if registers == 1:
        return math.inf
    return math.log(empty / registers) / math.log1p(-1.0 / registers)


@dataclass(frozen=True)
class ReachEstimate:
    """The reach of one set of parties, with its interval.

    Attributes
    ----------
    value : float
        Estimated users reached (inf when every register looks occupied).
    lower, upper : float
        The interval at the requested confidence.
    sd : float
        Delta-method standard deviation (inf when saturated).
    empty_fraction : float
        ``Ê / R``: the estimated fraction of empty registers (may fall outside [0, 1]).
    empty_fraction_variance : float
        The noise variance of ``empty_fraction`` (no hash or sampling part).
    sampling_variance : float
        The variance the VID sampling adds to ``value``.
    """

    value: float
    lower: float
    upper: float
    sd: float
    empty_fraction: float
    empty_fraction_variance: float
    sampling_variance: float


def _hash_variance(empty: float, registers: int) -> float:
    """Variance of the number of empty registers from the hash's collisions (Whang et al.)."""
    if not math.isfinite(empty) or empty <= 0 or empty >= registers:
        return 0.0
    lam = -math.log(empty / registers)
    e = math.exp(-lam)
    return max(registers * e * (1.0 - (1.0 + lam) * e), 0.0)


def reach_from_empty(empty: float, noise_variance: float, *, registers: int, rate: float,
                     z: float) -> ReachEstimate:
    """The reach and its interval from the emptiness estimate (see the module docstring).

    Examples
    --------
    >>> est = reach_from_empty(600.0, 100.0, registers=1000, rate=1.0, z=1.96)
    >>> round(est.value, 1), bool(est.lower < est.value < est.upper)
    (510.6, True)
    """
    R = registers
    total = noise_variance + _hash_variance(empty, R)
    sd_e = math.sqrt(total) if math.isfinite(total) else math.inf
    n_s = users_from_empty(empty, R)
    lo_s = users_from_empty(empty + z * sd_e, R)
    hi_s = users_from_empty(empty - z * sd_e, R) if math.isfinite(sd_e) else math.inf
    slope = 1.0 / (empty * abs(math.log1p(-1.0 / R))) if (
        math.isfinite(empty) and empty > 0 and R > 1) else math.inf
    value = n_s / rate
    samp = value * (1.0 - rate) / rate if math.isfinite(value) else math.inf
    sd = math.hypot(slope * sd_e / rate, math.sqrt(samp)) if math.isfinite(
        slope * sd_e) else math.inf
    if math.isfinite(value):
        lower = max(0.0, value - math.hypot((n_s - lo_s) / rate, z * math.sqrt(samp)))
        upper = value + math.hypot((hi_s - n_s) / rate, z * math.sqrt(samp)) if math.isfinite(
            hi_s) else math.inf
    else:
        lower = lo_s / rate if math.isfinite(lo_s) else math.inf
        upper = math.inf
    frac = empty / R if math.isfinite(empty) else math.nan
    return ReachEstimate(value=value, lower=lower, upper=upper, sd=sd, empty_fraction=frac,
                         empty_fraction_variance=noise_variance / R**2, sampling_variance=samp)
