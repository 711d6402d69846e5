"""How a grouped window release spends its (ε, δ): pure per-group budgets or zCDP across groups.

An item touches at most ``m`` groups (``m = 1`` at ``unit="event"``: one row is in one group).
Two accountings are valid, and the release takes the one whose per-group plan predicts the
smaller error, from public parameters only (as ``method="auto"`` does for one release):

* **pure**: every group's release at ``(ε_r/m, δ_r/m)``, each rounded down on fractions;
  basic composition over the ``m`` groups an item touches (parallel composition over the
  others) gives ``(ε_r, δ_r)``. Each group's plan may itself use zCDP inside that share
  (:func:`~dpfreq.windows.structures.chooser.make_plan`).
* **zCDP across groups** (δ > 0 only): ``ρ``, the largest ρ with
  ``ρ + 2√(ρ ln(1/δ_r)) <= ε_r`` (certified on fractions and rounded down,
  :func:`dpfreq.accounting.zcdp_rho_at_most`); every group's release is
  ``ρ/m``-zCDP, so an item's at most ``m`` groups compose to ρ-zCDP, which is
  ``(ε_r, δ_r)``-DP (Bun and Steinke 2016). A group alone is then
  ``(ρ/m + 2√(ρ/m · ln(1/δ_r)), δ_r)``-DP, which its release states.

Composing the ``m`` groups in zCDP costs ``√m`` where basic composition of per-group budgets
costs ``m``, so for ``m >= 2`` and moderate δ it is usually the better one.

With a public list the release has the whole budget: ``(ε_r, δ_r) = (ε, δ)``. With private
partition selection the selection spends ``ε_s`` (half of ε) and a δ share: under pure
accounting all of δ (the groups are released at δ = 0), under zCDP accounting half of δ (the
other half is the release's ``δ_r``); the selection's threshold is stated for each.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dpfreq.accounting.numbers import float_at_least, float_at_most
from dpfreq.accounting.zcdp import zcdp_epsilon, zcdp_rho_at_most
from dpfreq.errors import ParameterError
from dpfreq.grouped.accounting import epsilon_at_most, release_share
from dpfreq.grouped.selection import (
    ZCDP_DELTA_SHARE,
    SelectionPlan,
)
from dpfreq.windows.structures.chooser import make_plan, plan_score

__all__ = ["GroupBudget", "choose_budget", "group_epsilon"]


@dataclass(frozen=True)
class GroupBudget:
    """The budget of each group's release and how the call's (ε, δ) is accounted.

    Attributes
    ----------
    epsilon, delta : float
        What each group's release alone satisfies.
    rho : float or None
        Each group's zCDP ρ when the groups compose in zCDP (None: pure accounting).
    selection : SelectionPlan or None
        The partition selection (None with a public list).
    release_epsilon, release_delta : float
        ``(ε_r, δ_r)``: what all the groups' releases together spend.
    why : str
        The comparison that chose the accounting (predicted RMSE of both, public only).
    """

    epsilon: float
    delta: float
    rho: float | None
    selection: SelectionPlan | None
    release_epsilon: float
    release_delta: float
    why: str

    @property
    def accounting(self) -> str:
        """``"pure"`` or ``"zcdp"``."""
        return "pure" if self.rho is None else "zcdp"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the per-group budget and the accounting (the selection separately)."""
        return {"accounting": self.accounting, "epsilon_per_group": self.epsilon,
                "delta_per_group": self.delta, "rho_per_group": self.rho,
                "release_epsilon": self.release_epsilon, "release_delta": self.release_delta,
                "why": self.why}


def group_epsilon(rho: float, delta: float) -> float:
    """``ρ + 2√(ρ ln(1/δ))``: the ε of a ρ-zCDP release at δ, rounded up (the certified
    conversion of :func:`dpfreq.accounting.zcdp_epsilon`)."""
    return float_at_least(zcdp_epsilon(rho, delta))


def _candidate(par: Any, m: int, named: bool, zcdp: bool, func: str) -> GroupBudget:
    """One accounting's budget (its selection planned at its δ share); each share rounded
    down on fractions, so the groups never add up past (ε_r, δ_r)."""
    eps_r, delta_r, sel = release_share(par.epsilon, par.delta, m, named, zcdp, func)
    if not zcdp:
        return GroupBudget(epsilon_at_most(eps_r / m), float_at_most(Fraction(delta_r) / m),
                           None, sel, float(eps_r), delta_r, "")
    rho = float_at_most(zcdp_rho_at_most(eps_r, delta_r) / m)
    return GroupBudget(group_epsilon(rho, delta_r), delta_r, rho, sel, float(eps_r), delta_r,
                       "")


def _plan(par: Any, b: GroupBudget) -> Any:
    return make_plan(tuple(par.windows), tuple(par.k_values), par.axis.horizon, par.unit,
                     b.epsilon, b.delta, par.method, par.singleton, rho=b.rho)


def choose_budget(par: Any, m: int | None, named: bool, func: str) -> GroupBudget:
    """The accounting whose per-group plan predicts the smaller error (module docstring).

    ``m``: groups per item (None at ``unit="event"``); ``named``: the groups are a public
    list (else they are selected privately; δ must then be > 0, checked by the caller).
    Raises the pure plan's ParameterError when neither accounting calibrates.
    """
    mm = m or 1
    pure = _candidate(par, mm, named, False, func)
    # with one group per item and a public list the pure per-group plan already weighs zCDP
    if par.delta <= 0 or (mm == 1 and named):
        return _with_why(pure, "pure: " + ("delta = 0" if par.delta <= 0 else
                                           "one group per unit, the group's own plan compares "
                                           "pure and zCDP accounting"))
    zc = _candidate(par, mm, named, True, func)
    scores: dict[str, float] = {}
    for label, b in (("pure", pure), ("zcdp", zc)):
        try:
            plan = _plan(par, b)
        except ParameterError:
            continue
        scores[label] = math.exp(plan_score(plan) / (2 * len(plan.structures)))
    if not scores:
        _plan(par, pure)  # raises the pure plan's refusal
    pick = min(scores, key=lambda k: scores[k])
    rmse = ", ".join(f"{k} {v:.4g}" for k, v in scores.items())
    text = (f"{'zCDP across groups' if pick == 'zcdp' else 'pure per-group budgets'}: "
            f"predicted RMSE per structure (geometric mean) {rmse}, public parameters only")
    if not named:
        text += (f"; the selection's threshold is {pure.selection.threshold} items with all of "
                 f"delta (pure) and {zc.selection.threshold} with {float(ZCDP_DELTA_SHARE):g} "
                 "of it (zCDP)") if pure.selection and zc.selection else ""
    return _with_why(zc if pick == "zcdp" else pure, text)


def _with_why(b: GroupBudget, why: str) -> GroupBudget:
    return GroupBudget(b.epsilon, b.delta, b.rho, b.selection, b.release_epsilon,
                       b.release_delta, why)
