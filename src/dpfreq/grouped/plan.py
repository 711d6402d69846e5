"""Plans of grouped releases: each group's predicted error and the selection's cost.

A grouped plan wraps the plan of one group (made by the system's own planner at the per-group ε)
with what grouping adds: the accounting (:mod:`dpfreq.grouped.accounting`: ε/m per group, or
zCDP across groups when δ > 0 gives each group a larger ε; the whole ε per group at
``unit="event"``; half of ε for private partition selection when ``delta`` is given without a
list), the simultaneous statement over a public list of groups (the per-group plan at the
union-bound level), and the selection's threshold: how many items a group needs to be
released.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from dpfreq._display import PlanSummary
from dpfreq.accounting.plans import BudgetShare
from dpfreq.grouped.accounting import (
    GroupedAccounting,
    check_selection_share,
    choose_group_accounting,
)
from dpfreq.grouped.bound_choice import candidate_bound
from dpfreq.grouped.checks import check_group_selection
from dpfreq.grouped.dropped import check_capping_epsilon, release_epsilon
from dpfreq.grouped.selection import AnySelection, check_selection_mechanism
from dpfreq.grouped.set_union import SetUnionPlan

__all__ = ["GroupedPlan", "plan_grouped"]


@dataclass(frozen=True, repr=False)
class GroupedPlan(PlanSummary):
    """Predicted accuracy of a grouped release (public parameters only; no data, no budget).

    Attributes
    ----------
    per_group : plan
        The system's own plan of one group at ``epsilon_per_group`` (a ``ProfilePlan`` or an
        ``AnonymizedPlan``).
    epsilon, delta : float
        What the grouped call would spend.
    unit : str
        Its unit of privacy.
    max_groups_per_item : int or None
        ``m`` at ``unit="item"``; None at ``unit="event"`` (one group per row).
    epsilon_per_group : float
        The ε each group's release gets (``accounting.epsilon_per_group``).
    accounting : GroupedAccounting
        Which composition argument the release uses, both candidates' per-group ε and why.
    groups : tuple of str or None
        The public list, or None when the groups are selected privately.
    selection : SelectionPlan or SetUnionPlan or None
        The selection's threshold and release probabilities (with ``delta``).
    simultaneous : plan or None
        With a public list of ``G`` groups: the per-group plan at confidence
        ``1 − (1 − confidence)/G``, whose statements hold for all groups at once.
    description : str
        One paragraph a person can read.
    budget : BudgetShare or None
        With ``accountant=``: what the whole grouped release would take from it.
    capping_epsilon : float or None
        The share of ε measuring the cap (:mod:`dpfreq.grouped.dropped`); the rest is planned.
    candidates : dict of int to GroupedPlan, or None
        With ``max_groups_per_item="auto"``: the plan at every candidate ``m`` (this plan is
        the largest candidate's; the release chooses ``m`` privately).
    """

    per_group: Any
    epsilon: float
    delta: float
    unit: str
    max_groups_per_item: int | None
    epsilon_per_group: float
    accounting: GroupedAccounting
    groups: tuple[str, ...] | None
    selection: AnySelection | None
    simultaneous: Any
    description: str
    budget: BudgetShare | None = None
    capping_epsilon: float | None = None
    candidates: dict[int, GroupedPlan] | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The plan as a JSON-ready dictionary."""
        def plain(x: Any) -> Any:
            return None if x is None else x.to_dict() if hasattr(x, "to_dict") else vars(x)

        return {"kind": "grouped-plan", "epsilon": self.epsilon, "delta": self.delta,
                "unit": self.unit, "max_groups_per_item": self.max_groups_per_item,
                "epsilon_per_group": self.epsilon_per_group,
                "budget": plain(self.budget),
                "accounting": self.accounting.to_dict(),
                "groups": None if self.groups is None else list(self.groups),
                "per_group": plain(self.per_group), "selection": plain(self.selection),
                "simultaneous": plain(self.simultaneous), "description": self.description,
                "capping_epsilon": self.capping_epsilon,
                "candidates": None if self.candidates is None else sorted(self.candidates)}


def _selection_text(sel: AnySelection, unit: str) -> str:
    what, one = ("rows", "one row") if unit == "event" else ("items", "one item")
    if isinstance(sel, SetUnionPlan):
        m = sel.max_groups_per_item
        return (f" The groups are chosen by private partition selection with ε = {sel.epsilon:g} "
                f"and δ = {sel.delta:g} (weighted set union): an item with s kept groups gives "
                f"each the weight ⌊{sel.scale}/s⌋ and a group is released when its noisy weight "
                f"reaches τ = {sel.threshold} (half the time with {sel.count_for(0.5, 1)} "
                f"{what} holding one group each, {sel.count_for(0.5, m)} holding m = {m}); "
                f"the groups of {one} alone are released with probability at most "
                f"{sel.single_item_probability:.3g}.")
    return (f" The groups are chosen by private partition selection with ε = {sel.epsilon:g} "
            f"and δ = {sel.delta:g}: a group is released when its noisy number of {what} "
            f"reaches τ = {sel.threshold} (with {sel.count_for(0.5)} {what} half the time, with "
            f"{sel.count_for(0.95)} {what} 95% of the time); a group of {one} is released "
            f"with probability {sel.single_item_probability:.3g}.")


def _accounting_text(acc: GroupedAccounting) -> str:
    m = acc.max_groups_per_item
    if acc.accounting == "zcdp":
        return (f" (zCDP across groups: √(2ρ/m) with m = {m} groups per item and ρ = "
                f"{float(acc.rho or 0):.4g}, larger than ε/m = {acc.candidates['pure']:.4g})")
    if m == 1:
        return " (each row or item lies in one group: parallel composition)"
    zc = acc.candidates.get("zcdp")
    return (f" (ε/m with m = {m} groups per item" +
            (f"; zCDP across groups would give {zc:.4g})" if zc is not None else ")"))


def plan_grouped(*, epsilon: float, unit: str, max_groups_per_item: int | None, groups: Any,
                 delta: Any, plan_one: Callable[[float, float | None], Any],
                 summary: Callable[[Any], str], selection_epsilon: Any = "auto",
                 selection: Any = "auto", capping_epsilon: Any = None,
                 auto: bool = False) -> GroupedPlan:
    """Assemble a :class:`GroupedPlan` (``epsilon``, ``unit`` and ``m`` already checked).

    ``max_groups_per_item`` None means one group per row (``m = 1``; a public list then takes
    no δ). ``plan_one(eps, confidence_or_None)`` plans one group at ``eps`` (at the call's
    confidence when the second argument is None); ``summary(plan)`` is one sentence on a
    group's error. ``selection_epsilon``, ``selection`` and ``capping_epsilon`` as in the
    grouped releases: the selection's share and mechanism, the share measuring the cap (the
    rest is planned); ``auto``: ``m`` is chosen privately by the release, so every candidate
    ``1..M`` is planned (``max_groups_per_item`` is then ``M``).
    """
    names, dlt = check_group_selection(groups, delta,
                                       delta_with_list=max_groups_per_item is not None)
    cap_eps = check_capping_epsilon(capping_epsilon, epsilon, max_groups_per_item)
    rel_eps = release_epsilon(epsilon, cap_eps)
    sel_eps = check_selection_share(selection_epsilon, rel_eps, names is not None)
    mechanism = check_selection_mechanism(selection)

    def at(bound: int | None) -> GroupedPlan:
        """The plan at the fixed bound ``bound`` (None: one group per row)."""
        acc = choose_group_accounting(epsilon=rel_eps, delta=dlt,
                                      max_groups_per_item=1 if bound is None else bound,
                                      named=names is not None, selection_epsilon=sel_eps,
                                      selection=mechanism)
        sel, eps_g = acc.selection, acc.epsilon_per_group
        per_group = plan_one(eps_g, None)
        simultaneous = None
        text = (f"Each group is released at ε = {eps_g:g}{_accounting_text(acc)}: "
                f"{summary(per_group)}")
        if cap_eps is not None:
            text = (f"capping_epsilon = {cap_eps:g} of ε = {epsilon:g} measures the cap; the "
                    "rest is planned. " + text)
        if sel is not None:
            text += _selection_text(sel, unit)
        elif names is not None:
            level = 1.0 - (1.0 - per_group.confidence) / len(names)
            simultaneous = plan_one(eps_g, level)
            text += (f" For all {len(names)} listed groups at once (confidence "
                     f"{per_group.confidence:g}): {summary(simultaneous)}")
        return GroupedPlan(per_group=per_group, epsilon=epsilon, delta=dlt, unit=unit,
                           max_groups_per_item=bound, epsilon_per_group=eps_g, accounting=acc,
                           groups=names, selection=sel, simultaneous=simultaneous,
                           description=text, capping_epsilon=cap_eps)

    if not auto:
        return at(max_groups_per_item)
    candidates = {m: at(m) for m in range(1, candidate_bound(names) + 1)}
    top = candidates[max(candidates)]
    text = (f" m is chosen privately in 1..{max(candidates)} with capping_epsilon = "
            f"{cap_eps:g}; shown at the largest.")
    return replace(top, candidates=candidates, description=top.description + text)
