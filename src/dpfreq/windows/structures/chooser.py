"""Choosing the noise structure of every (window family, k) from public parameters only.

For each family (cumulative, rolling width W, all windows) and each k, every admissible
method registered in :mod:`dpfreq.windows.structures.base` is calibrated to the per-structure budget
and the one with the smallest predicted mean squared error is kept (or the caller's forced
choice). With δ > 0 a second plan under zCDP accounting is built and the better of the two is
used. Nothing
here looks at the data, so the whole plan (and every refusal it makes) happens before any
budget is spent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpfreq._validate import check_choice, message
from dpfreq.accounting.numbers import float_at_most
from dpfreq.accounting.zcdp import zcdp_rho
from dpfreq.errors import ParameterError
from dpfreq.noise import epsilon_to_fraction
from dpfreq.windows.params import PlanRequest
from dpfreq.windows.structures.base import registry
from dpfreq.windows.structures.protocol import WindowStructure

__all__ = ["Plan", "family_label", "make_plan", "plan_score"]

def family_label(family: str, width: int | None) -> str:
    """``"cumulative"``, ``"all"`` or ``"rolling(W=…)"``: the name of a query family."""
    return f"rolling(W={width})" if family == "rolling" else family


@dataclass(frozen=True)
class Plan:
    """Calibrated structures per ``(family label, k)`` and how the choice was made."""

    structures: dict[tuple[str, int], WindowStructure]
    record: dict[str, Any]
    accounting: str
    epsilon_per_structure: Fraction
    delta_per_structure: float


def _candidates(family: str, unit: str, singleton: bool) -> list[str]:
    """The registered methods ``auto`` compares for this family, unit and log kind."""
    return [name for name, cls in registry().items()
            if family in cls.families and cls.admissible(unit, singleton)]


def _forced(method: Any, w: Any, label: str, cands: list[str]) -> str | None:
    """The caller's method for this family (checked against the admissible ones), or None."""
    if method == "auto":
        return None
    forced = method.get(w, method.get(label))
    if forced is None or forced == "auto":
        return None
    return check_choice(forced, f"method for {label}", cands)


def _choose(families: tuple[Any, ...], ks: tuple[int, ...], horizon: int, unit: str,
            eps_s: Fraction, delta_s: float, method: Any, singleton: bool,
            rho_s: float | None = None
            ) -> tuple[dict[tuple[str, int], WindowStructure], dict[str, Any]]:
    chosen: dict[tuple[str, int], WindowStructure] = {}
    record: dict[str, Any] = {}
    kinds = ("laplace",) if rho_s is None else ("laplace", "gaussian")
    for w in families:
        family = "rolling" if not isinstance(w, str) else w
        width = None if isinstance(w, str) else int(w)
        label = family_label(family, width)
        cands = _candidates(family, unit, singleton)
        forced = _forced(method, w, label, cands)
        for k in ks:
            preds: dict[str, float] = {}
            structs: dict[str, WindowStructure] = {}
            layouts: dict[str, float] = {}
            for c in cands if forced is None else [forced]:
                for kind in kinds:
                    best = registry()[c].best_for(
                        family, k, horizon, unit, eps_s, delta_s, width, rho=rho_s,
                        noise_kind=kind, layouts=layouts if kind == "laplace" else None)
                    if best is None:
                        continue
                    name = c if rho_s is None else f"{c}/{kind}"
                    structs[name] = best
                    preds[name] = float(np.sqrt(best.mean_mse()))
            if forced is None:
                _drop_refinements(preds, structs)
            needs = registry()[forced].requires if forced is not None else None
            if not preds and needs:
                raise ParameterError(message(f"method for {label}",
                                             f"usable for this call ({forced} needs {needs})",
                                             forced))
            if not preds:
                raise ParameterError(message(
                    "epsilon", "large enough to give every structure representable "
                    "noise (raise epsilon, or release fewer k_values/windows or a shorter "
                    "horizon)", float(eps_s) * len(families) * len(ks)))
            pick = min(preds, key=lambda c: preds[c])
            chosen[(label, k)] = structs[pick]
            record[f"{label}, k={k}"] = {
                "method": structs[pick].method, "noise": structs[pick].noise_kind,
                "predicted_rmse": preds, "gamma": str(structs[pick].gamma),
                "detail": structs[pick].detail,
                "chosen_by": "auto (smallest predicted mean squared error, public parameters "
                             "only)" if forced is None else "caller",
                "why": _why(pick, preds, structs[pick])}
            if layouts:
                record[f"{label}, k={k}"]["tree_layouts_rmse"] = layouts
    return chosen, record


def _drop_refinements(preds: dict[str, float], structs: dict[str, WindowStructure]) -> None:
    """Drop each candidate whose method refines another candidate's (same noise kind) without
    predicting less error than it (:attr:`~dpfreq.windows.structures.base.Structure.refines`)."""
    for name in list(preds):
        parent = registry()[structs[name].method].refines
        if parent is None:
            continue
        base = parent if "/" not in name else f"{parent}/{name.split('/', 1)[1]}"
        if base in preds and preds[base] <= preds[name]:
            del preds[name], structs[name]


def _why(pick: str, preds: dict[str, float], s: WindowStructure) -> str:
    """One sentence: the chosen structure's predicted RMSE against the next best."""
    name = s.describe(pick)
    others = sorted((v, c) for c, v in preds.items() if c != pick)
    if not others:
        return f"{name}: the only admissible structure (predicted RMSE {preds[pick]:.4g})"
    v, c = others[0]
    return (f"{name}: predicted RMSE {preds[pick]:.4g} over the family's windows, against "
            f"{v:.4g} for the next best ({c}), from public parameters only")


def make_plan(request: PlanRequest) -> Plan:
    """Calibrate every structure (public parameters only; raises ParameterError on a bad
    forced method or a budget too small to calibrate).

    ``request.rho`` given: the zCDP plan at that ρ only (a grouped release whose groups compose
    in zCDP gives each group its share of ρ; ``(epsilon, delta)`` is then what that share
    implies for the group alone)."""
    windows, ks, horizon, unit = (request.windows, request.k_values, request.horizon,
                                  request.unit)
    epsilon, delta, method, singleton, rho = (request.epsilon, request.delta, request.method,
                                              request.singleton, request.rho)
    if rho is not None:
        return _zcdp_only(windows, ks, horizon, unit, epsilon, delta, method, singleton, rho)
    n_struct = len(windows) * len(ks)
    eps_s = epsilon_to_fraction(epsilon) / n_struct
    delta_s = delta / n_struct
    if eps_s <= 0:
        raise ParameterError(message("epsilon", f"large enough to split over {n_struct} "
                                     "structures", epsilon))
    choice = method if not isinstance(method, Mapping) else {
        (int(k) if str(k).isdigit() else k): v for k, v in method.items()}
    rho = zcdp_rho(epsilon, delta) if delta > 0 else 0.0
    try:
        pure: tuple[Any, dict[str, Any]] | None = _choose(windows, ks, horizon, unit, eps_s,
                                                           delta_s, choice, singleton)
        refusal: ParameterError | None = None
    except ParameterError as err:  # a forced method may need zCDP (the factorization)
        if rho <= 0:
            raise
        pure, refusal = None, err
    accounting = ("pure epsilon-DP: basic composition over structures (advanced composition "
                  "over item-level blocks/starts when delta > 0)")
    zcdp = None
    if rho > 0:
        # alternative plan: zCDP accounting, ρ split equally, discrete Laplace or Gaussian each
        try:
            zcdp = _choose(windows, ks, horizon, unit, eps_s, delta_s, choice, singleton,
                           rho_s=float_at_most(Fraction(rho) / n_struct))
        except ParameterError:  # ρ too small to calibrate (δ near 0): the pure plan stands
            if pure is None and refusal is not None:
                raise refusal from None
    if pure is not None and (zcdp is None or _score(pure[0]) <= _score(zcdp[0])):
        if any(s.noise_kind == "gaussian" for s in pure[0].values()):
            accounting = ("basic composition of every structure's (epsilon, delta) share: pure "
                          "epsilon-DP structures, and discrete Gaussian ones calibrated to "
                          "their share by their exact privacy loss distribution")
            _against_zcdp(pure[1], zcdp[1] if zcdp is not None else None)
        return Plan(pure[0], pure[1], accounting, eps_s, delta_s)
    if zcdp is None:  # neither accounting calibrates: the pure plan's refusal says why
        raise refusal or ParameterError(message("epsilon", "large enough to calibrate",
                                                epsilon))
    accounting = (f"zCDP: rho={rho:.6g} from (epsilon, delta) by "
                  "epsilon = rho + 2 sqrt(rho ln(1/delta)), split equally over "
                  "structures; pure pieces count as epsilon^2/2-zCDP")
    return Plan(zcdp[0], zcdp[1], accounting, eps_s, delta_s)


def _against_zcdp(record: dict[str, Any], zcdp: dict[str, Any] | None) -> None:
    """Where the (ε, δ)-calibrated Gaussian was chosen, its reason also names the best
    structure of the zCDP plan it was preferred to (the records of other choices are left as
    they were)."""
    for label, rec in record.items():
        if rec["noise"] != "gaussian":
            continue
        if zcdp is None or label not in zcdp:
            rec["why"] += "; the zCDP plan could not calibrate this call"
            continue
        preds = zcdp[label]["predicted_rmse"]
        best = min(preds, key=lambda c: preds[c])
        rec["why"] += (f"; under zCDP accounting (ρ from (ε, δ)) the best "
                       f"would be {best} at {preds[best]:.4g}")


def _zcdp_only(windows: tuple[Any, ...], ks: tuple[int, ...], horizon: int, unit: str,
               epsilon: float, delta: float, method: Any, singleton: bool,
               rho: float) -> Plan:
    """The plan of :func:`make_plan` under a given ρ (zCDP accounting only)."""
    n_struct = len(windows) * len(ks)
    if not (math.isfinite(rho) and rho > 0):
        raise ParameterError(message("rho", "a finite number > 0", rho))
    choice = method if not isinstance(method, Mapping) else {
        (int(k) if str(k).isdigit() else k): v for k, v in method.items()}
    eps_s, delta_s = epsilon_to_fraction(epsilon) / n_struct, delta / n_struct
    chosen, record = _choose(windows, ks, horizon, unit, eps_s, delta_s, choice, singleton,
                             rho_s=float_at_most(Fraction(rho) / n_struct))
    accounting = (f"zCDP: rho={rho:.6g} (this group's share of the grouped release's rho), "
                  "split equally over structures; pure pieces count as epsilon^2/2-zCDP")
    return Plan(chosen, record, accounting, eps_s, delta_s)


def plan_score(plan: Plan) -> float:
    """How two plans compare: the sum of the logs of their structures' predicted mean
    squared errors (smaller is better)."""
    return _score(plan.structures)


def _score(chosen: dict[tuple[str, int], WindowStructure]) -> float:
    """Geometric mean of the predicted MSEs (in logs): how the two accountings compare. A
    predicted MSE of 0 (noise that rounds away at a large ε) scores -inf, the best."""
    return float(sum(math.log(mse) if (mse := s.mean_mse()) > 0 else -math.inf
                     for s in chosen.values()))
