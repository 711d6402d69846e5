"""Checking the public parameters of a window release (shared by the release and the loader).

The time axis: ``horizon`` alone (integer periods ``1..T``), or ``start``, ``end`` and
``period``. ``end`` is inclusive: a date-only ``end`` means through the end of that day, a
timestamp means up to and including that instant, and ``T`` is the number of periods needed
to cover ``[start, end]`` — ``⌊(end − start)/period⌋ + 1`` with ``end`` the last instant
included — so the same ``start``/``end`` cover the same events whatever the period length
(the last period may reach past ``end``; its events are counted).

``timezone`` (an IANA name, default ``"UTC"``) makes ``start``, ``end`` and the period
boundaries wall-clock times in that zone: every event's instant is converted to its local
wall-clock time before bucketing, so daily periods start at local midnight and the day a
daylight-saving change happens covers 23 or 25 hours of real time. A naive ``start``/``end`` is
a wall-clock time in the zone; one with a UTC offset is converted to it. ``time_unit`` (``"s"``,
``"ms"``, ``"us"`` or ``"ns"``) reads an integer time column as an epoch in that unit (an
instant). Both need ``start``/``end``/``period``: integer periods (``horizon`` alone) have
neither a zone nor a unit, and a timestamp column with ``time_unit`` is refused by the engine.
"""

from __future__ import annotations

import datetime as _dt
import re
import zoneinfo
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfreq._validate import (
    check_confidence,
    check_delta,
    check_epsilon,
    check_int,
    check_unit,
    message,
)
from dpfreq.engines import TimeBuckets
from dpfreq.errors import ParameterError
from dpfreq.release import TABLE_UNITS
from dpfreq.resources import check_memory as memory_check

__all__ = [
    "MAX_HORIZON",
    "PlanRequest",
    "TimeAxis",
    "WindowBuild",
    "WindowParams",
    "check_memory",
    "check_method",
    "check_time_unit",
    "check_timezone",
    "check_window_params",
    "parse_k",
    "parse_period",
    "parse_windows",
    "time_axis",
]

#: largest horizon: 2d node ids ``u·2D + v`` (D >= T) stay below 2^63
MAX_HORIZON = 1 << 30

_UNITS_US = {"us": 1, "ms": 1_000, "s": 1_000_000, "min": 60_000_000, "m": 60_000_000,
             "h": 3_600_000_000, "d": 86_400_000_000, "w": 604_800_000_000}
_DAY_US = 86_400_000_000
_DATE_ONLY = re.compile(r"\s*\d{4}-\d{2}-\d{2}\s*")
_MAX_PERIOD_US = 1 << 62


def parse_period(period: Any) -> int:
    """A period length in microseconds from ``"1d"``, ``"6h"``, ``"30min"``, ``"1w"``,
    a :class:`datetime.timedelta` or a ``numpy.timedelta64``.

    Examples
    --------
    >>> parse_period("6h")
    21600000000
    """
    us: int | None = None
    if isinstance(period, str):
        m = re.fullmatch(r"\s*(\d{1,12})\s*(us|ms|s|min|m|h|d|w)\s*", period)
        if m:
            us = int(m.group(1)) * _UNITS_US[m.group(2)]
    elif isinstance(period, _dt.timedelta):
        us = (period.days * 86_400 + period.seconds) * 1_000_000 + period.microseconds
    elif isinstance(period, np.timedelta64) and not np.isnat(period):
        us = int(period.astype("timedelta64[us]").astype(np.int64))
    if us is None or us <= 0 or us > _MAX_PERIOD_US:
        raise ParameterError(message("period", "a positive duration such as '1d', '6h', "
                                     "'30min' or a timedelta", period))
    return us


def check_timezone(zone: Any) -> str:
    """An IANA time zone name (``"UTC"``, ``"America/New_York"``) known to this system."""
    try:
        if isinstance(zone, str) and zone:
            zoneinfo.ZoneInfo(zone)
            return zone
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        pass
    raise ParameterError(message("timezone", "an IANA time zone name such as 'UTC' or "
                                 "'America/New_York'", zone))


def check_time_unit(unit: Any) -> str | None:
    """None, or the unit of integer epochs: ``"s"``, ``"ms"``, ``"us"`` or ``"ns"``."""
    if unit is None or unit in ("s", "ms", "us", "ns"):
        return unit
    raise ParameterError(message("time_unit", "None or one of 's', 'ms', 'us', 'ns' "
                                 "(the unit of integer epochs)", unit))


def _to_us(value: Any, param: str, *, end: bool, zone: str = "UTC") -> int:
    """Microseconds since the epoch of a date or timestamp as a wall clock in ``zone`` (an
    offset-aware value converted to it); a date-only ``end`` is the last microsecond of that
    day."""
    date_only = False
    try:
        if isinstance(value, str):
            date_only = bool(_DATE_ONLY.fullmatch(value))
            value = _dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        if isinstance(value, _dt.datetime):
            if value.tzinfo is not None:
                value = value.astimezone(zoneinfo.ZoneInfo(zone)).replace(tzinfo=None)
        elif isinstance(value, _dt.date):
            date_only = True
        elif isinstance(value, np.datetime64):
            date_only = np.datetime_data(value.dtype)[0] in ("D", "W", "M", "Y")
        else:
            raise TypeError(type(value).__name__)
        out = np.datetime64(value, "us")
    except (TypeError, ValueError, OverflowError) as exc:
        raise ParameterError(message(param, "a date or timestamp", value)) from exc
    if np.isnat(out):
        raise ParameterError(message(param, "a date or timestamp", value))
    us = int(out.astype(np.int64))
    return us + _DAY_US - 1 if end and date_only else us


@dataclass(frozen=True)
class TimeAxis:
    """The public time axis: ``horizon`` periods, from ``start_us`` by ``period_us`` (wall
    clock in ``timezone``), of a timestamp column or of integer epochs in ``time_unit``."""

    horizon: int
    start_us: int | None = None
    period_us: int | None = None
    time_unit: str | None = None
    timezone: str = "UTC"

    def buckets(self) -> TimeBuckets:
        """The engines' bucketing of a time column into periods ``1..horizon``."""
        return TimeBuckets(self.horizon, self.start_us, self.period_us, self.time_unit,
                           self.timezone)

    def utc_bounds(self) -> tuple[int, int]:
        """The public range as UTC instants in microseconds, ``[low, high)``: the wall-clock
        start and end (``start + horizon·period``) in :attr:`timezone` (a wall-clock time a DST
        change repeats: its first instant; one it skips: the hour after). Timestamp axes
        only."""
        if self.start_us is None or self.period_us is None:
            raise ValueError("an integer time axis has no instants")
        return (_wall_to_utc(self.start_us, self.timezone),
                _wall_to_utc(self.start_us + self.horizon * self.period_us, self.timezone))

    def public(self) -> dict[str, Any]:
        if self.start_us is None:
            return {"kind": "integer", "horizon": self.horizon}
        start = str(np.datetime64(self.start_us, "us"))
        out = {"kind": "timestamp", "horizon": self.horizon, "start": start,
               "period_us": self.period_us, "timezone": self.timezone}
        if self.time_unit:
            out["time_unit"] = self.time_unit
        return out


def _wall_to_utc(wall_us: int, zone: str) -> int:
    """The UTC instant (µs) of a wall-clock time in ``zone`` (see :meth:`TimeAxis.utc_bounds`)."""
    if zone == "UTC":
        return wall_us
    epoch = _dt.datetime(1970, 1, 1)
    local = (epoch + _dt.timedelta(microseconds=wall_us)).replace(
        tzinfo=zoneinfo.ZoneInfo(zone))
    naive = local.astimezone(_dt.UTC).replace(tzinfo=None)
    return (naive - epoch) // _dt.timedelta(microseconds=1)


def time_axis(horizon: Any, start: Any, end: Any, period: Any, time_unit: Any = None,
              timezone: Any = "UTC") -> TimeAxis:
    """Check the time-axis arguments (module docstring) and return the axis."""
    unit, zone = check_time_unit(time_unit), check_timezone(timezone)
    if horizon is not None:
        if start is not None or end is not None or period is not None:
            raise ParameterError(message("horizon", "given alone, or replaced by "
                                         "start/end/period", horizon))
        if unit is not None:
            raise ParameterError(message("time_unit", "None with integer periods "
                                         "(horizon); epochs need start, end and period", unit))
        if zone != "UTC":
            raise ParameterError(message("timezone", "'UTC' with integer periods "
                                         "(horizon); a zone needs start, end and period", zone))
        return TimeAxis(check_int(horizon, "horizon", minimum=1, maximum=MAX_HORIZON))
    if start is None or end is None or period is None:
        raise ParameterError(message("horizon", "an integer >= 1, or start, end and "
                                     "period all given (public time range)", horizon))
    s = _to_us(start, "start", end=False, zone=zone)
    e = _to_us(end, "end", end=True, zone=zone)
    p = parse_period(period)
    if e < s:
        raise ParameterError(message("end", f"at or after start {start!r}", end))
    t = (e - s) // p + 1
    if t > MAX_HORIZON:
        raise ParameterError(message("period", f"long enough for at most {MAX_HORIZON} "
                                     "periods between start and end", period))
    return TimeAxis(t, s, p, unit, zone)


def parse_windows(windows: Any, horizon: int) -> tuple[Any, ...]:
    """The query families, deduplicated and sorted (widths first, then the named ones)."""
    if isinstance(windows, str | int | np.integer):
        items = [windows]
    else:
        try:
            items = list(windows)
        except TypeError:
            items = []
    if not items:
        raise ParameterError(message("windows", "a non-empty list of 'cumulative', "
                                     "'total', 'all' and window widths", windows))
    out: list[Any] = []
    for w in items:
        if isinstance(w, str) and w not in ("cumulative", "total", "all"):
            raise ParameterError(message("windows", "'cumulative', 'total', 'all' or an "
                                         "integer window width (7 for rolling 7-period windows)",
                                         w))
        if not isinstance(w, str):
            w = check_int(w, "windows", minimum=1, maximum=horizon)
        if w not in out:
            out.append(w)
    return tuple(sorted(out, key=lambda v: (isinstance(v, str), str(v))))


def parse_k(k_values: Any) -> tuple[int, ...]:
    """The released k values, deduplicated and sorted."""
    if isinstance(k_values, int | np.integer):
        ks = [k_values]
    else:
        try:
            ks = list(k_values)
        except TypeError:
            ks = []
    if not ks:
        raise ParameterError(message("k_values", "a non-empty list of integers >= 1",
                                     k_values))
    return tuple(sorted({check_int(k, "k_values", minimum=1, maximum=MAX_HORIZON)
                         for k in ks}))


def check_method(method: Any) -> Any:
    """``"auto"`` or a mapping {family: method} (the names are checked by the plan)."""
    if method == "auto":
        return method
    if isinstance(method, Mapping) and all(isinstance(v, str) for v in method.values()):
        return dict(method)
    raise ParameterError(message("method", "'auto' or a mapping {family: method}",
                                 method))


def check_memory(horizon: int, windows: tuple[Any, ...], n_k: int) -> None:
    """Refuse, before any work, a release whose per-period arrays cannot fit in memory
    (:func:`dpfreq.resources.check_memory`, the one policy: the memory available now).

    Each (family, k) structure keeps int64 / float64 arrays over the ``T`` periods: a released
    curve family holds its exact oracle, node noise, variances, the curve and its intervals
    and bands (measured peak about 330 bytes per period, budgeted 400); the all-windows family
    only its planning arrays (about 100, budgeted 128).
    """
    per_period = sum(128 if w == "all" else 400 for w in windows) * n_k
    memory_check(per_period * (horizon + 2), param="horizon", value=horizon,
                 what=f"the arrays of {len(windows) * n_k} (window family, k) structure(s) "
                      f"over {horizon} periods (use a longer period or fewer "
                      "k_values/windows)")


@dataclass(frozen=True)
class PlanRequest:
    """The public parameters a structure plan is calibrated from
    (:func:`dpfreq.windows.structures.chooser.make_plan`): the families and k values over
    ``horizon`` periods, the unit, the budget of the release (or of one group), the requested
    method, whether the log is singleton, and for a group of a call that composes its groups
    in zCDP that group's ρ."""

    windows: tuple[Any, ...]
    k_values: tuple[int, ...]
    horizon: int
    unit: str
    epsilon: float
    delta: float
    method: Any
    singleton: bool
    rho: float | None = None


@dataclass(frozen=True)
class WindowParams:
    """The checked public parameters of a window release (or of its plan)."""

    epsilon: float
    delta: float
    unit: str
    confidence: float
    singleton: bool
    k_values: tuple[int, ...]
    method: Any
    axis: TimeAxis
    windows: tuple[Any, ...]

    def plan_request(self, *, epsilon: float | None = None, delta: float | None = None,
                     singleton: bool | None = None, rho: float | None = None) -> PlanRequest:
        """The plan's parameters (the whole budget, or ``epsilon``/``delta``/``rho`` of one
        group; ``singleton`` when the caller knows better than the parameter)."""
        return PlanRequest(
            tuple(self.windows), tuple(self.k_values), self.axis.horizon, self.unit,
            self.epsilon if epsilon is None else epsilon,
            self.delta if delta is None else delta, self.method,
            self.singleton if singleton is None else singleton, rho)


def check_window_params(*, horizon: Any, start: Any, end: Any, period: Any,
                        time_unit: Any = None, timezone: Any = "UTC", epsilon: Any,
                        delta: Any, unit: Any, k_values: Any, windows: Any,
                        method: Any, singleton: Any, confidence: Any) -> WindowParams:
    """Check and normalise the parameters :func:`release_window_counts` and
    :func:`plan_window_counts` share (ε, δ, unit, confidence, the time axis, the families, k,
    the method), and refuse a release too large for memory."""
    eps = check_epsilon(epsilon, "epsilon")
    dlt = check_delta(delta, "delta")
    u = check_unit(unit, TABLE_UNITS)
    conf = check_confidence(confidence, "confidence")
    if not isinstance(singleton, bool):
        raise ParameterError(message("singleton", "True or False", singleton))
    ks = parse_k(k_values)
    choice = check_method(method)
    axis = time_axis(horizon, start, end, period, time_unit, timezone)
    fams = parse_windows(windows, axis.horizon)
    check_memory(axis.horizon, fams, len(ks))
    return WindowParams(epsilon=eps, delta=dlt, unit=u, confidence=conf, singleton=singleton,
                        k_values=ks, method=choice, axis=axis, windows=fams)


@dataclass(frozen=True)
class WindowBuild:
    """What one window release is built from, and saved with: the public parameters of its
    plan (ε and δ of this release — per group in a grouped call), the public time axis, and
    the curator-side facts (seeded, events dropped, the engine) that are never published.

    :meth:`to_dict` is the saved form (a release file's ``build`` field); a saved form is read
    back, after :mod:`dpfreq.windows.persist` has checked every field, by :meth:`from_dict`.
    """

    epsilon: float
    delta: float
    k_values: tuple[int, ...]
    unit: str
    windows: tuple[Any, ...]
    method: Any
    singleton: bool
    horizon: int
    axis: Mapping[str, Any]
    seeded: bool
    n_dropped: int
    source_kind: str
    confidence: float

    @classmethod
    def of(cls, par: WindowParams, *, epsilon: float, delta: float, seeded: bool,
           n_dropped: int = 0, source_kind: str = "") -> WindowBuild:
        """The build of a release of ``par`` at ``(epsilon, delta)`` (the whole budget, or a
        group's share of it)."""
        return cls(epsilon=epsilon, delta=delta, k_values=par.k_values, unit=par.unit,
                   windows=par.windows, method=par.method, singleton=par.singleton,
                   horizon=par.axis.horizon, axis=par.axis.public(), seeded=seeded,
                   n_dropped=int(n_dropped), source_kind=source_kind,
                   confidence=par.confidence)

    def plan_request(self, rho: float | None = None) -> PlanRequest:
        """The parameters of this build's plan (``rho``: a group's zCDP share)."""
        return PlanRequest(tuple(self.windows), tuple(self.k_values), self.horizon, self.unit,
                           self.epsilon, self.delta, self.method, self.singleton, rho)

    def to_dict(self) -> dict[str, Any]:
        """The saved form (JSON-ready; the keys every release file has held)."""
        return {"epsilon": self.epsilon, "delta": self.delta, "k_values": list(self.k_values),
                "unit": self.unit, "windows": list(self.windows), "method": self.method,
                "singleton": self.singleton, "horizon": self.horizon, "axis": dict(self.axis),
                "seeded": self.seeded, "n_dropped": self.n_dropped,
                "source_kind": self.source_kind, "confidence": self.confidence}

    @classmethod
    def from_dict(cls, b: Mapping[str, Any]) -> WindowBuild:
        """The build of a saved form whose fields have been checked."""
        return cls(epsilon=float(b["epsilon"]), delta=float(b["delta"]),
                   k_values=tuple(int(k) for k in b["k_values"]), unit=str(b["unit"]),
                   windows=tuple(b["windows"]), method=b["method"],
                   singleton=bool(b["singleton"]), horizon=int(b["horizon"]),
                   axis=dict(b["axis"]), seeded=bool(b["seeded"]),
                   n_dropped=int(b["n_dropped"]), source_kind=str(b["source_kind"]),
                   confidence=float(b["confidence"]))
