"""Reach, k+ reach and frequency from the noisy histograms of the shuffle (post-processing).

A measured entity's histogram ``H[v]`` counts the registers holding ``v = 0..V`` among the
``R`` true registers and both workers' dummies. Its expectation is the true histogram plus
``2s`` per value (two workers, dummy counts of mean ``s`` each), so ``Ĉ_t = H[t] − 2s`` is an
**unbiased** estimate of the number of registers whose summed capped value is ``t``, with
variance ``2 Var[D]`` and independent across ``t`` (:mod:`dpfreq.crossparty.shuffle.dummies`).
From there the estimators of the local-noise mode apply as they are
(:mod:`dpfreq.crossparty.estimate`): the reach from the empty registers ``Ĉ_0`` by linear
counting, divided by the sampling rate; the frequency distribution and the k+ reach by
inverting the compound Poisson law of the classes ``t < K`` (values at or above ``K`` are the
``K+`` class and are not needed); normal intervals by the delta method, with the hash's
collisions and the VID sampling. With ``per_party`` the union and the parties are made
consistent (:func:`dpfreq.crossparty.consistency.consistent_kplus`: the union at least each
party, at most their sum). Everything is a function of the histograms and the public
parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import NormalDist
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import check_confidence, message
from dpfreq.accounting import Composed
from dpfreq.crossparty.consistency import consistent_kplus
from dpfreq.crossparty.estimate import (
    EntityEstimate,
    entity_from_classes,
    kplus_distribution,
    union_error,
)
from dpfreq.crossparty.reach import reach_from_empty
from dpfreq.crossparty.shuffle.dummies import DummyLaw, calibrate_dummies
from dpfreq.crossparty.shuffle.params import ShuffleParams
from dpfreq.crossparty.shuffle.plan import MISSING_REASONS, Plan
from dpfreq.crossparty.shuffle.result import RELATION, ShuffleRelease
from dpfreq.errors import DataError, ParameterError, public_errors

__all__ = ["MECHANISM", "WORKERS", "dummy_law", "estimate_histogram", "measurement_loss",
           "release_from_histograms"]

MECHANISM = "crossparty-shuffle"
#: Workers adding dummies (each adds its own; the offsets count both).
WORKERS = 2
_FUNC = "release_from_histograms"


@public_errors("ShuffleParams")
def dummy_law(params: ShuffleParams) -> DummyLaw:
    """The dummy law of every histogram of ``params`` (its share of the budget).

    Examples
    --------
    >>> from dpfreq.crossparty import Coverage
    >>> params = ShuffleParams(
    ...     measurement="m", registers=8, sampling_start=0, sampling_width=1,
    ...     max_frequency=3, epsilon=1.0, delta=1e-9, parties=["tv", "web"],
    ...     per_party=True,
    ...     coverage=Coverage(), deadline="2030-01-01", hash="sha256-prefix/v1",
    ...     key_id="0" * 32)
    >>> law = dummy_law(params)  # three histograms at (1/3, 1e-9/3) each
    >>> law.epsilon <= 1 / 3, law.delta <= 1e-9 / 3
    (True, True)
    """
    eps, delta = params.histogram_budget
    return calibrate_dummies(eps, delta)


def measurement_loss(params: ShuffleParams) -> Composed:
    """The measurement's privacy loss as a value: one worker's dummies on each of the
    ``params.histograms`` histograms, composed (at most ``(params.epsilon, params.delta)``).

    Examples
    --------
    >>> from fractions import Fraction
    >>> from dpfreq.crossparty import Coverage
    >>> params = ShuffleParams(
    ...     measurement="m", registers=8, sampling_start=0, sampling_width=1,
    ...     max_frequency=3, epsilon=1.0, delta=1e-9, parties=["tv", "web"],
    ...     per_party=True,
    ...     coverage=Coverage(), deadline="2030-01-01", hash="sha256-prefix/v1",
    ...     key_id="0" * 32)
    >>> loss = measurement_loss(params)
    >>> loss.epsilon_bound() <= 1, loss.bad_delta() <= Fraction(1e-9)
    (True, True)
    """
    return Composed((dummy_law(params).privacy_loss(),) * params.histograms)


def estimate_histogram(histogram: NDArray[Any], *, law: DummyLaw, max_frequency: int,
                       registers: int, rate: float, z: float) -> EntityEstimate:
    """The raw estimates of one entity from its noisy histogram (see the module docstring).

    Examples
    --------
    >>> from dpfreq.crossparty.shuffle.dummies import calibrate_dummies
    >>> law = calibrate_dummies(1.0, 1e-6)
    >>> H = np.array([700, 250, 40, 10]) + 2 * law.shift  # no noise around the offsets
    >>> est = estimate_histogram(H, law=law, max_frequency=3, registers=1000, rate=1.0,
    ...                          z=1.96)
    >>> round(float(est.kplus[0]), 1), est.frequency.size
    (356.5, 3)
    """
    H = np.asarray(histogram, dtype=np.float64)
    K = max_frequency
    offset = WORKERS * law.mean
    var = WORKERS * law.variance
    C = H[:K] - offset
    reach = reach_from_empty(float(C[0]), var, registers=registers, rate=rate, z=z)
    return entity_from_classes(reach, C, np.diag(np.full(K, var)), registers=registers,
                               rate=rate, z=z)


def _checked(histograms: Sequence[Any], params: ShuffleParams, plan: Plan
             ) -> list[NDArray[np.int64]]:
    if len(histograms) != len(plan.entities):
        raise ParameterError(message("histograms", f"one per measured entity "
                                     f"({len(plan.entities)})", f"{len(histograms)} arrays"))
    out = []
    for h, V in zip(histograms, plan.values(params), strict=True):
        arr = np.asarray(h)
        if arr.shape != (V + 1,) or arr.dtype.kind not in "iu" or (arr.size and arr.min() < 0):
            raise DataError(f"histograms of {_FUNC} must hold {V + 1} counts >= 0 per entity.")
        out.append(arr.astype(np.int64))
    return out


@public_errors("release_from_histograms")
def release_from_histograms(histograms: Sequence[Any], *, params: ShuffleParams, plan: Plan,
                            confidence: float, seeded: bool = False) -> ShuffleRelease:
    """The release of a shuffled measurement from its noisy histograms (post-processing).

    Parameters
    ----------
    histograms : list of numpy.ndarray of int
        One per measured entity of ``plan``, in its order (union first), of length
        ``V_e + 1``: what the aggregator reconstructed.
    params : ShuffleParams
        The measurement's public parameters.
    plan : Plan
        The included and missing parties and the measured entities.
    confidence : float
        Confidence level of the intervals, in (0, 1).
    seeded : bool
        Whether the workers' noise came from a seed (simulations, tests).

    Returns
    -------
    ShuffleRelease

    Notes
    -----
    **Privacy.** Post-processing of the noisy histograms: ``(params.epsilon, params.delta)``
    for one user with all their impressions at every party (:class:`ShuffleParams`); it
    spends and draws nothing, and the same histograms always give the same release.

    Examples
    --------
    >>> from dpfreq.crossparty.shuffle.plan import make_plan
    >>> from dpfreq.crossparty import Coverage
    >>> params = ShuffleParams(
    ...     measurement="m", registers=1000, sampling_start=0, sampling_width=1,
    ...     max_frequency=2, epsilon=1.0, delta=1e-9, parties=["tv", "web"],
    ...     per_party=False,
    ...     coverage=Coverage(), deadline="2030-01-01", hash="sha256-prefix/v1",
    ...     key_id="0" * 32)
    >>> plan = make_plan(params, {"tv": "a" * 32}, {"tv": "a" * 32})
    >>> s = dummy_law(params).shift
    >>> rel = release_from_histograms([np.array([800, 150, 50]) + 2 * s], params=params,
    ...                               plan=plan, confidence=0.95)
    >>> rel.parties, rel.missing, round(rel.reach)
    (('tv',), (('web', 'none'),), 223)
    """
    conf = check_confidence(confidence, "confidence")
    if not isinstance(params, ShuffleParams):
        raise ParameterError(message("params", "a ShuffleParams", type(params).__name__))
    hists = _checked(histograms, params, plan)
    if not plan.entities or plan.entities[0][0] != 0:
        raise DataError("no party is measured (none uploaded to both workers): nothing to "
                        "release.")
    z = NormalDist().inv_cdf((1.0 + conf) / 2.0)
    law = dummy_law(params)
    rate = float(params.sampling_rate)
    est = [estimate_histogram(h, law=law, max_frequency=params.max_frequency,
                              registers=params.registers, rate=rate, z=z) for h in hists]
    union, parts = est[0], est[1:]
    K = params.max_frequency

    def stack(rows: list[NDArray[np.float64]]) -> NDArray[np.float64]:
        return np.vstack(rows) if rows else np.zeros((0, K))

    u, p = consistent_kplus(union.kplus, union.kplus_sd, stack([e.kplus for e in parts]),
                            stack([e.kplus_sd for e in parts]))
    mech = {"params": params.to_dict(), "coverage": params.coverage.to_dict(),
            "noise": law.describe(), "workers": WORKERS,
            "privacy_loss": measurement_loss(params).to_dict(),
            "offset_per_value": WORKERS * law.mean, "plan": plan.to_dict(),
            "missing": {p: MISSING_REASONS[r] for p, r in plan.missing},
            "confidence": conf, "sampling_rate": rate,
            "histogram_budget": [float(x) for x in params.histogram_budget],
            "relation": RELATION}
    return ShuffleRelease(
        value=u, epsilon=params.epsilon, delta=params.delta, unit="item", mechanism=MECHANISM,
        mechanism_params=mech, seeded=seeded, error=union_error(union, conf, (
            f"the exact law of the dummy registers ({WORKERS} workers, shift {law.shift}, "
            f"variance {law.variance:.4g} each per value)")),
        parties=tuple(name for name, _ in plan.included), max_frequency=K,
        frequency=kplus_distribution(u), frequency_lower=union.frequency_lower,
        frequency_upper=union.frequency_upper, party_kplus_reach=p,
        party_lower=stack([e.kplus_lower for e in parts]),
        party_upper=stack([e.kplus_upper for e in parts]), raw_kplus_reach=union.kplus,
        raw_party_kplus_reach=stack([e.kplus for e in parts]), histograms=tuple(hists),
        missing=plan.missing)
