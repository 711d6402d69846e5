"""What a grouped release says about its contribution bound: its intervals cover the capped
data, not the data.

Each item keeps at most ``m`` of its groups (:mod:`dpfreq.engines.grouping`). The released
values, and the intervals around them, are about the items each group keeps: a group loses
the items that kept other groups instead, so where items hold more than ``m`` groups its
values are biased low and its true value (before the cap) may lie above the interval. Every
grouped release states this in its ``mechanism_params["coverage"]`` (the whole call's and each
group's) and at the end of every error statement (each group's and the simultaneous one):
:func:`with_coverage`.
"""

from __future__ import annotations

import dataclasses

from dpfreq.release import ErrorStatement

__all__ = ["AT_RANDOM", "MEASURE_REMEDY", "capping_statement", "with_coverage"]

#: how a one-off grouped release picks the groups an item keeps (:mod:`dpfreq.engines.grouping`)
AT_RANDOM = "chosen uniformly at random by a secret key"

#: what a one-off grouped release can do about its cap (its closing words)
MEASURE_REMEDY = ("raise max_groups_per_item or see the dropped-fraction estimate "
                  "(capping_epsilon=)")


def capping_statement(m: int | None, remedy: str = MEASURE_REMEDY, *,
                      chosen: str = AT_RANDOM) -> str:
    """The coverage sentence of a grouped release with ``m`` groups per item (None: nothing
    capped, one row lies in one group), saying how the kept groups are ``chosen`` and closing
    with ``remedy``: what the user can do about the cap (a stream keeps an item's first
    groups, fixes ``m`` when it is created and measures no dropped fraction).

    Examples
    --------
    >>> capping_statement(None)
    'the intervals cover the data itself: nothing is capped (each row lies in one group)'
    >>> capping_statement(3).startswith("the intervals cover the capped data")
    True
    """
    if m is None:
        return "the intervals cover the data itself: nothing is capped (each row lies in one group)"
    return (f"the intervals cover the capped data, not the data: each item keeps at most {m} "
            f"of its groups ({chosen}), so where items hold "
            f"more than {m} groups the per-group counts are biased low (by the (item, group) "
            f"pairs the cap dropped) and a group's true value can lie above its interval; "
            f"{remedy}")


def with_coverage(statement: ErrorStatement, m: int | None,
                  remedy: str = MEASURE_REMEDY, *, chosen: str = AT_RANDOM) -> ErrorStatement:
    """``statement`` with the coverage sentence of :func:`capping_statement` appended to its
    description (post-processing: the numbers are unchanged).

    Examples
    --------
    >>> s = ErrorStatement(kind="bound", confidence=0.95, value=1.0, description="Bound.")
    >>> with_coverage(s, 2).description[:50]
    'Bound. Coverage: the intervals cover the capped da'
    """
    return dataclasses.replace(statement, description=(
        f"{statement.description} Coverage: {capping_statement(m, remedy, chosen=chosen)}."))
