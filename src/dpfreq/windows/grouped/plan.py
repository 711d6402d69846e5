"""The plan of a grouped window release (:func:`~dpfreq.windows.plan_window_counts` with
``group=``): one group's plan at its share of the budget, the selection's threshold, and with
``max_groups_per_item="auto"`` the plan at every candidate bound. Public parameters only."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dpfreq._display import PlanSummary
from dpfreq._epsilon_search import round_up3, smallest_epsilon
from dpfreq._validate import check_positive_float
from dpfreq.errors import ParameterError, public_errors
from dpfreq.grouped.bound_choice import candidate_bound, resolve_auto
from dpfreq.grouped.dropped import check_capping_epsilon, release_epsilon
from dpfreq.grouped.selection import AnySelection
from dpfreq.grouped.set_union import SetUnionPlan
from dpfreq.windows.grouped.budget import GroupBudget
from dpfreq.windows.grouped.release import check_window_grouping, window_budget
from dpfreq.windows.params import WindowParams

__all__ = ["GroupedWindowCountsPlan", "plan_grouped_window_counts"]


@dataclass(frozen=True, repr=False)
class GroupedWindowCountsPlan(PlanSummary):
    """Predicted accuracy of a grouped window release (public parameters only).

    Attributes
    ----------
    per_group : WindowCountsPlan
        The plan of one group's release, at the per-group budget (every group's structures are
        the same, so their intervals are too).
    epsilon, delta : float
        The budget of the whole grouped call.
    max_groups_per_item : int or None
        ``m`` (None at ``unit="event"``: the whole budget per group).
    n_groups : int or None
        Number of public groups (None when the groups are selected privately).
    selection : SelectionPlan or SetUnionPlan or None
        Without a public list: the selection's mechanism, threshold ``τ`` and release probabilities
        (its share of ε, chosen or given, and a share of δ).
    budget : GroupBudget or None
        How the call's (ε, δ) is accounted: pure per-group budgets or zCDP across groups,
        whichever predicts less error (:mod:`dpfreq.windows.grouped.budget`), and why.
    capping_epsilon : float or None
        The share of ε measuring the cap (:mod:`dpfreq.grouped.dropped`); the rest is planned.
    candidates : dict of int to GroupedWindowCountsPlan, or None
        With ``max_groups_per_item="auto"``: the plan at every candidate ``m`` (this plan is
        the largest candidate's; the release chooses ``m`` privately).

    Examples
    --------
    >>> from dpfreq.windows import plan_window_counts
    >>> plan = plan_window_counts(horizon=30, epsilon=1.0, unit="item", k_values=[1],
    ...                           windows=["total"], group="campaign", groups=["c0", "c1"],
    ...                           max_groups_per_item=4)
    >>> plan.per_group.epsilon, plan.n_groups, plan.budget.accounting
    (0.25, 2, 'pure')
    >>> sel = plan_window_counts(horizon=30, epsilon=1.0, delta=1e-6, unit="item",
    ...                          k_values=[1], windows=["total"], group="campaign",
    ...                          max_groups_per_item=4)
    >>> round(sel.per_group.epsilon, 4), sel.per_group.delta, sel.selection.threshold
    (0.1, 0.0, 294)
    >>> sel.selection.epsilon, sel.selection.mechanism  # both chosen from public parameters
    (0.6, 'weighted_set_union')
    """

    per_group: Any
    epsilon: float
    delta: float
    max_groups_per_item: int | None
    n_groups: int | None
    selection: AnySelection | None = None
    budget: GroupBudget | None = None
    _replan: Callable[[float], GroupedWindowCountsPlan] | None = field(
        default=None, repr=False, compare=False)
    capping_epsilon: float | None = None
    candidates: dict[int, GroupedWindowCountsPlan] | None = field(default=None, repr=False)

    @public_errors("GroupedWindowCountsPlan.epsilon_for")
    def epsilon_for(self, target: float, **which: Any) -> float:
        """The smallest total ε giving each group a half-width ``target`` at the family and k
        ``which`` selects: under pure accounting :meth:`WindowCountsPlan.epsilon_for` of one
        group, times ``m``, divided by the share left to the release when the groups are
        selected; under zCDP across groups (ρ not linear in ε) a bisection of the whole call's
        ε, re-planned at each step (3 significant digits, rounded up)."""
        target = check_positive_float(target, "target")
        if self.budget is None or self.budget.rho is None or self._replan is None:
            share = (1.0 if self.budget is None
                     else self.budget.release_epsilon / self.epsilon)
            return float(self.per_group.epsilon_for(target, **which)
                         * (self.max_groups_per_item or 1) / share)
        key = self.per_group._key(which.get("family", "cumulative"), which.get("k", 1))
        replan = self._replan

        def half(eps: float) -> float:
            try:
                return float(replan(eps).per_group.max_halfwidth[key[0]][key[1]])
            except ParameterError:
                return math.inf

        eps = smallest_epsilon(half, target, planned=self.epsilon)
        for _ in range(12):  # the accounting may switch with ε: step up until it is met
            if half(eps) <= target:
                break
            eps = round_up3(eps, 1)
        return eps

    def lines(self) -> list[str]:
        """The per-group plan's lines, led by how the budget is split."""
        m = self.max_groups_per_item
        which = (f"{self.n_groups} groups" if self.selection is None else
                 "groups selected privately")
        head = (f"{which}, epsilon={self.epsilon:g} spent once: "
                + (f"ε/m = {self.per_group.epsilon:g} per group (m={m})" if m is not None
                   else f"ε = {self.per_group.epsilon:g} per group (unit event)"))
        if self.budget is not None and self.budget.rho is not None:
            head = (f"{which}, epsilon={self.epsilon:g}, delta={self.delta:g} spent once: zCDP "
                    f"across groups, rho = {self.budget.rho:.4g} per group (m={m}; "
                    f"{self.budget.why})")
        if self.capping_epsilon is not None:
            head += (f"; capping_epsilon={self.capping_epsilon:g} of epsilon measures the cap"
                     + (f" (m chosen privately in 1..{max(self.candidates)}; shown at the "
                        "largest)" if self.candidates else ""))
        if self.selection is None:
            return [head, *self.per_group.lines()]
        sel = self.selection
        what = "items" if m is not None else "rows"
        if isinstance(sel, SetUnionPlan):
            k = sel.max_groups_per_item
            return [head, f"selection: ε={sel.epsilon:g} and δ={sel.delta:g} (weighted set "
                    f"union); an item with s kept groups gives each the weight "
                    f"⌊{sel.scale}/s⌋ and a group is released when its noisy weight reaches "
                    f"τ={sel.threshold} (half the time with {sel.count_for(0.5, 1)} items "
                    f"holding one group each, {sel.count_for(0.5, k)} holding m={k}; the "
                    f"groups of one item alone are released with probability at most "
                    f"{sel.single_item_probability:.3g})", *self.per_group.lines()]
        return [head, f"selection: ε={sel.epsilon:g} and δ={sel.delta:g}; a group is "
                f"released when its noisy number of {what} reaches τ={sel.threshold} (with "
                f"{sel.count_for(0.5)} {what} half the time, {sel.count_for(0.95)} 95% of the "
                f"time; a group of one is released with probability "
                f"{sel.single_item_probability:.3g})", *self.per_group.lines()]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the whole call's budget, the selection and the per-group plan."""
        return {"epsilon": self.epsilon, "delta": self.delta,
                "max_groups_per_item": self.max_groups_per_item, "n_groups": self.n_groups,
                "selection": None if self.selection is None else self.selection.to_dict(),
                "budget": None if self.budget is None else self.budget.to_dict(),
                "capping_epsilon": self.capping_epsilon,
                "candidates": None if self.candidates is None else {
                    str(m): p.per_group.to_dict() for m, p in self.candidates.items()},
                "per_group": self.per_group.to_dict()}


def plan_grouped_window_counts(par: WindowParams, group: Any, groups: Any,
                               max_groups_per_item: Any,
                               plan_one: Callable[[float, float, float | None], Any],
                               selection_epsilon: Any = "auto",
                               selection: Any = "auto",
                               capping_epsilon: Any = None) -> GroupedWindowCountsPlan:
    """The grouped plan: ``plan_one(ε, δ, ρ)`` plans one group at its share of the budget
    (``ε − capping_epsilon`` when the cap is measured). With ``max_groups_per_item="auto"``
    the plan at the largest candidate ``m`` (the most noise), every candidate's plan in
    :attr:`GroupedWindowCountsPlan.candidates` (``m`` is chosen by the release, privately)."""
    bound, auto = resolve_auto(max_groups_per_item, capping_epsilon, par.unit)
    _, names, m = check_window_grouping(group, groups, bound, par.unit)
    cap_eps = check_capping_epsilon(capping_epsilon, par.epsilon, m)
    if auto:
        plans: dict[int, GroupedWindowCountsPlan] = {}
        for cand in range(1, candidate_bound(names) + 1):
            try:
                plans[cand] = plan_grouped_window_counts(par, group, groups, cand,
                                                         plan_one, selection_epsilon,
                                                         selection, cap_eps)
            except ParameterError:
                continue
        if not plans:  # refused at every candidate: the largest candidate's refusal
            plan_grouped_window_counts(par, group, groups, candidate_bound(names),
                                       plan_one, selection_epsilon, selection, cap_eps)
        return dataclasses.replace(plans[max(plans)], candidates=plans)
    rel_par = par if cap_eps is None else dataclasses.replace(
        par, epsilon=release_epsilon(par.epsilon, cap_eps))
    budget = window_budget(names, rel_par, m, selection_epsilon, selection)
    per = plan_one(budget.epsilon, budget.delta, budget.rho)

    def replan(eps: float) -> GroupedWindowCountsPlan:
        share = selection_epsilon if selection_epsilon == "auto" else (
            float(selection_epsilon) * eps / par.epsilon)
        cap = None if cap_eps is None else cap_eps * eps / par.epsilon
        return plan_grouped_window_counts(dataclasses.replace(par, epsilon=eps), group, groups,
                                          max_groups_per_item, plan_one, share, selection,
                                          cap)

    return GroupedWindowCountsPlan(per_group=per, epsilon=par.epsilon, delta=par.delta,
                                   max_groups_per_item=m,
                                   n_groups=None if names is None else len(names),
                                   selection=budget.selection, budget=budget, _replan=replan,
                                   capping_epsilon=cap_eps)
