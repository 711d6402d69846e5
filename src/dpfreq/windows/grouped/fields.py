"""What a grouped window release states about the whole call: frozen, typed, and written to the
public dict (``mechanism_params`` and the saved file's grouped fields) by ``to_dict``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dpfreq.grouped.capping import capping_statement
from dpfreq.grouped.selection import selection_statement
from dpfreq.release import RELATIONS
from dpfreq.windows.grouped.budget import GroupBudget

__all__ = ["GroupedWindowFields", "GroupedWindowMechanism"]


@dataclass(frozen=True)
class GroupedWindowMechanism:
    """The shared ``mechanism_params`` of a grouped window release.

    Attributes
    ----------
    engine : str
        The engine that read the log.
    unit : str
        ``"item"`` or ``"event"``.
    group_column : str
        The group column.
    max_groups_per_item : int or None
        ``m`` (None at ``unit="event"``).
    budget : GroupBudget
        Each group's budget, the accounting and the selection (None with a public list).
    """

    engine: str
    unit: str
    group_column: str
    max_groups_per_item: int | None
    budget: GroupBudget

    def _split(self) -> str:
        """How the release's budget is split over the groups, in words."""
        budget, m = self.budget, self.max_groups_per_item
        if budget.rho is not None:
            return (f"zCDP across groups: rho = {budget.rho * (m or 1):.6g} from (ε_r, δ_r) = "
                    f"({budget.release_epsilon:.6g}, {budget.release_delta:g}), "
                    f"rho/m = {budget.rho:.6g} per group (the at most m groups an item touches "
                    "compose in zCDP; parallel composition over the others)")
        if m is not None:
            return (f"ε/m = {budget.epsilon:.6g} per group (basic composition over the at most "
                    "m groups an item touches; parallel composition over the others)")
        return (f"ε = {budget.epsilon:.6g} per group (an event is in one group: parallel "
                "composition)")

    def _groups(self) -> str:
        """Where the group names come from, in words."""
        if self.budget.selection is None:
            return ("public list (rows of other groups dropped; the range check applies to the "
                    "rows of listed groups)")
        what = ("items (after each item kept at most m groups)"
                if self.max_groups_per_item is not None else "rows")
        return (selection_statement(f"number of {what}", self.budget.selection)
                + "; rows of other groups dropped, "
                "the range check applies to the rows of selected groups")

    def to_dict(self) -> dict[str, Any]:
        """The public entries (the JSON, the saved file and the docs read these keys, in this
        order)."""
        budget, m, selection = self.budget, self.max_groups_per_item, self.budget.selection
        split = self._split()
        if selection is not None:
            split = (f"ε_selection = {selection.epsilon:.6g} ({budget.selection_why}) selects the "
                     f"groups with δ_selection = {selection.delta:g}; the rest, (ε_r, δ_r) = "
                     f"({budget.release_epsilon:.6g}, {budget.release_delta:g}), releases "
                     "them: " + split)
        params: dict[str, Any] = {
            "engine": self.engine, "group_column": self.group_column,
            "max_groups_per_item": m, "epsilon_per_group": budget.epsilon,
            "delta_per_group": budget.delta, "rho_per_group": budget.rho,
            "accounting": budget.accounting, "accounting_why": budget.why,
            "relation": RELATIONS[self.unit] + (" (in all its groups)" if m is not None else ""),
            "bounding": (f"each item keeps at most {m} of the "
                         f"{'listed' if selection is None else 'selected'} groups, chosen "
                         "uniformly by a keyed rank of (key, item, group)" if m is not None
                         else "none needed (an event is in one group)"),
            "coverage": capping_statement(m),
            "groups": self._groups(),
            "split": split,
            "noise": "per group: the structures of one plan (public parameters); every group's "
                     "node noise from one keyed source per tree, drawn for all groups in one "
                     "vectorised call (group g's node v at counter v·G + g)",
            "simultaneous": "Bonferroni over groups and released curves"}
        if selection is not None:
            params["selection"] = selection.to_dict()
        return params


@dataclass(frozen=True)
class GroupedWindowFields:
    """What the whole grouped call states (saved with the release as its grouped fields)."""

    epsilon: float
    delta: float
    unit: str
    group_column: str
    max_groups_per_item: int | None
    groups: tuple[str, ...]
    params: GroupedWindowMechanism

    def to_dict(self) -> dict[str, Any]:
        """The public dict (the keys the saved file checks, in this order)."""
        return {"epsilon": self.epsilon, "delta": self.delta, "unit": self.unit,
                "group_column": self.group_column,
                "max_groups_per_item": self.max_groups_per_item, "groups": list(self.groups),
                "params": self.params.to_dict()}
