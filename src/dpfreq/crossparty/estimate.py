"""Reach, k+ reach and the frequency distribution of one set of parties, with intervals.

Combines :mod:`dpfreq.crossparty.reach` (reach from the bits) and
:mod:`dpfreq.crossparty.frequency` (register classes and their inversion) for one *entity*: the
union of all merged parties, or one party alone (``P = 1``). Everything is a deterministic
function of the noisy registers and the public parameters.

Intervals are normal intervals at the requested confidence. Reach: see
:func:`~dpfreq.crossparty.reach.reach_from_empty`. The k+ reach ``n τ_k`` (``τ_k`` the fraction
of users seen at least ``k`` times) and the frequency fractions ``g_t``: delta method through
the inversion with the unbiased covariance of the noisy inputs (the bits' noise variance for
``p_0``, independent of the frequency noise), plus the VID sampling's binomial variance
(``n τ_k (1 − ρ)/ρ``, ``g_t (1 − g_t)(1 − ρ)/(ρ n)``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.crossparty.frequency import class_estimates, compound_inverse
from dpfreq.crossparty.reach import ReachEstimate, empty_estimate, reach_from_empty
from dpfreq.release import ErrorStatement

__all__ = ["EntityEstimate", "entity_from_classes", "estimate_entity", "kplus_distribution",
           "union_error"]


@dataclass(frozen=True)
class EntityEstimate:
    """Raw (unbiased or nearly) estimates of one entity, before the consistency step.

    Attributes
    ----------
    kplus, kplus_sd, kplus_lower, kplus_upper : numpy.ndarray
        k+ reach for ``k = 1..K`` (length 1 for reach-only sketches), its delta-method
        standard deviation and interval.
    frequency, frequency_lower, frequency_upper : numpy.ndarray or None
        The frequency distribution among reached users, ``1..K−1`` and ``K+`` (None for
        reach-only sketches), with intervals.
    """

    kplus: NDArray[np.float64]
    kplus_sd: NDArray[np.float64]
    kplus_lower: NDArray[np.float64]
    kplus_upper: NDArray[np.float64]
    frequency: NDArray[np.float64] | None
    frequency_lower: NDArray[np.float64] | None
    frequency_upper: NDArray[np.float64] | None


def _frequency(reach: ReachEstimate, C: NDArray[np.float64], cov: NDArray[np.float64], *,
               registers: int, rate: float
               ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64],
                          NDArray[np.float64]]:
    """``(g, g_sd, kplus, kplus_sd)``: ``g`` for ``1..K−1, K+`` and k+ reach for ``k = 1..K``,
    from unbiased class estimates ``C`` (``t = 0..K−1``) and their covariance."""
    K = C.size
    p = C / registers
    p[0] = reach.empty_fraction
    sigma = cov / registers**2
    sigma[0, :] = 0.0
    sigma[:, 0] = 0.0
    sigma[0, 0] = reach.empty_fraction_variance
    g, grad = compound_inverse(p)  # (K-1,), (K-1, K)
    tail = 1.0 - np.concatenate([[0.0], np.cumsum(g)])  # τ_1..τ_K
    dtail = -np.vstack([np.zeros((1, K)), np.cumsum(grad, axis=0)])
    n = reach.value
    dn = np.zeros(K)
    if math.isfinite(n) and 0 < p[0] < 1 and registers > 1:
        dn[0] = 1.0 / (p[0] * math.log1p(-1.0 / registers) * rate)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        kplus = n * tail
        dk = tail[:, None] * dn[None, :] + n * dtail
        var_k = np.einsum("ki,ij,kj->k", dk, sigma, dk) + kplus * (1 - rate) / rate
        hash_part = max(reach.sd**2 - (dn[0] ** 2) * sigma[0, 0] - reach.sampling_variance, 0.0)
        var_k = var_k + tail**2 * hash_part
        freq = np.concatenate([g, [tail[-1]]])
        dfreq = np.vstack([grad, dtail[-1:]])
        var_f = np.einsum("ki,ij,kj->k", dfreq, sigma, dfreq)
        var_f = var_f + np.clip(freq * (1 - freq), 0, None) * (1 - rate) / (rate * n)
    return (np.asarray(freq, dtype=np.float64), np.sqrt(np.clip(var_f, 0, None)),
            np.asarray(kplus, dtype=np.float64), np.sqrt(np.clip(var_k, 0, None)))


def _ends(value: NDArray[np.float64], sd: NDArray[np.float64], z: float, top: float
          ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    bad = ~(np.isfinite(value) & np.isfinite(sd))
    lower = np.where(bad, 0.0, np.clip(value - z * sd, 0.0, top))
    upper = np.where(bad, np.inf if top == np.inf else top, np.clip(value + z * sd, 0.0, top))
    return lower, upper


def estimate_entity(ones_histogram: NDArray[np.int64], sums: NDArray[Any] | None, *,
                    parties: int, q: float, alpha: float | None, max_frequency: int,
                    registers: int, rate: float, z: float) -> EntityEstimate:
    """Estimates of one entity from its bit histogram ``N_j`` and summed frequencies.

    Examples
    --------
    One party, no frequency registers, 4 of 8 registers observed occupied at q = 3/4:

    >>> est = estimate_entity(np.array([4, 4]), None, parties=1, q=0.75, alpha=None,
    ...                       max_frequency=3, registers=8, rate=1.0, z=1.96)
    >>> est.kplus.round(3).tolist(), est.frequency is None
    ([5.191], True)
    """
    empty, var = empty_estimate(ones_histogram, parties, q)
    reach = reach_from_empty(empty, var, registers=registers, rate=rate, z=z)
    one = np.array([reach.value])
    if sums is None or alpha is None:
        return EntityEstimate(kplus=one, kplus_sd=np.array([reach.sd]),
                              kplus_lower=np.array([reach.lower]),
                              kplus_upper=np.array([reach.upper]), frequency=None,
                              frequency_lower=None, frequency_upper=None)
    C, cov = class_estimates(sums, parties=parties, max_frequency=max_frequency, alpha=alpha)
    return entity_from_classes(reach, C, cov, registers=registers, rate=rate, z=z)


def entity_from_classes(reach: ReachEstimate, C: NDArray[np.float64],
                        cov: NDArray[np.float64], *, registers: int, rate: float,
                        z: float) -> EntityEstimate:
    """Estimates of one entity from its reach and unbiased estimates ``C`` of the number of
    registers in each class ``t = 0..K−1`` with their covariance (however they were noised:
    summed frequency registers here, a noisy histogram of the shuffle in
    :mod:`dpfreq.crossparty.shuffle`).

    Examples
    --------
    Exact classes of 1000 registers (no noise), users seen once or twice:

    >>> reach = reach_from_empty(600.0, 0.0, registers=1000, rate=1.0, z=1.96)
    >>> est = entity_from_classes(reach, np.array([600.0, 300.0, 75.0]), np.zeros((3, 3)),
    ...                           registers=1000, rate=1.0, z=1.96)
    >>> est.kplus.shape, est.frequency.shape
    ((3,), (3,))
    """
    freq, freq_sd, kplus, kplus_sd = _frequency(reach, C, cov, registers=registers, rate=rate)
    lower, upper = _ends(kplus, kplus_sd, z, np.inf)
    lower[0], upper[0], kplus_sd[0] = reach.lower, reach.upper, reach.sd
    f_lower, f_upper = _ends(freq, freq_sd, z, 1.0)
    return EntityEstimate(kplus=kplus, kplus_sd=kplus_sd, kplus_lower=lower, kplus_upper=upper,
                          frequency=freq, frequency_lower=f_lower, frequency_upper=f_upper)


def kplus_distribution(kplus: NDArray[np.float64]) -> NDArray[np.float64]:
    """The frequency distribution ``1 … K−1, K+`` (fractions of the reach) from the k+ reach
    ``kplus`` (``kplus[0]`` the reach); NaN where the reach is not a positive number."""
    if not (np.isfinite(kplus[0]) and kplus[0] > 0):
        return np.full(kplus.size, np.nan)
    out: NDArray[np.float64] = np.append(kplus[:-1] - kplus[1:], kplus[-1]) / kplus[0]
    return out


def union_error(union: EntityEstimate, confidence: float, noise: str) -> ErrorStatement:
    """The error statement of a union's k+ reach: its normal intervals at ``confidence`` from
    the noise law named by ``noise`` (text), the hash's collisions and the VID sampling, through
    the delta method; vacuous (infinite upper ends) when every register looks occupied."""
    lower, upper = union.kplus_lower, union.kplus_upper
    vacuous = bool(not np.all(np.isfinite(upper)))
    finite = np.isfinite(lower) & np.isfinite(upper)
    half = np.where(finite, (np.where(finite, upper, 0.0) - np.where(finite, lower, 0.0)) / 2.0,
                    np.inf)
    return ErrorStatement(
        kind="interval", confidence=confidence, value=half,
        description=(f"normal {confidence:.3g} interval of each k+ reach of the union, from "
                     f"{noise}, the hash's collisions and the VID sampling, through the delta "
                     "method; intervals of the raw estimates, before the consistency step; "
                     "frequency_lower/upper and party_lower/upper are the same intervals of "
                     "the union's frequency distribution and of each party's k+ reach"
                     + ("; an infinite upper end means every register looks occupied: more "
                        "registers or a narrower sampling interval are needed"
                        if vacuous else "")),
        lower=lower, upper=upper, vacuous=vacuous)
