"""Grouped profile: the direct profile of every group, spent once.

The engine bounds each item to ``m`` groups where the data lives and returns the per-group
count-of-counts of one query; each group gets the direct mechanism of
:func:`dpfreq.profile.release_profile` at the per-group ε of
:mod:`dpfreq.grouped.accounting`: ``ε/m``, or with ``delta`` the larger ``√(2ρ/m)`` of zCDP
accounting across groups when it is larger. The groups are a public list, or (with ``delta``
and no list) the groups of the data chosen by private partition selection
(:mod:`dpfreq.grouped.selection`) with half of ε, the other half releasing them. The release
runs on the grouped driver (:mod:`dpfreq.grouped.driver`) with :class:`GroupedProfileAdapter`:
the plan calibrates the selection and checks memory, the read checks the data with no key and
no draw, and after the spend the driver takes the secret bounding key, runs the one bounded
grouped query, selects the groups and noises each one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfreq._noise_laws import discrete_laplace_variance
from dpfreq._validate import warn_large_delta
from dpfreq.budget import BudgetAccountant
from dpfreq.engines import (
    CountRequest,
    GroupedCounting,
    Grouping,
    get_engine,
    require_capability,
)
from dpfreq.errors import DataError, ParameterError, public_caller
from dpfreq.grouped.accounting import (
    GroupedAccounting,
    check_selection_share,
    choose_group_accounting,
)
from dpfreq.grouped.bound_choice import resolve_auto
from dpfreq.grouped.capping import capping_statement, with_coverage
from dpfreq.grouped.checks import check_bound, check_group_selection
from dpfreq.grouped.driver import (
    Bounding,
    Candidates,
    Drawn,
    GroupedCall,
    GroupSecret,
    run_grouped,
)
from dpfreq.grouped.dropped import check_capping_epsilon, release_epsilon
from dpfreq.grouped.result import GroupedRelease
from dpfreq.grouped.selection import (
    AnySelection,
    check_selection_mechanism,
    group_entries,
    group_weights,
)
from dpfreq.pipeline import Charge, Reading
from dpfreq.profile.direct import direct_layout
from dpfreq.profile.direct_release import DirectRelease
from dpfreq.profile.intervals import direct_widths
from dpfreq.profile.plan import ProfileParams, check_profile_parameters
from dpfreq.profile.result import ProfileRelease
from dpfreq.release import RELATIONS, ErrorStatement
from dpfreq.resources import check_memory
from dpfreq.rng import ResolvedRNG, resolve_rng

__all__ = ["GroupedProfileAdapter", "GroupedProfileArgs", "GroupedProfileMechanism",
           "release_grouped_profile"]

_FUNC = "release_profile"


def _group_sizes(gp: Any) -> np.ndarray:
    """Distinct items of every group of a grouped count-of-counts."""
    out: np.ndarray = np.bincount(gp.group_index, weights=gp.prevalences,
                                  minlength=len(gp.groups)).astype(np.int64)
    return out


def _check_domain(gp: Any, d: int) -> None:
    """Refuse a group with more distinct items than the public domain (on the rows before any
    bounding: bounding only removes items, so a group that passes here passes after it)."""
    func = public_caller()
    seen = _group_sizes(gp)
    if seen.size and int(seen.max()) > d:
        raise DataError(f"source of {func} holds more distinct items in one group than "
                        f"domain_size = {d}; domain_size must be the public size of a domain "
                        "containing every item.")


def _group_classes(gp: Any, rows: np.ndarray, d: int, n: int) -> np.ndarray:
    """Class sizes ``c[j, 0..n]`` of the groups ``gp.groups[rows[j]]`` (``c[j, 0]`` from the
    public domain)."""
    where = np.full(len(gp.groups), -1, dtype=np.int64)
    where[rows] = np.arange(rows.size)
    j = where[gp.group_index]
    keep = j >= 0
    classes = np.zeros((rows.size, n + 1), dtype=np.int64)
    np.add.at(classes, (j[keep], np.minimum(gp.counts[keep], n)), gp.prevalences[keep])
    classes[:, 0] = d - classes.sum(axis=1)
    return classes


def _simultaneous(n_groups: int, eps_g: float, unit: str, d: int, n: int,
                  conf: float) -> ErrorStatement:
    """Union bound over the released groups of each group's band."""
    if n_groups == 0:
        return ErrorStatement(kind="bound", confidence=conf, value=0.0, description=(
            "No group was released (none passed the private partition selection), so there "
            "is nothing to bound."))
    level = 1.0 - (1.0 - conf) / n_groups
    layout = direct_layout(unit, eps_g, n)
    _, q_band = direct_widths(layout.gamma, n, level, derive_zero=layout.derive_zero)
    l1 = min(2.0, 2.0 * float(q_band.sum()) / d)
    return ErrorStatement(kind="bound", confidence=conf, value=l1, description=(
        f"With probability at least {conf:.6g} every one of the {n_groups} groups' profiles "
        f"is within ℓ1 distance {l1:.6g} of its true profile (each group's band at level "
        f"{level:.6g}, union bound over the groups)."))


@dataclass(frozen=True)
class GroupedProfileMechanism:
    """The shared ``mechanism_params`` of a grouped profile (public parameters only)."""

    engine: str
    domain_size: int
    max_count: int
    confidence: float
    group_column: str
    accounting: GroupedAccounting

    def to_dict(self) -> dict[str, Any]:
        """The public entries (the JSON and the docs read these keys, in this order)."""
        acc = self.accounting
        n, m, eps_g, sel = (self.max_count, acc.max_groups_per_item, acc.epsilon_per_group,
                            acc.selection)
        share = (f"ε/m = {eps_g:.6g} per group: an item touches at most m groups"
                 if acc.accounting == "pure" else
                 f"ε_g = √(2ρ/m) = {eps_g:.6g} per group: zCDP across the at most m groups "
                 f"an item touches, at δ_r = {acc.release_delta:g}")
        out: dict[str, Any] = {
            "engine": self.engine, "method": "direct",
            "why": "direct: the one profile mechanism at unit='item'",
            "domain_size": self.domain_size, "max_count": n, "confidence": self.confidence,
            "group_column": self.group_column, "max_groups_per_item": m,
            "epsilon_per_group": eps_g, "accounting": acc.to_dict(),
            "per_group_guarantee": f"each group's release alone is ε_g = {eps_g:.6g}-DP "
                                   "(pure, δ = 0) at unit='item'",
            "clamping": f"counts above max_count = {n} clamped to {n} before noising",
            "relation": RELATIONS["item"] + " (in all its groups)",
            "bounding": f"each item keeps at most {m} of "
                        f"{'the listed groups' if sel is None else 'its groups'}, chosen "
                        "uniformly by a keyed rank of (key, item, group)",
            "coverage": capping_statement(m),
            **group_entries("item count", sel, share if sel is None else (
                f"ε_selection = {sel.epsilon:.6g} selects the groups (with δ = "
                f"{sel.delta:g}); the rest, ε_r = {acc.release_epsilon:.6g}, "
                f"releases them at {share}"))}
        return out


@dataclass(frozen=True)
class GroupedProfileArgs:
    """The checked arguments of a grouped profile (see :func:`release_grouped_profile`)."""

    par: ProfileParams
    item: str
    group: str
    max_groups_per_item: int
    names: tuple[str, ...] | None
    delta: float
    selection_epsilon: float | None = None
    selection: str = "auto"
    capping_epsilon: float | None = None
    auto_bound: bool = False


@dataclass(frozen=True)
class _Plan:
    accounting: GroupedAccounting

    @property
    def epsilon_per_group(self) -> float:
        return self.accounting.epsilon_per_group


@dataclass(frozen=True)
class _Checked:
    engine: Any  # the engine holding the source, checked (no key drawn yet)


@dataclass(frozen=True)
class _Classes:
    engine: str
    classes: np.ndarray  # row j: the class sizes of the j-th released group


@dataclass(frozen=True)
class GroupedProfileAdapter:
    """The grouped profile's part of a grouped release (:mod:`dpfreq.grouped.driver`): the
    read checks every group's distinct items against the public domain, the engine computes
    the bounded count-of-counts per group, and each group gets the direct mechanism."""

    args: GroupedProfileArgs
    source: Any
    engine: Any
    release_one: Callable[..., DirectRelease]
    keyed = True

    @property
    def call(self) -> GroupedCall:
        a = self.args
        return GroupedCall(Charge(a.par.epsilon, a.delta, a.par.unit, _FUNC), a.group, a.names,
                           a.max_groups_per_item, a.capping_epsilon, a.par.confidence,
                           a.auto_bound)

    def with_bound(self, m: int) -> GroupedProfileAdapter:
        """This adapter at the fixed bound ``m``."""
        return dataclasses.replace(self, args=dataclasses.replace(
            self.args, max_groups_per_item=m, auto_bound=False))

    def noise_variance(self, plan: _Plan) -> float:
        """One group's predicted variance of its items at counts ``t >= 1`` (the sum of the
        ``n`` noisy classes ``t >= 1``, each ``DLap`` at the direct layout's γ)."""
        par = self.args.par
        layout = direct_layout(par.unit, plan.epsilon_per_group, par.max_count)
        return par.max_count * discrete_laplace_variance(layout.gamma)

    def plan(self) -> _Plan:
        a, par = self.args, self.args.par
        acc = choose_group_accounting(epsilon=release_epsilon(par.epsilon, a.capping_epsilon),
                                      delta=a.delta,
                                      max_groups_per_item=a.max_groups_per_item,
                                      named=a.names is not None,
                                      selection_epsilon=a.selection_epsilon,
                                      selection=a.selection)
        if a.names is not None:
            check_memory(64 * (par.max_count + 1) * len(a.names), param="max_count",
                         value=par.max_count,
                         what="the count-of-counts of n + 1 classes per group")
        return _Plan(acc)

    def selection(self, plan: _Plan) -> AnySelection | None:
        return plan.accounting.selection

    def read(self, plan: _Plan) -> Reading[_Checked]:
        """Every check of the data, with no key and no draw: each listed group (every group of
        the data under selection) holds at most ``domain_size`` distinct items before the
        bounding (so also after it)."""
        a = self.args
        warn_large_delta(a.delta, a.par.domain_size, "the domain size")  # public d
        eng = require_capability(get_engine(self.engine, self.source), GroupedCounting,
                                 "grouped count-of-counts")
        raw = eng.grouped_count_of_counts(self.source, CountRequest(
            a.item, Grouping(a.group, a.names, None), max_count=1))
        _check_domain(raw, a.par.domain_size)
        return Reading(_Checked(eng))

    def _grouping(self, bounding: Bounding) -> Grouping:
        a = self.args
        return Grouping(a.group, bounding.groups, bounding.max_groups_per_item, bounding.key)

    def _counts(self, data: _Checked, bounding: Bounding) -> Any:
        """The one bounded grouped count-of-counts (clamped at ``max_count``)."""
        return data.engine.grouped_count_of_counts(self.source, CountRequest(
            self.args.item, self._grouping(bounding), max_count=self.args.par.max_count))

    def sizes(self, plan: _Plan, data: _Checked, bounding: Bounding,
              selection: AnySelection) -> Candidates:
        """Each group's bounded item count or, when the set union selects, its weight: the
        items' kept groups asked under the same grouping (one bounding key, so the same kept
        pairs), matched to the groups by name."""
        gp = self._counts(data, bounding)
        sizes = _group_sizes(gp)
        if selection.per_item != "rows":  # the set union weighs groups per item
            per = data.engine.grouped_count_of_counts(self.source, CountRequest(
                self.args.item, self._grouping(bounding), per_item=selection.per_item))
            weight = dict(zip(per.groups, group_weights(per, selection, True).tolist(),
                              strict=True))
            sizes = np.array([weight.get(g, 0) if k >= 1 else 0
                              for g, k in zip(gp.groups, sizes, strict=True)], np.int64)
        return Candidates(gp.groups, sizes, gp)

    def aggregate(self, plan: _Plan, data: _Checked, bounding: Bounding,
                  counted: Candidates | None) -> _Classes:
        """The class sizes of the released groups, from the selection's query or (with a public
        list) from the one bounded query of the listed groups."""
        gp = counted.aggregate if counted is not None else self._counts(data, bounding)
        row = {name: g for g, name in enumerate(gp.groups)}
        assert bounding.groups is not None
        rows = np.array([row[x] for x in bounding.groups], dtype=np.int64)
        par = self.args.par
        return _Classes(data.engine.name,
                        _group_classes(gp, rows, par.domain_size, par.max_count))

    def distinct_groups(self, plan: _Plan, data: _Checked, names: tuple[str, ...] | None
                        ) -> Any:
        """Each item's number of distinct groups among ``names`` (None: all)."""
        a = self.args
        return data.engine.grouped_count_of_counts(self.source, CountRequest(
            a.item, Grouping(a.group, names, None), per_item="distinct_groups"))

    def release(self, plan: _Plan, aggregate: _Classes, names: tuple[str, ...],
                secret: GroupSecret | None, rng: ResolvedRNG) -> dict[str, DirectRelease]:
        """Every released group's direct mechanism, in order."""
        par = self.args.par
        return {name: self.release_one(aggregate.classes[j], d=par.domain_size,
                                       n=par.max_count, eps=plan.epsilon_per_group,
                                       unit=par.unit, conf=par.confidence, gen=rng.generator)
                for j, name in enumerate(names)}

    def result(self, plan: _Plan, drawn: Drawn[_Checked, dict[str, DirectRelease]]
               ) -> GroupedRelease:
        a, par, eps_g = self.args, self.args.par, plan.epsilon_per_group
        d, n, conf = par.domain_size, par.max_count, par.confidence
        seeded, m = drawn.seeded, a.max_groups_per_item
        base = GroupedProfileMechanism(drawn.data.engine.name, d, n, conf, a.group,
                                       plan.accounting).to_dict()
        releases = {name: ProfileRelease(
            value=out.value, epsilon=eps_g, delta=0.0, unit=par.unit, mechanism=out.mechanism,
            mechanism_params=dict(base, group=name, **out.params.to_dict()),
            seeded=seeded, error=with_coverage(out.error, m), domain_size=d, max_count=n,
            method=par.method, l1_bound=out.l1_bound, l1_confidence=conf, B=0, norm="1",
            noisy_profile=out.noisy_profile) for name, out in drawn.outs.items()}
        sim = with_coverage(_simultaneous(len(releases), eps_g, par.unit, d, n, conf), m)
        return GroupedRelease(releases=releases, epsilon=par.epsilon, delta=a.delta,
                              unit=par.unit, mechanism="grouped-direct-count-of-counts",
                              mechanism_params=base, simultaneous=sim, seeded=seeded,
                              group_column=a.group)


def release_grouped_profile(source: Any, *, item: str | None, group: str, groups: Any,
                            max_groups_per_item: Any, domain_size: int, max_count: int,
                            epsilon: float, unit: str, confidence: float = 0.95,
                            engine: Any = None, rng: Any = None,
                            accountant: BudgetAccountant | None = None,
                            delta: Any = None, selection_epsilon: Any = "auto",
                            selection: Any = "auto", capping_epsilon: Any = None,
                            release_one: Callable[..., DirectRelease]) -> GroupedRelease:
    """The ε-DP (or, with ``delta``, (ε, δ)-DP) direct profile of every group.

    Parameters are those of :func:`dpfreq.profile.release_profile` plus ``group`` (the group
    column), ``groups`` (the public list of groups, or a file of one name per line),
    ``max_groups_per_item`` (``m``, the public number of groups one item may touch), ``delta``
    (without ``groups``: δ of the private partition selection of the data's groups; with
    ``groups``: optional, the release's δ for zCDP accounting across groups),
    ``selection_epsilon`` and ``selection`` (the selection's ε and mechanism, as in
    :func:`dpfreq.profile.release_profile`), ``capping_epsilon`` (None, or the share of ε
    measuring the dropped fraction, :mod:`dpfreq.grouped.dropped`) and ``release_one``, the
    direct mechanism of one
    class vector (given by :func:`~dpfreq.profile.release_profile`, which dispatches here).

    Returns
    -------
    GroupedRelease
        ``rel[g]`` is the :class:`~dpfreq.profile.ProfileRelease` of group ``g``. With a public
        list, rows of unlisted groups are dropped and listed groups without rows are released
        (all mass at 0); with selection, the selected groups in name order.

    Notes
    -----
    **Privacy.** Unit ``"item"``: neighbours add or remove one item with all its rows, in every
    group. The engine first keeps only rows of listed groups (all groups under selection), then
    each item keeps at most ``m`` of its groups, chosen by a keyed hash of (key, item, group)
    that depends on that item's rows only; so a neighbour changes the bounded data of at most
    ``m`` groups. In each such group the item enters or leaves one class ``t >= 1`` (ℓ1 change
    1 on the classes ``t >= 1``; class 0 is derived from the public ``d``), and every group
    gets the direct mechanism at ``ε_g`` (its layout for unit ``"item"``: ``γ <= ε_g``), which
    is pure ``ε_g``-DP. The accounting (:mod:`dpfreq.grouped.accounting`, stated in
    ``mechanism_params["accounting"]``) takes the larger ``ε_g`` of two valid arguments: basic
    composition over the ``≤ m`` groups it touches (parallel composition over the others),
    ``ε_g = ε_r/m`` and the releases ε_r-DP; or, with ``δ > 0`` and ``m >= 2``, zCDP: each
    group is ``ε_g²/2``-zCDP, an item's groups compose to ``ρ = m·ε_g²/2 <= zcdp_rho(ε_r,
    δ_r)`` and the releases are ``(ε_r, δ_r)``-DP. With a public list ``(ε_r, δ_r) = (ε,
    δ)``. Without a list, the group names are chosen by
    :func:`dpfreq.grouped.selection.select_groups` on the bounded item counts with
    ``ε_s = selection_epsilon`` (``"auto"``: ε/2; the set union on the items' weights when
    ``selection`` picks it) and ``δ_s`` (all of δ under pure accounting, half under zCDP, the
    rest being ``δ_r``), which is ``(ε_s, δ_s)``-DP; a group is released only when selected, and the
    release given the selected set is ``(ε_r, δ_r)``-DP, so the call is ``(ε, δ)``-DP. Group
    names come from the public list or from the selection, never from the data directly. With
    ``capping_epsilon = ε_c`` everything above runs at ``ε − ε_c`` and the dropped fraction
    is ``ε_c``-DP (:mod:`dpfreq.grouped.dropped`): basic composition, ``(ε, δ)`` in all. With
    ``max_groups_per_item="auto"`` the ``ε_c``-DP measurement is the histogram of groups per
    item and ``m`` is post-processing of it (:mod:`dpfreq.grouped.bound_choice`); the argument
    above holds for every fixed ``m``: ``(ε, δ)`` by adaptive composition.
    """
    par = check_profile_parameters(domain_size, max_count, epsilon, unit, confidence, "direct")
    bound, auto = resolve_auto(max_groups_per_item, capping_epsilon, par.unit)
    group, m = check_bound(group, bound, par.unit)
    names, dlt = check_group_selection(groups, delta, delta_with_list=True)
    if not isinstance(item, str) or not item:
        raise ParameterError(f"item of {_FUNC} must be the name of the item column of the "
                             f"tabular source; got {item!r}.")
    cap_eps = check_capping_epsilon(capping_epsilon, par.epsilon, m)
    sel_eps = check_selection_share(selection_epsilon, release_epsilon(par.epsilon, cap_eps),
                                    names is not None)
    args = GroupedProfileArgs(par, item, group, m, names, dlt, sel_eps,
                              check_selection_mechanism(selection), cap_eps, auto)
    return run_grouped(GroupedProfileAdapter(args, source, engine, release_one),
                       accountant=accountant, rng=resolve_rng(rng))
