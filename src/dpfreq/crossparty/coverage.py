"""What a party's sketch covers: the measurement period and the campaigns it counts (public).

A sketch counts only the rows of its log in the measurement period and of the campaigns listed
(:func:`dpfreq.crossparty.build_sketch`'s ``period`` and ``campaigns``). Both are public — the
parties agree on them with the parameters — and a sketch records them, so that a merge of
sketches of different periods or campaigns is refused instead of adding up users of different
measurements (:func:`dpfreq.crossparty.merge_sketches`). The column names are the party's own
schema and are not recorded.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from dpfreq._validate import message
from dpfreq.errors import ParameterError, public_errors

__all__ = ["UNITS", "Coverage"]

#: how a period's bounds read: the time column's own integers, or µs since the epoch (UTC)
UNITS = ("integer", "microseconds")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_LIMIT = 2**62


@dataclass(frozen=True, kw_only=True)
class Coverage:
    """The public description of the rows a sketch counts.

    Attributes
    ----------
    period : tuple of int or None
        ``(start, end)``: rows with ``start <= time < end`` count; None: every time.
    period_unit : str or None
        ``"integer"`` (the time column's integers) or ``"microseconds"`` (timestamps, as µs
        since 1970-01-01 UTC); None without a period.
    campaigns : tuple of str or None
        The campaigns counted (sorted, as text); None: every campaign.

    Raises
    ------
    ParameterError
        A field breaks its rule (one line naming it).

    Examples
    --------
    >>> Coverage(period=(0, 30), period_unit="integer", campaigns=("x", "y")).describe()
    'period [0, 30) of the time column; campaigns x, y'
    >>> Coverage().describe()
    'every row of the log (no period, no campaign list)'
    """

    period: tuple[int, int] | None = None
    period_unit: str | None = None
    campaigns: tuple[str, ...] | None = None

    @public_errors("Coverage")
    def __post_init__(self) -> None:
        period = self.period
        if period is not None:
            if (not isinstance(period, tuple | list) or len(period) != 2
                    or not all(isinstance(b, int) and not isinstance(b, bool)
                               and -_LIMIT <= b <= _LIMIT for b in period)
                    or period[0] >= period[1]):
                raise ParameterError(message("period", "None or a pair of integers start < "
                                             "end in -2^62..2^62", period))
            object.__setattr__(self, "period", (int(period[0]), int(period[1])))
        if (self.period is None) != (self.period_unit is None) or (
                self.period_unit is not None and self.period_unit not in UNITS):
            raise ParameterError(message("period_unit", "'integer' or 'microseconds' with a "
                                         "period, None without", self.period_unit))
        names = self.campaigns
        if names is not None:
            if (isinstance(names, str) or not isinstance(names, tuple | list) or not names
                    or not all(isinstance(c, str) for c in names)):
                raise ParameterError(message("campaigns", "None or a non-empty list of "
                                             "campaign names (str)", names))
            object.__setattr__(self, "campaigns", tuple(sorted(set(names))))

    @classmethod
    def of(cls, period: tuple[int, int] | None, given: Any, campaigns: tuple[str, ...] | None
           ) -> Coverage:
        """The coverage of checked bounds ``period`` (``given``: the bounds as the caller gave
        them: datetimes or dates make the unit ``"microseconds"``) and campaign names."""
        unit = None if period is None else (
            "microseconds" if any(isinstance(b, dt.date) for b in given) else "integer")
        return cls(period=period, period_unit=unit, campaigns=campaigns or None)

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON-ready values (lists for tuples)."""
        return {"period": None if self.period is None else list(self.period),
                "period_unit": self.period_unit,
                "campaigns": None if self.campaigns is None else list(self.campaigns)}

    @classmethod
    def from_dict(cls, fields: Any) -> Coverage:
        """A coverage from :meth:`to_dict`'s fields (ParameterError if they break a rule)."""
        if not isinstance(fields, dict) or set(fields) != {"period", "period_unit",
                                                           "campaigns"}:
            raise ParameterError(message("coverage", "the fields period, period_unit and "
                                         "campaigns", type(fields).__name__))
        return cls(period=fields["period"], period_unit=fields["period_unit"],
                   campaigns=fields["campaigns"])

    def shown(self, name: str) -> str:
        """Field ``name`` as messages name it: the period as :meth:`describe` writes it (UTC,
        or of the time column), any other field as its value's repr.

        Examples
        --------
        >>> Coverage(period=(0, 30), period_unit="integer").shown("period")
        '[0, 30) of the time column'
        >>> Coverage().shown("period")
        'every time (no period given)'
        """
        if name != "period":
            return repr(getattr(self, name))
        if self.period is None:
            return "every time (no period given)"
        start, end = self.period
        if self.period_unit == "microseconds":
            return f"[{_iso(start)}, {_iso(end)})"
        return f"[{start}, {end}) of the time column"

    def describe(self) -> str:
        """The coverage in words (for headers and messages)."""
        parts = []
        if self.period is not None:
            parts.append(f"period {self.shown('period')}")
        if self.campaigns is not None:
            parts.append("campaigns " + ", ".join(self.campaigns))
        return "; ".join(parts) or "every row of the log (no period, no campaign list)"


def _iso(us: int) -> str:
    """µs since the epoch as ISO text (UTC), or the integer when out of datetime's range."""
    try:
        when = _EPOCH + dt.timedelta(microseconds=us)
    except OverflowError:
        return f"{us} us"
    return when.isoformat().replace("+00:00", "Z")
