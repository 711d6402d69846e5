"""The evaluation shared by the symmetric-property estimators of
:mod:`dpfreq.anonymized.properties`: reading a release or an exact histogram, the linear
plug-in ``Σ f(r, n) φ_r``, the error statement ``L ×`` the release's sorted-ℓ1 bound cut to the
range the property lies in, and the
:class:`~dpfreq.anonymized.property_estimate.PropertyEstimate` built from them."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import check_int, message
from dpfreq.anonymized.histogram_input import as_prevalences
from dpfreq.anonymized.plan import epsilon_for_l1
from dpfreq.anonymized.property_estimate import PropertyEstimate, clamp, no_statement
from dpfreq.anonymized.property_range import RANGE_WHY, within_range
from dpfreq.errors import ParameterError
from dpfreq.release import ErrorStatement, Release

__all__ = [
    "PropertyInput",
    "build_estimate",
    "empty_error",
    "linear_plugin",
    "max_count_of",
    "private_error",
    "read_histogram",
    "vacuous_tail",
]

F64 = NDArray[np.float64]



@dataclass(frozen=True)
class PropertyInput:
    """A histogram read for an estimator: its distinct counts and their prevalences, the
    sample size ``n`` of ``f(r, n)`` and the release (None for an exact histogram)."""

    counts: NDArray[np.int64]
    prevalences: NDArray[np.int64]
    sample_size: int
    release: Any  # the release, or None for an exact histogram


def read_histogram(histogram: Any) -> PropertyInput:
    """The input of the estimator called: an anonymized-histogram release or an exact histogram."""
    if isinstance(histogram, Release):
        if not hasattr(histogram, "n_estimate"):
            raise ParameterError(message("histogram", "an anonymized-histogram release, a "
                                         "mapping {count: prevalence} or an array of counts",
                                         type(histogram).__name__))
        counts, prev = as_prevalences(histogram, "histogram")
        n = check_int(int(histogram.n_estimate), "histogram.n_estimate", minimum=0)
        return PropertyInput(counts, prev, n, histogram)
    counts, prev = as_prevalences(histogram, "histogram")
    n = int(np.dot(counts.astype(object), prev.astype(object))) if counts.size else 0
    return PropertyInput(counts, prev, n, None)


def private_error(inp: PropertyInput, lipschitz: float, width: float, *,
                  total_included: bool = False) -> ErrorStatement:
    """``L ×`` the release's sorted-ℓ1 bound, with the release's confidence (``total_included``:
    the caller adds the uncertainty of ``N``, so the description does not say it is left out)."""
    err = getattr(inp.release, "error", None)
    bound = math.nan if err is None or err.kind != "bound" else float(np.max(err.value))
    if err is None or not (math.isfinite(bound) and math.isfinite(lipschitz)):
        return no_statement("the release states no finite sorted-ℓ1 bound (or the estimator "
                            "has no Lipschitz constant): no error statement is available")
    value = float(lipschitz * bound)
    vacuous = value >= width
    tail = vacuous_tail(inp, lipschitz, width, "the range of the quantity itself") \
        if vacuous else ""
    return ErrorStatement(kind="bound", confidence=err.confidence, value=value, vacuous=vacuous,
                          description=(
        f"|raw estimate − the same estimator on the true histogram at sample size N| <= "
        f"L × B = {value:.6g} with probability about {err.confidence:g}, where B = {bound:.6g} "
        f"is the release's sorted-ℓ1 bound and L = {lipschitz:.6g} the estimator's sorted-ℓ1 "
        f"Lipschitz constant (counts <= max(N, largest count))."
        + ("" if total_included else " The uncertainty of N itself is not included.")
        + tail))


def vacuous_tail(inp: PropertyInput, lipschitz: float, width: float, what: str) -> str:
    """The sentence a vacuous statement from a release ends with: it is no better than
    ``what`` (of width ``width``) at the release's ε, and the ε that would bring ``L × B``
    under half that width (when the estimator has a Lipschitz constant and one is found)."""
    rel = inp.release
    err = getattr(rel, "error", None)
    useful = None
    if err is not None and err.confidence is not None and math.isfinite(lipschitz) \
            and lipschitz > 0 and math.isfinite(width):
        useful = epsilon_for_l1(width / (2 * lipschitz), inp.sample_size,
                                str(getattr(rel, "method", "auto")), err.confidence)
    return (f" It is no better than {what}: the estimate carries little information at the "
            f"release's ε = {float(rel.epsilon):g}" + (
                f"; an epsilon of about {useful:.3g} would bring L × B under half that range "
                "(predicted for a Zipf(1)-shaped histogram)." if useful is not None else "."))


def empty_error(inp: PropertyInput, value: float, value_range: tuple[float, float],
                total_bound: Callable[[int], float] | None) -> ErrorStatement:
    """The statement of an estimate from a release with ``N = 0`` (the empty histogram).

    The release's exact interval ``[0, B]`` holds the true total at its confidence, and
    ``total_bound(B)`` is the largest distance from ``value`` to the property of any histogram
    of total at most ``B`` (the property's range there): together, a bound at that confidence,
    vacuous when it covers the whole of ``value_range``.
    """
    interval = getattr(inp.release, "total_interval", None)
    conf = getattr(getattr(inp.release, "error", None), "confidence", None)
    if total_bound is None or interval is None or conf is None:
        return no_statement("N = 0: the value on the empty sample is returned; no error "
                            "statement is available")
    big_b = int(interval[1])
    bound = float(total_bound(big_b))
    vacuous = value - bound <= value_range[0] and value + bound >= value_range[1]
    return ErrorStatement(kind="bound", confidence=conf, value=bound, vacuous=vacuous,
                          description=(
        f"N = 0 (the empty histogram is released): the true total is at most {big_b} with "
        f"probability >= {conf:g} (the release's exact interval), and on every histogram of "
        f"total <= {big_b} the property lies within {bound:.6g} of {value:.6g}."))


def build_estimate(inp: PropertyInput, name: str, raw: float, lipschitz: float, big_r: int,
            parameters: dict[str, Any], *, value_range: tuple[float, float] = (0.0, math.inf),
            width: float = math.inf, error: ErrorStatement | None = None,
            total_bound: Callable[[int], float] | None = None,
            clamp_range: tuple[float, float] | None = None,
            range_why: str = RANGE_WHY) -> PropertyEstimate:
    """Build the estimate: ``value`` is ``raw`` clamped to ``clamp_range`` (default
    ``value_range``), ``clamped`` says whether that moved it; ``width`` is the trivial error
    (for the vacuous flag). ``total_bound`` gives the statement at ``N = 0``
    (:func:`empty_error`). From a release, ``value_range`` is the range the property's target
    lies in whenever its statement holds, and the statement is cut to it (:func:`within_range`,
    ``range_why`` saying where the range comes from)."""
    rel = inp.release
    value = clamp(float(raw), clamp_range or value_range)
    common: dict[str, Any] = {"property_name": name, "sample_size": inp.sample_size,
              "lipschitz_constant": float(lipschitz), "max_count": big_r,
              "parameters": parameters, "raw_value": float(raw), "clamped": value != raw
              and not math.isnan(raw), "value_range": value_range, "value": value,
              "delta": 0.0, "unit": "event"}
    if rel is None:
        err = error or ErrorStatement(
            kind="bound", confidence=1.0, value=0.0,
            description="exact plug-in value on the raw histogram: NOT differentially private")
        return PropertyEstimate(epsilon=math.inf, mechanism="exact plug-in (non-private "
                                "reference)", mechanism_params={"sample_size": inp.sample_size,
                                                               **parameters},
                                seeded=False, error=err, private=False, **common)
    if error is None and inp.sample_size == 0:
        error = empty_error(inp, value, value_range, total_bound)
    if error is None:
        error = private_error(inp, lipschitz, width)
    cut = within_range(error, value, value_range, range_why)
    if cut.vacuous and not error.vacuous:  # vacuous by the cut alone: the same ε sentence
        cut = replace(cut, description=cut.description + vacuous_tail(
            inp, lipschitz, value_range[1] - value_range[0], "the range the property lies in"))
    error = cut
    common["unit"] = str(getattr(rel, "unit", "event"))
    common["delta"] = float(getattr(rel, "delta", 0.0))
    return PropertyEstimate(
        epsilon=float(rel.epsilon), mechanism=f"plug-in on {rel.mechanism} (post-processing)",
        mechanism_params={"sample_size": inp.sample_size, "release_mechanism": rel.mechanism,
                          "release_method": getattr(rel, "method", None), **parameters},
        seeded=bool(rel.seeded), error=error, private=True, **common)


def max_count_of(inp: PropertyInput) -> int:
    """``R = max(sample size, largest count, 1)``: the count range of the Lipschitz constant."""
    top = int(inp.counts[-1]) if inp.counts.size else 1
    return max(top, inp.sample_size, 1)


def linear_plugin(inp: PropertyInput, coef: Callable[[F64], F64]) -> float:
    """The linear plug-in ``Σ_r coef(r) φ_r``."""
    if inp.counts.size == 0:
        return 0.0
    return float(np.dot(coef(inp.counts.astype(np.float64)), inp.prevalences.astype(np.float64)))
