"""Checks shared by the grouped releases: the group column, the bound, the public groups."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from dpfreq._validate import message
from dpfreq.errors import ParameterError
from dpfreq.grouped.selection import check_selection_delta

__all__ = ["check_bound", "check_group_selection", "check_grouping", "check_ungrouped"]


def _read_groups(groups: Any) -> tuple[str, ...]:
    """The public group list: an iterable of names, or a text file with one name per line."""
    if isinstance(groups, str | Path):
        path = Path(groups)
        if not path.is_file():
            raise ParameterError(message("groups", "a list of group names or a readable "
                                         "file of one name per line", str(groups)))
        groups = [line.strip() for line in path.read_text().splitlines() if line.strip()]
    if groups is None or isinstance(groups, bytes) or not hasattr(groups, "__iter__"):
        raise ParameterError(message("groups", "a public list of group names (or, where "
                                     "supported, give delta= > 0 for private partition "
                                     "selection)", groups))
    names = tuple(dict.fromkeys(str(g) for g in groups))
    if not names:
        raise ParameterError(message("groups", "a non-empty list of group names",
                                     list(names)))
    return names


def check_bound(group: Any, max_groups_per_item: Any, unit: str) -> tuple[str, int]:
    """``(group column, m)`` checked; refuses units the bounding does not cover."""
    if not isinstance(group, str) or not group:
        raise ParameterError(message("group", "a non-empty column name (str)", group))
    if unit != "item":
        raise ParameterError(message("unit", "'item' for a grouped release (the bound "
                                     "max_groups_per_item is per item)", unit))
    m = max_groups_per_item
    if m is None:
        raise ParameterError(message("max_groups_per_item", "given (an integer >= 1: how "
                                     "many groups one item may touch) when group= is set at "
                                     "unit='item'", m))
    if isinstance(m, bool) or not isinstance(m, int | np.integer) or m < 1:
        raise ParameterError(message("max_groups_per_item", "an integer >= 1, or 'auto' "
                                     "(chosen privately, with capping_epsilon=)", m))
    return group, int(m)


def check_grouping(group: Any, groups: Any, max_groups_per_item: Any,
                   unit: str) -> tuple[str, tuple[str, ...], int]:
    """``(group column, public groups, m)`` checked; refuses units the bounding does not cover."""
    group, m = check_bound(group, max_groups_per_item, unit)
    return group, _read_groups(groups), m


def check_group_selection(groups: Any, delta: Any, *,
                          delta_with_list: bool = False) -> tuple[tuple[str, ...] | None, float]:
    """``(public groups or None, δ)``: a public list, or private partition selection of the
    data's groups with ``0 < δ <= 1e-3``.

    With a public list ``delta`` must be None, unless ``delta_with_list`` (a release whose groups
    may compose in zCDP, :mod:`dpfreq.grouped.accounting`): then it is None or in (0, 1e-3],
    all of it the release's.
    """
    if groups is not None:
        if delta is not None and not delta_with_list:
            raise ParameterError(message("delta", "None when groups= is given (a public "
                                         "list of groups needs no selection)", delta))
        dlt = 0.0 if delta is None else check_selection_delta(
            delta, "(with a public list: the release's δ, for zCDP accounting across "
            "groups)")
        return _read_groups(groups), dlt
    if delta is None:
        raise ParameterError(message("groups", "a public list of group names, or give "
                                     "delta= > 0 for private partition selection of the groups "
                                     "in the data", groups))
    return None, check_selection_delta(delta)


def check_ungrouped(**options: Any) -> None:
    """Refuse the grouped-only options of an ungrouped release: ``selection_epsilon`` and
    ``selection`` must be ``"auto"`` (only a grouped release selects groups) and
    ``capping_epsilon`` None (only a grouped release caps groups per item)."""
    for name, value in options.items():
        if name == "capping_epsilon":
            if value is not None:
                raise ParameterError(message(name, "None without group= (only a grouped "
                                             "release caps groups per item)", value))
        elif not (isinstance(value, str) and value == "auto"):
            raise ParameterError(message(name, "'auto' without group= (only a grouped "
                                         "release selects groups)", value))
