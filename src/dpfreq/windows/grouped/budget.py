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
partition selection the selection spends ``ε_s`` (``selection_epsilon``, or with ``"auto"``
the share of smallest predicted error, :func:`_auto_share`) and a δ share: under pure
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
from dpfreq.grouped.accounting import check_selection_share, epsilon_at_most, release_share
from dpfreq.grouped.selection import (
    ZCDP_DELTA_SHARE,
    AnySelection,
    plan_partition_selection,
)
from dpfreq.windows.structures.chooser import make_plan, plan_score

__all__ = ["AUTO_SHARES", "GroupBudget", "check_selection_epsilon", "choose_budget",
           "group_epsilon"]


@dataclass(frozen=True)
class GroupBudget:
    """The budget of each group's release and how the call's (ε, δ) is accounted.

    Attributes
    ----------
    epsilon, delta : float
        What each group's release alone satisfies.
    rho : float or None
        Each group's zCDP ρ when the groups compose in zCDP (None: pure accounting).
    selection : SelectionPlan or SetUnionPlan or None
        The partition selection (None with a public list).
    release_epsilon, release_delta : float
        ``(ε_r, δ_r)``: what all the groups' releases together spend.
    why : str
        The comparison that chose the accounting (predicted RMSE of both, public only).
    selection_why : str
        How the selection's share of ε was chosen (``""`` with a public list).
    """

    epsilon: float
    delta: float
    rho: float | None
    selection: AnySelection | None
    release_epsilon: float
    release_delta: float
    why: str
    selection_why: str = ""

    @property
    def accounting(self) -> str:
        """``"pure"`` or ``"zcdp"``."""
        return "pure" if self.rho is None else "zcdp"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the per-group budget and the accounting (the selection separately)."""
        return {"accounting": self.accounting, "epsilon_per_group": self.epsilon,
                "delta_per_group": self.delta, "rho_per_group": self.rho,
                "release_epsilon": self.release_epsilon, "release_delta": self.release_delta,
                "why": self.why, "selection_why": self.selection_why}


def group_epsilon(rho: float, delta: float) -> float:
    """``ρ + 2√(ρ ln(1/δ))``: the ε of a ρ-zCDP release at δ, rounded up (the certified
    conversion of :func:`dpfreq.accounting.zcdp_epsilon`)."""
    return float_at_least(zcdp_epsilon(rho, delta))


def _share(par: Any, m: int, named: bool, zcdp: bool, eps_s: float | None,
           mechanism: str = "auto") -> tuple[Fraction, float, AnySelection | None]:
    """``(ε_r, δ_r, selection)``: the selection (None with a public list) at ``ε_s`` and its δ
    share (all of δ under pure accounting, :data:`ZCDP_DELTA_SHARE` of it under zCDP), the
    release the rest (``ε_r`` exact, ``δ_r`` rounded down)."""
    if named or eps_s is None:  # a public list, or the fixed half of release_share
        return release_share(par.epsilon, par.delta, m, named, zcdp, None, mechanism)
    sel_delta = par.delta * float(ZCDP_DELTA_SHARE) if zcdp else par.delta
    sel = plan_partition_selection(eps_s, sel_delta, m, mechanism)
    eps_r = Fraction(par.epsilon) - Fraction(sel.epsilon)
    return eps_r, float_at_most(Fraction(par.delta) - Fraction(sel.delta)), sel


def _candidate(par: Any, m: int, named: bool, zcdp: bool,
               eps_s: float | None = None, mechanism: str = "auto") -> GroupBudget:
    """One accounting's budget (its selection planned at ``ε_s`` and its δ share); each share
    rounded down on fractions, so the groups never add up past (ε_r, δ_r)."""
    eps_r, delta_r, sel = _share(par, m, named, zcdp, eps_s, mechanism)
    if not zcdp:
        return GroupBudget(epsilon_at_most(eps_r / m), float_at_most(Fraction(delta_r) / m),
                           None, sel, float(eps_r), delta_r, "")
    rho = float_at_most(zcdp_rho_at_most(eps_r, delta_r) / m)
    return GroupBudget(group_epsilon(rho, delta_r), delta_r, rho, sel, float(eps_r), delta_r,
                       "")


def _plan(par: Any, b: GroupBudget) -> Any:
    return make_plan(par.plan_request(epsilon=b.epsilon, delta=b.delta, rho=b.rho))


#: the shares of ε the ``"auto"`` selection considers
AUTO_SHARES = tuple(Fraction(i, 20) for i in range(2, 19))


def check_selection_epsilon(value: Any, epsilon: float, named: bool) -> Any:
    """``selection_epsilon``: ``"auto"`` or a number in (0, ε) (ε of the selection); with a
    public list only ``"auto"`` (there is no selection). The checks of
    :func:`~dpfreq.grouped.accounting.check_selection_share`; ``"auto"`` is kept as such, for
    the window counts choose the share from their error model (:func:`choose_budget`)."""
    share = check_selection_share(value, epsilon, named)
    return "auto" if share is None else share


def _auto_share(par: Any, m: int, mechanism: str = "auto") -> tuple[float, str]:
    """``(ε_s, why)``: the share ``s`` of ε for the selection, from public parameters only.

    The score of a share is ``n_½(sε) + 2·RMSE((1 − s)ε)``, in items: the number of items a
    group needs to be selected half the time, plus twice the predicted RMSE of its released
    values — the smallest group that is both found and measured. ``RMSE`` is the per-group
    plan's (geometric mean over its structures) at ``s = ½``, scaled as ``1/ε_r`` (the noise
    scale of every structure); ``n_½`` is exact (:meth:`SelectionPlan.count_for`; under the
    set union for items holding ``⌈m/2⌉`` groups). The share of smallest score among
    :data:`AUTO_SHARES` is taken (ties: the one nearest ½).
    """
    typical = max(1, (m + 1) // 2)
    half = _candidate(par, m, False, False, par.epsilon * 0.5, mechanism)
    try:
        plan = _plan(par, half)
        rmse_half = math.exp(plan_score(plan) / (2 * len(plan.structures)))
    except ParameterError:
        return par.epsilon * 0.5, "half of ε (the release cannot be planned at half)"
    best: tuple[float, float, float, int] | None = None
    for s in AUTO_SHARES:
        try:
            sel = plan_partition_selection(par.epsilon * float(s), par.delta, m, mechanism)
        except ParameterError:
            continue
        rmse = rmse_half * 0.5 / (1 - float(s))
        n_half = sel.count_for(0.5, typical)
        score = n_half + 2 * rmse
        key = (score, abs(float(s) - 0.5))
        if best is None or key < (best[0], abs(best[1] - 0.5)):
            best = (score, float(s), rmse, n_half)
    if best is None:
        return par.epsilon * 0.5, "half of ε"
    _, share, rmse, n_half = best
    sel_half = half.selection.count_for(0.5, typical) if half.selection is not None else 0
    why = (f"share {share:g} of ε chosen from public parameters: it minimises n_½ + 2·RMSE, the "
           f"items a group needs to be selected half the time plus twice its released values' "
           f"predicted RMSE ({n_half} + 2·{rmse:.4g}; at ½: {sel_half} + "
           f"2·{rmse_half:.4g}), the smallest group both found and measured")
    return par.epsilon * share, why


def choose_budget(par: Any, m: int | None, named: bool,
                  selection_epsilon: Any = "auto", selection: str = "auto") -> GroupBudget:
    """The accounting whose per-group plan predicts the smaller error (module docstring).

    ``m``: groups per item (None at ``unit="event"``); ``named``: the groups are a public
    list (else they are selected privately; δ must then be > 0, checked by the caller);
    ``selection_epsilon``: the selection's ε, or ``"auto"`` (:func:`_auto_share`);
    ``selection``: its mechanism (:func:`~dpfreq.grouped.selection.plan_partition_selection`).
    Raises the pure plan's ParameterError when neither accounting calibrates.
    """
    mm = m or 1
    eps_s: float | None = None
    sel_why = ""
    if not named:
        if selection_epsilon == "auto":
            eps_s, sel_why = _auto_share(par, mm, selection)
        else:
            eps_s = float(selection_epsilon)
            sel_why = f"given: selection_epsilon = {eps_s:g}"
    pure = _candidate(par, mm, named, False, eps_s, selection)
    # with one group per item and a public list the pure per-group plan already weighs zCDP
    if par.delta <= 0 or (mm == 1 and named):
        return _with_why(pure, "pure: " + ("delta = 0" if par.delta <= 0 else
                                           "one group per unit, the group's own plan compares "
                                           "pure and zCDP accounting"), sel_why)
    zc = _candidate(par, mm, named, True, eps_s, selection)
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
    return _with_why(zc if pick == "zcdp" else pure, text, sel_why)


def _with_why(b: GroupBudget, why: str, selection_why: str = "") -> GroupBudget:
    return GroupBudget(b.epsilon, b.delta, b.rho, b.selection, b.release_epsilon,
                       b.release_delta, why, selection_why)
