"""Grouped window counts: reach and k+ reach over time windows for every public group, spent once.

:func:`release_window_counts` and :func:`plan_window_counts` dispatch here when ``group=`` is
given. The engine computes the window summaries of every (group, item, period) in one pass
after the keyed bounding of the grouped profile (:meth:`~dpfreq.engines.Summarizing.summaries`,
one SQL statement on DuckDB and Spark); one plan
is calibrated from public parameters at the per-group budget and every group gets its own copy
with its own secret sub-key. The release runs on the grouped driver
(:mod:`dpfreq.grouped.driver`) with :class:`GroupedWindowAdapter`: the plan splits the budget and
calibrates, the read checks the log with no key, and after the spend the driver draws the
release's secret, selects the groups (without a public list), runs the one bounded grouped query
and attaches every group's structures to the shared keyed noise source.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from dpfreq._validate import message
from dpfreq.budget import BudgetAccountant, check_accountant
from dpfreq.engines import CountRequest, Grouping, Summaries, SummaryRequest
from dpfreq.errors import DataError, ParameterError
from dpfreq.grouped.bound_choice import resolve_auto
from dpfreq.grouped.checks import check_bound, check_grouping
from dpfreq.grouped.driver import Bounding, Candidates, Drawn, GroupedCall, GroupSecret, run_grouped
from dpfreq.grouped.dropped import check_capping_epsilon, release_epsilon
from dpfreq.grouped.selection import AnySelection, check_selection_mechanism, group_weights
from dpfreq.pipeline import Charge, Reading
from dpfreq.rng import ResolvedRNG, resolve_rng
from dpfreq.windows.data.events import engine_source, range_error, summarizing_engine
from dpfreq.windows.data.summaries import WindowSummaries, summary_specs
from dpfreq.windows.grouped.budget import GroupBudget, check_selection_epsilon, choose_budget
from dpfreq.windows.grouped.fields import GroupedWindowFields, GroupedWindowMechanism
from dpfreq.windows.grouped.result import (
    GroupedWindowRelease,
    assemble,
    calibrated_plan,
    group_states,
)
from dpfreq.windows.params import WindowBuild, WindowParams
from dpfreq.windows.state import route

#: The ledger label of a grouped window release: the function that charges it.
_LABEL = "release_window_counts"

__all__ = ["GroupedWindowAdapter", "GroupedWindowArgs", "check_window_grouping",
           "release_grouped_window_counts", "window_budget"]


def check_window_grouping(group: Any, groups: Any, max_groups_per_item: Any,
                          unit: str) -> tuple[str, tuple[str, ...] | None, int | None]:
    """``(group column, public groups or None, m or None)``.

    ``unit="item"``: ``m`` is required (an item may touch several groups). ``unit="event"``:
    one event is in one group, so the groups are disjoint in the unit and ``m`` is refused
    (it would bound nothing the guarantee needs; refusing says so instead of ignoring it).
    ``"item_replace"`` is refused: a replacement may move an item between groups.
    ``groups=None``: the groups are selected privately (:func:`window_budget`).
    """
    if group is None:
        raise ParameterError(message("group", "the group column when "
                                     "max_groups_per_item or groups is given", group))
    if unit == "event":
        if max_groups_per_item is not None:
            raise ParameterError(message(
                "max_groups_per_item", "None at unit='event' (one event is in one "
                "group: every group gets the whole epsilon, parallel composition)",
                max_groups_per_item))
        g, _ = check_bound(group, 1, "item")
        m = None
    elif unit != "item":
        raise ParameterError(message("unit", "'item' or 'event' for a grouped release "
                                     "(a replacement may move an item between groups)", unit))
    else:
        g, m = check_bound(group, max_groups_per_item, unit)
    names = None if groups is None else check_grouping(g, groups, 1, "item")[1]
    return g, names, m


def window_budget(names: tuple[str, ...] | None, par: WindowParams, m: int | None,
                  selection_epsilon: Any = "auto",
                  selection: Any = "auto") -> GroupBudget:
    """The budget of each group and the partition selection (None with a public list).

    Without a public list the selection spends ``selection_epsilon`` (``"auto"``: the share of
    :func:`~dpfreq.windows.grouped.budget.choose_budget`) and a share of δ (δ must be in
    (0, 1e-3]); the groups' window
    releases share the rest, under pure or zCDP accounting, whichever predicts less error
    (:func:`~dpfreq.windows.grouped.budget.choose_budget`), so the call's total is exactly the
    (ε, δ) asked for.
    """
    if names is None and par.delta == 0.0:
        raise ParameterError(message("groups", "a public list of group names, or give "
                                     "delta= > 0 for private partition selection of the groups "
                                     "in the data", None))
    sel_eps = check_selection_epsilon(selection_epsilon, par.epsilon, names is not None)
    mechanism = check_selection_mechanism(selection)
    return choose_budget(par, m, names is not None, sel_eps, mechanism)


def _grouped_source(source: Any, item: Any, time: Any, group: str,
                    axis: Any) -> tuple[Any, str, str]:
    """The event log with its group column (an ``(items, times)`` pair has none)."""
    if isinstance(source, tuple | list):
        raise ParameterError(message("source", "a mapping, file, SQL or DataFrame with "
                                     f"the group column {group!r} (an (items, times) pair has "
                                     "none)", type(source).__name__))
    if not isinstance(source, Mapping):
        return engine_source(source, item, time, axis)
    if item is None or time is None:
        raise ParameterError(message("item/time", "column names of the source",
                                     (item, time)))
    if group not in source:
        raise DataError(message("source", f"a mapping with column {group!r}",
                                sorted(map(str, source))))
    cols, item, time = engine_source({k: source[k] for k in (item, time) if k in source},
                                     item, time, axis)
    return {**cols, group: np.asarray(source[group])}, item, time


def _sizes(eng: Any, src: Any, item: str, group: str, bounding: Bounding,
           selection: AnySelection) -> Candidates:
    """Every group of the data and what ``selection`` thresholds, counted by the engine in one
    query: distinct items per group after each item kept at most ``m`` of its groups, or their
    set-union weights; rows per group at ``unit="event"``, ``m = None``."""
    m = bounding.max_groups_per_item
    gp = eng.grouped_count_of_counts(src, CountRequest(
        item, Grouping(group, None, m, bounding.key), per_item=selection.per_item))
    return Candidates(gp.groups, group_weights(gp, selection, m is not None))


def _check_logs(eng: Any, src: Any, item: str, time: str, group: str,
                names: tuple[str, ...] | None, par: WindowParams, out_of_range: str) -> Summaries:
    """Every check of the data, on the rows before any bounding and before any draw, in one
    engine query without a key: the events per period of every listed group, or, under private
    selection (no public list), of the whole log — a stricter check (a log with at most one
    event per period has at most one in each group), since the groups are not known before
    the spend. Bounding only removes rows, so what passes here passes after it; whether a call
    is refused is a function of the data and the parameters alone; under selection the group
    column is checked too (one grouped count, without a key). Returns the engine's
    summaries: the events per period of every listed group (or of the whole log) and the
    number of rows outside the horizon (dropped with ``out_of_range="drop"``)."""
    axis = par.axis
    grouping = None if names is None else Grouping(group, names, None)
    if names is None:  # the summaries do not read the group column: check it (present, no
        # nulls, scalar) here, or a bad one would be found after the spend, by the selection
        eng.grouped_count_of_counts(src, CountRequest(item, Grouping(group, None, None),
                                                      max_count=1))
    red = eng.summaries(src, SummaryRequest(item, time, axis.buckets(), (),
                                            drop_out_of_range=out_of_range == "drop",
                                            grouping=grouping))
    if red.n_out_of_range and out_of_range == "error":
        raise range_error(axis, time)
    if par.singleton and red.weights.size and int(red.weights.max()) > 1:
        raise DataError(message("singleton", "True only for logs with at most one event "
                                "per period in each group", "a group with several events in "
                                "one period"))
    return red


def _summaries(eng: Any, src: Any, item: str, time: str, group: str, bounding: Bounding,
               par: WindowParams, out_of_range: str,
               checked: Summaries) -> list[WindowSummaries]:
    """Every released group's window summaries after the bounding, in one engine query. The
    data was checked before the spend (``checked``); when that check counted the events per
    period of these same groups (a public list), the engine does not count them again."""
    names = bounding.groups
    if not names:
        return []
    axis = par.axis
    specs = summary_specs(par.windows, par.k_values)
    again = checked.groups != names
    red = eng.summaries(src, SummaryRequest(
        item, time, axis.buckets(), specs, drop_out_of_range=out_of_range == "drop",
        grouping=Grouping(group, names, bounding.max_groups_per_item, bounding.key),
        checked=not again))
    out = []
    for g in range(len(names)):
        slots, keys, weights = red.entries(g)
        if not again:  # slot 0 (the events per period) from the check, then the bounded slots
            s0, k0, w0 = checked.entries(g)
            slots, keys, weights = (np.concatenate(v) for v in ((s0, slots), (k0, keys),
                                                                (w0, weights)))
        out.append(WindowSummaries(axis.horizon, specs, slots, keys, weights))
    return out


@dataclass(frozen=True)
class GroupedWindowArgs:
    """The checked arguments of a grouped window release (``par`` checked by the caller)."""

    par: WindowParams
    item: Any
    time: Any
    group: str
    names: tuple[str, ...] | None
    max_groups_per_item: int | None
    out_of_range: str
    selection_epsilon: Any = "auto"
    selection: Any = "auto"
    capping_epsilon: float | None = None
    auto_bound: bool = False


@dataclass(frozen=True)
class _Plan:
    budget: GroupBudget
    build: WindowBuild
    calibrated: Any  # the plan every group's structures copy (public parameters only)


@dataclass(frozen=True)
class _Logs:
    """The checked source: where it lives and what the checks found (no key, no draw)."""

    source: Any
    item: str
    time: str
    engine: Any
    checked: Summaries  # the check's summaries: events per period before the bounding

    @property
    def n_dropped(self) -> int:
        return int(self.checked.n_out_of_range)


@dataclass(frozen=True)
class _Measured:
    engine: str
    summaries: list[WindowSummaries]


@dataclass(frozen=True)
class _States:
    states: list[Any]
    noise_key: bytes
    build: WindowBuild


@dataclass(frozen=True)
class GroupedWindowAdapter:
    """The grouped window release's part of a grouped release (:mod:`dpfreq.grouped.driver`).

    The read checks the data (range, singleton) on the rows before any bounding, with no key;
    the engine computes every released group's window summaries in one bounded query; every
    group's structures are copies of one calibrated plan, attached to keys derived from the
    release's secret, their node noise drawn for all groups at once (so the groups are released
    together, not one by one)."""

    args: GroupedWindowArgs
    source: Any
    engine: Any
    seeded: bool
    keyed = True

    @property
    def call(self) -> GroupedCall:
        a = self.args
        return GroupedCall(Charge(a.par.epsilon, a.par.delta, a.par.unit, _LABEL), a.group,
                           a.names, a.max_groups_per_item, a.capping_epsilon,
                           a.par.confidence, a.auto_bound)

    def with_bound(self, m: int) -> GroupedWindowAdapter:
        """This adapter at the fixed bound ``m``."""
        return replace(self, args=replace(self.args, max_groups_per_item=m, auto_bound=False))

    def noise_variance(self, plan: _Plan) -> float:
        """One group's predicted variance (with the squared bias bound) of its widest released
        window ending at ``T`` (``[1, T]`` unless only rolling windows are released) at its
        smallest k, as the release routes it."""
        structs = plan.calibrated.structures
        k = min(key[1] for key in structs)
        cands = [s for key, s in structs.items() if key[1] == k]
        horizon = self.args.par.axis.horizon
        starts = np.arange(1, horizon + 1, dtype=np.int64)
        ends = np.full(horizon, horizon, dtype=np.int64)
        best = route(cands, starts, ends)
        i = int(np.flatnonzero(best >= 0)[0])
        s = cands[int(best[i])]
        return float(s.variance(starts[i:i + 1], ends[i:i + 1])[0] + s.bias_bound() ** 2)

    def plan(self) -> _Plan:
        a = self.args
        par = a.par if a.capping_epsilon is None else dataclasses.replace(
            a.par, epsilon=release_epsilon(a.par.epsilon, a.capping_epsilon))
        budget = window_budget(a.names, par, a.max_groups_per_item,
                               a.selection_epsilon, a.selection)
        build = WindowBuild.of(a.par, epsilon=budget.epsilon, delta=budget.delta,
                               seeded=self.seeded)
        # calibrates (or refuses) before any data is read; every group's structures copy it
        return _Plan(budget, build, calibrated_plan(build, budget.rho))

    def selection(self, plan: _Plan) -> AnySelection | None:
        return plan.budget.selection

    def read(self, plan: _Plan) -> Reading[_Logs]:
        a = self.args
        src, item, time = _grouped_source(self.source, a.item, a.time, a.group, a.par.axis)
        eng = summarizing_engine(self.engine, src)
        checked = _check_logs(eng, src, item, time, a.group, a.names, a.par, a.out_of_range)
        return Reading(_Logs(src, item, time, eng, checked), source=eng.name)

    def sizes(self, plan: _Plan, data: _Logs, bounding: Bounding,
              selection: AnySelection) -> Candidates:
        return _sizes(data.engine, data.source, data.item, self.args.group, bounding, selection)

    def aggregate(self, plan: _Plan, data: _Logs, bounding: Bounding,
                  counted: Candidates | None) -> _Measured:
        a = self.args
        return _Measured(data.engine.name, _summaries(
            data.engine, data.source, data.item, data.time, a.group, bounding, a.par,
            a.out_of_range, data.checked))

    def distinct_groups(self, plan: _Plan, data: _Logs, names: tuple[str, ...] | None) -> Any:
        """Each item's number of distinct groups among ``names`` (None: all)."""
        return data.engine.grouped_count_of_counts(data.source, CountRequest(
            data.item, Grouping(self.args.group, names, None), per_item="distinct_groups"))

    def release(self, plan: _Plan, aggregate: _Measured, names: tuple[str, ...],
                secret: GroupSecret | None, rng: ResolvedRNG) -> _States:
        """Every group's structures attached to its key (node noise from one keyed source)."""
        assert secret is not None
        build = replace(plan.build, source_kind=aggregate.engine)
        keys = [secret.derive("windows-group", name) for name in names]
        noise_key = secret.derive("windows-groups-noise", *names)
        return _States(group_states(aggregate.summaries, keys, build, noise_key,
                                    plan.calibrated), noise_key, build)

    def result(self, plan: _Plan, drawn: Drawn[_Logs, _States]) -> GroupedWindowRelease:
        a, eng = self.args, drawn.data.engine.name
        mech = GroupedWindowMechanism(eng, a.par.unit, a.group, a.max_groups_per_item,
                                      plan.budget)
        fields = GroupedWindowFields(a.par.epsilon, a.par.delta, a.par.unit, a.group,
                                     a.max_groups_per_item, drawn.names, mech)
        return assemble(drawn.outs.states, drawn.names, fields.to_dict(), drawn.outs.noise_key,
                        n_dropped=drawn.data.n_dropped, build=drawn.outs.build)


def release_grouped_window_counts(source: Any, *, par: WindowParams, item: Any, time: Any,
                                  group: Any, groups: Any, max_groups_per_item: Any,
                                  out_of_range: str, engine: Any, rng: Any,
                                  accountant: BudgetAccountant | None,
                                  selection_epsilon: Any = "auto", selection: Any = "auto",
                                  capping_epsilon: Any = None) -> GroupedWindowRelease:
    """:func:`~dpfreq.windows.release_window_counts` with ``group=`` (parameters checked there).

    Privacy
    -------
    ``unit="item"``: neighbours add or remove one item with all its rows in every group. The
    engine keeps the rows of listed groups, then each item keeps at most ``m`` of its groups,
    chosen by a keyed hash of (key, item, group) that depends on that item's rows only, so a
    neighbour changes the bounded log of at most ``m`` groups, each by that item's rows alone:
    in each such group it is an item-level neighbour. Every group's release is the window
    release at ``(ε/m, δ/m)``, so by basic composition over those ``m`` groups (parallel
    composition over the others) the whole call is (ε, δ)-DP. Where it predicts less error
    (δ > 0, ``m >= 2``; :mod:`dpfreq.windows.grouped.budget`) every group's release is instead
    ``ρ/m``-zCDP with ``ρ + 2√(ρ ln(1/δ)) <= ε``: the at most ``m`` touched groups compose to
    ρ-zCDP, which is (ε, δ)-DP. ``unit="event"``: neighbours add or remove one row, which lies
    in one group; every group's release is at (ε, δ) and the call is (ε, δ)-DP by parallel
    composition. Group names come from the public list only.

    Without a public list (``groups=None``, ``δ > 0``): the data's groups are chosen by
    :func:`~dpfreq.grouped.selection.select_groups` with ``ε_s = ε/2`` and all of δ on each
    group's number of items after the bounding (rows at ``"event"``, ``m = 1``), which is
    ``(ε_s, δ)``-DP. For every fixed set ``S`` of selected names, releasing the groups of ``S``
    (rows of other groups dropped, each item bounded to ``m`` of its groups in ``S``, a group
    of ``S`` without rows released empty) is ``(ε − ε_s)``-DP by the argument above at
    ``((ε − ε_s)/m, 0)`` per group; by adaptive sequential composition the call is (ε, δ)-DP.
    Under zCDP accounting (when it predicts less error) the selection uses ``δ/2`` and the
    release is ``(ε − ε_s, δ/2)``-DP through ``ρ/m``-zCDP per group, as above.
    Both steps bound the items with the same secret key: the argument holds for every fixed
    key (each step's bounding is then a function of each item's own rows, and the two noises
    are independent), hence for the key drawn at random. Group names come from the selection,
    never from the data directly. With ``capping_epsilon = ε_c`` (``unit="item"`` only)
    everything above runs at ``ε − ε_c`` and the dropped fraction is ``ε_c``-DP
    (:mod:`dpfreq.grouped.dropped`): basic composition, (ε, δ) in all. With
    ``max_groups_per_item="auto"`` the ``ε_c``-DP measurement is the histogram of groups per
    item and ``m`` is post-processing of it (:mod:`dpfreq.grouped.bound_choice`); the argument
    above holds for every fixed ``m``, so the call is (ε, δ)-DP by adaptive composition.
    """
    bound, auto = resolve_auto(max_groups_per_item, capping_epsilon, par.unit)
    group, names, m = check_window_grouping(group, groups, bound, par.unit)
    cap_eps = check_capping_epsilon(capping_epsilon, par.epsilon, m)
    check_accountant(accountant)
    resolved = resolve_rng(rng)
    args = GroupedWindowArgs(par, item, time, group, names, m, out_of_range,
                             selection_epsilon, selection, cap_eps, auto)
    return run_grouped(GroupedWindowAdapter(args, source, engine, resolved.seeded),
                       accountant=accountant, rng=resolved)
