"""The direct profile release of one class vector, and the typed mechanism parameters of a
profile release.

:func:`release_profile` and the grouped profile draw the noise of the direct mechanism with
:func:`draw_direct` and build the release's value, intervals and mechanism parameters with
:func:`build_direct` (post-processing only). The mechanism parameters are typed
(:class:`ProfileMechanism`, :class:`DirectParams`); the public ``mechanism_params`` mapping of
a release is written from them by their ``to_dict``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.profile.direct import (
    DirectLayout,
    derived_vector,
    direct_layout,
    noisy_classes,
    project_to_simplex,
)
from dpfreq.profile.intervals import IntervalSet, direct_intervals, direct_widths
from dpfreq.profile.plan import USEFUL_L1, plan_profile
from dpfreq.release import RELATIONS, ErrorStatement

__all__ = ["DirectParams", "DirectRelease", "ProfileMechanism", "build_direct", "direct_fields",
           "draw_direct", "release_direct"]

MECHANISM = "direct-count-of-counts"


@dataclass(frozen=True)
class ProfileMechanism:
    """What every profile release states about its mechanism (public parameters only)."""

    engine: str
    why: str
    method: str
    domain_size: int
    max_count: int
    confidence: float
    unit: str

    def to_dict(self) -> dict[str, Any]:
        """The public ``mechanism_params`` entries (the JSON and the docs read these keys)."""
        n = self.max_count
        return {"engine": self.engine, "why": self.why, "method": self.method,
                "domain_size": self.domain_size, "max_count": n, "confidence": self.confidence,
                "clamping": f"counts above max_count = {n} clamped to {n} before noising",
                "relation": RELATIONS[self.unit]}


@dataclass(frozen=True)
class DirectParams:
    """The parameters of one direct release: its noise layout and exact half-widths, and the
    noisy count-of-counts it released."""

    gamma: Fraction
    sensitivity: int
    derive_zero: bool
    layout_why: str
    half_width_items: NDArray[np.int64]
    band_half_width_items: NDArray[np.int64]
    noisy_count_of_counts: NDArray[np.int64]

    @property
    def noised(self) -> str:
        """Which classes got noise, in words."""
        if self.derive_zero:
            return "the classes t >= 1 (class 0 = d minus their sum)"
        return f"all {self.noisy_count_of_counts.size} classes"

    def to_dict(self) -> dict[str, Any]:
        """The public ``mechanism_params`` entries of the direct mechanism."""
        return {"gamma": str(self.gamma), "sensitivity": self.sensitivity,
                "layout": "class 0 derived" if self.derive_zero else "all classes",
                "layout_why": self.layout_why,
                "noise": f"exact discrete Laplace on {self.noised}",
                "post_processing": "nearest non-negative integer vector summing to d "
                                   "(ℓ2 and ℓ1)",
                "half_width_items": self.half_width_items.tolist(),
                "band_half_width_items": self.band_half_width_items.tolist(),
                "noisy_count_of_counts": self.noisy_count_of_counts}


@dataclass(frozen=True)
class DirectRelease:
    """The direct mechanism's outputs on one class vector (before the release object)."""

    value: NDArray[np.float64]
    params: DirectParams
    error: ErrorStatement
    l1_bound: float
    noisy_profile: NDArray[np.float64]
    mechanism: str = MECHANISM


@lru_cache(maxsize=256)
def _useful(d: int, n: int, unit: str, method: str, confidence: float) -> str:
    """The ε (a search over plans: ~40 plan evaluations) that would make a vacuous statement
    useful; a function of public parameters only, so cached (a grouped release asks it once per
    group, an audit once per run)."""
    plan = plan_profile(domain_size=d, max_count=n, epsilon=1.0, unit=unit, method=method,
                        confidence=confidence)
    eps = plan.useful_epsilon()
    if eps is None:
        return f"no ε ≤ 1000 bounds the ℓ1 error by {USEFUL_L1:g} with method={method!r}"
    return f"ε ≈ {eps:g} would bound the ℓ1 error by {USEFUL_L1:g} with method={method!r}"


def vacuous_note(d: int, n: int, unit: str, method: str, confidence: float) -> str:
    """The sentence appended to a vacuous statement: the ε that would make it useful."""
    target = _useful(d, n, unit, method, confidence)
    if method != "direct":
        target += "; " + _useful(d, n, unit, "direct", confidence)
    return (f" This statement is vacuous: the band allows any profile (ℓ1 bound 2); {target} "
            "(see plan_profile).")


def _interval_error(iv: IntervalSet, estimate: NDArray[np.float64], confidence: float,
                    description: str, note: str | None) -> ErrorStatement:
    vacuous = note is not None
    half = np.maximum(estimate - iv.lower, iv.upper - estimate)
    return ErrorStatement(kind="interval", confidence=confidence, value=half,
                          description=description + (note or ""), lower=iv.lower,
                          upper=iv.upper, band_lower=iv.band_lower, band_upper=iv.band_upper,
                          vacuous=vacuous)


def draw_direct(classes: NDArray[np.int64], layout: DirectLayout, *, d: int, n: int,
                gen: np.random.Generator) -> NDArray[np.int64]:
    """The noisy count-of-counts ``y[0..n]`` of the layout (class 0 derived or noised)."""
    if layout.derive_zero:
        return derived_vector(noisy_classes(classes[1:], layout.gamma, gen) if n
                              else classes[1:], d)
    return noisy_classes(classes, layout.gamma, gen)


def build_direct(y: NDArray[np.int64], layout: DirectLayout, *, d: int, n: int, unit: str,
                 conf: float) -> DirectRelease:
    """Projection and exact intervals of a noisy count-of-counts (post-processing only)."""
    gamma = layout.gamma
    x = project_to_simplex(y, d)
    iv = direct_intervals(y, x, gamma=gamma, domain_size=d, confidence=conf,
                          derive_zero=layout.derive_zero)
    q, q_band = direct_widths(gamma, n, conf, derive_zero=layout.derive_zero)
    l1 = min(2.0, 2.0 * float(q_band.sum()) / d)
    r = x.astype(np.float64) / d
    params = DirectParams(gamma=gamma, sensitivity=layout.sensitivity,
                          derive_zero=layout.derive_zero, layout_why=layout.why,
                          half_width_items=q, band_half_width_items=q_band,
                          noisy_count_of_counts=y)
    desc = (f"Each class's interval holds with probability at least {conf:.6g} and the band "
            f"holds for all {n + 1} classes at once with probability at least {conf:.6g}: exact "
            f"quantiles (±{int(q[-1])} items per noised class, ±{int(q_band[-1])} for the band"
            + (f"; class 0 ±{int(q[0])}, band ±{int(q_band[0])}" if layout.derive_zero else "")
            + f") of the discrete Laplace noise (γ = ε/{layout.sensitivity}) on "
            f"{params.noised}, widened to contain the released projection; hence the ℓ1 error "
            f"is at most {l1:.6g} with probability at least {conf:.6g}.")
    note = vacuous_note(d, n, unit, "direct", conf) if iv.vacuous else None
    return DirectRelease(value=r, params=params, error=_interval_error(iv, r, conf, desc, note),
                         l1_bound=l1, noisy_profile=y.astype(np.float64) / d)


def direct_fields(y: NDArray[np.int64], layout: DirectLayout, *, d: int, n: int, eps: float,
                  unit: str, conf: float, norm: str, seeded: bool,
                  params: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of the :class:`~dpfreq.profile.ProfileRelease` of a noisy count-of-counts
    ``y`` (post-processing only).

    ``params`` holds the release's public context (:class:`ProfileMechanism`'s entries); the
    direct mechanism's own entries (:class:`DirectParams`) are computed from ``y`` and replace
    any of the same name. A release (:func:`~dpfreq.profile.release_profile`) and a saved
    release loaded again (:meth:`~dpfreq.profile.ProfileRelease.from_measurement`) are both
    made from these fields: one function of one noisy measurement.
    """
    out = build_direct(y, layout, d=d, n=n, unit=unit, conf=conf)
    return {"value": out.value, "epsilon": eps, "delta": 0.0, "unit": unit,
            "mechanism": out.mechanism, "mechanism_params": {**params, **out.params.to_dict()},
            "seeded": seeded, "error": out.error, "domain_size": d, "max_count": n,
            "method": "direct", "l1_bound": out.l1_bound, "l1_confidence": conf, "B": 0,
            "norm": norm, "noisy_profile": out.noisy_profile}


def release_direct(classes: NDArray[np.int64], *, d: int, n: int, eps: float, unit: str,
                   conf: float, gen: np.random.Generator) -> DirectRelease:
    """Noise, projection and exact intervals of the direct mechanism (layout per unit)."""
    layout = direct_layout(unit, eps, n)
    return build_direct(draw_direct(classes, layout, d=d, n=n, gen=gen), layout, d=d, n=n,
                        unit=unit, conf=conf)
