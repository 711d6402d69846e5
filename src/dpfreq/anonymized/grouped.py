"""Grouped anonymized histograms: the anonymized histogram of every group, spent once.

At ``unit="event"`` (the only unit of this system) each row lies in exactly one group, so adding
or removing a row changes one group's histogram: parallel composition gives every group the
whole ε, and no bound on groups per item is needed (``max_groups_per_item`` is refused with that
reason). The groups are a public list, or the data's groups chosen by private partition selection
(:mod:`dpfreq.grouped.selection`, with ``m = 1`` and half of ε) when ``delta`` is given. The
release runs on the grouped driver (:mod:`dpfreq.grouped.driver`) with
:class:`GroupedAnonymizedAdapter`: the plan calibrates the selection and the split, the read runs
the one grouped query and checks every group, and after the spend the driver selects the groups
and runs each one's mechanism.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfreq._validate import message
from dpfreq.anonymized import auto
from dpfreq.anonymized.accuracy import total_interval
from dpfreq.anonymized.core import (
    FUNC,
    build_prevalences,
    check_common,
    check_feasible,
    draw_prevalences,
    mechanism_name,
    plan_method,
)
from dpfreq.anonymized.steps import I64, Outcome, epsilon_fractions
from dpfreq.budget import BudgetAccountant, check_accountant
from dpfreq.errors import DataError, ParameterError
from dpfreq.grouped.accounting import (
    GroupedAccounting,
    check_selection_share,
    choose_group_accounting,
)
from dpfreq.grouped.capping import capping_statement, with_coverage
from dpfreq.grouped.checks import check_group_selection
from dpfreq.grouped.driver import Bounding, Candidates, Drawn, GroupedCall, GroupSecret, run_grouped
from dpfreq.grouped.result import GroupedRelease
from dpfreq.grouped.selection import AnySelection, group_entries
from dpfreq.pipeline import Charge, Reading
from dpfreq.release import RELATIONS, ErrorStatement
from dpfreq.rng import ResolvedRNG

__all__ = ["GroupedAnonymizedAdapter", "GroupedAnonymizedArgs", "GroupedAnonymizedMechanism",
           "release_grouped_anonymized_histogram"]



def _check_grouped(group: Any, item: Any, count: Any, max_groups_per_item: Any) -> str:
    if not isinstance(group, str) or not group:
        raise ParameterError(message("group", "a non-empty column name (str)", group))
    if max_groups_per_item is not None:
        raise ParameterError(message(
            "max_groups_per_item", "None at unit='event' (each row lies in exactly one "
            "group, so every group gets the full epsilon by parallel composition)",
            max_groups_per_item))
    if not isinstance(item, str) or not item or item == group:
        raise ParameterError(message("item", "the item column of a table source, other "
                                     "than group, when group= is given", item))
    if count is not None:
        raise ParameterError(message("count", "None with group= (grouped "
                                     "pre-aggregated item,count tables are not supported)",
                                     count))
    return group


def _histograms(gp: Any) -> dict[str, tuple[I64, I64]]:
    """Each group's ``(counts, prevalences)`` (sorted by count; empty for a group without
    rows)."""
    gi = np.asarray(gp.group_index, dtype=np.int64)
    order = np.lexsort((gp.counts, gi))
    gi, c, p = gi[order], np.asarray(gp.counts)[order], np.asarray(gp.prevalences)[order]
    cut = np.searchsorted(gi, np.arange(len(gp.groups) + 1))
    return {name: (c[cut[g]:cut[g + 1]].astype(np.int64), p[cut[g]:cut[g + 1]].astype(np.int64))
            for g, name in enumerate(gp.groups)}


def _simultaneous(releases: dict[str, Any], gamma1: Any, conf: float) -> ErrorStatement:
    """Union bound over the groups of the exact intervals of their totals."""
    if not releases:
        return ErrorStatement(kind="bound", confidence=conf, value=0.0, description=(
            "No group was released (none passed the private partition selection), so there "
            "is nothing to bound."))
    level = 1.0 - (1.0 - conf) / len(releases)
    half = max(total_interval(r.n_estimate, gamma1, level)[1] - r.n_estimate
               for r in releases.values())
    return ErrorStatement(kind="bound", confidence=conf, value=float(half), description=(
        f"With probability at least {conf:.6g} the true total of every one of the "
        f"{len(releases)} groups lies within ±{half} rows of its released total N (exact "
        f"intervals of the noise on N at level {level:.6g}, union bound over the groups); "
        "each group's sorted-ℓ1 statement holds on its own at the release's confidence."))


def _covered(rel: Any) -> Any:
    """A group's release whose error statement and parameters say what its intervals cover
    (nothing is capped)."""
    return dataclasses.replace(rel, error=with_coverage(rel.error, None), mechanism_params={
        **rel.mechanism_params, "coverage": capping_statement(None)})


@dataclass(frozen=True)
class GroupedAnonymizedMechanism:
    """The shared ``mechanism_params`` of a grouped anonymized release."""

    engine: str
    group_column: str
    accounting: GroupedAccounting

    def to_dict(self) -> dict[str, Any]:
        """The public entries (the JSON and the docs read these keys, in this order)."""
        eps_r, sel = self.accounting.epsilon_per_group, self.accounting.selection
        split = (f"parallel composition: every group gets ε = {eps_r:.6g}" if sel is None else
                 f"ε_selection = {sel.epsilon:.6g} selects the groups (with all of δ = "
                 f"{sel.delta:g}); every selected group is released at ε = {eps_r:.6g} "
                 "(parallel composition)")
        return {
            "engine": self.engine, "group_column": self.group_column,
            "epsilon_per_group": eps_r, "accounting": self.accounting.to_dict(),
            "per_group_guarantee": f"each group's release alone is ε = {eps_r:.6g}-DP (pure, "
                                   "δ = 0) at unit='event'",
            "relation": RELATIONS["event"],
            "bounding": "none needed: each row lies in exactly one group",
            "coverage": capping_statement(None),
            **group_entries("row count", sel, split)}


@dataclass(frozen=True)
class GroupedAnonymizedArgs:
    """The checked arguments of a grouped anonymized release (``split`` and ``domain_size``
    are checked by the plan, against the release's share of ε)."""

    epsilon: float
    method: str
    confidence: float
    item: str
    group: str
    names: tuple[str, ...] | None
    delta: float
    split: Any
    domain_size: Any
    selection_epsilon: float | None = None


@dataclass(frozen=True)
class _Plan:
    accounting: GroupedAccounting
    mechanism: auto.Plan
    domain_size: int | None

    @property
    def selection(self) -> AnySelection | None:
        return self.accounting.selection

    @property
    def epsilon_per_group(self) -> float:
        return self.accounting.epsilon_per_group


@dataclass(frozen=True)
class _Hists:
    engine: str
    hists: dict[str, tuple[I64, I64]]


@dataclass(frozen=True)
class GroupedAnonymizedAdapter:
    """The grouped anonymized histogram's part of a grouped release
    (:mod:`dpfreq.grouped.driver`): nothing is bounded or keyed (one row lies in one group); the
    read runs the one grouped query and checks every group; each group gets the ungrouped
    mechanism at the whole release ε (parallel composition)."""

    args: GroupedAnonymizedArgs
    source: Any
    engine: Any
    keyed = False

    @property
    def call(self) -> GroupedCall:
        a = self.args
        return GroupedCall(Charge(a.epsilon, a.delta, "event", FUNC), a.group, a.names, None)

    def plan(self) -> _Plan:
        a = self.args
        acc = choose_group_accounting(epsilon=a.epsilon, delta=a.delta, max_groups_per_item=1,
                                      named=a.names is not None,
                                      selection_epsilon=a.selection_epsilon)
        plan, d = plan_method(a.method, a.split, acc.epsilon_per_group, a.domain_size)
        return _Plan(acc, plan, d)

    def selection(self, plan: _Plan) -> AnySelection | None:
        return plan.selection

    def read(self, plan: _Plan) -> Reading[_Hists]:
        from dpfreq.engines import (
            CountRequest,
            GroupedCounting,
            Grouping,
            get_engine,
            require_capability,
        )

        a, d = self.args, plan.domain_size
        eng = require_capability(get_engine(self.engine, self.source), GroupedCounting,
                                 "grouped count-of-counts")
        hists = _histograms(eng.grouped_count_of_counts(
            self.source, CountRequest(a.item, Grouping(a.group, a.names, None))))
        for counts, prev in hists.values():
            check_feasible(counts, prev, plan.epsilon_per_group, plan.mechanism)
            if d is not None and int(prev.sum()) > d:
                raise DataError(message("domain_size", "at least the number of distinct "
                                        "items in every group", d))
        return Reading(_Hists(eng.name, hists))

    def sizes(self, plan: _Plan, data: _Hists, bounding: Bounding,
              selection: AnySelection) -> Candidates:
        """Each group's rows (read before the spend: nothing is bounded)."""
        rows = np.array([int(np.dot(c, p)) for c, p in data.hists.values()], dtype=np.int64)
        return Candidates(tuple(data.hists), rows)

    def aggregate(self, plan: _Plan, data: _Hists, bounding: Bounding,
                  counted: Candidates | None) -> dict[str, tuple[I64, I64]]:
        assert bounding.groups is not None
        return {name: data.hists[name] for name in bounding.groups}

    def distinct_groups(self, plan: _Plan, data: _Hists, names: tuple[str, ...] | None) -> Any:
        """Never asked: nothing is capped at unit='event' (``capping_epsilon`` is refused)."""
        raise ParameterError(message("capping_epsilon", "None (nothing is capped at "
                                     "unit='event')", "a number"))

    def with_bound(self, m: int) -> GroupedAnonymizedAdapter:
        """Never asked: nothing is capped at unit='event' (``max_groups_per_item`` is
        refused)."""
        raise ParameterError(message("max_groups_per_item", "None at unit='event' (each "
                                     "row lies in exactly one group)", m))

    def noise_variance(self, plan: _Plan) -> float:
        """Never asked (as :meth:`with_bound`)."""
        raise ParameterError(message("max_groups_per_item", "None at unit='event' (each "
                                     "row lies in exactly one group)", "auto"))

    def release(self, plan: _Plan, aggregate: dict[str, tuple[I64, I64]],
                names: tuple[str, ...], secret: GroupSecret | None,
                rng: ResolvedRNG) -> dict[str, Outcome]:
        """Every released group's mechanism, in order."""
        return {name: draw_prevalences(*aggregate[name], plan=plan.mechanism,
                                       epsilon=plan.epsilon_per_group, generator=rng.generator)
                for name in names}

    def result(self, plan: _Plan, drawn: Drawn[_Hists, dict[str, Outcome]]) -> GroupedRelease:
        a, engine, seeded = self.args, drawn.data.engine, drawn.seeded
        releases = {name: _covered(build_prevalences(
            out, plan=plan.mechanism, epsilon=plan.epsilon_per_group, method=a.method,
            confidence=a.confidence, seeded=seeded, engine_name=engine,
            domain_size=plan.domain_size)) for name, out in drawn.outs.items()}
        params = GroupedAnonymizedMechanism(engine, a.group, plan.accounting).to_dict()
        sim = with_coverage(_simultaneous(releases, epsilon_fractions(plan.mechanism.split)[0],
                                          a.confidence), None)
        return GroupedRelease(releases=releases, epsilon=a.epsilon, delta=a.delta,
                              unit="event", mechanism="grouped-" + mechanism_name(
                                  plan.mechanism.method),
                              mechanism_params=params, simultaneous=sim, seeded=seeded,
                              group_column=a.group)


def release_grouped_anonymized_histogram(
        source: Any, *, epsilon: float, unit: str, item: Any, count: Any, method: str,
        split: Any, confidence: float, domain_size: Any, engine: Any, rng: Any,
        accountant: BudgetAccountant | None, group: Any, groups: Any, max_groups_per_item: Any,
        delta: Any, selection_epsilon: Any = "auto") -> GroupedRelease:
    """The anonymized histogram of every group (``release_anonymized_histogram(group=...)``).

    Parameters are those of :func:`dpfreq.anonymized.release_anonymized_histogram` plus
    ``group`` (the group column of a table source), ``groups`` (a public list or a file of one
    name per line) or ``delta`` (δ of the private partition selection of the data's groups)
    and ``selection_epsilon`` (its ε: ``"auto"`` is half of ε).

    Returns
    -------
    GroupedRelease
        ``rel[g]`` is the :class:`~dpfreq.anonymized.AnonymizedHistogramRelease` of group ``g``.

    Notes
    -----
    **Privacy.** Unit ``"event"``: neighbours add or remove one row. The row lies in one group,
    so exactly one group's histogram moves, by sorted-ℓ1 distance 1 (the neighbouring relation
    of the ungrouped release); every group is released by the ungrouped mechanism at ``ε_r`` and
    the releases are ``ε_r``-DP together by parallel composition (``ε_r = ε`` with a public
    list). Without a list, the names are selected on each group's row count (sensitivity 1, one
    group per row, so ``m = 1``) with ``ε_s = selection_epsilon`` (``"auto"``: ε/2) and δ
    (:func:`dpfreq.grouped.selection.select_groups`), and ``ε_r = ε − ε_s``: a group is released
    only when selected, so the call is ``(ε, δ)``-DP and a group with a single row is published
    with probability at most δ.
    """
    eps, conf = check_common(epsilon, unit, method, confidence)
    check_accountant(accountant)
    group = _check_grouped(group, item, count, max_groups_per_item)
    names, dlt = check_group_selection(groups, delta)
    sel_eps = check_selection_share(selection_epsilon, eps, names is not None)
    args = GroupedAnonymizedArgs(eps, method, conf, item, group, names, dlt, split, domain_size,
                                 sel_eps)
    return run_grouped(GroupedAnonymizedAdapter(args, source, engine), accountant=accountant,
                       rng=rng)
