"""The published fields of a Wu & Pagh sketch release as a function of its noisy measurement.

The measurement is the counts of noisy item counts on the window ``t = −B..n+B``; everything
here is deterministic post-processing of it (the reconstruction of :mod:`dpfreq.profile.solve`,
the simulated intervals of :mod:`dpfreq.profile.intervals` with a generator keyed by the
measurement, the Theorem 1.1 bound) and takes no ``rng``. :func:`sketch_fields` returns the
fields of a :class:`~dpfreq.profile.ProfileRelease` (made by
:func:`dpfreq.profile.reconstruct.sketch_release` and
:meth:`dpfreq.profile.ProfileRelease.from_measurement`), so that a release and a saved release
loaded again are one function of one measurement.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import check_count_array, check_int, message
from dpfreq.errors import DataError, ParameterError
from dpfreq.noise import discrete_laplace_gamma
from dpfreq.profile.bounds import (
    USEFUL_L1,
    event_probability,
    minimum_bound_parameter,
    profile_error_bounds,
    useful_sketch_epsilon,
    window_bound,
)
from dpfreq.profile.checks import check_reconstruction_memory
from dpfreq.profile.intervals import SIMULATION_DRAWS, simulated_intervals
from dpfreq.profile.kernel import CirculantKernel, get_kernel
from dpfreq.profile.mle import smooth_profile
from dpfreq.profile.solve import DRAW_EM_ITERATIONS, EM_ITERATIONS, solve_profile, solve_profiles
from dpfreq.release import RELATIONS, ErrorStatement

__all__ = ["SketchMechanism", "checked_sketch_counts", "gamma_alpha", "sketch_fields"]


def gamma_alpha(epsilon: float) -> tuple[Fraction, float, float]:
    """(γ as a Fraction, float γ, α = e^{-γ}) for the noise the sketch actually drew."""
    gamma = discrete_laplace_gamma(epsilon)
    g = float(gamma)
    return gamma, g, math.exp(-g)



def _vacuous_note(d: int, n: int, epsilon: float, confidence: float) -> str:
    """The sentence appended to a vacuous statement: the ε that would make it useful."""
    eps = useful_sketch_epsilon(d, n, epsilon, confidence)
    target = (f"ε ≈ {eps:g} would bound the ℓ1 error by {USEFUL_L1:g}" if eps is not None
              else f"no ε <= 1000 bounds the ℓ1 error by {USEFUL_L1:g} at this d and n")
    return (f" This statement is vacuous: the simulated band would allow any profile (ℓ1 2), "
            f"so every interval and the band are the trivial [0, 1] (single classes are not "
            f"resolved); "
            f"{target} (see plan_profile).")


def _description(method: str, confidence: float, centre: Any, l1: float,
                 l1_conf: float) -> str:
    """The error statement's description of a sketch release (without the vacuous note)."""
    around = ("the released estimate" if centre is None else
              "a smooth profile as plausible as the estimate (EM's estimate is sparse)")
    desc = (f"Per-class intervals and a simultaneous band at confidence {confidence:.6g}, "
            f"computed by pushing {SIMULATION_DRAWS} simulated sketches (noise of the known "
            f"law) through the same reconstruction around {around} (approximate coverage). "
            f"Wu & Pagh's Theorem 1.1 bounds the ℓ1 error by {l1:.6g} with "
            f"probability at least {l1_conf:.6g} (release.l1_bound).")
    if method == "mle":
        desc += (" The theorem is proved for Algorithms 2+3 (method='fft'); the estimate was "
                 "computed by EM maximum likelihood (at most "
                 f"{EM_ITERATIONS} iterations; each simulated sketch of the intervals runs at "
                 f"most {DRAW_EM_ITERATIONS}, from its own Algorithms 2+3 start). Measured "
                 "over 1,000 seeded releases per ε in {0.25, 0.5, 1, 4} at nominal 0.9, the "
                 "per-class intervals covered 0.90–0.92 on average (single classes down to "
                 "0.75 in a set of 200), and the band 0.900–0.924: conservative by about 2 "
                 "points at ε <= 1.")
    return desc


@dataclass(frozen=True)
class SketchMechanism:
    """What a sketch release states about its reconstruction (public parameters and the
    solver's diagnostics). :meth:`to_dict` writes the caller's ``extra`` entries first (the
    system's own, e.g. the engine), then these keys (overriding a caller's value in place),
    then ``diagnostics``."""

    kernel: CirculantKernel
    gamma: Fraction
    domain_size: int
    norm: str
    method: str
    confidence: float
    bound_parameter: int
    eta_event: float
    bounds: Mapping[str, float]
    l1_bound: float
    counted_fraction: float
    smoothed_centre: bool
    extra: Mapping[str, Any]
    diagnostics: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """The public ``mechanism_params`` (the JSON and the docs read these keys)."""
        k = self.kernel
        return {**self.extra,
                "gamma": str(self.gamma), "alpha": k.alpha, "sensitivity": 1, "clamp_bound": k.B,
                "max_count": k.max_count, "domain_size": self.domain_size, "norm": self.norm,
                "method": self.method, "confidence": self.confidence, "kernel_size": k.size,
                "kernel_norm": k.norm_constant, "inverse_norm_1": k.inverse_norm_1(),
                "inverse_norm_2": k.inverse_norm_2(), "bound_parameter": self.bound_parameter,
                "eta_event": self.eta_event, "bounds": dict(self.bounds),
                "l1_bound": self.l1_bound, "counted_fraction": self.counted_fraction,
                "intervals": f"simulated ({SIMULATION_DRAWS} draws, generator keyed by the "
                             "release)",
                "interval_centre": ("early-stopped EM within n/2 of the maximum likelihood, "
                                    "from a flat start keeping the estimate's cap class"
                                    if self.smoothed_centre else "estimate"),
                "relation": RELATIONS["event"], **self.diagnostics}


def sketch_fields(
    counts: NDArray[np.int64], *, domain_size: int, max_count: int, epsilon: float, B: int,
    method: str, norm: str, confidence: float, seeded: bool,
    mechanism_params: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The fields of the :class:`~dpfreq.profile.ProfileRelease` of a Wu & Pagh
    reconstruction from validated counts of noisy values (post-processing only).

    Runs :func:`solve_profile`, then the intervals of
    :func:`dpfreq.profile.intervals.simulated_intervals` (simulated sketches of the known noise
    law pushed through the same reconstruction around the estimate; the generator is keyed by
    the release, so this is post-processing without budget), and evaluates the Theorem 1.1 ℓ1
    bound at ``η = (1 − confidence)/2`` (the theorem holds with probability ``1 − 2η``). The
    bound is ``release.l1_bound``, not the per-row ±. Inputs are assumed checked (see
    :func:`reconstruct_profile_from_counts`). The unit of privacy is ``"event"``.
    """
    d, n, b = domain_size, max_count, B
    gamma, g, alpha = gamma_alpha(epsilon)
    kernel = get_kernel(n, b, alpha)
    if kernel.min_eigenvalue <= 0:  # pragma: no cover - excluded by B >= B_min
        raise ParameterError(message("B", "large enough for an invertible "
                                     "kernel", b))
    f_tilde = counts.astype(np.float64) / d
    r, diagnostics = solve_profile(f_tilde, kernel, norm=norm, method=method)

    def solve(c: NDArray[np.int64]) -> NDArray[np.float64]:
        return solve_profiles(c.astype(np.float64) / d, kernel, norm=norm, method=method,
                              em_iterations=DRAW_EM_ITERATIONS)

    centre = (smooth_profile(f_tilde, kernel, reference=r, items=float(counts.sum()))
              if method == "mle" else None)
    iv = simulated_intervals(r, counts, solve=solve, domain_size=d, max_count=n, B=b,
                             gamma=gamma, confidence=confidence, label=f"{method}/{norm}",
                             centre=centre)
    eta = (1.0 - confidence) / 2.0
    bounds = profile_error_bounds(kernel, domain_size=d, eta=eta)
    b_paper = window_bound(d, g, eta)
    eta_b = event_probability(d, b, g)
    l1_conf = confidence if b >= b_paper else max(0.0, 1.0 - eta - eta_b)
    l1 = min(2.0, bounds["1"])
    desc = _description(method, confidence, centre, l1, l1_conf)
    note = _vacuous_note(d, n, epsilon, confidence) if iv.vacuous else None
    half = np.maximum(r - iv.lower, iv.upper - r)
    error = ErrorStatement(kind="interval", confidence=confidence, value=half,
                           description=desc + (note or ""), lower=iv.lower, upper=iv.upper,
                           band_lower=iv.band_lower, band_upper=iv.band_upper,
                           vacuous=note is not None)
    params = SketchMechanism(
        kernel, gamma, d, norm, method, confidence, bound_parameter=b_paper, eta_event=eta_b,
        bounds=bounds, l1_bound=l1, counted_fraction=int(counts.sum()) / d,
        smoothed_centre=centre is not None, extra=dict(mechanism_params or {}),
        diagnostics=diagnostics).to_dict()
    return {"value": r, "epsilon": epsilon, "delta": 0.0, "unit": "event",
            "mechanism": f"wu-pagh-{method}", "mechanism_params": params,
            "seeded": bool(seeded), "error": error, "domain_size": d, "max_count": n,
            "method": method, "l1_bound": l1, "l1_confidence": l1_conf, "B": b, "norm": norm,
            "noisy_profile": f_tilde}



def _window(counts: NDArray[np.int64], n: int, B: int | None) -> int:
    """The window parameter B of counts of length ``n + 2B + 1`` (checked against ``B``)."""
    if B is None:
        extra = counts.size - n - 1
        if extra < 0 or extra % 2:
            raise DataError(message("profile_counts",
                                    f"of length n + 2B + 1 for some B >= 0 (n = {n})",
                                    f"length {counts.size}"))
        return extra // 2
    b = check_int(B, "B", minimum=0)
    if counts.size != n + 2 * b + 1:
        raise DataError(message("profile_counts", f"of length n + 2B + 1 = "
                                f"{n + 2 * b + 1}", f"length {counts.size}"))
    return b


def checked_sketch_counts(profile_counts: Any, *, domain_size: int, max_count: int,
                          epsilon: float, B: int | None) -> tuple[NDArray[np.int64], int]:
    """The counts of noisy values and their window ``B`` (inferred from the length when None),
    checked: non-negative integers of length ``n + 2B + 1``, ``B >= B_min(ε)``, a sum of at
    most ``d``, and a reconstruction that fits in memory (``d``, ``n``, ε already checked)."""
    counts = check_count_array(profile_counts, "profile_counts")
    b = _window(counts, max_count, B)
    b_min = minimum_bound_parameter(float(discrete_laplace_gamma(epsilon)))
    if b < b_min:
        raise ParameterError(message("B", f"at least B_min(ε) = {b_min} (smaller B can "
                                     "make the kernel singular)", b))
    if int(counts.sum()) > domain_size:
        raise DataError(message("profile_counts", f"counts summing to at most "
                                f"domain_size = {domain_size}", "a larger sum"))
    check_reconstruction_memory(max_count, b, epsilon=epsilon)
    return counts, b
