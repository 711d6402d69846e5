"""Reading one append's events where they are: DuckDB aggregates them per (item, group, period).

An append hands the stream an event log (a mapping of columns or an ``(items, times[, groups])``
tuple, a CSV/Parquet path, a SQL query, a pandas/Polars/Arrow table or a DuckDB relation; files
and tables are opened by the DuckDB engine of :func:`dpfreq.engines.get_engine`). The events are
projected once into a temporary table of ``(k, g, p, n)``: the item key, the group's code in
the public list (0 without groups), the period and the number of events, for the periods
``after < p <= through`` the append closes. What falls outside is only counted: events of
closed periods (``p <= after``: late, unless they re-send those periods as appended, which the
table's per-period digests tell), events after ``through`` (refused by the caller), and events
of groups not in the public list (not part of the stream). Periods: integer periods as they
are, or timestamps bucketed from the public ``start`` by the public ``period`` (UTC, exact
integer floor division).

**Item ids.** An id column holds integers or text, by the one rule of every engine
(:func:`dpfreq.engines.id_key`: ``DECIMAL(p,0)`` is an integer; a fraction, a float, a time, a
boolean is no id and is refused, naming the type). An item *is* its text — an integer id its
decimal text, on every engine — so an integer id and the same digits as text are one item, and
ids of either kind may follow each other in a stream. The key is stored compactly as BIGINT
while every id so far came from an integer column whose values fit it (``id_key`` says which
types do); from the first text id (or wider integer type: ``UBIGINT``, ``HUGEINT``,
``DECIMAL(19+,0)``) on, the stream's keys are text for ever (:func:`key_kind`; the store
rewrites its keys once). What the stream publishes never depends on how keys are stored: the
keyed ranks and the digests read the text.
"""

from __future__ import annotations

import contextlib
import functools
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np

from dpfreq._validate import message
from dpfreq.engines import column_error, get_engine, id_error, id_key
from dpfreq.errors import DataError, ParameterError, public_errors

__all__ = ["EMPTY_PERIOD", "AppendSpec", "EventTable", "PeriodEvents", "events_inside",
           "key_kind", "period_sql", "read_events", "source_columns"]

#: integer types of a time column of periods
_INTEGER = ("tinyint", "smallint", "integer", "bigint", "utinyint", "usmallint", "uinteger",
            "ubigint", "hugeint", "uhugeint")
_TIME = ("timestamp", "timestamp_s", "timestamp_ms", "timestamp_ns", "date",
         "timestamp with time zone", "timestamp_tz")


@dataclass(frozen=True)
class AppendSpec:
    """What an append reads: columns, the public time axis, the periods it closes, and whether
    the stream's keys are text (integer ids are then read as their decimal text)."""

    item: str
    time: str
    group: str | None
    groups: tuple[str, ...] | None
    start_us: int | None
    period_us: int | None
    after: int
    through: int
    text_keys: bool = False

    @property
    def columns(self) -> list[str]:
        """The columns an append reads: item, time and (grouped) group."""
        return [self.item, self.time] + ([self.group] if self.group else [])


@dataclass(frozen=True)
class PeriodEvents:
    """What a source holds of one period: its aggregated rows of listed groups (``rows``, their
    ``events`` and an order-free ``hash`` of ``(id text, group, period, events)`` — together the
    period's private digest, compared with a re-sent period) and every event of the period,
    listed group or not (``all_events``)."""

    rows: int
    events: int
    hash: int
    all_events: int

    @property
    def digest(self) -> str:
        """``rows:events:hash`` (what the state saves per period)."""
        return f"{self.rows}:{self.events}:{self.hash}"


#: the digest of a period without events
EMPTY_PERIOD = "0:0:0"


@dataclass
class EventTable:
    """The append's events aggregated in a DuckDB temporary table ``name`` (columns ``k, g, p,
    n``), and what was left out; ``periods`` what the source holds of each period ``1 <= p <=
    through`` (closed ones included). ``run(sql)`` runs SQL on the table's connection."""

    rel: Any
    name: str
    key_kind: str
    n_events: int
    n_late: int
    n_future: int
    periods: dict[int, PeriodEvents]

    def run(self, sql: str) -> dict[str, Any]:
        """Fetch the result of ``sql`` as numpy columns."""
        res = self.rel.query("dpfreq_src", sql)
        return dict(res.fetchnumpy()) if res is not None else {}

    def execute(self, sql: str) -> None:
        """Run a statement (no result)."""
        self.rel.query("dpfreq_src", sql)

    def close(self) -> None:
        """Drop the temporary table."""
        with contextlib.suppress(Exception):
            self.execute(f"DROP TABLE IF EXISTS {self.name}")


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@functools.lru_cache(maxsize=1)
def _engine() -> Any:
    """One DuckDB engine per process for reading appends (opening a connection costs more than
    a day's append of a small stream); every append uses its own uniquely named tables."""
    return get_engine("duckdb")


def source_columns(source: Any, spec: AppendSpec) -> dict[str, Any] | None:
    """A mapping or ``(items, times[, groups])`` tuple as checked numpy columns (text as
    object arrays); None for any other source (a file, SQL, a table)."""
    cols = spec.columns
    if isinstance(source, tuple | list):
        if len(source) != len(cols):
            raise ParameterError(message("source", f"a tuple of {len(cols)} columns "
                                         f"({', '.join(cols)})", f"{len(source)} items"))
        source = dict(zip(cols, source, strict=True))
    if not isinstance(source, Mapping):
        return None
    data = {}
    for c in cols:
        if c not in source:
            raise DataError(message("source", f"a mapping with column {c!r}",
                                    sorted(map(str, source))))
        arr = np.asarray(source[c])
        data[c] = arr.astype(object) if arr.dtype.kind in "US" else arr
    if len({v.shape for v in data.values()}) != 1 or next(iter(data.values())).ndim != 1:
        raise DataError(message("source", "columns of one common length", "others"))
    return data


def _relation(source: Any, spec: AppendSpec) -> Any:
    """The source as a DuckDB relation (mappings and tuples registered as numpy columns)."""
    eng: Any = _engine()
    data = source_columns(source, spec)
    if data is not None:
        view = f"dpfreq_append_{uuid.uuid4().hex}"
        eng.connection.register(view, data)
        return eng.connection.table(view)
    return eng.relation(source, text_columns=tuple(c for c in spec.columns if c != spec.time))


def _type(rel: Any, column: str) -> str:
    names = list(rel.columns)
    if column not in names:
        raise column_error(rel, column)
    return str(rel.types[names.index(column)]).lower()


def period_sql(ty: str, col: str, spec: AppendSpec, *, integer: bool, time: bool,
               micros: Callable[[str, str], str], div: str) -> str:
    """The period of the time column ``col`` of type ``ty`` (an ``integer`` or a ``time`` type
    of the engine): integer periods as they are, or the microseconds ``micros(ty, col)``
    bucketed from ``start`` by ``period`` in exact integer arithmetic (``div``: the engine's
    integer division). A column of the wrong kind is refused in one line."""
    if spec.start_us is None:
        if not integer:
            raise DataError(message("time", "an integer column of periods (the stream "
                                    "was created without start/period)", ty.upper()))
        return f"CAST({col} AS BIGINT)"
    if not time:
        raise DataError(message("time", "a timestamp or date column (the stream was "
                                "created with start and period)", ty.upper()))
    d = f"({micros(ty, col)} - ({int(spec.start_us)}))"
    per = int(spec.period_us or 1)
    return (f"(CASE WHEN {d} >= 0 THEN {d} {div} {per} ELSE -((-{d} - 1) {div} {per}) - 1 "
            "END + 1)")


def _micros(ty: str, col: str) -> str:
    return f"epoch_us(CAST({col} AS TIMESTAMP))" if ty == "date" else f"epoch_us({col})"


def _period_sql(rel: Any, spec: AppendSpec) -> str:
    """The period of the time column: integer periods, or a timestamp bucketed (UTC). A
    text column without rows (what a header-only CSV file holds: an empty period) has none."""
    ty = _type(rel, spec.time)
    if ty == "varchar" and not rel.limit(1).fetchall():  # a header-only CSV: text, no rows
        return "CAST(NULL AS BIGINT)"
    return period_sql(ty, _quote(spec.time), spec, integer=ty in _INTEGER,
                      time=ty in _TIME or ty.startswith("timestamp"), micros=_micros, div="//")


def key_kind(type_name: str, text_keys: bool, empty: Callable[[], bool]) -> str:
    """``"integer"`` (BIGINT keys) or ``"text"``: how ids of a column of this type (DuckDB's or
    Spark's name) are keyed in a stream whose keys are already text or not (module docstring;
    the width rule is :func:`dpfreq.engines.id_key`'s); a type that holds no id is refused in
    one line naming it (:func:`dpfreq.engines.id_error`), unless the source is ``empty()`` (no
    value of the wrong type: keyed as the stream's keys are)."""
    key = id_key(type_name)
    if key is None and empty():
        return "text" if text_keys else "integer"
    if key is None:
        raise id_error(type_name.upper())
    return "integer" if key == "integer" and not text_keys else "text"


def _key_sql(rel: Any, spec: AppendSpec) -> tuple[str, str]:
    kind = key_kind(_type(rel, spec.item), spec.text_keys, lambda: not rel.limit(1).fetchall())
    return f"CAST({_quote(spec.item)} AS {'BIGINT' if kind == 'integer' else 'VARCHAR'})", kind


def _group_sql(spec: AppendSpec) -> tuple[str, str]:
    """``(SELECT of the group code, join)``: the code in the public list (0 without groups;
    NULL for a group not in it)."""
    if spec.group is None or spec.groups is None:
        return "0", ""
    listed = ", ".join(f"({_literal(x)}, {i})" for i, x in enumerate(spec.groups))
    return ("listed.gi", f" LEFT JOIN (VALUES {listed}) AS listed(gname, gi) ON "
                         "a.gname = listed.gname")


@public_errors("ReachStream.append")
def read_events(source: Any, spec: AppendSpec) -> EventTable:
    """Aggregate the append's events into a temporary table (module docstring); refuses nulls
    in the item, time or group column, and a time column of the wrong kind. The source is
    scanned once; every check reads the aggregated table. Files DuckDB cannot scan together
    (a glob or directory of other tables) are refused in one line."""
    try:
        return _aggregate(source, spec)
    except duckdb.Error as exc:
        raise DataError("source of ReachStream.append cannot be read (a directory or glob "
                        f"must hold files of one table; DuckDB: {type(exc).__name__}).") from None


def _aggregate(source: Any, spec: AppendSpec) -> EventTable:
    rel = _relation(source, spec)
    key, kind = _key_sql(rel, spec)
    period = _period_sql(rel, spec)
    gtext = (f"CAST({_quote(spec.group)} AS VARCHAR)" if spec.group else "''")
    if spec.group:
        _type(rel, spec.group)
    name = f"dpfreq_stream_events_{uuid.uuid4().hex}"
    # the group's code (NULL for a group not in the public list) joined once, to the
    # aggregated rows: the periods' digests and the append's table both read it
    gcode, join = _group_sql(spec)
    rel.query("dpfreq_src", f"CREATE TEMP TABLE {name}_all AS SELECT a.k, a.gname, {gcode} AS "
              f"g, a.p, a.n FROM (SELECT k, gname, p, count(*) AS n FROM (SELECT {key} AS k, "
              f"{gtext} AS gname, {period} AS p FROM dpfreq_src) GROUP BY ALL) a{join}")
    table = EventTable(rel, name, kind, 0, 0, 0, {})
    try:
        stats = table.run(
            f"SELECT coalesce(sum(n), 0) AS total, coalesce(sum(n) FILTER (WHERE k IS NULL OR "
            f"p IS NULL OR gname IS NULL), 0) AS nn, coalesce(sum(n) FILTER (WHERE p <= "
            f"{spec.after}), 0) AS late, coalesce(sum(n) FILTER (WHERE p > {spec.through}), 0) "
            f"AS future FROM {name}_all")
        if int(stats["nn"][0]):
            raise DataError(message("source", "free of nulls in the item, time and "
                                    "group columns", "nulls"))
        table.n_events = int(stats["total"][0])
        table.n_late, table.n_future = int(stats["late"][0]), int(stats["future"][0])
        table.execute(f"CREATE TEMP TABLE {name} AS SELECT k, g, p, n FROM {name}_all WHERE g "
                      f"IS NOT NULL AND p > {spec.after} AND p <= {spec.through}")
        table.periods = _periods(table, spec)
    finally:
        table.execute(f"DROP TABLE IF EXISTS {name}_all")
    return table


def _periods(table: EventTable, spec: AppendSpec) -> dict[int, PeriodEvents]:
    """:class:`PeriodEvents` of each period ``1..through`` the source holds (the id hashed as
    its text: an integer id is the same item as its decimal text)."""
    res = table.run(
        "SELECT p, count(*) FILTER (WHERE g IS NOT NULL) AS c, coalesce(sum(n) FILTER (WHERE g "
        "IS NOT NULL), 0) AS s, coalesce(bit_xor(hash(CAST(k AS VARCHAR), g, p, n)) FILTER "
        f"(WHERE g IS NOT NULL), 0) AS h, sum(n) AS e FROM {table.name}_all WHERE p >= 1 AND "
        f"p <= {spec.through} GROUP BY p")
    return {int(p): PeriodEvents(int(c), int(s), int(h), int(e)) for p, c, s, h, e in
            zip(*(res[x].tolist() for x in ("p", "c", "s", "h", "e")), strict=True)}


def events_inside(periods: dict[int, PeriodEvents], after: int, through: int) -> int:
    """Events of listed groups in the periods ``after < p <= through`` (those an append
    measures)."""
    return sum(v.events for p, v in periods.items() if after < p <= through)
