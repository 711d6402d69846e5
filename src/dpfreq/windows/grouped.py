"""Grouped window counts: reach and k+ reach over time windows for every public group, spent once.

:func:`release_window_counts` and :func:`plan_window_counts` dispatch here when ``group=`` is
given. The engine computes the window summaries of every (group, item, period) in one pass
after the keyed bounding of the grouped profile (:meth:`Engine.grouped_reduce_items`); one plan
is calibrated from public parameters at the per-group budget and every group gets its own copy
with its own secret sub-key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfreq._validate import message
from dpfreq.budget import check_accountant
from dpfreq.engines import get_engine
from dpfreq.errors import DataError, ParameterError
from dpfreq.grouped.checks import check_grouping
from dpfreq.rng import derive_key, resolve_rng
from dpfreq.windows.events import engine_source, range_error
from dpfreq.windows.grouped_result import (
    GroupedWindowRelease,
    assemble,
    calibrated_plan,
    group_states,
)
from dpfreq.windows.params import WindowParams
from dpfreq.windows.plan import RELATIONS
from dpfreq.windows.summaries import WindowReducer, WindowSummaries, summary_specs

__all__ = ["GroupedWindowCountsPlan", "check_window_grouping", "release_grouped_window_counts"]


def check_window_grouping(group: Any, groups: Any, max_groups_per_item: Any, unit: str,
                          func: str) -> tuple[str, tuple[str, ...], int | None]:
    """``(group column, public groups, m or None)``.

    ``unit="item"``: ``m`` is required (an item may touch several groups). ``unit="event"``:
    one event is in one group, so the groups are disjoint in the unit and ``m`` is refused
    (it would bound nothing the guarantee needs; refusing says so instead of ignoring it).
    ``"item_replace"`` is refused: a replacement may move an item between groups.
    """
    if group is None:
        raise ParameterError(message("group", func, "the group column when "
                                     "max_groups_per_item or groups is given", group))
    if unit == "event":
        if max_groups_per_item is not None:
            raise ParameterError(message(
                "max_groups_per_item", func, "None at unit='event' (one event is in one "
                "group: every group gets the whole epsilon, parallel composition)",
                max_groups_per_item))
        g, names, _ = check_grouping(group, groups, 1, "item", func)
        return g, names, None
    if unit != "item":
        raise ParameterError(message("unit", func, "'item' or 'event' for a grouped release "
                                     "(a replacement may move an item between groups)", unit))
    return check_grouping(group, groups, max_groups_per_item, unit, func)


def _grouped_source(source: Any, item: Any, time: Any, group: str, axis: Any,
                    func: str) -> tuple[Any, str, str]:
    """The event log with its group column (an ``(items, times)`` pair has none)."""
    if isinstance(source, tuple | list):
        raise ParameterError(message("source", func, "a mapping, file, SQL or DataFrame with "
                                     f"the group column {group!r} (an (items, times) pair has "
                                     "none)", type(source).__name__))
    if not isinstance(source, Mapping):
        return engine_source(source, item, time, axis)
    if item is None or time is None:
        raise ParameterError(message("item/time", func, "column names of the source",
                                     (item, time)))
    if group not in source:
        raise DataError(message("source", func, f"a mapping with column {group!r}",
                                sorted(map(str, source))))
    cols, item, time = engine_source({k: source[k] for k in (item, time) if k in source},
                                     item, time, axis)
    return {**cols, group: np.asarray(source[group])}, item, time


def _grouped_fields(par: WindowParams, group: str, names: tuple[str, ...], m: int | None,
                    engine: str) -> dict[str, Any]:
    """What the whole call states (saved with the release)."""
    split = (f"ε/m = {par.epsilon / m:.6g} per group (basic composition over the at most m "
             "groups an item touches; parallel composition over the others)" if m is not None
             else "the whole ε per group (an event is in one group: parallel composition)")
    params = {
        "engine": engine, "group_column": group, "max_groups_per_item": m,
        "epsilon_per_group": par.epsilon / (m or 1), "delta_per_group": par.delta / (m or 1),
        "unit_of_privacy": ("one item with all its rows in every group" if m is not None
                            else "one event (one row, in one group)"),
        "relation": RELATIONS[par.unit] + (" (in all its groups)" if m is not None else ""),
        "bounding": (f"each item keeps at most {m} of the listed groups, chosen uniformly by a "
                     "keyed MD5 rank of (key, item, group)" if m is not None
                     else "none needed (an event is in one group)"),
        "groups": "public list (rows of other groups dropped; the range check applies to the "
                  "rows of listed groups)",
        "split": split,
        "noise": "per group: the structures of one plan (public parameters), each group's node "
                 "noise under its own secret sub-key",
        "simultaneous": "Bonferroni over groups and released curves"}
    return {"epsilon": par.epsilon, "delta": par.delta, "unit": par.unit,
            "group_column": group, "max_groups_per_item": m, "groups": list(names),
            "params": params}


def release_grouped_window_counts(source: Any, *, par: WindowParams, item: Any, time: Any,
                                  group: Any, groups: Any, max_groups_per_item: Any,
                                  out_of_range: str, engine: Any, rng: Any,
                                  accountant: Any, func: str) -> GroupedWindowRelease:
    """:func:`~dpfreq.windows.release_window_counts` with ``group=`` (parameters checked there).

    Privacy
    -------
    ``unit="item"``: neighbours add or remove one item with all its rows in every group. The
    engine keeps the rows of listed groups, then each item keeps at most ``m`` of its groups,
    chosen by a keyed hash of (key, item, group) that depends on that item's rows only, so a
    neighbour changes the bounded log of at most ``m`` groups, each by that item's rows alone:
    in each such group it is an item-level neighbour. Every group's release is the window
    release at ``(ε/m, δ/m)``, so by basic composition over those ``m`` groups (parallel
    composition over the others) the whole call is (ε, δ)-DP. ``unit="event"``: neighbours add
    or remove one row, which lies in one group; every group's release is at (ε, δ) and the call
    is (ε, δ)-DP by parallel composition. Group names come from the public list only.
    """
    group, names, m = check_window_grouping(group, groups, max_groups_per_item, par.unit, func)
    acct = check_accountant(accountant, func)
    eps_g, delta_g = par.epsilon / (m or 1), par.delta / (m or 1)
    axis, fams, ks = par.axis, par.windows, par.k_values
    resolved = resolve_rng(rng, func)
    master = resolved.generator.bytes(32)
    keys = [derive_key(master, "windows-group", name) for name in names]
    build = {"epsilon": eps_g, "delta": delta_g, "k_values": list(ks), "unit": par.unit,
             "windows": list(fams), "method": par.method, "singleton": par.singleton,
             "horizon": axis.horizon, "axis": axis.public(), "seeded": resolved.seeded,
             "n_dropped": 0, "source_kind": "", "confidence": par.confidence}
    calibrated_plan(build)  # calibrates (or refuses) before any data is read
    if acct is not None:
        acct.check(par.epsilon, par.delta)
    specs = summary_specs(fams, ks)
    src, item, time = _grouped_source(source, item, time, group, axis, func)
    eng = get_engine(engine, src)
    red = eng.grouped_reduce_items(src, item=item, time=time, group=group, groups=names,
                                   max_groups_per_item=m,
                                   hash_key=derive_key(master, "group-bounding"),
                                   buckets=axis.buckets(),
                                   reducer=WindowReducer(axis.horizon, specs),
                                   drop_out_of_range=out_of_range == "drop")
    if red.n_out_of_range and out_of_range == "error":
        raise range_error(axis.horizon)
    summaries = [WindowSummaries(axis.horizon, specs, *red.entries(g))
                 for g in range(len(names))]
    if par.singleton and not all(s.singleton for s in summaries):
        raise DataError(message("singleton", func, "True only for logs with at most one event "
                                "per period in each group", "a group with several events in "
                                "one period"))
    if acct is not None:
        acct.spend(par.epsilon, par.delta, label=func, unit=par.unit, source=eng.name)
    build["source_kind"] = eng.name
    return assemble(group_states(summaries, keys, build), names,
                    _grouped_fields(par, group, names, m, eng.name),
                    n_dropped=red.n_out_of_range)


@dataclass(frozen=True)
class GroupedWindowCountsPlan:
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
    n_groups : int
        Number of public groups.

    Examples
    --------
    >>> from dpfreq.windows import plan_window_counts
    >>> plan = plan_window_counts(horizon=30, epsilon=1.0, unit="item", k_values=[1],
    ...                           windows=["total"], group="campaign", groups=["c0", "c1"],
    ...                           max_groups_per_item=4)
    >>> plan.per_group.epsilon, plan.n_groups
    (0.25, 2)
    """

    per_group: Any
    epsilon: float
    delta: float
    max_groups_per_item: int | None
    n_groups: int

    def epsilon_for(self, target: float, **which: Any) -> float:
        """The smallest total ε giving each group a half-width ``target`` at the family and k
        ``which`` selects (:meth:`WindowCountsPlan.epsilon_for` of one group, times ``m``)."""
        return float(self.per_group.epsilon_for(target, **which)
                     * (self.max_groups_per_item or 1))

    def lines(self) -> list[str]:
        """The per-group plan's lines, led by how the budget is split."""
        m = self.max_groups_per_item
        head = (f"{self.n_groups} groups, epsilon={self.epsilon:g} spent once: "
                + (f"ε/m = {self.per_group.epsilon:g} per group (m={m})" if m is not None
                   else "the whole ε per group (unit event)"))
        return [head, *self.per_group.lines()]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the whole call's budget and the per-group plan."""
        return {"epsilon": self.epsilon, "delta": self.delta,
                "max_groups_per_item": self.max_groups_per_item, "n_groups": self.n_groups,
                "per_group": self.per_group.to_dict()}
