"""Where a symmetric property's target lies, and its error statement cut to that range.

An estimate from a release states ``|value − target| <= b`` at a confidence; the target also
lies in a range known from public values, ``N`` and the events the statement already holds on.
The published interval is ``[value ± b]`` intersected with that range
(:func:`within_range`); the ranges of the entropy (:func:`entropy_range`), the support size
(:func:`support_range`) and the support coverage (:func:`coverage_range`) are built here, the
others are plain ``(lo, hi)`` pairs in :mod:`dpfreq.anonymized.properties`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from dpfreq.release import ErrorStatement

__all__ = [
    "RANGE_WHY",
    "PropertyRange",
    "checked_domain_size",
    "coverage_range",
    "entropy_range",
    "l1_bound_of",
    "support_range",
    "within_range",
]

#: where a property's range comes from, unless its estimator says otherwise
RANGE_WHY = "the values the estimator takes at sample size N and the public parameters"


@dataclass(frozen=True)
class PropertyRange:
    """The range a property's target lies in (``value_range``), the narrower range its value is
    clamped to (``clamp_range``, None: the same), why (``why``), and at ``N = 0`` the largest
    distance to it over histograms of total at most ``b`` (``total_bound``)."""

    value_range: tuple[float, float]
    why: str = RANGE_WHY
    clamp_range: tuple[float, float] | None = None
    total_bound: Callable[[int], float] | None = None


def checked_domain_size(release: Any) -> int | None:
    """The release's ``domain_size``: public, and checked against the data before anything
    was spent (a source with more distinct items is refused), so the true support is at most
    it; None for exact input (``release`` None) or a release without one."""
    params = getattr(release, "mechanism_params", None) or {}
    d = params.get("domain_size") if release is not None else None
    return None if d is None else int(d)


def l1_bound_of(release: Any) -> float:
    """The release's sorted-ℓ1 bound (``inf`` without a finite one, or for exact input)."""
    err = getattr(release, "error", None)
    bound = math.inf if err is None or err.kind != "bound" else float(np.max(err.value))
    return bound if math.isfinite(bound) else math.inf


def entropy_range(release: Any, miller_madow: bool) -> PropertyRange:
    """The plug-in entropy of a histogram of total ``n`` and support ``S`` is at most
    ``ln min(n, S)`` (Miller–Madow adds ``(S − 1)/(2n) <= (n − 1)/(2n)``). From a release,
    ``n <= B`` (the top of the total's interval) when the interval holds — an event the
    entropy's statement already includes — and ``S <= d``, the checked ``domain_size``."""
    d = checked_domain_size(release)

    def top(b: float) -> float:
        mm = max(b - 1, 0) / (2 * max(b, 1)) if math.isfinite(b) else 0.5
        return math.log(max(min(b, d or math.inf), 1)) + (mm if miller_madow else 0.0)

    interval = getattr(release, "total_interval", None)
    big_b = math.inf if interval is None else int(interval[1])
    why = ("the plug-in entropy of a histogram of total n and support S is at most "
           f"ln min(n, S){' + (n − 1)/(2n)' if miller_madow else ''}"
           + ("" if d is None else f", S <= domain_size = {d} (checked at release)")
           + ("" if interval is None else f", and n <= {big_b} when the total's interval "
              "holds, which this statement already includes"))
    return PropertyRange(value_range=(0.0, top(big_b)), why=why, total_bound=top)


def support_range(release: Any, scale: float) -> PropertyRange:
    """The support (divided by ``scale``) is at most the checked ``domain_size`` ``d``; at
    ``N = 0`` at most the total's ``b`` too."""
    d = checked_domain_size(release)
    top = math.inf if d is None else d / scale
    return PropertyRange(value_range=(0.0, top), total_bound=lambda b: min(b / scale, top),
                         why=f"the support is at most domain_size = {d}, checked at release")


def coverage_range(release: Any, observed: float, extra: float, scale: float) -> PropertyRange:
    """The support coverage of a histogram of support ``S`` lies in ``[S, S + extra]``
    (``extra = t·N``), divided by ``scale``: the value is clamped to that range around the
    released support. From a release the target's ``S`` is the true support, within the
    release's sorted-ℓ1 bound ``b`` of the released one when the statement holds, so its range
    is ``[S − b, S + b + extra]``."""
    clamp_range = (observed / scale, (observed + extra) / scale)
    if release is None:
        return PropertyRange(value_range=clamp_range)
    b = l1_bound_of(release)
    return PropertyRange(
        value_range=(max(observed - b, 0.0) / scale, (observed + b + extra) / scale),
        clamp_range=clamp_range, why=(
            "the support coverage of a histogram of support S lies in [S, S + t·N] at sample "
            "size N, and the true support is within the release's sorted-ℓ1 bound of the "
            "released one when the statement holds"))


def within_range(error: ErrorStatement, value: float, value_range: tuple[float, float],
                 why: str) -> ErrorStatement:
    """``error`` cut to ``value_range``, the range the property's target lies in whenever
    ``error`` holds (``why`` says where the range comes from).

    The published interval is ``[value ± b] ∩ value_range`` (what
    :meth:`~dpfreq.anonymized.property_estimate.PropertyEstimate.table` prints), with ``value``
    in the range. When ``b`` reaches ``max(value − lo, hi − value)`` that intersection is the
    whole range: ``b`` is lowered to that distance (the same interval) and the statement is
    marked vacuous. The range rests on no event beyond those ``error`` already holds on, so
    the confidence is unchanged.
    """
    if error.kind != "bound" or error.confidence is None or math.isnan(value):
        return error
    lo, hi = value_range
    widest = max(value - lo, hi - value)
    bound = float(np.max(error.value))
    if not (math.isfinite(widest) and bound >= widest):
        return error
    if bound == widest:  # exactly the whole range: the same statement, vacuous
        return replace(error, vacuous=True)
    return ErrorStatement(kind="bound", confidence=error.confidence, value=widest, vacuous=True,
                          description=(
        f"{error.description} Cut to the range [{lo:.6g}, {hi:.6g}] the property lies in "
        f"({why}): the interval is that whole range, so the statement is vacuous; its "
        f"half-width around {value:.6g} is {widest:.6g} instead of {bound:.6g}, at the same "
        f"confidence {error.confidence:g} (no further event is used)."))
