"""The DuckDB engine: exact aggregates of CSV/Parquet files, SQL, relations and DataFrames.

Aggregation runs in SQL (``GROUP BY``; ``row_number() OVER (PARTITION BY item ORDER BY time)``
for ``k_max``); only the small results are fetched as numpy arrays and finished by the same
numpy code as the memory engine, so the two agree exactly.

Sources
-------
* a path (``str``/``pathlib.Path``) ending in ``.csv``/``.tsv`` (CSV) or ``.parquet``/``.pq``
  (Parquet), a directory of Parquet files, or a glob of such files;
* a pandas, Polars or Arrow table (``pyarrow.Table``/``RecordBatch``), scanned in place
  without a copy (pandas through DuckDB's DataFrame scan, Polars as the Arrow table its
  ``to_arrow()`` shares);
* a ``duckdb.DuckDBPyRelation`` (run on its own connection);
* a SQL string: a query (``SELECT``/``WITH``/``FROM``/``VALUES``/``(``) or a table name on the
  engine's connection.

Types
-----
Item and group keys follow the one rule of an id column
(:func:`~dpfreq.engines.columns.id_key`): integers whose every value fits 64 signed bits
(``DECIMAL(p,0)``, ``p <= 18``, included) give int64 keys, text, an ``ENUM``'s labels and wider
integers the keys' text (``CAST AS VARCHAR``, an integer's decimal text) as an object array of
``str``; a fraction, a float, a time or a boolean is refused naming the type. An id column read
from CSV is always read as text (identifiers such as ``007`` keep their leading zeros). List,
struct and map columns and nulls are refused, with the same message as every other engine.
Time: integer columns as they are (``time_kind="integer"``); ``TIMESTAMP``/``TIMESTAMPTZ``
(any precision, time zone aware values as instants)/``DATE`` as int64 microseconds since the
Unix epoch (UTC, ``time_kind="timestamp_us"``); integral floating/decimal values as integers;
anything else is a :class:`~dpfreq.errors.DataError`.

Each method reads its source once: per-item aggregates in one query; the event readers
(``occurrence_times``) project the events once into a temporary table on the
source's connection and run their checks and passes on that table.
"""

from __future__ import annotations

import glob as _glob
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
from numpy.typing import NDArray

import dpfreq.engines._common as common
from dpfreq._validate import message
from dpfreq.engines import base
from dpfreq.engines.columns import column_error, id_error, id_key
from dpfreq.engines.duckdb.sql import (
    CSV_SUFFIXES,
    IDENT,
    INT64_LIMIT,
    PARQUET_SUFFIXES,
    SQL_START,
    column_category,
    is_nan_sql,
    plain_column,
    reason,
)
from dpfreq.engines.grouping import check_count_request, check_grouping, check_summary_request
from dpfreq.engines.periods import duckdb_period_sql
from dpfreq.engines.sql import DUCKDB, count_sql, finish_counts, finish_summaries, summaries_sql
from dpfreq.errors import DataError, ParameterError, public_caller, public_errors

__all__ = ["DuckDBEngine"]

_EMPTY = np.zeros(0, dtype=np.int64)


class DuckDBEngine:
    """Exact aggregates computed by DuckDB.

    Parameters
    ----------
    connection : duckdb.DuckDBPyConnection or None, keyword-only
        Connection on which SQL strings, table names, files and DataFrames are read; None opens
        a private in-memory connection. Relations always run on their own connection.
    """

    name = "duckdb"

    @public_errors("DuckDBEngine")
    def __init__(self, *, connection: Any = None) -> None:
        if connection is None:
            connection = duckdb.connect(":memory:")
        elif not isinstance(connection, duckdb.DuckDBPyConnection):
            raise ParameterError(message("connection",
                                         "a duckdb.DuckDBPyConnection or None",
                                         type(connection).__name__))
        self.connection = connection

    # -- sources ---------------------------------------------------------------------------
    @public_errors("DuckDBEngine")
    def relation(self, source: Any, *,
                 text_columns: tuple[str, ...] = ()) -> duckdb.DuckDBPyRelation:
        """The source as a DuckDB relation (files are read lazily, DataFrames in place).

        ``text_columns`` are read as text from CSV files, so that identifiers made only of
        digits keep their leading zeros; typed sources (Parquet, DataFrames, SQL) keep their
        types.
        """
        owner = common.source_owner()
        if isinstance(source, duckdb.DuckDBPyRelation):
            return source
        kind = common.dataframe_kind(source)
        if kind is not None:
            return self._dataframe(source, kind)
        if isinstance(source, Path):
            return self._file(str(source), text_columns)
        if isinstance(source, str):
            text = source.strip()
            if SQL_START.match(text):
                try:
                    return self.connection.sql(text)
                except duckdb.Error as exc:
                    raise DataError(f"{owner}: the SQL query failed: "
                                    f"{reason(exc)}") from exc
            lower = text.lower()
            if (lower.endswith(CSV_SUFFIXES + PARQUET_SUFFIXES) or "/" in text or "\\" in text
                    or Path(text).exists() or not IDENT.match(text)):
                return self._file(text, text_columns)
            try:
                return self.connection.table(text)
            except duckdb.Error as exc:
                raise DataError(f"{owner}: no table {text!r} on the connection "
                                f"({reason(exc)}).") from exc
        raise ParameterError(message("source", "a CSV/Parquet path, a SQL query or table "
                                     "name, a pandas, Polars or Arrow table, or a "
                                     "duckdb.DuckDBPyRelation", type(source).__name__))

    def _dataframe(self, source: Any, kind: str) -> duckdb.DuckDBPyRelation:
        """A pandas, Polars or Arrow table as a relation scanning it in place."""
        owner = common.source_owner()
        try:
            if kind == "pandas":
                return self.connection.from_df(source)
            if kind == "polars":
                source = source.to_arrow()
            return self.connection.from_arrow(source)
        except ImportError as exc:  # Polars' to_arrow needs pyarrow
            raise ParameterError(message("source", f"a {kind} table with pyarrow "
                                         "installed (pip install pyarrow)", kind)) from exc
        except (duckdb.Error, TypeError, ValueError) as exc:
            raise DataError(f"{owner}: DuckDB cannot scan the {kind} table: "
                            f"{reason(exc)}") from exc

    def _file(self, text: str,
              text_columns: tuple[str, ...] = ()) -> duckdb.DuckDBPyRelation:
        owner = common.source_owner()
        path = Path(text)
        lower = text.lower()
        is_glob = any(ch in text for ch in "*?[")
        if re.match(r"^[A-Za-z][A-Za-z0-9+.-]+://", text):  # s3://, https://: DuckDB checks
            target = text
        elif is_glob:
            if not _glob.glob(text, recursive=True):
                raise DataError(f"{owner}: no file matches {text!r}.")
            target = text
        elif path.is_dir():
            target = str(path / "**" / "*.parquet")
            if not _glob.glob(target, recursive=True):
                raise DataError(f"{owner}: directory {text!r} holds no .parquet files.")
            lower = target.lower()
        elif not path.exists():
            raise common.missing_file(text)
        else:
            common.check_not_empty(path, text)
            target = text
        try:
            if lower.endswith(PARQUET_SUFFIXES):
                quoted = common.quote_literal(target)
                rel = self.connection.sql(f"SELECT * FROM read_parquet({quoted})")
            elif lower.endswith(CSV_SUFFIXES):
                rel = self._csv(target, text_columns)
            else:
                raise DataError(f"{owner}: cannot tell the format of {text!r} "
                                "(expected .csv, .tsv, .parquet or .pq).")
            rel.columns  # noqa: B018 - forces the schema to be read
        except duckdb.Error as exc:
            raise DataError(f"{owner}: cannot read {text!r}: {reason(exc)}") from exc
        return rel

    def _csv(self, target: str, text_columns: tuple[str, ...]) -> duckdb.DuckDBPyRelation:
        """A CSV file (``.tsv``: tab-separated) whose first line is its header (never sniffed,
        checked by :func:`~dpfreq.engines._common.csv_header`), with DuckDB's type detection,
        except ``text_columns`` read as text."""
        sep = "\t" if ".tsv" in target.lower() else ","
        read = f"read_csv({common.quote_literal(target)}, delim = {common.quote_literal(sep)}"
        first = self.connection.sql(f"SELECT * FROM {read}, header = false, "
                                    "all_varchar = true) LIMIT 1").fetchall()
        names = common.csv_header(first[0] if first else ())
        read += ", header = true"
        as_text = [c for c in dict.fromkeys(text_columns) if c in names]
        if as_text:
            types = ", ".join(f"{common.quote_literal(c)}: 'VARCHAR'" for c in as_text)
            read += f", types = {{{types}}}"
        return self.connection.sql(f"SELECT * FROM {read})")

    @public_errors("DuckDBEngine")
    def read_columns(self, source: Any, columns: list[str], *,
                     text_columns: tuple[str, ...] = ()) -> dict[str, NDArray[Any]]:
        """The named columns of a source as 1-d numpy arrays (one scan of those columns).

        Nested columns and nulls are refused as by the aggregates. ``text_columns`` are id
        columns, read by the one rule of every engine (:func:`~dpfreq.engines.columns.id_key`):
        integers that fit 64 signed bits as int64 (a ``DECIMAL(p,0)`` too, which numpy would
        round), anything else as text (wider integers their decimal text), as the aggregates
        key them (:meth:`_key_expr`); a type that holds no id is refused.
        """
        rel = self.relation(source, text_columns=text_columns)
        exprs = []
        for col in columns:
            if column_category(self._type(rel, col)) == "nested":
                raise common.nested_error(col)
            q = common.quote_ident(col)
            exprs.append(f"{self._key_expr(rel, col)} AS {q}" if col in text_columns else q)
        res = self._run(rel, f"SELECT {', '.join(exprs)} FROM dpfreq_src")
        return {col: plain_column(res[col], col) for col in columns}

    # -- helpers ---------------------------------------------------------------------------
    @staticmethod
    def _type(rel: duckdb.DuckDBPyRelation, column: str) -> str:
        cols = list(rel.columns)
        if column not in cols:
            raise column_error(rel, column)
        return str(rel.types[cols.index(column)].id).lower()

    @staticmethod
    def _run(rel: duckdb.DuckDBPyRelation, sql: str) -> dict[str, Any]:
        func = public_caller()
        try:
            result = rel.query("dpfreq_src", sql)
            if result is None:  # pragma: no cover - only for statements without results
                raise DataError(f"{func}: DuckDB returned no result.")
            return dict(result.fetchnumpy())
        except duckdb.Error as exc:
            raise DataError(f"{func} failed in DuckDB: {reason(exc)}") from exc

    @contextmanager
    def _events_table(self, rel: duckdb.DuckDBPyRelation, select: str) -> Iterator[str]:
        """Project the source once into a temporary table (on the relation's connection, where
        DuckDB may spill it to disk); every check and pass then reads that table, so all of
        them see the same events however the source changes meanwhile. Dropped on exit."""
        func = public_caller()
        name = f"dpfreq_events_{uuid.uuid4().hex}"
        try:
            rel.query("dpfreq_src", f"CREATE TEMP TABLE {name} AS {select}")
        except duckdb.Error as exc:
            raise DataError(f"{func} failed in DuckDB: {reason(exc)}") from exc
        try:
            yield name
        finally:
            with suppress(duckdb.Error):  # the connection may be gone
                rel.query("dpfreq_src", f"DROP TABLE IF EXISTS {name}")

    def _is_empty(self, rel: duckdb.DuckDBPyRelation) -> bool:
        res = self._run(rel, "SELECT count(*) AS n FROM (SELECT 1 FROM dpfreq_src LIMIT 1)")
        return int(res["n"][0]) == 0

    def _id_key(self, rel: duckdb.DuckDBPyRelation, column: str) -> str:
        """``"integer"`` or ``"text"``: how the id column is keyed, by the one rule of every
        engine (:func:`~dpfreq.engines.columns.id_key`); a column of a type that holds no id is
        refused naming its type, unless the source has no rows (keyed as text)."""
        cols = list(rel.columns)
        if column not in cols:
            raise column_error(rel, column)
        ty = rel.types[cols.index(column)]
        if column_category(str(ty.id)) == "nested":
            raise common.nested_error(column)
        key = id_key(str(ty))
        if key is None and not self._is_empty(rel):
            raise id_error(str(ty).upper(), column)
        return key or "text"

    def _key_expr(self, rel: duckdb.DuckDBPyRelation, column: str) -> str:
        """Keys of an id column (an item, a group): BIGINT for integers that fit, else the
        id's text (:meth:`_id_key`); NULL for nulls."""
        key = self._id_key(rel, column)
        return (f"CAST({common.quote_ident(column)} AS "
                f"{'BIGINT' if key == 'integer' else 'VARCHAR'})")

    def _time_expr(self, rel: duckdb.DuckDBPyRelation, time: str) -> tuple[str, str, str]:
        """(SQL expression of the time as BIGINT, NULL for nulls, NaN and non-integral values;
        time_kind; SQL condition true for non-integral, infinite or out-of-range values)."""
        ty = self._type(rel, time)
        category = column_category(ty)
        col = common.quote_ident(time)
        if category == "integer":
            return f"CAST({col} AS BIGINT)", "integer", "false"
        if category == "time":
            if ty.lower() == "timestamptz_ns":  # epoch_us has no overload for it
                return f"epoch_us(CAST({col} AS TIMESTAMPTZ))", "timestamp_us", "false"
            return f"epoch_us({col})", "timestamp_us", "false"
        if category == "float":
            ok = f"(isfinite({col}) AND {col} = trunc({col}) AND abs({col}) < {INT64_LIMIT})"
            return (f"CASE WHEN {ok} THEN CAST({col} AS BIGINT) END", "integer",
                    f"(NOT {is_nan_sql(col)} AND NOT {ok})")
        if category == "nested":
            raise common.nested_error(time)
        if self._is_empty(rel):
            return "CAST(NULL AS BIGINT)", "integer", "false"
        raise common.data_error(time, "integer or timestamp/date valued",
                                f"type {ty.upper()}")

    def _events(self, rel: duckdb.DuckDBPyRelation, item: str, time: str) -> tuple[str, str]:
        """SELECT of the events ``(k, t, f)`` (key, time, non-integral flag) and time_kind."""
        key = self._key_expr(rel, item)
        texpr, kind, frac = self._time_expr(rel, time)
        return f"SELECT {key} AS k, {texpr} AS t, {frac} AS f FROM dpfreq_src", kind

    def _check_events(self, rel: duckdb.DuckDBPyRelation, table: str, item: str, time: str,
                      extra: str = "") -> dict[str, Any]:
        """Counts of the projected events and the column checks every event reader makes."""
        stats = self._run(rel, f"SELECT count(*) AS n, count(k) AS ni, count(*) FILTER "
                          f"(WHERE f) AS nf, count(t) AS nt{extra} FROM {table}")
        n, ni, nf, nt = (int(stats[c][0]) for c in ("n", "ni", "nf", "nt"))
        common.check_event_counts(item, time, n, ni, nt + nf, nf)
        return stats

    # -- protocol --------------------------------------------------------------------------
    @public_errors("DuckDBEngine.item_counts")
    def item_counts(self, source: Any, *, item: str) -> base.ItemCounts:
        """Exact number of rows per distinct value of column ``item`` (``GROUP BY``)."""
        common.check_column_name(item, "item")
        rel = self.relation(source, text_columns=(item,))
        key = self._key_expr(rel, item)
        res = self._run(rel, f"SELECT {key} AS k, count(*) AS c FROM dpfreq_src GROUP BY 1")
        keys = plain_column(res["k"], item)
        return common.finish_item_counts(keys, plain_column(res["c"], item))

    @public_errors("DuckDBEngine.count_of_counts")
    def count_of_counts(self, source: Any, *, item: str,
                        max_count: int | None = None) -> base.Prevalences:
        """Exact prevalences of the per-item counts, clamped at ``max_count`` (two GROUP BYs
        over one scan)."""
        common.check_column_name(item, "item")
        max_count = common.check_max_count(max_count)
        rel = self.relation(source, text_columns=(item,))
        key = self._key_expr(rel, item)
        clamp = "c" if max_count is None else f"least(c, {max_count})"
        sql = (f"SELECT {clamp} AS v, count(*) AS p, max(null_key) AS anynull FROM "
               f"(SELECT count(*) AS c, CAST(k IS NULL AS INTEGER) AS null_key "
               f"FROM (SELECT {key} AS k FROM dpfreq_src) GROUP BY k) GROUP BY 1 ORDER BY 1")
        res = self._run(rel, sql)
        anynull = plain_column(res["anynull"], item)
        if anynull.size and anynull.max() > 0:
            raise common.null_error(item)
        return base.Prevalences(counts=plain_column(res["v"], item).astype(np.int64),
                                prevalences=plain_column(res["p"], item).astype(np.int64))

    @public_errors("DuckDBEngine.grouped_count_of_counts")
    def grouped_count_of_counts(self, source: Any, request: base.CountRequest
                                ) -> base.GroupedPrevalences:
        """Per-group prevalences after the bounding, in one DuckDB statement
        (:func:`dpfreq.engines.sql.count_sql`)."""
        req, n = check_count_request(request)
        names, m, key_hex = check_grouping(req.grouping, req.item)
        group = req.grouping.column
        rel = self.relation(source, text_columns=(req.item, group))
        k = self._key_expr(rel, req.item)
        g = self._key_expr(rel, group)
        events = f"SELECT {k} AS k, CAST({g} AS VARCHAR) AS g FROM dpfreq_src"
        statement = count_sql(DUCKDB, events, names, m, key_hex, n, req.per_item)
        res = self._run(rel, statement.with_clause())
        return finish_counts(res, req, names)

    @public_errors("DuckDBEngine.summaries")
    def summaries(self, source: Any, request: base.SummaryRequest) -> base.Summaries:
        """The summaries of ``request`` in one DuckDB statement
        (:func:`dpfreq.engines.sql.summaries_sql`): the source is read once, only the summed
        entries and a few counts reach this process."""
        req = check_summary_request(request)
        grouping = req.grouping
        text = (req.item,) + ((grouping.column,) if grouping is not None else ())
        rel = self.relation(source, text_columns=text)
        select, kind = self._events(rel, req.item, req.time)
        common.check_time_kind(kind, req.buckets, req.time)
        names, m, key_hex = None, None, ""
        if grouping is not None:
            names, m, key_hex = check_grouping(grouping, req.item, (req.time,))
            gexpr = f"CAST({self._key_expr(rel, grouping.column)} AS VARCHAR)"
            select = select.replace(" FROM dpfreq_src", f", {gexpr} AS g FROM dpfreq_src", 1)
            if names is None:
                raise ParameterError(message("groups", "a public list for summaries "
                                             "(select the groups first)", None))
        sql = summaries_sql(DUCKDB, select, duckdb_period_sql(req.buckets), req, names, m,
                            key_hex).with_clause()
        return finish_summaries(self._run(rel, sql), req, names)

    @public_errors("DuckDBEngine.occurrence_times")
    def occurrence_times(self, source: Any, *, item: str, time: str,
                         k_max: int | None = None) -> base.OccurrenceTimes:
        """Per-item sorted event times; with ``k_max`` only each item's first ``k_max``
        (``row_number() OVER (PARTITION BY item ORDER BY time)``)."""
        common.check_column_name(item, "item")
        common.check_column_name(time, "time")
        k_max = common.check_k_max(k_max)
        rel = self.relation(source, text_columns=(item,))
        select, kind = self._events(rel, item, time)
        with self._events_table(rel, select) as table:
            stats = self._check_events(rel, table, item, time,
                                       ", count(DISTINCT k) AS nd")
            inner = f"SELECT k, t FROM {table}"
            if k_max is not None:
                inner += f" QUALIFY row_number() OVER (PARTITION BY k ORDER BY t) <= {k_max}"
            res = self._run(rel, f"SELECT k, t FROM ({inner}) ORDER BY k, t")
        keys = plain_column(res["k"], item)
        times = plain_column(res["t"], time).astype(np.int64)
        return common.finish_occurrence_times(common.sorted_codes(keys), times,
                                              n_items=int(stats["nd"][0]),
                                              n_events=int(stats["n"][0]), time_kind=kind,
                                              k_max=None, presorted=True)

    @public_errors("DuckDBEngine.report_sums")
    def report_sums(self, source: Any, *, param_id: str | None,
                    interval_counts: tuple[int, ...]) -> base.ReportSums:
        """Validate longitudinal reports in DuckDB (read once) and sum them per (order, interval).

        See :meth:`dpfreq.engines.base.Engine.report_sums`; the rules are in
        :mod:`dpfreq.engines.reports`.
        """
        from dpfreq.engines.duckdb.reports import duckdb_report_sums

        return duckdb_report_sums(self, source, param_id=param_id,
                                  interval_counts=interval_counts)
