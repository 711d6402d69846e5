"""What a grouped release says about its contribution bound: its intervals cover the capped
data, not the data.

Each item keeps at most ``m`` of its groups (:mod:`dpfreq.engines.grouping`). The released
values, and the intervals around them, are about the items each group keeps: a group loses
the items that kept other groups instead, so where items touch more than ``m`` groups its true
value (before the cap) may lie above the interval. Every grouped release states this in its
``mechanism_params["coverage"]`` (the whole call's and each group's).
"""

from __future__ import annotations

__all__ = ["capping_statement"]


def capping_statement(m: int | None, what: str = "items") -> str:
    """The coverage sentence of a grouped release with ``m`` groups per item (None: nothing
    capped, one row lies in one group).

    Examples
    --------
    >>> capping_statement(None)
    'the intervals cover the data itself: nothing is capped (each row lies in one group)'
    >>> capping_statement(3).startswith("the intervals cover the capped data")
    True
    """
    if m is None:
        return "the intervals cover the data itself: nothing is capped (each row lies in one group)"
    return (f"the intervals cover the capped data: each item kept at most {m} of its groups "
            f"(chosen uniformly at random by a secret key), so each group's values count the "
            f"{what} it kept; where {what} touch more than {m} groups, a group's value before "
            "the cap can lie above its interval (by the pairs the cap dropped, which this "
            "release does not estimate)")
