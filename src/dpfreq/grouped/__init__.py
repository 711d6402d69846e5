"""Grouped releases: the same release per group, with each item's contribution bounded, and the
private partition selection of groups not known in advance."""

from dpfreq.grouped.accounting import GroupedAccounting
from dpfreq.grouped.plan import GroupedPlan
from dpfreq.grouped.result import GroupedRelease
from dpfreq.grouped.selection import SelectionPlan, plan_selection, select_groups

__all__ = ["GroupedAccounting", "GroupedPlan", "GroupedRelease", "SelectionPlan",
           "plan_selection", "select_groups"]
