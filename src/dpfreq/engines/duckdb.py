"""The DuckDB engine: exact aggregates of CSV/Parquet files, SQL and relations (DESIGN.md §6).

Aggregation runs in SQL (``GROUP BY``; ``row_number() OVER (PARTITION BY item ORDER BY time)``
for ``k_max``); only the small results are fetched as numpy arrays and finished by the same
numpy code as the memory engine, so the two agree exactly.

Sources
-------
* a path (``str``/``pathlib.Path``) ending in ``.csv``/``.tsv`` (CSV) or ``.parquet``/``.pq``
  (Parquet), a directory of Parquet files, or a glob of such files;
* a ``duckdb.DuckDBPyRelation`` (run on its own connection);
* a SQL string: a query (``SELECT``/``WITH``/``FROM``/``VALUES``/``(``) or a table name on the
  engine's connection.

Types
-----
Item keys: integer columns give int64 keys, any other type the keys' text (``CAST AS VARCHAR``)
as an object array of ``str``. Time: integer columns as they are (``time_kind="integer"``);
``TIMESTAMP``/``TIMESTAMPTZ``/``DATE`` as int64 microseconds since the Unix epoch (UTC,
``time_kind="timestamp_us"``); integral floating/decimal values as integers; anything else is
a :class:`~dpfreq.errors.DataError`. Nulls are never dropped: they raise a ``DataError``.
"""

from __future__ import annotations

import glob as _glob
import re
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import message
from dpfreq.engines._common import (
    check_column_name,
    check_event_counts,
    check_k_max,
    check_max_count,
    check_time_kind,
    data_error,
    finish_item_counts,
    finish_occurrence_times,
    reduce_sorted,
    sum_entries,
)
from dpfreq.engines.base import (
    ItemCounts,
    ItemReducer,
    ItemReduction,
    OccurrenceTimes,
    Prevalences,
    ReportSums,
    TimeBuckets,
)
from dpfreq.errors import DataError, ParameterError

__all__ = ["DuckDBEngine"]

_CSV_SUFFIXES = (".csv", ".tsv", ".csv.gz", ".tsv.gz")
_PARQUET_SUFFIXES = (".parquet", ".pq")
_INT_TYPES = {"tinyint", "smallint", "integer", "bigint", "hugeint", "utinyint", "usmallint",
              "uinteger", "ubigint", "uhugeint"}
_TIME_TYPES = {"timestamp", "timestamp with time zone", "date", "timestamp_s", "timestamp_ms",
               "timestamp_ns"}
_FLOAT_TYPES = {"float", "double", "decimal"}
_SQL_START = re.compile(r"^\s*(select|with|from|values|\(|table\b|pivot|unpivot)", re.IGNORECASE)
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*){0,2}$")


def _q(name: str) -> str:
    """Quote an identifier."""
    return '"' + name.replace('"', '""') + '"'


def _lit(text: str) -> str:
    """Quote a string literal."""
    return "'" + text.replace("'", "''") + "'"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _plain(arr: Any, column: str, func: str) -> NDArray[Any]:
    """A fetched result column as a plain ndarray; nulls are a DataError."""
    if isinstance(arr, np.ma.MaskedArray):
        mask = np.ma.getmaskarray(arr)
        if mask.any():
            raise data_error(func, column, "free of nulls", f"{int(mask.sum())} null value(s)")
        return np.ma.getdata(arr)
    return np.asarray(arr)


_EMPTY = np.zeros(0, dtype=np.int64)
_EVENTS_PER_PASS = 1 << 23  # events fetched per reduce_items pass (bounds this process's memory)


class DuckDBEngine:
    """Exact aggregates computed by DuckDB.

    Parameters
    ----------
    connection : duckdb.DuckDBPyConnection or None, keyword-only
        Connection on which SQL strings, table names and files are read; None opens a private
        in-memory connection. Relations always run on their own connection.
    """

    name = "duckdb"

    def __init__(self, *, connection: Any = None) -> None:
        if connection is None:
            connection = duckdb.connect(":memory:")
        elif not isinstance(connection, duckdb.DuckDBPyConnection):
            raise ParameterError(message("connection", "DuckDBEngine",
                                         "a duckdb.DuckDBPyConnection or None",
                                         type(connection).__name__))
        self.connection = connection

    # -- sources ---------------------------------------------------------------------------
    def relation(self, source: Any, func: str = "DuckDBEngine") -> duckdb.DuckDBPyRelation:
        """The source as a DuckDB relation (files are read lazily)."""
        if isinstance(source, duckdb.DuckDBPyRelation):
            return source
        if isinstance(source, Path):
            return self._file(str(source), func)
        if isinstance(source, str):
            text = source.strip()
            if _SQL_START.match(text):
                try:
                    return self.connection.sql(text)
                except duckdb.Error as exc:
                    raise DataError(f"source of {func}: the SQL query failed: "
                                    f"{_one_line(exc)}") from exc
            lower = text.lower()
            if (lower.endswith(_CSV_SUFFIXES + _PARQUET_SUFFIXES) or "/" in text or "\\" in text
                    or Path(text).exists() or not _IDENT.match(text)):
                return self._file(text, func)
            try:
                return self.connection.table(text)
            except duckdb.Error as exc:
                raise DataError(f"source of {func}: no table {text!r} on the connection "
                                f"({_one_line(exc)}).") from exc
        raise ParameterError(message("source", func, "a CSV/Parquet path, a SQL query or table "
                                     "name, or a duckdb.DuckDBPyRelation",
                                     type(source).__name__))

    def _file(self, text: str, func: str) -> duckdb.DuckDBPyRelation:
        path = Path(text)
        lower = text.lower()
        is_glob = any(ch in text for ch in "*?[")
        if re.match(r"^[A-Za-z][A-Za-z0-9+.-]+://", text):  # s3://, https://: DuckDB checks
            target = text
        elif is_glob:
            if not _glob.glob(text, recursive=True):
                raise DataError(f"source of {func}: no file matches {text!r}.")
            target = text
        elif path.is_dir():
            target = str(path / "**" / "*.parquet")
            if not _glob.glob(target, recursive=True):
                raise DataError(f"source of {func}: directory {text!r} holds no .parquet files.")
            lower = target.lower()
        elif not path.exists():
            raise DataError(f"source of {func}: file {text!r} does not exist.")
        elif path.stat().st_size == 0:
            raise DataError(f"source of {func}: file {text!r} is empty (not even a header).")
        else:
            target = text
        try:
            if lower.endswith(_PARQUET_SUFFIXES):
                rel = self.connection.sql(f"SELECT * FROM read_parquet({_lit(target)})")
            elif lower.endswith(_CSV_SUFFIXES):
                rel = self.connection.sql(f"SELECT * FROM read_csv({_lit(target)})")
            else:
                raise DataError(f"source of {func}: cannot tell the format of {text!r} "
                                "(expected .csv, .tsv, .parquet or .pq).")
            rel.columns  # noqa: B018 - forces the schema to be read
        except duckdb.Error as exc:
            raise DataError(f"source of {func}: cannot read {text!r}: {_one_line(exc)}") from exc
        return rel

    # -- helpers ---------------------------------------------------------------------------
    @staticmethod
    def _type(rel: duckdb.DuckDBPyRelation, column: str, func: str) -> str:
        cols = list(rel.columns)
        if column not in cols:
            raise DataError(f"column {column!r} of {func} is not in the source; available: "
                            f"{', '.join(cols)}.")
        return str(rel.types[cols.index(column)].id).lower()

    @staticmethod
    def _run(rel: duckdb.DuckDBPyRelation, sql: str, func: str) -> dict[str, Any]:
        try:
            result = rel.query("dpfreq_src", sql)
            if result is None:  # pragma: no cover - only for statements without results
                raise DataError(f"{func}: DuckDB returned no result.")
            return dict(result.fetchnumpy())
        except duckdb.Error as exc:
            raise DataError(f"{func} failed in DuckDB: {_one_line(exc)}") from exc

    def _is_empty(self, rel: duckdb.DuckDBPyRelation, func: str) -> bool:
        res = self._run(rel, "SELECT count(*) AS n FROM (SELECT 1 FROM dpfreq_src LIMIT 1)", func)
        return int(res["n"][0]) == 0

    def _key_expr(self, rel: duckdb.DuckDBPyRelation, item: str, func: str) -> str:
        ty = self._type(rel, item, func)
        if ty in _INT_TYPES:
            return f"CAST({_q(item)} AS BIGINT)"
        return f"CAST({_q(item)} AS VARCHAR)"

    def _time_expr(self, rel: duckdb.DuckDBPyRelation, time: str,
                   func: str) -> tuple[str, str, str | None]:
        """(SQL expression, time_kind, SQL condition counting non-integral values or None)."""
        ty = self._type(rel, time, func)
        col = _q(time)
        if ty in _INT_TYPES:
            return f"CAST({col} AS BIGINT)", "integer", None
        if ty in _TIME_TYPES:
            return f"epoch_us({col})", "timestamp_us", None
        if ty in _FLOAT_TYPES:
            return f"CAST({col} AS BIGINT)", "integer", f"{col} <> trunc({col})"
        if self._is_empty(rel, func):
            return "CAST(NULL AS BIGINT)", "integer", None
        raise data_error(func, time, "integer or timestamp/date valued", f"type {ty.upper()}")

    # -- protocol --------------------------------------------------------------------------
    def item_counts(self, source: Any, *, item: str) -> ItemCounts:
        """Exact number of rows per distinct value of column ``item`` (``GROUP BY``)."""
        func = "DuckDBEngine.item_counts"
        check_column_name(item, "item", func)
        rel = self.relation(source, func)
        key = self._key_expr(rel, item, func)
        res = self._run(rel, f"SELECT {key} AS k, count(*) AS c FROM dpfreq_src GROUP BY 1",
                        func)
        keys = _plain(res["k"], item, func)
        return finish_item_counts(keys, _plain(res["c"], item, func))

    def count_of_counts(self, source: Any, *, item: str,
                        max_count: int | None = None) -> Prevalences:
        """Exact prevalences of the per-item counts, clamped at ``max_count`` (two GROUP BYs)."""
        func = "DuckDBEngine.count_of_counts"
        check_column_name(item, "item", func)
        max_count = check_max_count(max_count, func)
        rel = self.relation(source, func)
        self._type(rel, item, func)
        col = _q(item)
        clamp = "c" if max_count is None else f"least(c, {max_count})"
        sql = (f"SELECT {clamp} AS v, count(*) AS p, max(null_key) AS anynull FROM "
               f"(SELECT count(*) AS c, CAST({col} IS NULL AS INTEGER) AS null_key "
               f"FROM dpfreq_src GROUP BY {col}) GROUP BY 1 ORDER BY 1")
        res = self._run(rel, sql, func)
        anynull = _plain(res["anynull"], item, func)
        if anynull.size and anynull.max() > 0:
            raise data_error(func, item, "free of nulls", "null value(s)")
        return Prevalences(counts=_plain(res["v"], item, func).astype(np.int64),
                           prevalences=_plain(res["p"], item, func).astype(np.int64))

    def occurrence_times(self, source: Any, *, item: str, time: str,
                         k_max: int | None = None) -> OccurrenceTimes:
        """Per-item sorted event times; with ``k_max`` only each item's first ``k_max``
        (``row_number() OVER (PARTITION BY item ORDER BY time)``)."""
        func = "DuckDBEngine.occurrence_times"
        check_column_name(item, "item", func)
        check_column_name(time, "time", func)
        k_max = check_k_max(k_max, func)
        rel = self.relation(source, func)
        key = self._key_expr(rel, item, func)
        texpr, kind, frac = self._time_expr(rel, time, func)
        frac_sql = f"count(*) FILTER (WHERE {frac})" if frac else "0"
        stats = self._run(rel, f"SELECT count(*) AS n, count({_q(item)}) AS ni, "
                          f"count({_q(time)}) AS nt, count(DISTINCT {key}) AS nd, "
                          f"{frac_sql} AS nf FROM dpfreq_src", func)
        n, ni, nt, nd, nf = (int(stats[c][0]) for c in ("n", "ni", "nt", "nd", "nf"))
        check_event_counts(func, item, time, n, ni, nt, nf)
        inner = f"SELECT {key} AS k, {texpr} AS t FROM dpfreq_src"
        if k_max is not None:
            inner += f" QUALIFY row_number() OVER (PARTITION BY k ORDER BY t) <= {k_max}"
        res = self._run(rel, f"SELECT k, t FROM ({inner}) ORDER BY k, t", func)
        keys = _plain(res["k"], item, func)
        times = _plain(res["t"], time, func).astype(np.int64)
        if len(keys):
            change = np.asarray(keys[1:] != keys[:-1], dtype=bool)
            codes = np.concatenate(([0], np.cumsum(change))).astype(np.int64)
        else:
            codes = np.zeros(0, dtype=np.int64)
        return finish_occurrence_times(codes, times, n_items=nd, n_events=n, time_kind=kind,
                                       k_max=None, presorted=True)

    def reduce_items(self, source: Any, *, item: str, time: str, buckets: TimeBuckets,
                     reducer: ItemReducer, drop_out_of_range: bool = False) -> ItemReduction:
        """Per-item reduction of the bucketed events, with bounded memory in this process.

        DuckDB computes the periods (exact integer floor division), the range check and the
        first event outside in (item, time) order; the events inside are then fetched in
        ``⌈n / 2^23⌉`` passes over the items split by ``hash(item)`` (every item in exactly one
        pass), each sorted by (item, period) in SQL and reduced by ``reducer`` in numpy chunks
        of whole items. The summaries are sums over items, so the passes add up to the
        one-pass result. Each pass reads the source again (cheap for Parquet; a large CSV is
        better converted to Parquet first).
        """
        func = "DuckDBEngine.reduce_items"
        check_column_name(item, "item", func)
        check_column_name(time, "time", func)
        rel = self.relation(source, func)
        key = self._key_expr(rel, item, func)
        texpr, kind, frac = self._time_expr(rel, time, func)
        frac_sql = f"count(*) FILTER (WHERE {frac})" if frac else "0"
        stats = self._run(rel, f"SELECT count(*) AS n, count({_q(item)}) AS ni, "
                          f"count({_q(time)}) AS nt, {frac_sql} AS nf FROM dpfreq_src", func)
        n, ni, nt, nf = (int(stats[c][0]) for c in ("n", "ni", "nt", "nf"))
        check_event_counts(func, item, time, n, ni, nt, nf)
        check_time_kind(kind, buckets, time, func)
        if buckets.start_us is None:
            period = "t"
        else:  # ⌊d / P⌋ + 1 with only non-negative operands divided (exact for any sign of d)
            d, per = f"(t - ({int(buckets.start_us)}))", int(buckets.period_us or 1)
            period = (f"(CASE WHEN {d} >= 0 THEN {d} // {per} "
                      f"ELSE -((-{d} - 1) // {per}) - 1 END + 1)")
        base = f"SELECT k, t, {period} AS p FROM (SELECT {key} AS k, {texpr} AS t FROM dpfreq_src)"
        bad = f"(p < 1 OR p > {int(buckets.horizon)})"
        n_bad, first = 0, None
        if n:
            n_bad = int(self._run(rel, f"SELECT count(*) FILTER (WHERE {bad}) AS b FROM ({base})",
                                  func)["b"][0])
        if n_bad:
            first = int(self._run(rel, f"SELECT p FROM ({base}) WHERE {bad} ORDER BY k, t "
                                  "LIMIT 1", func)["p"][0])
            if not drop_out_of_range:
                return ItemReduction(slots=_EMPTY, keys=_EMPTY.copy(), weights=_EMPTY.copy(),
                                     n_events=0, n_out_of_range=n_bad, first_out_of_range=first)
        n_in = n - n_bad
        passes = max(1, -(-n_in // _EVENTS_PER_PASS))
        parts = []
        for b in range(passes if n_in else 0):
            where = f"NOT {bad}" + (f" AND hash(k) % {passes} = {b}" if passes > 1 else "")
            res = self._run(rel, f"SELECT k, p FROM ({base}) WHERE {where} ORDER BY k, p", func)
            keys = _plain(res["k"], item, func)
            if not len(keys):
                continue
            codes = np.zeros(len(keys), dtype=np.int64)
            np.cumsum(np.asarray(keys[1:] != keys[:-1], dtype=bool), out=codes[1:])
            parts.append(reduce_sorted(codes, _plain(res["p"], time, func).astype(np.int64),
                                       reducer))
        if parts:
            slots, ks, ws = sum_entries(*(np.concatenate(v) for v in zip(*parts, strict=True)))
        else:
            slots, ks, ws = _EMPTY, _EMPTY.copy(), _EMPTY.copy()
        return ItemReduction(slots=slots, keys=ks, weights=ws, n_events=n_in,
                             n_out_of_range=n_bad, first_out_of_range=first)

    def report_sums(self, source: Any, *, param_id: str | None,
                    interval_counts: tuple[int, ...]) -> ReportSums:
        """Validate longitudinal reports in DuckDB (read once) and sum them per (order, interval).

        See :meth:`dpfreq.engines.base.Engine.report_sums`; the rules are in
        :mod:`dpfreq.engines.reports`.
        """
        from dpfreq.engines.reports import check_report_args
        from dpfreq.engines.reports_duckdb import duckdb_report_sums

        param_id, counts = check_report_args(param_id, interval_counts,
                                             f"{type(self).__name__}.report_sums")
        return duckdb_report_sums(self, source, param_id=param_id,
                                  interval_counts=counts)
