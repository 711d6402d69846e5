"""Reading one append's events on Spark: Spark SQL aggregates them per (item, group, period).

The Spark twin of :mod:`~dpfreq.stream.items.reader`, with the same rules and the same one-line
errors. A source is what the Spark engine of :func:`dpfreq.engines.get_engine` reads (a Spark
DataFrame, a Parquet/CSV path or directory, a SQL query, a catalog table, a pandas/Polars/Arrow
table) or a mapping of columns (copied into Spark). The events become a view of
``(k, g, p, n)`` — item key (as the DuckDB reader keys it: BIGINT or STRING, an item being its
text), the group's code in
the public list (0 without groups), the period, the number of events — for the periods
``after < p <= through`` the append closes; late events (``p <= after``), events after
``through`` and events of unlisted groups are only counted. Periods are the integer periods as
they are, or timestamps bucketed from the public ``start`` by the public ``period`` in exact
integer arithmetic on microseconds (a ``TIMESTAMP`` by its instant, a ``TIMESTAMP_NTZ`` or
``DATE`` by its wall clock read as UTC, whatever the session's time zone). Nothing is collected
but a few counts. pyspark is imported only when a stream on the Spark engine runs.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

from dpfreq._validate import message
from dpfreq.engines import column_error, get_engine
from dpfreq.errors import DataError, public_caller, public_errors
from dpfreq.stream.items.reader import (
    AppendSpec,
    PeriodEvents,
    key_kind,
    period_sql,
    source_columns,
)

__all__ = ["SparkEvents", "read_spark_events", "spark_guard"]

_INTEGER = ("tinyint", "smallint", "int", "bigint")
_DAY_US = 86_400_000_000


@contextlib.contextmanager
def spark_guard() -> Iterator[None]:
    """Spark's failures as one DataError naming Spark's error condition or exception class
    only (its message may quote the data or the query, which holds the stream's key)."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    try:
        yield
    except (PySparkException, Py4JError) as exc:
        condition = getattr(exc, "getCondition", lambda: None)()
        raise DataError(f"{public_caller()} failed in Spark "
                        f"({condition or type(exc).__name__}).") from None


class SparkEvents:
    """The append's events as the temporary view ``name`` (columns ``k, g, p, n``) on the
    session ``spark``, and what was left out: its counts come from the one-row query
    ``stats_sql`` (columns ``total, nn, late, future``) and what it holds of each period
    (:class:`~dpfreq.stream.items.reader.PeriodEvents`) from ``periods_sql`` (columns ``p, c,
    s, h, e``), run on first use or filled by the store's first job (:meth:`fill`). Every view
    made for the append is registered here and dropped by :meth:`close`."""

    def __init__(self, spark: Any, name: str, key_kind: str) -> None:
        self.spark, self.name, self.key_kind = spark, name, key_kind
        self.stats_sql = self.periods_sql = ""
        self._stats: dict[str, int] | None = None
        self._periods: dict[int, PeriodEvents] | None = None
        self._views: list[str] = []

    def fill(self, row: Any, periods: list[Any] | None = None) -> None:
        """Take the counts from a row of ``stats_sql``'s columns (and the periods from rows of
        ``periods_sql``'s); refuses nulls in the item, time or group column (as the DuckDB
        reader does)."""
        stats = {c: int(row[c]) for c in ("total", "nn", "late", "future")}
        if stats["nn"]:
            raise DataError(message("source", "free of nulls in the item, time and group "
                                    "columns", "nulls"))
        self._stats = stats
        if periods is not None:
            self._periods = {int(r["p"]): PeriodEvents(int(r["c"]), int(r["s"]), int(r["h"]),
                                                       int(r["e"])) for r in periods}

    def _stat(self, column: str) -> int:
        if self._stats is None:
            self.fill(self.rows(self.stats_sql)[0])
        return (self._stats or {})[column]

    @property
    def n_events(self) -> int:
        """Events of the source."""
        return self._stat("total")

    @property
    def n_late(self) -> int:
        """Events of periods already closed."""
        return self._stat("late")

    @property
    def n_future(self) -> int:
        """Events after ``through``."""
        return self._stat("future")

    @property
    def periods(self) -> dict[int, PeriodEvents]:
        """What the source holds of each period ``1..through`` (as the DuckDB reader's; the
        digests are the engine's own: a stream stays on its engine)."""
        if self._periods is None:
            stats = self._stats if self._stats is not None else self.rows(self.stats_sql)[0]
            self.fill(stats, self.rows(self.periods_sql))
        return self._periods or {}

    def view(self, frame: Any, name: str) -> str:
        """Register ``frame`` (a DataFrame or a SELECT) as the view ``name``; returns it."""
        if isinstance(frame, str):
            frame = self.spark.sql(frame)
        frame.createOrReplaceTempView(name)
        self._views.append(name)
        return name

    def rows(self, sql: str) -> list[Any]:
        """The rows of a small query, collected."""
        with spark_guard():
            return list(self.spark.sql(sql).collect())

    def close(self) -> None:
        """Drop the views of the append."""
        for view in self._views:
            with contextlib.suppress(Exception):
                self.spark.catalog.dropTempView(view)
        self._views.clear()


def _frame(source: Any, spec: AppendSpec) -> tuple[Any, Any]:
    """``(engine, DataFrame)`` of the source (mappings and tuples copied in through Arrow)."""
    eng: Any = get_engine("spark")
    data = source_columns(source, spec)
    if data is not None:
        import pyarrow as pa

        source = pa.table({c: pa.array(v.tolist() if v.dtype == object else v)
                           for c, v in data.items()})
    text = tuple(c for c in spec.columns if c != spec.time)
    return eng, eng.dataframe(source, text_columns=text)


def _type(types: dict[str, str], column: str) -> str:
    return types[column].lower()  # every column of the spec is there (read_spark_events)


def _q(column: str) -> str:
    return "`" + column.replace("`", "``") + "`"


def _key_sql(df: Any, types: dict[str, str], spec: AppendSpec) -> tuple[str, str]:
    kind = key_kind(_type(types, spec.item), spec.text_keys, lambda: not df.limit(1).collect())
    return f"CAST({_q(spec.item)} AS {'BIGINT' if kind == 'integer' else 'STRING'})", kind


def _micros_sql(ty: str, col: str) -> str:
    """Microseconds since the epoch: an instant by its epoch, a zone-less value by its own
    calendar fields (its wall clock as UTC)."""
    if ty == "timestamp":
        return f"unix_micros({col})"
    if ty == "date":
        return f"CAST(unix_date({col}) AS BIGINT) * {_DAY_US}"
    return (f"(CAST(unix_date(CAST({col} AS DATE)) AS BIGINT) * {_DAY_US} + CAST(hour({col}) "
            f"AS BIGINT) * 3600000000 + CAST(minute({col}) AS BIGINT) * 60000000 + "
            f"CAST(date_part('SECOND', {col}) * 1000000 AS BIGINT))")


def _period_sql(types: dict[str, str], spec: AppendSpec) -> str:
    ty = _type(types, spec.time)
    return period_sql(ty, _q(spec.time), spec, integer=ty in _INTEGER,
                      time=ty in ("timestamp", "timestamp_ntz", "date"), micros=_micros_sql,
                      div="div")


@public_errors("ReachStream.append")
def read_spark_events(source: Any, spec: AppendSpec) -> SparkEvents:
    """The append's events on Spark as lazy views (module docstring); refuses a time column of
    the wrong kind here, nulls when the counts are computed (:class:`SparkEvents`), as the
    DuckDB reader does. Nothing runs yet: the store's first job computes the counts with the
    increments. Each of the append's two Spark jobs reads the source again, which is faster
    than caching it (a cached table keeps its 200 shuffle partitions, which adaptive execution
    then cannot coalesce); a DataFrame that is costly to compute is best persisted first."""
    eng, df = _frame(source, spec)
    types = dict(df.dtypes)
    for column in spec.columns:
        if column not in types:
            raise column_error(df, column)
    with spark_guard():
        key, kind = _key_sql(df, types, spec)
    period = _period_sql(types, spec)
    gtext = "''"
    if spec.group:
        _type(types, spec.group)
        gtext = f"CAST({_q(spec.group)} AS STRING)"
    name = f"dpfreq_stream_events_{uuid.uuid4().hex}"
    table = SparkEvents(eng.spark, name, kind)
    try:
        with spark_guard():
            src = table.view(df, f"{name}_src")
            table.view(f"SELECT k, gname, p, count(*) AS n FROM (SELECT {key} AS k, {gtext} "
                       f"AS gname, {period} AS p FROM {src}) GROUP BY k, gname, p",
                       f"{name}_all")
            coded = _coded(table, spec, name)
            table.view(f"SELECT k, g, p, n FROM {coded} WHERE inside", name)
    except BaseException:
        table.close()
        raise
    table.stats_sql = (
        f"SELECT coalesce(sum(n), 0) AS total, coalesce(sum(CASE WHEN k IS NULL OR p IS NULL "
        f"OR gname IS NULL THEN n END), 0) AS nn, coalesce(sum(CASE WHEN p <= {spec.after} "
        f"THEN n END), 0) AS late, coalesce(sum(CASE WHEN p > {spec.through} THEN n END), 0) "
        f"AS future FROM {coded}")
    listed = "g IS NOT NULL"
    table.periods_sql = (
        f"SELECT p, count_if({listed}) AS c, coalesce(sum(CASE WHEN {listed} THEN n END), 0) "
        f"AS s, coalesce(bit_xor(CASE WHEN {listed} THEN xxhash64(CAST(k AS STRING), g, p, n) "
        f"END), 0) AS h, sum(n) AS e FROM {coded} WHERE p >= 1 AND p <= {spec.through} "
        "GROUP BY p")
    return table


def _coded(table: SparkEvents, spec: AppendSpec, name: str) -> str:
    """The view of the aggregated events with the group's code ``g`` (null for a group not in
    the public list) and ``inside``: whether the row is an event the append closes."""
    inside = f"(a.p > {spec.after} AND a.p <= {spec.through})"
    if spec.group is None or spec.groups is None:
        sql = f"SELECT a.*, CAST(0 AS BIGINT) AS g, {inside} AS inside FROM {name}_all a"
    else:
        listed = table.view(table.spark.createDataFrame(
            [(x, i) for i, x in enumerate(spec.groups)], "gname string, gi bigint"),
            f"{name}_listed")
        sql = (f"SELECT a.*, l.gi AS g, {inside} AND l.gi IS NOT NULL AS inside FROM "
               f"{name}_all a LEFT JOIN {listed} l ON a.gname = l.gname")
    return table.view(sql, f"{name}_coded")
