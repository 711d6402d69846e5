"""The Spark engine: the engine protocol on pyspark DataFrames, Parquet/CSV paths, SQL queries
and catalog tables.

Aggregation runs on the executors (``groupBy``; ``row_number()`` over a window partitioned by
item and ordered by time for ``k_max``); only the small results reach the driver (as Arrow
batches when available) and are finished by the same numpy code as the memory and DuckDB
engines, so all three agree exactly. ``summaries`` and ``grouped_count_of_counts`` (the window
releases' summaries and the grouped bounding) are one Spark SQL statement each
(:mod:`dpfreq.engines.sql`): the executors run Spark SQL only — no Python worker, so a
cluster whose executors lack dpfreq (or any Python packages) runs every release; only the
summed summaries are collected, never the event log.

Types follow the DuckDB engine: item and group keys follow the one rule of an id column
(:func:`~dpfreq.engines.columns.id_key`: int64 keys for integers that fit 64 signed bits, the
keys' text, ``CAST AS STRING``, for text and wider integers; a fraction, a float, a time or a
boolean refused naming the type); integral time columns stay integers; ``TIMESTAMP``/``DATE`` become
int64 microseconds since the Unix epoch: a ``TIMESTAMP`` (time zone aware) by its instant,
a ``TIMESTAMP_NTZ`` (naive) by its wall clock read as UTC, whatever
``spark.sql.session.timeZone`` is, and Parquet nanosecond timestamps (pandas' default), which
Spark refuses, through :mod:`dpfreq.engines.spark.times`. Spark itself interprets zone-less
timestamp *text* (CSV) in ``spark.sql.session.timeZone``; set it to ``UTC`` for results equal to
the other engines (the sessions this module creates do). Nulls raise
:class:`~dpfreq.errors.DataError`, as do unknown columns and unreadable files.

pyspark is imported when this module is imported; :func:`dpfreq.engines.get_engine` turns a
missing pyspark into :class:`~dpfreq.errors.EngineUnavailableError`.
"""

from __future__ import annotations

import csv
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from py4j.protocol import Py4JJavaError
from pyspark import StorageLevel
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

import dpfreq.engines._common as common
from dpfreq._validate import message
from dpfreq.engines import base
from dpfreq.engines.columns import column_error, id_error, id_key
from dpfreq.engines.grouping import check_count_request, check_grouping, check_summary_request
from dpfreq.engines.periods import spark_period_sql
from dpfreq.engines.spark import times as spark_times
from dpfreq.engines.spark.session import SPARK_ERRORS, reason, spark_session
from dpfreq.engines.sql import SPARK, count_sql, finish_counts, finish_summaries, summaries_sql
from dpfreq.errors import DataError, ParameterError, public_caller, public_errors
from dpfreq.progress import task

__all__ = ["SparkEngine", "spark_session"]

_MASTER_URL = re.compile(r"local(\[(\d+|\*)(,\s*\d+)?\])?|local-cluster\[[\d,\s]+\]"
                         r"|spark://\S+|yarn|k8s://\S+")
_SQL_START = re.compile(r"^\s*(select|with|from|values|table\b|\()", re.IGNORECASE)
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,2}$")
_FILE_SUFFIXES = common.CSV_SUFFIXES + common.PARQUET_SUFFIXES
_INT_TYPES = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_FLOAT_TYPES = (T.FloatType, T.DoubleType, T.DecimalType)


def _to_numpy(df: DataFrame,
              names: dict[str, str] | None = None) -> dict[str, NDArray[Any]]:
    """Collect a small DataFrame to numpy columns (through Arrow); a null raises a DataError
    naming the source column (``names`` maps result aliases to source column names)."""
    func = public_caller()
    try:
        with task(f"{func}: Spark job"):  # unknown total: the elapsed time is shown
            tbl = df.toArrow()
    except SPARK_ERRORS as exc:
        raise DataError(f"{func} failed in Spark: {reason(exc)}") from exc
    out: dict[str, NDArray[Any]] = {}
    for name in tbl.column_names:
        col = tbl.column(name)
        if col.null_count:
            raise common.null_error((names or {}).get(name, name),
                                    f"{col.null_count} value(s)")
        out[name] = col.to_numpy(zero_copy_only=False)
    return out


def _agg_row(df: DataFrame, aggs: list[Any]) -> Any:
    """The one row of ``df.agg(*aggs)``; a Spark failure becomes a DataError."""
    func = public_caller()
    try:
        with task(f"{func}: Spark job"):
            return df.agg(*aggs).collect()[0]
    except SPARK_ERRORS as exc:
        raise DataError(f"{func} failed in Spark: {reason(exc)}") from exc


@contextmanager
def _persisted(df: DataFrame) -> Iterator[DataFrame]:
    """``df`` persisted (memory, spilling to disk) for the duration: the first action reads the
    source and fills the cache, later actions read the cache, so checks and aggregate see the
    same rows (the source is read again only if an executor holding cached blocks is lost)."""
    cached = df.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        yield cached
    finally:
        cached.unpersist()


class SparkEngine:
    """Exact aggregates computed by Spark.

    Parameters
    ----------
    spark : pyspark.sql.SparkSession or None, keyword-only
        The session to use; None gets or creates one with ``master`` on first use.
    master : str, keyword-only
        Master URL when a session has to be created (default ``"local[*]"``): ``local[N]``,
        ``spark://HOST:PORT`` (standalone, several masters comma-separated), ``yarn`` or
        ``k8s://URL``. Ignored when a session is already active in this process (e.g. under
        ``spark-submit``, whose ``--master`` then applies).
    """

    name = "spark"

    @public_errors("SparkEngine")
    def __init__(self, *, spark: Any = None, master: str = "local[*]") -> None:
        if spark is not None and not isinstance(spark, SparkSession):
            raise ParameterError(message("spark", "a SparkSession or None",
                                         type(spark).__name__))
        if not isinstance(master, str) or _MASTER_URL.fullmatch(master) is None:
            raise ParameterError(message(
                "master", "a Spark master URL (local, local[N], local[*], "
                "local[N,F], local-cluster[...], spark://HOST:PORT, yarn or k8s://URL)", master))
        self._spark = spark
        self.master = master

    @property
    def spark(self) -> SparkSession:
        """The session (created on first use)."""
        if self._spark is None:
            self._spark = spark_session(self.master)
        return self._spark

    # -- sources ---------------------------------------------------------------------------
    @public_errors("SparkEngine")
    def dataframe(self, source: Any, *,
                  text_columns: tuple[str, ...] = ()) -> DataFrame:
        """The source as a Spark DataFrame.

        A DataFrame as it is; a pandas, Polars or Arrow table through
        ``spark.createDataFrame`` (a copy into Spark); a string starting like a query
        (``SELECT``, ``WITH``, ``FROM``, ``VALUES``, ``TABLE``, ``(``) through ``spark.sql``; a
        name such as ``events`` or ``db.events`` (no path separator, no file suffix, not an
        existing file) through ``spark.table`` (metastore/catalog tables); anything else as a
        Parquet/CSV path or URI. ``text_columns`` are read as text from CSV files (identifiers
        keep their leading zeros).
        """
        owner = common.source_owner()
        if isinstance(source, DataFrame):
            return source
        kind = common.dataframe_kind(source)
        if kind is not None:
            try:  # through Arrow, whose schema holds even for an empty table
                import pyarrow as pa

                if kind == "polars":
                    source = source.to_arrow()
                elif kind == "pandas":
                    source = pa.Table.from_pandas(source, preserve_index=False)
                elif type(source).__name__ == "RecordBatch":
                    source = pa.Table.from_batches([source])
                return self.spark.createDataFrame(spark_times.arrow_instants(source))
            except (PySparkException, Py4JJavaError, TypeError, ValueError,
                    pa.ArrowException) as exc:
                raise DataError(f"{owner}: Spark cannot take the {kind} table: "
                                f"{reason(exc)}") from exc
        if isinstance(source, Path):
            return self._read(source, str(source), text_columns)
        if isinstance(source, str):
            text = source.strip()
            if _SQL_START.match(text):
                try:
                    return self.spark.sql(text)
                except SPARK_ERRORS as exc:
                    raise DataError(f"{owner}: the SQL query failed: "
                                    f"{reason(exc)}") from exc
            lower = text.lower()
            if (_IDENT.match(text) and not lower.endswith(_FILE_SUFFIXES)
                    and not Path(text).exists()):
                try:
                    return self.spark.table(text)
                except SPARK_ERRORS as exc:
                    raise DataError(f"{owner}: no table {text!r} in the Spark catalog "
                                    f"({reason(exc)}).") from exc
            return self._read(Path(text), text, text_columns)
        raise ParameterError(message("source", "a Spark DataFrame, a Parquet/CSV path, a "
                                     "SQL query, a table name or a pandas, Polars or Arrow "
                                     "table", type(source).__name__))

    def _read(self, path: Path, text: str,
              text_columns: tuple[str, ...] = ()) -> DataFrame:
        owner = common.source_owner()
        lower = text.lower()
        is_glob = any(ch in text for ch in "*?[")
        # hdfs://, s3a://, file:/ ...: checked by Spark itself (a URI without a CSV suffix is
        # read as a Parquet file or directory)
        is_uri = re.match(r"^[A-Za-z][A-Za-z0-9+.-]+:/", text) is not None
        if not is_glob and not is_uri and not path.exists():
            raise common.missing_file(text)
        if not is_uri:
            common.check_not_empty(path, text)
        reader = self.spark.read
        try:
            if lower.endswith(common.CSV_SUFFIXES):
                sep = "\t" if ".tsv" in lower else ","
                line = self._first_line(text)
                if line is not None:  # else no such file: Spark's own error below
                    common.csv_header(next(csv.reader([line], delimiter=sep), []))
                df = reader.csv(text, header=True, inferSchema=True, sep=sep)
                as_text = set(text_columns) & set(df.columns)
                if as_text:  # the inferred schema, with the identifier columns as text
                    schema = T.StructType([
                        T.StructField(f.name, T.StringType() if f.name in as_text
                                      else f.dataType, True) for f in df.schema.fields])
                    df = self.spark.read.schema(schema).csv(text, header=True, sep=sep)
            elif lower.endswith(common.PARQUET_SUFFIXES) or is_uri or is_glob or path.is_dir():
                df = spark_times.read_parquet(self.spark, text)  # also nanosecond timestamps
            else:
                raise DataError(f"{owner}: cannot tell the format of {text!r} "
                                "(expected .csv, .tsv, .parquet, .pq or a Parquet directory).")
        except SPARK_ERRORS as exc:
            raise DataError(f"{owner}: cannot read {text!r}: {reason(exc)}") from exc
        return df

    def _first_line(self, text: str) -> str | None:
        """The first line of the (first) file at ``text`` (a file, directory or glob), read on
        the driver through Hadoop's FileSystem and its codec (``.gz``): a few calls, no Spark
        job. ``""`` for a file without lines; None when no file is there."""
        sc: Any = self.spark.sparkContext
        jvm, conf = sc._jvm, sc._jsc.hadoopConfiguration()
        hpath = jvm.org.apache.hadoop.fs.Path(text)
        fs = hpath.getFileSystem(conf)
        files = []
        for status in fs.globStatus(hpath) or []:
            listed = fs.listStatus(status.getPath()) if status.isDirectory() else [status]
            files += [str(f.getPath().toString()) for f in listed if f.isFile()
                      and not f.getPath().getName().startswith(("_", "."))]
        if not files:
            return None
        first = jvm.org.apache.hadoop.fs.Path(min(files))
        stream = fs.open(first)
        codec = jvm.org.apache.hadoop.io.compress.CompressionCodecFactory(conf).getCodec(first)
        if codec is not None:
            stream = codec.createInputStream(stream)
        reader = jvm.java.io.BufferedReader(jvm.java.io.InputStreamReader(stream, "UTF-8"))
        try:
            return str(reader.readLine() or "")
        finally:
            reader.close()

    # -- helpers ---------------------------------------------------------------------------
    @staticmethod
    def _type(df: DataFrame, column: str) -> Any:
        if column not in df.columns:
            raise column_error(df, column)
        ty = df.schema[column].dataType
        if isinstance(ty, T.ArrayType | T.StructType | T.MapType):
            raise common.nested_error(column)
        return ty

    @staticmethod
    def _is_empty(df: DataFrame) -> bool:
        return len(df.limit(1).collect()) == 0

    def _key(self, df: DataFrame, column: str) -> Any:
        """Keys of an id column (an item, a group) by the one rule of every engine
        (:func:`~dpfreq.engines.columns.id_key`): long for integers that fit 64 signed bits,
        the id's text otherwise (an integer's decimal text); null for nulls. A type that holds
        no id is refused naming it, unless the source has no rows."""
        ty = self._type(df, column)
        key = id_key(ty.simpleString())
        if key is None and not self._is_empty(df):
            raise id_error(ty.simpleString().upper(), column)
        return F.col(f"`{column}`").cast("long" if key == "integer" else "string")

    def _time(self, df: DataFrame, time: str) -> tuple[Any, str, Any]:
        """(time as long, null for nulls, NaN and non-integral values; time_kind; flag of
        non-integral, infinite or out-of-range values)."""
        ty = self._type(df, time)
        col = F.col(f"`{time}`")
        if isinstance(ty, _INT_TYPES):
            return col.cast("long"), "integer", F.lit(False)
        if isinstance(ty, T.DateType):
            return (F.unix_date(col).cast("long") * F.lit(86_400_000_000), "timestamp_us",
                    F.lit(False))
        if isinstance(ty, T.TimestampType):  # an instant: its epoch, in every zone
            return F.unix_micros(col), "timestamp_us", F.lit(False)
        if isinstance(ty, T.TimestampNTZType):  # zone-less: its wall clock as UTC
            return spark_times.ntz_micros(col), "timestamp_us", F.lit(False)
        if isinstance(ty, _FLOAT_TYPES):
            is_nan = F.isnan(col) if isinstance(ty, T.FloatType | T.DoubleType) else F.lit(False)
            ok = ~is_nan & (F.abs(col) < F.lit(9.2e18)) & (col == F.round(col, 0))
            return F.when(ok, col.cast("long")), "integer", ~is_nan & ~ok
        if self._is_empty(df):
            return F.lit(None).cast("long"), "integer", F.lit(False)
        raise common.data_error(time, common.TIME_RULE, f"type {ty.simpleString().upper()}")

    def _events(self, df: DataFrame, item: str, time: str) -> tuple[DataFrame, str]:
        """The events ``(k, t, f)`` (key, time, non-integral flag) and the time_kind."""
        key = self._key(df, item)
        texpr, kind, frac = self._time(df, time)
        return df.select(key.alias("k"), texpr.alias("t"), frac.alias("f")), kind

    @staticmethod
    def _event_checks() -> list[Any]:
        """Aggregates counting rows, non-null keys and times and non-integral times."""
        return [F.count(F.lit(1)).alias("n"), F.count("k").alias("ni"),
                F.count("t").alias("nt"), F.count(F.when(F.col("f"), 1)).alias("nf")]

    # -- protocol --------------------------------------------------------------------------
    @public_errors("SparkEngine.item_counts")
    def item_counts(self, source: Any, *, item: str) -> base.ItemCounts:
        """Exact number of rows per distinct value of column ``item`` (``groupBy``)."""
        common.check_column_name(item, "item")
        df = self.dataframe(source, text_columns=(item,))
        key = self._key(df, item)
        res = _to_numpy(df.groupBy(key.alias("k")).agg(F.count(F.lit(1)).alias("c")),
                        {"k": item})
        return common.finish_item_counts(res["k"], res["c"])

    @public_errors("SparkEngine.count_of_counts")
    def count_of_counts(self, source: Any, *, item: str,
                        max_count: int | None = None) -> base.Prevalences:
        """Exact prevalences of the per-item counts, clamped at ``max_count``."""
        common.check_column_name(item, "item")
        max_count = common.check_max_count(max_count)
        df = self.dataframe(source, text_columns=(item,))
        key = self._key(df, item)
        per_item = df.groupBy(key.alias("k")).agg(F.count(F.lit(1)).alias("c"))
        per_item = per_item.select(
            (F.col("c") if max_count is None else F.least(F.col("c"), F.lit(max_count)))
            .alias("v"), F.col("k").isNull().cast("int").alias("null_key"))
        res = _to_numpy(per_item.groupBy("v").agg(F.count(F.lit(1)).alias("p"),
                                                  F.max("null_key").alias("anynull")))
        if res["anynull"].size and res["anynull"].max() > 0:
            raise common.null_error(item)
        order = np.argsort(res["v"])
        return base.Prevalences(counts=res["v"][order].astype(np.int64),
                                prevalences=res["p"][order].astype(np.int64))

    def _sql(self, df: DataFrame, build: Any) -> dict[str, NDArray[Any]]:
        """Run the :class:`~dpfreq.engines.sql.Statement` ``build(view)`` on ``df`` (registered
        as a temporary view) and collect its final SELECT. Each step becomes a temporary view
        of a fresh name; the steps the statement reads several times are persisted (memory,
        spilling to disk) so that Spark computes them once and every later step reads the same
        rows. Spark SQL only: the executors run no Python."""
        func = public_caller()
        prefix = f"dpfreq_{uuid.uuid4().hex[:12]}_"
        source = prefix + "src"
        df.createOrReplaceTempView(source)
        views, cached = [source], []
        try:
            steps, final = build(source).named(prefix)
            reused = set(build(source).reused)
            try:
                for name, view, select in steps:
                    step = self.spark.sql(select)
                    if name in reused:
                        step = step.persist(StorageLevel.MEMORY_AND_DISK)
                        cached.append(step)
                    step.createOrReplaceTempView(view)
                    views.append(view)
                out = self.spark.sql(final)
            except SPARK_ERRORS as exc:
                raise DataError(f"{func} failed in Spark: {reason(exc)}") from exc
            return _to_numpy(out)
        finally:
            for step in cached:
                step.unpersist()
            for view in views:
                self.spark.catalog.dropTempView(view)

    @public_errors("SparkEngine.grouped_count_of_counts")
    def grouped_count_of_counts(self, source: Any, request: base.CountRequest
                                ) -> base.GroupedPrevalences:
        """Per-group prevalences after the bounding, in one Spark SQL statement
        (:func:`dpfreq.engines.sql.count_sql`)."""
        req, n = check_count_request(request)
        names, m, key_hex = check_grouping(req.grouping, req.item)
        group = req.grouping.column
        df = self.dataframe(source, text_columns=(req.item, group))
        raw = df.select(self._key(df, req.item).alias("k"),
                        self._key(df, group).cast("string").alias("g"))
        res = self._sql(raw, lambda v: count_sql(SPARK, f"SELECT k, g FROM {v}", names, m,
                                                 key_hex, n, req.per_item))
        return finish_counts(res, req, names)

    @public_errors("SparkEngine.summaries")
    def summaries(self, source: Any, request: base.SummaryRequest) -> base.Summaries:
        """The summaries of ``request`` in one Spark SQL statement
        (:func:`dpfreq.engines.sql.summaries_sql`): filter, periods, bounding and every
        summary run as SQL on the executors (no Python there: executors need no dpfreq);
        only the summed entries and a few counts are collected."""
        req = check_summary_request(request)
        grouping = req.grouping
        text = (req.item,) + ((grouping.column,) if grouping is not None else ())
        df = self.dataframe(source, text_columns=text)
        texpr, kind, frac = self._time(df, req.time)
        common.check_time_kind(kind, req.buckets, req.time)
        cols = [self._key(df, req.item).alias("k"), texpr.alias("t"), frac.alias("f")]
        names, m, key_hex = None, None, ""
        if grouping is not None:
            names, m, key_hex = check_grouping(grouping, req.item, (req.time,))
            if names is None:
                raise ParameterError(message("groups", "a public list for summaries "
                                             "(select the groups first)", None))
            cols.append(self._key(df, grouping.column).cast("string").alias("g"))
        raw = df.select(*cols)
        period = spark_period_sql(req.buckets)
        res = self._sql(raw, lambda v: summaries_sql(SPARK, f"SELECT * FROM {v}", period, req,
                                                     names, m, key_hex))
        return finish_summaries(res, req, names)

    @public_errors("SparkEngine.occurrence_times")
    def occurrence_times(self, source: Any, *, item: str, time: str,
                         k_max: int | None = None) -> base.OccurrenceTimes:
        """Per-item sorted event times; with ``k_max`` only each item's first ``k_max``
        (``row_number()`` over ``Window.partitionBy(item).orderBy(time)`` on the executors).
        The projected events are persisted, so the checks and the collect read the source
        once."""
        common.check_column_name(item, "item")
        common.check_column_name(time, "time")
        k_max = common.check_k_max(k_max)
        df = self.dataframe(source, text_columns=(item,))
        projected, kind = self._events(df, item, time)
        with _persisted(projected) as events:
            row = _agg_row(events, [*self._event_checks(), F.countDistinct("k").alias("nd")])
            n, ni, nt, nf, nd = (int(row[c] or 0) for c in ("n", "ni", "nt", "nf", "nd"))
            common.check_event_counts(item, time, n, ni, nt + nf, nf)
            if n == 0:
                z = np.zeros(0, dtype=np.int64)
                return base.OccurrenceTimes(item_index=z, times=z.copy(), n_items=0, n_events=0,
                                            time_kind=kind)
            ev = events.select("k", "t")
            if k_max is not None:
                w = Window.partitionBy("k").orderBy("t")
                ev = (ev.withColumn("rn", F.row_number().over(w))
                      .where(F.col("rn") <= k_max).drop("rn"))
            res = _to_numpy(ev.orderBy("k", "t"), {"k": item, "t": time})
        keys, times = res["k"], res["t"].astype(np.int64)
        return common.finish_occurrence_times(common.sorted_codes(keys), times, n_items=nd,
                                              n_events=n, time_kind=kind, k_max=None,
                                              presorted=True)

    def tables(self) -> Any:
        """ε-free table operations on this session for values keyed by a public integer domain
        (:class:`dpfreq.engines.spark.tables.SparkTables`: domain tables built on the
        executors, counts added by a join, reductions to small histograms, Parquet files)."""
        from dpfreq.engines.spark.tables import SparkTables

        return SparkTables(self)

    @public_errors("SparkEngine.report_sums")
    def report_sums(self, source: Any, *, param_id: str | None,
                    interval_counts: tuple[int, ...]) -> base.ReportSums:
        """Validate longitudinal reports on the executors and sum them per (order, interval).

        See :meth:`dpfreq.engines.base.Engine.report_sums`; the rules are in
        :mod:`dpfreq.engines.reports`.
        """
        from dpfreq.engines.spark.reports import spark_report_sums

        return spark_report_sums(self, source, param_id=param_id,
                                 interval_counts=interval_counts)
