"""The period of a time, written once per engine (numpy, DuckDB SQL, Spark SQL).

A time column is read by its engine as integer periods, or as an instant in microseconds
since the Unix epoch (UTC). With :class:`~dpfreq.engines.base.TimeBuckets` giving a start and a
period length, the period of a time ``t`` is computed in three steps, the same in every engine:

1. with ``time_unit``, the integer ``t`` is an epoch in that unit: ``t·10^6`` (s), ``t·10^3``
   (ms), ``t`` (us) or ``⌊t / 10^3⌋`` (ns) microseconds;
2. with a ``timezone`` other than UTC, the instant becomes its wall-clock time in that zone
   (the microseconds of the local date and time read as if they were UTC);
3. ``⌊(w − start) / period⌋ + 1`` in exact integer arithmetic (floor, also before ``start``).

Before steps 1 and 2 the values are clamped to a range that keeps every product inside int64
and every instant inside the zone database's calendar: the range reaches two days beyond
``[start, start + horizon·period]`` (more than any UTC offset), so a clamped time stays
outside the periods ``1..horizon`` and every time inside keeps its value.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.engines.base import TimeBuckets

__all__ = ["EPOCH_UNITS", "duckdb_period_sql", "spark_period_sql", "wall_clock_us"]

#: microseconds per unit of an integer epoch (``ns``: divided by 1000, floor)
EPOCH_UNITS = {"s": 1_000_000, "ms": 1_000, "us": 1, "ns": 1}
_MARGIN_US = 2 * 86_400_000_000
_LIMIT = (1 << 62)
_INT64_MAX = (1 << 63) - 1


def _utc_bounds(b: TimeBuckets) -> tuple[int, int]:
    """Instants (us) outside which every time is outside the periods, kept in ±2^62."""
    assert b.start_us is not None
    assert b.period_us is not None
    lo = max(b.start_us - _MARGIN_US, -_LIMIT)
    hi = min(b.start_us + b.horizon * b.period_us + _MARGIN_US, _LIMIT)
    return lo, hi


def _epoch_bounds(b: TimeBuckets) -> tuple[int, int]:
    """Integer epochs whose conversion reaches just beyond :func:`_utc_bounds`."""
    lo, hi = _utc_bounds(b)
    if b.time_unit == "ns":
        return max(lo * 1000, -_INT64_MAX), min(hi * 1000 + 999, _INT64_MAX)
    f = EPOCH_UNITS[str(b.time_unit)]
    return lo // f, -(-hi // f)


def _local_duckdb(us: NDArray[np.int64], zone: str) -> NDArray[np.int64]:
    """Wall-clock microseconds in ``zone`` of UTC instants. numpy has no time zones; DuckDB (a
    dependency) converts with the zone database the DuckDB engine uses."""
    import duckdb

    con = duckdb.connect()
    try:
        col = {"t": us}  # noqa: F841 - scanned by name in the query
        sql = f"SELECT {_duckdb_local('t', zone)} AS w FROM col"
        out = con.sql(sql).fetchnumpy()["w"]
    finally:
        con.close()
    return np.asarray(out, dtype=np.int64)


def wall_clock_us(times: NDArray[Any], buckets: TimeBuckets) -> NDArray[np.int64]:
    """Steps 1 and 2 of the module on a numpy array (a copy)."""
    t = np.asarray(times, dtype=np.int64)
    if buckets.start_us is None:
        return t
    if buckets.time_unit:
        t = np.clip(t, *_epoch_bounds(buckets))
        t = t // 1000 if buckets.time_unit == "ns" else t * EPOCH_UNITS[buckets.time_unit]
    if buckets.timezone != "UTC" and t.size:
        t = _local_duckdb(np.clip(t, *_utc_bounds(buckets)), buckets.timezone)
    return t


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _duckdb_local(col: str, zone: str) -> str:
    return (f"epoch_us(timezone({_quote(zone)}, timezone('UTC', "
            f"make_timestamp(CAST({col} AS BIGINT)))))")


def _duckdb_floor_div(d: str, per: int) -> str:
    """``⌊d / per⌋`` with only non-negative operands divided (exact for any sign of d)."""
    return f"(CASE WHEN {d} >= 0 THEN {d} // {per} ELSE -((-{d} - 1) // {per}) - 1 END)"


def _spark_floor_div(d: str, per: int) -> str:
    return f"(({d} - pmod({d}, {per})) div {per})"


@dataclass(frozen=True)
class _Dialect:
    """What the period's SQL expression writes differently in each engine: the clamp of an
    expression to ``[lo, hi]``, the exact floor division, and the wall-clock microseconds in a
    zone of an expression in UTC microseconds."""

    clamp: Callable[[str, int, int], str]
    floor_div: Callable[[str, int], str]
    local: Callable[[str, str], str]


_DUCKDB = _Dialect(clamp=lambda t, lo, hi: f"least(greatest({t}, {lo}), {hi})",
                   floor_div=_duckdb_floor_div, local=_duckdb_local)
_SPARK = _Dialect(
    clamp=lambda t, lo, hi: f"least(greatest({t}, CAST({lo} AS BIGINT)), CAST({hi} AS BIGINT))",
    floor_div=_spark_floor_div,
    local=lambda t, zone: f"unix_micros(from_utc_timestamp(timestamp_micros({t}), {_quote(zone)}))")


def _period_sql(buckets: TimeBuckets, col: str, sql: _Dialect) -> str:
    """The period of column ``col`` (module steps 1–3) as an expression of dialect ``sql``."""
    if buckets.start_us is None:
        return col
    t = col
    if buckets.time_unit:
        t = sql.clamp(t, *_epoch_bounds(buckets))
        t = (sql.floor_div(t, 1000) if buckets.time_unit == "ns"
             else f"({t} * {EPOCH_UNITS[buckets.time_unit]})")
    if buckets.timezone != "UTC":
        t = sql.local(sql.clamp(t, *_utc_bounds(buckets)), buckets.timezone)
    d = f"({t} - ({int(buckets.start_us)}))"
    return f"({sql.floor_div(d, int(buckets.period_us or 1))} + 1)"


def duckdb_period_sql(buckets: TimeBuckets, col: str = "t") -> str:
    """The period of column ``col`` (module steps 1–3) as a DuckDB expression."""
    return _period_sql(buckets, col, _DUCKDB)


def spark_period_sql(buckets: TimeBuckets, col: str = "t") -> str:
    """The period of column ``col`` (module steps 1–3) as a Spark SQL expression
    (``from_utc_timestamp`` shifts microseconds by the zone's offset, whatever the session's
    zone)."""
    return _period_sql(buckets, col, _SPARK)
