"""Grouped profile: the direct profile of every group, spent once.

The engine bounds each item to ``m`` groups where the data lives and returns the per-group
count-of-counts of one query; each group gets the direct mechanism of
:func:`dpfreq.profile.release_profile` at ``ε/m``. The groups are a public list, or (with
``delta``) the groups of the data chosen by private partition selection
(:mod:`dpfreq.grouped.selection`) with half of ε, the other half releasing them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dpfreq._validate import warn_large_delta
from dpfreq.budget import BudgetAccountant, check_accountant
from dpfreq.engines import get_engine
from dpfreq.errors import DataError, ParameterError
from dpfreq.grouped.checks import bounding_key, check_bound, check_group_selection
from dpfreq.grouped.result import GroupedRelease
from dpfreq.grouped.selection import SELECTION_SHARE, plan_selection, select_groups
from dpfreq.pipeline import BudgetGate, Charge
from dpfreq.profile.direct import direct_layout
from dpfreq.profile.direct_release import DirectRelease
from dpfreq.profile.intervals import direct_widths
from dpfreq.profile.plan import check_profile_parameters
from dpfreq.profile.result import ProfileRelease
from dpfreq.release import ErrorStatement
from dpfreq.resources import check_memory
from dpfreq.rng import resolve_rng

__all__ = ["release_grouped_profile"]


def _group_sizes(gp: Any, d: int, func: str) -> np.ndarray:
    """Distinct items of every group after bounding (refused if one exceeds ``d``)."""
    seen = np.bincount(gp.group_index, weights=gp.prevalences,
                       minlength=len(gp.groups)).astype(np.int64)
    if seen.size and int(seen.max()) > d:
        raise DataError(f"source of {func} holds more distinct items in one group than "
                        f"domain_size = {d}; domain_size must be the public size of a domain "
                        "containing every item.")
    return seen


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


def _params(eng: Any, d: int, n: int, conf: float, group: str, m: int, eps_g: float,
            selection: Any) -> dict[str, Any]:
    """The shared ``mechanism_params`` of a grouped profile."""
    base: dict[str, Any] = {
        "engine": str(getattr(eng, "name", type(eng).__name__)), "method": "direct",
        "why": "direct: the one profile mechanism at unit='item'",
        "d": d, "n": n, "confidence": conf, "group_column": group,
        "max_groups_per_item": m, "epsilon_per_group": eps_g,
        "clamping": f"counts above max_count = {n} clamped to {n} before noising",
        "unit_of_privacy": "one item with all its rows in every group",
        "relation": "add or remove one item with all its rows (in all its groups)",
        "bounding": f"each item keeps at most {m} of "
                    f"{'the listed groups' if selection is None else 'its groups'}, chosen "
                    "uniformly by a keyed MD5 rank of (key, item, group)",
        "groups": "public list (rows of other groups dropped)",
        "split": f"ε/m = {eps_g:.6g} per group: an item touches at most m groups"}
    if selection is not None:
        base["groups"] = ("private partition selection of the data's groups (thresholded exact "
                          "discrete Laplace on each group's item count; see 'selection')")
        base["selection"] = selection.to_dict()
        base["split"] = (f"ε_selection = {selection.epsilon:.6g} selects the groups (with all "
                         f"of δ = {selection.delta:g}); the rest, {eps_g * m:.6g}, releases "
                         f"them at ε/m = {eps_g:.6g} per group: an item touches at most m "
                         "groups")
    return base


def release_grouped_profile(source: Any, *, item: str | None, group: str, groups: Any,
                            max_groups_per_item: Any, domain_size: int, max_count: int,
                            epsilon: float, unit: str, confidence: float = 0.95,
                            engine: Any = None, rng: Any = None,
                            accountant: BudgetAccountant | None = None,
                            delta: Any = None,
                            release_one: Callable[..., DirectRelease]) -> GroupedRelease:
    """The ε-DP (or, with selection, (ε, δ)-DP) direct profile of every group.

    Parameters are those of :func:`dpfreq.profile.release_profile` plus ``group`` (the group
    column), ``groups`` (the public list of groups, or a file of one name per line),
    ``max_groups_per_item`` (``m``, the public number of groups one item may touch), ``delta``
    (without ``groups``: δ of the private partition selection of the data's groups) and
    ``release_one``, the direct mechanism of one class vector (given by
    :func:`~dpfreq.profile.release_profile`, which dispatches here).

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
    gets the direct mechanism at ``ε_r/m`` (its layout for unit ``"item"``: ``γ = ε_r/m``): by
    basic composition over the ``≤ m`` groups it touches (parallel composition over the
    others) the releases are ε_r-DP, with ``ε_r = ε`` for a public list. Without a list, the
    group names are chosen by :func:`dpfreq.grouped.selection.select_groups` on the bounded
    item counts with ``ε_s = ε/2`` and δ, which is ``(ε_s, δ)``-DP; a group is released only
    when selected, so per touched group the (selection, release) pair is
    ``((ε_s + ε_r)/m, δ/m)``-DP and the call is ``(ε, δ)``-DP. Group names come from the
    public list or from the selection, never from the data directly.
    """
    func = "release_profile"
    par = check_profile_parameters(domain_size, max_count, epsilon, unit, confidence, "direct",
                                   func)
    d, n, eps, u, conf = par.domain_size, par.max_count, par.epsilon, par.unit, par.confidence
    group, m = check_bound(group, max_groups_per_item, u, func)
    names, dlt = check_group_selection(groups, delta, func)
    if not isinstance(item, str) or not item:
        raise ParameterError(f"item of {func} must be the name of the item column of the "
                             f"tabular source; got {item!r}.")
    selection = None
    eps_r = eps
    if names is None:
        selection = plan_selection(eps * float(SELECTION_SHARE), dlt, m, func)
        eps_r = eps - selection.epsilon
    resolved = resolve_rng(rng, func)
    acct = check_accountant(accountant, func)
    if names is not None:
        check_memory(64 * (n + 1) * len(names), param="max_count", func=func, value=n,
                     what="the count-of-counts of n + 1 classes per group")
    gate = BudgetGate(acct, Charge(eps, dlt, u, func))
    gate.check()
    warn_large_delta(dlt, d, func, "the domain size")  # the public number of items
    eng = get_engine(engine, source)
    gp = eng.grouped_count_of_counts(source, item=item, group=group, groups=names,
                                     max_groups_per_item=m, hash_key=bounding_key(resolved),
                                     max_count=n)
    sizes = _group_sizes(gp, d, func)
    gate.spend()
    released: tuple[str, ...] = gp.groups
    if selection is not None:
        present = sizes >= 1
        released = select_groups([g for g, k in zip(gp.groups, present, strict=True) if k],
                                 sizes[present], selection, resolved.generator)
    row = {name: g for g, name in enumerate(gp.groups)}
    classes = _group_classes(gp, np.array([row[x] for x in released], dtype=np.int64), d, n)
    eps_g = eps_r / m
    base = _params(eng, d, n, conf, group, m, eps_g, selection)
    releases = {}
    for j, name in enumerate(released):
        out = release_one(classes[j], d=d, n=n, eps=eps_g, unit=u, conf=conf,
                          gen=resolved.generator)
        params = dict(base, group=name, **out.params.to_dict())
        releases[name] = ProfileRelease(
            value=out.value, epsilon=eps_g, delta=0.0, unit=u, mechanism=out.mechanism,
            mechanism_params=params, seeded=resolved.seeded, error=out.error, domain_size=d,
            max_count=n, method=par.method, l1_bound=out.l1_bound, l1_confidence=conf, B=0,
            norm="1", noisy_profile=out.noisy_profile)
    sim = _simultaneous(len(releases), eps_g, u, d, n, conf)
    return GroupedRelease(releases=releases, epsilon=eps, delta=dlt, unit=u,
                          mechanism="grouped-direct-count-of-counts", mechanism_params=base,
                          simultaneous=sim, seeded=resolved.seeded, group_column=group)
