"""The public parameters of a reach stream, checked once at creation.

Everything here is public and chosen before any data: the item and time columns, the time axis
(integer periods, or timestamps cut from a public ``start`` into periods of a public ``period``,
UTC), the horizon ``T`` or ``None`` (no horizon), the k values, the unit of privacy, ``(ε, δ)``,
the method, the groups (a public list) with the bound ``m``, what to do with late events, the
confidence of the intervals, the engine that holds the per-item state and, for a grouped stream
at ``unit="item"``, the share ``capping_epsilon`` of ε that measures what the cap dropped
(:mod:`dpfreq.stream.capping`; None: not measured). Nothing is defaulted that sets the privacy or
the accuracy: ``epsilon``, ``delta``, ``unit``, ``horizon``, ``k_values``, ``method`` and
``late`` are always the caller's.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from dpfreq._validate import (
    check_choice,
    check_confidence,
    check_delta,
    check_epsilon,
    check_int,
    check_unit,
    message,
)
from dpfreq.errors import ParameterError
from dpfreq.grouped.checks import check_bound, check_grouping
from dpfreq.grouped.dropped import check_capping_epsilon, release_epsilon
from dpfreq.stream.auto import METHODS, StreamPlan, plan_stream, saved_plan
from dpfreq.windows.params import parse_period

__all__ = ["ENGINES", "LATE", "MAX_K", "MAX_PERIODS", "StreamParams", "check_params",
           "period_of", "to_microseconds"]

#: what an append does with events of periods already closed
LATE = ("drop", "error")

#: where the per-item state lives
ENGINES = ("memory", "duckdb", "spark")

#: largest k (counts are kept up to it per item)
MAX_K = 1 << 15

#: longest stream: period numbers stay far inside int64 node ids
MAX_PERIODS = 1 << 30


def to_microseconds(value: Any, param: str) -> int:
    """Microseconds since the epoch (UTC) of a date or timestamp (naive: read as UTC)."""
    try:
        if isinstance(value, str):
            value = _dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        if isinstance(value, _dt.datetime) and value.tzinfo is not None:
            value = value.astimezone(_dt.UTC).replace(tzinfo=None)
        if isinstance(value, np.datetime64):
            out = value.astype("datetime64[us]")
        elif isinstance(value, _dt.date):
            out = np.datetime64(value, "us")
        else:
            raise TypeError(type(value).__name__)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ParameterError(message(param, "a date or timestamp", value)) from exc
    if np.isnat(out):
        raise ParameterError(message(param, "a date or timestamp", value))
    return int(out.astype(np.int64))


@dataclass(frozen=True)
class StreamParams:
    """The checked public parameters of a stream (saved in its manifest)."""

    item: str
    time: str
    horizon: int | None
    start_us: int | None
    period_us: int | None
    k_values: tuple[int, ...]
    unit: str
    epsilon: float
    delta: float
    method: str
    group: str | None
    groups: tuple[str, ...] | None
    max_groups_per_item: int | None
    late: str
    confidence: float
    engine: str
    capping_epsilon: float | None = None

    @property
    def n_groups(self) -> int:
        return len(self.groups) if self.groups else 1

    @property
    def counters_epsilon(self) -> float:
        """What the reach counters spend: ``ε − ε_c`` rounded down (``ε`` without
        ``capping_epsilon``)."""
        return release_epsilon(self.epsilon, self.capping_epsilon)

    def plan(self) -> StreamPlan:
        """The counter, node law and budget of every structure, chosen from these public
        parameters alone (:func:`~dpfreq.stream.auto.plan_stream`)."""
        return plan_stream(horizon=self.horizon, unit=self.unit, epsilon=self.counters_epsilon,
                           delta=self.delta, n_k=len(self.k_values), method=self.method,
                           max_groups_per_item=self.max_groups_per_item)

    def saved_plan(self, record: dict[str, Any], spec: dict[str, Any]) -> StreamPlan:
        """The plan saved with a stream (its ``record`` and counter ``spec``), rebuilt without
        planning again (:func:`~dpfreq.stream.auto.saved_plan`; ValueError if it does not fit
        these parameters)."""
        return saved_plan(unit=self.unit, epsilon=self.counters_epsilon, delta=self.delta,
                          n_k=len(self.k_values), max_groups_per_item=self.max_groups_per_item,
                          record=record, spec=spec)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["k_values"] = list(self.k_values)
        out["groups"] = None if self.groups is None else list(self.groups)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StreamParams:
        """The parameters of a saved manifest, checked again."""
        return check_params(**{**d, "start": d.get("start_us"), "period": d.get("period_us")})

    def period_label(self, t: Any) -> Any:
        """The first instant of period ``t`` as ISO text (a date for whole days from
        midnight), or ``t`` itself for integer periods."""
        if self.start_us is None:
            return t
        start = np.datetime64(self.start_us, "us") + (np.asarray(t) - 1) * np.timedelta64(
            int(self.period_us or 0), "us")
        if int(self.period_us or 0) % 86_400_000_000 == 0 and self.start_us % 86_400_000_000 == 0:
            start = start.astype("datetime64[D]")
        return np.datetime_as_string(start)


def period_of(params: StreamParams, when: Any) -> int:
    """The period number of ``when``: an integer period number, or (a stream of timestamps)
    the period holding a date or timestamp."""
    if params.start_us is None or (isinstance(when, int | np.integer)
                                   and not isinstance(when, bool)):
        return check_int(when, "through", minimum=1, maximum=params.horizon or MAX_PERIODS)
    us = to_microseconds(when, "through")
    t = (us - params.start_us) // int(params.period_us or 1) + 1
    if not 1 <= t <= (params.horizon or MAX_PERIODS):
        raise ParameterError(message("through", "a time inside the stream's periods",
                                     when))
    return int(t)


def _time_axis(start: Any, period: Any) -> tuple[int | None, int | None]:
    if start is None and period is None:
        return None, None
    if start is None or period is None:
        raise ParameterError(message("start/period", "both given (timestamps cut into "
                                     "periods) or both None (integer periods 1, 2, ...)",
                                     (start, period)))
    us = int(period) if isinstance(period, int | np.integer) and not isinstance(period, bool) \
        else parse_period(period)
    return (int(start) if isinstance(start, int | np.integer) and not isinstance(start, bool)
            else to_microseconds(start, "start")), us


def _k_values(k_values: Any) -> tuple[int, ...]:
    ks = [k_values] if isinstance(k_values, int | np.integer) else (
        list(k_values) if hasattr(k_values, "__iter__") and not isinstance(k_values, str)
        else [])
    if not ks:
        raise ParameterError(message("k_values", "a non-empty list of integers >= 1",
                                     k_values))
    return tuple(sorted({check_int(k, "k_values", minimum=1, maximum=MAX_K)
                         for k in ks}))


def _grouping(group: Any, groups: Any, m: Any, unit: str
              ) -> tuple[str | None, tuple[str, ...] | None, int | None]:
    if group is None and groups is None and m is None:
        return None, None, None
    if group is None or groups is None:
        raise ParameterError(message("groups", "a public list of group names together "
                                     "with group= (streams take no private partition "
                                     "selection)", groups))
    if unit == "event":
        if m is not None:
            raise ParameterError(message("max_groups_per_item", "None at unit='event' "
                                         "(one event is in one group: every group gets the "
                                         "whole budget)", m))
        g, names, _ = check_grouping(group, groups, 1, "item")
        return g, names, None
    if isinstance(m, str):  # grouped releases choose m privately ('auto'); a stream cannot
        raise ParameterError(message("max_groups_per_item", "an integer >= 1 (a stream "
                                     "fixes m when it is created, before any data: no "
                                     "'auto')", m))
    check_bound(group, m, unit)
    return check_grouping(group, groups, m, unit)


def check_params(*, item: Any, time: Any, horizon: Any, start: Any, period: Any,
                 k_values: Any, unit: Any, epsilon: Any, delta: Any, method: Any,
                 group: Any = None, groups: Any = None, max_groups_per_item: Any = None,
                 late: Any, confidence: Any, engine: Any, capping_epsilon: Any = None,
                 **_: Any) -> StreamParams:
    """Check every public parameter of a stream (one-line ParameterError on the first bad)."""
    for name, col in (("item", item), ("time", time)):
        if not isinstance(col, str) or not col:
            raise ParameterError(message(name, "a column name (str)", col))
    hz = None if horizon is None else check_int(horizon, "horizon", minimum=1,
                                                maximum=MAX_PERIODS)
    start_us, period_us = _time_axis(start, period)
    u = check_unit(unit, ("event", "item", "item_replace"))
    g, names, m = _grouping(group, groups, max_groups_per_item, u)
    eps = check_epsilon(epsilon, "epsilon")
    if capping_epsilon is not None and m is None:
        raise ParameterError(message("capping_epsilon", "None at unit='event' (one event "
                                     "lies in one group: nothing is capped)" if u == "event"
                                     else "None without max_groups_per_item (nothing is "
                                     "capped: a grouped stream at unit='item' caps the groups "
                                     "per item)", capping_epsilon))
    cap_eps = check_capping_epsilon(capping_epsilon, eps, m)
    eng = check_choice(engine, "engine", ENGINES)
    return StreamParams(
        item=item, time=time, horizon=hz, start_us=start_us, period_us=period_us,
        k_values=_k_values(k_values), unit=u, epsilon=eps,
        delta=check_delta(delta, "delta"),
        method=check_choice(method, "method", ("auto", *METHODS)), group=g,
        groups=names, max_groups_per_item=m, late=check_choice(late, "late", LATE),
        confidence=check_confidence(confidence, "confidence"), engine=eng,
        capping_epsilon=cap_eps)
