"""Grouped profile: the direct profile of every public group, spent once.

The engine bounds each item to ``m`` of the listed groups where the data lives and returns the
per-group count-of-counts of one query; each group gets the direct mechanism of
:func:`dpfreq.profile.release_profile` at ``ε/m``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dpfreq.budget import check_accountant
from dpfreq.engines import get_engine
from dpfreq.errors import DataError, ParameterError
from dpfreq.grouped.checks import bounding_key, check_grouping
from dpfreq.grouped.result import GroupedRelease
from dpfreq.profile.direct import direct_layout
from dpfreq.profile.intervals import direct_widths
from dpfreq.profile.plan import check_profile_parameters
from dpfreq.profile.result import ProfileRelease
from dpfreq.release import ErrorStatement
from dpfreq.resources import check_memory
from dpfreq.rng import resolve_rng

__all__ = ["release_grouped_profile"]


def _group_classes(gp: Any, d: int, n: int, func: str) -> np.ndarray:
    """Class sizes ``c[g, 0..n]`` of every listed group (``c[g, 0]`` from the public domain)."""
    classes = np.zeros((len(gp.groups), n + 1), dtype=np.int64)
    np.add.at(classes, (gp.group_index, np.minimum(gp.counts, n)), gp.prevalences)
    seen = classes.sum(axis=1)
    if seen.size and int(seen.max()) > d:
        raise DataError(f"source of {func} holds more distinct items in one group than "
                        f"domain_size = {d}; domain_size must be the public size of a domain "
                        "containing every item.")
    classes[:, 0] = d - seen
    return classes


def release_grouped_profile(source: Any, *, item: str | None, group: str, groups: Any,
                            max_groups_per_item: Any, domain_size: int, max_count: int,
                            epsilon: float, unit: str, confidence: float = 0.95,
                            engine: Any = None, rng: Any = None, accountant: Any = None,
                            release_one: Callable[..., dict[str, Any]]) -> GroupedRelease:
    """The ε-DP direct profile of every listed group (``release_profile(..., group=...)``).

    Parameters are those of :func:`dpfreq.profile.release_profile` plus ``group`` (the group
    column), ``groups`` (the public list of groups, or a file of one name per line) and
    ``max_groups_per_item`` (``m``, the public number of groups one item may touch), and
    ``release_one``, the direct mechanism of one class vector (given by
    :func:`~dpfreq.profile.release_profile`, which dispatches here).

    Returns
    -------
    GroupedRelease
        ``rel[g]`` is the :class:`~dpfreq.profile.ProfileRelease` of group ``g``; rows of
        unlisted groups are dropped; listed groups without rows are released (all mass at 0).

    Notes
    -----
    **Privacy.** Unit ``"item"``: neighbours add or remove one item with all its rows, in every
    group. The engine first keeps only rows of listed groups, then each item keeps at most ``m``
    of its groups, chosen by a keyed hash of (key, item, group) that depends on that item's rows
    only; so a neighbour changes the bounded data of at most ``m`` groups. In each such group the
    item enters or leaves one class ``t >= 1`` (ℓ1 change 1 on the classes ``t >= 1``; class 0
    is derived from the public ``d``), and every group gets the direct mechanism at ``ε/m``
    (its layout for unit ``"item"``: ``γ = ε/m``): by basic composition over the ``≤ m`` groups
    it touches (parallel composition over the others) the release is ε-DP. The group names come
    from the public list, never from the data.
    """
    func = "release_profile"
    d, n, eps, u, conf, chosen, _ = check_profile_parameters(
        domain_size, max_count, epsilon, unit, confidence, "direct", func)
    group, names, m = check_grouping(group, groups, max_groups_per_item, u, func)
    if not isinstance(item, str) or not item:
        raise ParameterError(f"item of {func} must be the name of the item column of the "
                             f"tabular source; got {item!r}.")
    resolved = resolve_rng(rng, func)
    acct = check_accountant(accountant, func)
    check_memory(64 * (n + 1) * len(names), param="max_count", func=func, value=n,
                 what="the count-of-counts of n + 1 classes per group")
    if acct is not None:
        acct.check(eps, 0.0)
    eng = get_engine(engine, source)
    gp = eng.grouped_count_of_counts(source, item=item, group=group, groups=names,
                                     max_groups_per_item=m, hash_key=bounding_key(resolved),
                                     max_count=n)
    classes = _group_classes(gp, d, n, func)
    if acct is not None:
        acct.spend(eps, 0.0, label=func, unit=u)
    eps_g = eps / m
    base = {"engine": str(getattr(eng, "name", type(eng).__name__)), "method": "direct",
            "why": "direct: the one profile mechanism at unit='item'",
            "d": d, "n": n, "confidence": conf, "group_column": group,
            "max_groups_per_item": m, "epsilon_per_group": eps_g,
            "clamping": f"counts above max_count = {n} clamped to {n} before noising",
            "unit_of_privacy": "one item with all its rows in every group",
            "relation": "add or remove one item with all its rows (in all its groups)",
            "bounding": f"each item keeps at most {m} of the listed groups, chosen uniformly by "
                        "a keyed MD5 rank of (key, item, group)",
            "groups": "public list (rows of other groups dropped)",
            "split": f"ε/m = {eps_g:.6g} per group: an item touches at most m groups"}
    releases = {}
    for g, name in enumerate(names):
        out = release_one(classes[g], d=d, n=n, eps=eps_g, unit=u, conf=conf,
                              gen=resolved.generator)
        params = dict(base, group=name, **out["params"])
        releases[name] = ProfileRelease(
            value=out["value"], epsilon=eps_g, delta=0.0, unit=u, mechanism=out["mechanism"],
            mechanism_params=params, seeded=resolved.seeded, error=out["error"], domain_size=d,
            max_count=n, method=chosen, l1_bound=out["l1_bound"], l1_confidence=conf, B=0,
            norm="1", noisy_profile=out["noisy_profile"])
    level = 1.0 - (1.0 - conf) / len(names)
    layout = direct_layout(u, eps_g, n)
    _, q_band = direct_widths(layout.gamma, n, level, derive_zero=layout.derive_zero)
    l1 = min(2.0, 2.0 * float(q_band.sum()) / d)
    sim = ErrorStatement(kind="bound", confidence=conf, value=l1, description=(
        f"With probability at least {conf:.6g} every one of the {len(names)} groups' profiles "
        f"is within ℓ1 distance {l1:.6g} of its true profile (each group's band at level "
        f"{level:.6g}, union bound over the groups)."))
    return GroupedRelease(releases=releases, epsilon=eps, delta=0.0, unit=u,
                          mechanism="grouped-direct-count-of-counts", mechanism_params=base,
                          simultaneous=sim, seeded=resolved.seeded, group_column=group)
