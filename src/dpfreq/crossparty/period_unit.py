"""A log's time column must be of the kind its period's bounds are (one rule, every engine).

A period given as integers counts the rows whose time column holds those integers; a period
given as dates or datetimes counts rows by their instant (µs since the epoch, UTC). Bounds of
one kind over a column of the other would compare unrelated numbers — a period of days
0..27 over timestamps, or of March over day numbers, counts no row while the sketch states
the period — so a log whose time column is of the other kind is refused, before anything is
counted or charged.
"""

from __future__ import annotations

from typing import Any

from dpfreq._validate import message
from dpfreq.errors import DataError

__all__ = ["check_time_kind"]

_RULES = {"integer": "integers (the period's bounds are integers)",
          "microseconds": "timestamps or dates (the period's bounds are dates)"}


def check_time_kind(spec: Any, integer: bool) -> None:
    """Refuse (one line) a time column of the other kind than ``spec.period_unit``
    (``integer``: whether the column holds integers); None: not checked.

    Examples
    --------
    >>> from dpfreq.crossparty.registers import LogSpec
    >>> check_time_kind(LogSpec(user="u", time="t", period=(0, 7), period_unit="integer"),
    ...                 True)
    """
    unit = getattr(spec, "period_unit", None)
    if unit is None or (unit == "integer") == integer:
        return
    raise DataError(message("time", f"a column of {_RULES[unit]}",
                            "integers" if integer else "timestamps"))
