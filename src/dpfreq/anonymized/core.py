"""The shared steps of the anonymized release: parameter checks, feasibility, the mechanism
run and its error statements on one histogram in prevalence form.

Used by :func:`dpfreq.anonymized.release_anonymized_histogram` (one histogram) and by
:mod:`dpfreq.anonymized.grouped` (one histogram per group).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dpfreq._validate import (
    check_choice,
    check_confidence,
    check_epsilon,
    check_int,
    check_unit,
    message,
)
from dpfreq.anonymized import auto
from dpfreq.anonymized import hay as hay_module
from dpfreq.anonymized.accuracy import (
    MAX_TOTAL,
    MAX_WORKING_BYTES,
    run_plan,
    simulated_l1_bound,
    simulation_count,
    total_interval,
    working_bytes,
    working_elements,
)
from dpfreq.anonymized.histogram_input import total_of
from dpfreq.anonymized.plan import epsilon_for_l1
from dpfreq.anonymized.result import AnonymizedHistogramRelease
from dpfreq.anonymized.steps import I64, ExactNoise, Outcome, epsilon_fractions
from dpfreq.errors import DataError, ParameterError
from dpfreq.noise import discrete_laplace_tail_bound
from dpfreq.release import RELATIONS, ErrorStatement

__all__ = ["FUNC", "METHODS", "REFUSED_UNITS", "AnonymizedMechanism", "build_prevalences",
           "check_common", "check_feasible", "check_split", "draw_prevalences",
           "histogram_error", "mechanism_name", "plan_method"]

METHODS = ("auto", "privhist", "privhist-tuned", "hay")
FUNC = "release_anonymized_histogram"


def check_split(split: Any, epsilon: float, method: str) -> tuple[float, float, float]:
    """A user's budget split ``(ε1, ε2, ε3)`` (``(ε1, ε2)`` for Hay et al.), validated."""
    high = method != "hay" and not auto.plan_for(method, epsilon).low_privacy_branch
    if method == "hay":
        rule = (f"a sequence (ε1, ε2[, 0]) of finite numbers with ε1 > 0, ε2 > 0 and sum <= "
                f"epsilon = {epsilon!r}")
    else:
        rule = ("a sequence (ε1, ε2, ε3) of finite numbers >= 0 with ε1 > 0, ε2 > 0, "
                + ("ε3 > 0 (high-privacy branch), " if high else "")
                + f"and sum <= epsilon = {epsilon!r}")
    if isinstance(split, str | bytes) or not isinstance(split, Sequence):
        raise ParameterError(message("split", rule, split))
    try:
        values = [float(v) for v in split]
    except (TypeError, ValueError):
        raise ParameterError(message("split", rule, split)) from None
    if method == "hay" and len(values) == 2:
        values.append(0.0)
    if len(values) != 3 or any(not math.isfinite(v) or v < 0 for v in values):
        raise ParameterError(message("split", rule, split))
    e1, e2, e3 = values
    if e1 <= 0 or e2 <= 0 or sum(values) > epsilon * (1 + 1e-9):
        raise ParameterError(message("split", rule, split))
    if (method == "hay" and e3 != 0) or (high and e3 <= 0):
        raise ParameterError(message("split", rule, split))
    for part in values:
        if part > 0:
            check_epsilon(part, "split")
    return e1, e2, e3


def check_common(epsilon: Any, unit: Any, method: Any, confidence: Any) -> tuple[float, float]:
    """``(ε, confidence)`` checked, with the unit and the method: the parameters that every
    anonymized release checks first, grouped or not."""
    epsilon = check_epsilon(epsilon, "epsilon")
    check_unit(unit, ("event",), refused=REFUSED_UNITS)
    check_choice(method, "method", METHODS)
    return epsilon, check_confidence(confidence, "confidence")


def plan_method(method: str, split: Any, epsilon: float,
                domain_size: Any) -> tuple[auto.Plan, int | None]:
    """The mechanism's plan at ``epsilon`` (the method and its budget split, a user's ``split``
    checked against it) and the checked ``domain_size`` (None when not given)."""
    if method == "auto" and split is not None:
        raise ParameterError(message("split", "None when method='auto' (auto picks "
                                     "its own split)", split))
    plan = auto.plan_for(method, epsilon, None if split is None else
                         check_split(split, epsilon, method))
    d = None if domain_size is None else check_int(domain_size, "domain_size", minimum=1)
    return plan, d


def check_feasible(counts: I64, prevalences: I64, epsilon: float, plan: auto.Plan) -> None:
    """Refuse (before any budget is spent) what cannot be computed exactly or in memory.

    The sizes are those at the largest private total ``N`` the noise gives with probability
    ``1 − 10^-9``. The messages state the rule and the public limit, never the data's total
    or a memory need derived from it.
    """
    n = total_of(counts, prevalences)
    if n > MAX_TOTAL:
        raise DataError(message("source", "a histogram whose total count is at most 2**52 "
                                "(larger totals cannot be computed exactly)",
                                "a larger total"))
    n_high = n + discrete_laplace_tail_bound(1e-9, epsilon_fractions(plan.split)[0])
    if plan.method == "hay" and n_high > hay_module.HAY_MAX_LENGTH:
        raise ParameterError(message(
            "method", f"not 'hay' when the private total may exceed "
            f"{hay_module.HAY_MAX_LENGTH} (O(N) memory; a large total or a tiny epsilon; use "
            "'privhist' or 'auto', which run in O(sqrt N))", plan.method))
    need = working_bytes(n_high, epsilon, plan)
    if need > MAX_WORKING_BYTES:
        # no size is named: any number derived from N (even a rounded one) can move with one
        # event at a bucket edge
        raise ParameterError(message(
            "epsilon", f"such that {plan.method} fits in its working-memory limit of "
            f"{MAX_WORKING_BYTES / 2**30:g} GiB, which this source exceeds (about "
            "sqrt(N·min(ε, 1)) + N/T + 4·ln(N)/ε2 elements of 64 bytes: a tiny epsilon or a "
            "huge total)", epsilon))


def histogram_error(out: Outcome, plan: auto.Plan, epsilon: float, confidence: float,
                    interval: tuple[int, int]) -> tuple[ErrorStatement, float, float]:
    """The sorted-ℓ1 error statement of a release, and the half-width of the band on the items
    with count ``>= r`` with the confidence it holds at (simulated; exact for an empty
    release)."""
    if out.regime == "empty":
        return ErrorStatement(kind="bound", confidence=confidence, value=float(interval[1]),
                              description=(
            f"N = 0 and the empty histogram is released; its sorted-ℓ1 distance to the true "
            f"histogram is the true total n, which is at most {interval[1]} with probability "
            f">= {confidence:g} (exact, from the law of the noise on N)")), \
            float(interval[1]), confidence
    elements = working_elements(out.n_estimate, epsilon, plan)
    bound = simulated_l1_bound(out.counts, out.prevalences, out.n_estimate, plan=plan,
                               epsilon=epsilon, confidence=confidence,
                               simulations=simulation_count(elements, confidence, plan))
    vacuous = bound.value >= 2 * max(out.n_estimate, 1)
    tail = ""
    if vacuous:
        useful = epsilon_for_l1(out.n_estimate / 2, out.n_estimate, plan.method, confidence)
        tail = (" This is no better than the trivial bound 2N: the release carries little "
                "information" + (f"; an epsilon of about {useful:.3g} would bring the bound "
                                 "under N/2 (predicted for a Zipf(1)-shaped histogram)."
                                 if useful is not None else "."))
    return ErrorStatement(kind="bound", confidence=confidence, value=bound.value, description=(
        f"sorted-ℓ1 distance between the released and the true histogram <= {bound.value:g} "
        f"with probability about {confidence:g}: the {bound.rank}-th smallest of "
        f"{bound.simulations} simulated errors, obtained by rerunning {plan.method} with noise "
        f"of the known law on the released histogram (post-processing; coverage measured, not "
        f"proved). From the same runs, the number of items with count >= r is within "
        f"±{bound.band:g} of the released one for every r at once, with probability about "
        f"{bound.band_confidence:.3g} (the share of runs within it: the band is a whole number "
        f"of items). The true total n is in [{interval[0]}, {interval[1]}] with probability "
        f">= {confidence:g} (exact).{tail}"),
        vacuous=vacuous), bound.band, bound.band_confidence


REFUSED_UNITS = dict.fromkeys(
    ("item", "item_replace"),
    "an anonymized histogram has no public count cap, so one item's rows can move the sorted "
    "counts by any amount; for item-level protection release a profile instead: max_count of "
    "release_profile caps each item's count")
REFUSED_UNITS["device"] = "'device' is the longitudinal system's unit"


@dataclass(frozen=True)
class AnonymizedMechanism:
    """What an anonymized release states about its mechanism; ``steps`` are the mechanism's
    own parameters (:attr:`Outcome.params`). Written to ``mechanism_params`` by
    :meth:`to_dict`."""

    requested_method: str
    epsilon_fractions: tuple[Fraction, ...]
    steps: Mapping[str, Any]
    why: str | None
    engine: str | None
    domain_size: int | None

    def to_dict(self) -> dict[str, Any]:
        """The public ``mechanism_params`` (the JSON and the docs read these keys)."""
        params: dict[str, Any] = {"requested_method": self.requested_method,
                                  "epsilon_fractions": list(self.epsilon_fractions),
                                  "relation": RELATIONS["event"], **self.steps}
        if self.why is not None:
            params["why"] = self.why
        if self.engine is not None:
            params["engine"] = self.engine
        if self.domain_size is not None:
            params["domain_size"] = self.domain_size
        return params


def draw_prevalences(counts: I64, prev: I64, *, plan: auto.Plan, epsilon: float,
                     generator: Any) -> Outcome:
    """The mechanism's noisy outcome on one checked histogram (budget already charged)."""
    return run_plan(plan, counts, prev, epsilon=epsilon, noise=ExactNoise(generator))


def build_prevalences(out: Outcome, *, plan: auto.Plan, epsilon: float, method: str,
                      confidence: float, seeded: bool, engine_name: str | None,
                      domain_size: int | None) -> AnonymizedHistogramRelease:
    """The release object and its error statements of a noisy outcome (post-processing)."""
    fractions = epsilon_fractions(plan.split)
    interval = total_interval(out.n_estimate, fractions[0], confidence)
    params = AnonymizedMechanism(
        requested_method=method, epsilon_fractions=tuple(fractions), steps=out.params,
        why=auto.why(epsilon) if method == "auto" else None, engine=engine_name,
        domain_size=domain_size).to_dict()
    error, band, band_confidence = histogram_error(out, plan, epsilon, confidence, interval)
    return AnonymizedHistogramRelease(
        value={"counts": out.counts, "prevalences": out.prevalences,
               "n_estimate": out.n_estimate},
        epsilon=epsilon, delta=0.0, unit="event", mechanism=mechanism_name(plan.method),
        mechanism_params=params, seeded=seeded,
        error=error, total_interval=interval, items_at_least_band=band,
        items_at_least_confidence=band_confidence, split=plan.split,
        regime=out.regime, method=plan.method)


def mechanism_name(method: str) -> str:
    """The release's ``mechanism`` for a method."""
    return "hay-sorted-counts" if method == "hay" else "privhist"

