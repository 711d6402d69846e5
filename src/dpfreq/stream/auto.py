"""The plan of a reach stream: the budget of each structure and its online counter, said why.

A stream releases ``K`` cumulative curves (one per k of ``k_values``) per group. Every
``(group, k)`` is one **structure**: its own counter over the periods, the same public layout
and node law in every group and every k. The budget is spent once, at creation:

* the k levels share it equally (basic composition over ``K`` structures: ``ε/K`` each; with
  ``δ > 0`` also the zCDP alternative, ``ρ/K`` each with ``ρ`` the largest with
  ``ρ + 2√(ρ ln(1/δ)) <= ε``), as the offline window release does;
* groups (a public list): at ``unit="item"`` an item touches at most ``m`` groups, so each
  group gets ``ε/m`` (or, with δ > 0, ``ρ/m``-zCDP when that predicts less error; Bun and
  Steinke 2016); at ``unit="event"`` one event lies in one group and every group gets the whole
  budget (parallel composition).

``method="auto"`` compares every method's best calibration
(:func:`~dpfreq.stream.mechanisms.candidates.best_counters`) by its mean answer variance over
``t = 1..T`` — public parameters only — and keeps the smallest; without a horizon it compares
the horizon-free epochs (:mod:`~dpfreq.stream.mechanisms.epochs`) with the simple counter by
their predicted error at ``t = 365`` (stating it at ``t = 30`` too). The record states every
candidate's predicted RMSE and one sentence **why**; with ``δ > 0`` the why also names the best
counter of the accounting not chosen (pure ε-DP or zCDP) and its predicted RMSE.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from dpfreq._validate import message
from dpfreq.accounting.numbers import float_at_most
from dpfreq.accounting.zcdp import zcdp_rho, zcdp_rho_at_most
from dpfreq.errors import ParameterError
from dpfreq.grouped.accounting import epsilon_at_most
from dpfreq.noise import epsilon_to_fraction
from dpfreq.stream.mechanisms import BOUNDED_METHODS, Budget, EpochCounter, best_counters
from dpfreq.stream.mechanisms.intervals import SimpleLayout
from dpfreq.stream.mechanisms.law import calibrate
from dpfreq.stream.mechanisms.saved import rebuild_counter

__all__ = ["METHODS", "StreamPlan", "choose_counter", "plan_stream", "saved_plan",
           "structure_budgets"]

#: every method name ``method=`` accepts besides ``"auto"``
METHODS = (*BOUNDED_METHODS, "epochs")

#: periods at which an unbounded stream's candidates are compared
_UNBOUNDED_AT = (30, 365)


@dataclass(frozen=True)
class StreamPlan:
    """The counter every structure uses, the budget of each structure, and how they were
    chosen (public parameters only).

    Attributes
    ----------
    counter : Counter or EpochCounter
        The online counter (layout and node law) of every (group, k) structure.
    budget : Budget
        Each structure's budget.
    accounting : str
        How the call's (ε, δ) is composed over k levels and groups, in words.
    record : dict
        JSON-ready: the method, its layout and law, every candidate's predicted RMSE, why.

    Examples
    --------
    >>> plan = plan_stream(horizon=365, unit="item", epsilon=1.0, delta=0.0, n_k=1,
    ...                    method="auto", max_groups_per_item=None)
    >>> plan.method, plan.budget.accounting
    ('tree', 'pure epsilon-DP')
    >>> plan.record["why"].startswith("21-ary tree")
    True
    """

    counter: Any
    budget: Budget
    accounting: str
    record: dict[str, Any] = field(default_factory=dict)

    @property
    def method(self) -> str:
        return str(self.counter.name)


def _unbounded(unit: str, budget: Budget, method: str) -> tuple[Any, dict[str, float], str]:
    """``(counter, predicted RMSE at t = 365 per candidate, why)`` without a horizon."""
    cands: dict[str, Any] = {}
    if method in ("auto", "epochs"):
        with contextlib.suppress(ValueError):
            cands["epochs"] = EpochCounter(unit, budget)
    if method in ("auto", "simple"):
        for kind in budget.kinds():
            law = calibrate(budget, kind, *SimpleLayout(None).sensitivity(unit))
            if law is not None:
                from dpfreq.stream.mechanisms.counter import Counter

                label = "simple" if budget.rho is None else f"simple/{kind}"
                cands[label] = Counter(SimpleLayout(None), law)
    if method not in ("auto", "epochs", "simple"):
        raise ParameterError(message("method", "'auto', 'epochs' or 'simple' without a "
                                     "horizon (the other counters need horizon=T)", method))
    if not cands:
        raise ParameterError(message("epsilon", "large enough to calibrate the "
                                     "counter's noise", float(budget.epsilon)))
    rmse = {c: [math.sqrt(v.variance(t)) for t in _UNBOUNDED_AT] for c, v in cands.items()}
    pick = min(rmse, key=lambda c: rmse[c][-1])  # the smaller error a year of days in
    at = ", ".join(f"t={t}" for t in _UNBOUNDED_AT)
    others = "; ".join(f"{c}: {', '.join(f'{x:.4g}' for x in v)}" for c, v in rmse.items()
                       if c != pick)
    why = (f"{cands[pick].describe()}: no horizon; predicted RMSE "
           f"{', '.join(f'{x:.4g}' for x in rmse[pick])} at {at}"
           + (f", against {others}" if others else " (the only candidate)")
           + ", from public parameters only")
    return cands[pick], {c: v[1] for c, v in rmse.items()}, why


def _bounded(horizon: int, unit: str, budget: Budget, method: str
             ) -> tuple[Any, dict[str, float], str]:
    """``(counter, predicted RMSE per candidate, why)`` for ``T`` periods."""
    if method == "epochs":
        raise ParameterError(message("method", "one of 'auto', " + ", ".join(
            repr(m) for m in BOUNDED_METHODS) + " with a horizon ('epochs' is for streams "
            "without one)", method))
    methods = BOUNDED_METHODS if method == "auto" else (method,)
    found = best_counters(horizon, unit, budget, methods)
    if not found and method == "factorization":
        raise ParameterError(message("method", "usable for this call (the "
                                     "factorization needs delta > 0: zCDP accounting, discrete "
                                     "Gaussian noise; and horizon <= 8192)", method))
    if not found:
        return None, {}, ""
    rmse = {label: math.sqrt(score) for label, _, score in found}
    label, counter, _ = min(found, key=lambda c: c[2])
    others = sorted((v, c) for c, v in rmse.items() if c != label)
    if others:
        why = (f"{counter.describe()}: predicted RMSE {rmse[label]:.4g} (mean over the "
               f"{horizon} periods), against {others[0][0]:.4g} for the next best "
               f"({others[0][1]}), from public parameters only")
    else:
        why = (f"{counter.describe()}: the only candidate (predicted RMSE "
               f"{rmse[label]:.4g})")
    return counter, rmse, why


def choose_counter(horizon: int | None, unit: str, budget: Budget, method: str
                   ) -> tuple[Any, dict[str, float], str]:
    """``(counter, predicted RMSE per candidate, why)`` of one structure at ``budget``
    (``counter`` None when no candidate calibrates)."""
    if horizon is None:
        return _unbounded(unit, budget, method)
    return _bounded(horizon, unit, budget, method)


def _score(counter: Any, horizon: int | None) -> float:
    """The log of the variance ``auto`` compares (``−inf`` where the noise's variance
    underflows to 0: a budget near the largest ε)."""
    v = counter.variance(_UNBOUNDED_AT[-1]) if horizon is None else counter.mean_variance(
        horizon)
    return math.log(v) if v > 0 else -math.inf


def structure_budgets(epsilon: float, delta: float, n_k: int, m: int | None
                      ) -> list[tuple[Budget, str]]:
    """Each accounting's per-structure budget, with its statement (module docstring)."""
    share = m or 1
    eps_g = epsilon if share == 1 else epsilon_at_most(Fraction(epsilon) / share)
    out = [(Budget(epsilon_to_fraction(eps_g) / n_k),
            f"pure epsilon-DP: basic composition over the {n_k} k level(s)"
            + (f" and the at most {share} groups an item touches (epsilon/{share} per group)"
               if share > 1 else ""))]
    if delta > 0:
        rho = zcdp_rho(epsilon, delta) if share == 1 else float_at_most(
            zcdp_rho_at_most(Fraction(epsilon), delta) / share)
        out.append((Budget(epsilon_to_fraction(eps_g) / n_k,
                           float_at_most(Fraction(rho) / n_k)),
                    f"zCDP: rho={rho:.6g}" + (f" per group ({share} groups per item)"
                                              if share > 1 else "")
                    + " from (epsilon, delta) by epsilon = rho + 2 sqrt(rho ln(1/delta)), "
                    f"split equally over the {n_k} k level(s)"))
    return out


def plan_stream(*, horizon: int | None, unit: str, epsilon: float, delta: float,
                n_k: int, method: str, max_groups_per_item: int | None) -> StreamPlan:
    """Calibrate the stream's counter from public parameters only (see the module docstring);
    refuses (ParameterError) a forced method that cannot be used or a budget too small."""
    plans: list[tuple[float, StreamPlan]] = []
    refusal: ParameterError | None = None
    for budget, accounting in structure_budgets(epsilon, delta, n_k, max_groups_per_item):
        try:  # a forced method may need the other accounting (the factorization: zCDP)
            counter, rmse, why = choose_counter(horizon, unit, budget, method)
        except ParameterError as err:
            refusal = refusal or err
            continue
        if counter is None:
            continue
        plan = StreamPlan(counter, budget, accounting, {
            "method": counter.name, "chosen_by": "auto (smallest predicted error, public "
            "parameters only)" if method == "auto" else "caller",
            "predicted_rmse": rmse, "why": why, "counter": counter.record(),
            "accounting": accounting})
        plans.append((_score(counter, horizon), plan))
    if not plans:
        raise refusal or ParameterError(message(
            "epsilon", "large enough to give every structure representable noise "
            "(raise epsilon, or release fewer k_values)", epsilon))
    best = min(plans, key=lambda sp: sp[0])[1]
    at = "" if horizon is not None else f" at t={_UNBOUNDED_AT[-1]}"
    why = str(best.record["why"]) + "".join(_also(other, at) for _, other in plans
                                            if other is not best)
    return dataclasses.replace(best, record={**best.record, "why": why})


def _also(plan: StreamPlan, at: str) -> str:
    """The why's closing clause naming the best counter of an accounting not chosen."""
    rmse = plan.record["predicted_rmse"]
    name = min(rmse, key=rmse.get)
    return (f"; under {plan.budget.accounting} the best is {name}, predicted RMSE "
            f"{rmse[name]:.4g}{at}")


def saved_plan(*, unit: str, epsilon: float, delta: float, n_k: int,
               max_groups_per_item: int | None, record: dict[str, Any],
               spec: dict[str, Any]) -> StreamPlan:
    """The plan a stream made when it was created, rebuilt without planning again: the budget
    of the accounting its ``record`` names and the counter of its ``spec``
    (:mod:`~dpfreq.stream.mechanisms.saved`). ValueError when they do not fit these public
    parameters; the caller compares the rebuilt counter's record with the saved one."""
    budgets = {text: budget for budget, text in structure_budgets(epsilon, delta, n_k,
                                                                   max_groups_per_item)}
    accounting = record.get("accounting")
    if accounting not in budgets:
        raise ValueError("the saved accounting is not one of these parameters'")
    return StreamPlan(rebuild_counter(spec, unit, budgets[accounting]), budgets[accounting],
                      str(accounting), dict(record))
