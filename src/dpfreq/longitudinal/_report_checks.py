"""Validation of a collected longitudinal reports file where the data is (futurerand.md §7.3).

:func:`dpfreq.longitudinal.aggregate_reports_file` rejects a whole file with one
:class:`~dpfreq.errors.DataError` on the first failed rule, in this order:

1. the file is readable and has the columns ``user, h, j, bit``;
2. h, j and bit hold 64-bit integers (integer or boolean columns; floating values without a
   fractional part; text matching ``[+-]?[0-9]{1,18}`` up to surrounding white space);
3. no null user, h, j or bit;
4. every ``param_id`` (optional column) is the served one (the smallest other one is named,
   a null one first);
5. h in ``0..log d``; j in ``1..d/2^h`` for rows with a valid h; bit in {0, 1};
6. no duplicate (user, h, j); no user reporting two orders h.

Counts in the messages are of rows, except rule 6 (groups, users). One function per engine
kind runs the same rules with the same messages: :func:`check_reports_duckdb` (a local file,
read by an in-process DuckDB connection) and :func:`check_reports_spark` (conditional counts in
one ``agg`` on the executors, then one ``groupBy`` pipeline partitioned by user for rule 6; only
a handful of numbers reach the driver). Both return the number of users per order h (every
user in the file counts as enrolled with its reported order).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.errors import DataError

from .client import ProtocolParams

__all__ = [
    "CheckedReports",
    "check_local_file",
    "check_reports_duckdb",
    "check_reports_spark",
    "is_glob",
    "is_uri",
    "missing_file",
]

REQUIRED = ("user", "h", "j", "bit")
VALUE_COLUMNS = ("h", "j", "bit")
#: integer literal accepted in a text column (18 digits always fit in 64 bits)
INT_TEXT = r"\s*[+-]?[0-9]{1,18}\s*"
_TWO_63 = 9.223372036854775808e18
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:/")


@dataclass(frozen=True)
class CheckedReports:
    """Outcome of a passed validation.

    Attributes
    ----------
    users_per_order : numpy.ndarray of int64
        Distinct users per order h (length ``params.orders``).
    frame : duckdb relation or pyspark DataFrame
        The validated reports as int64 columns ``h, j, bit``, on the engine that checked them
        (for ``report_sums``).
    """

    users_per_order: NDArray[np.int64]
    frame: Any


# -- shared rules and messages ------------------------------------------------------------------
def is_uri(text: str) -> bool:
    """``hdfs://``, ``s3a://``, ``file:/`` ...: left to the engine that reads it."""
    return _URI.match(text) is not None


def is_glob(text: str) -> bool:
    return any(ch in text for ch in "*?[")


def missing_file(label: str, hint: str = "") -> DataError:
    return DataError(f"reports file {label!r} does not exist.{hint}")


def check_local_file(label: str) -> None:
    """A path without a scheme or glob must exist on the driver and, if a file, not be empty
    (both engines then fail alike, before reading)."""
    if is_uri(label) or is_glob(label):
        return
    path = Path(label)
    if not path.exists():
        raise missing_file(label)
    if path.is_file() and path.stat().st_size == 0:
        raise _unreadable(label, "the file is empty (not even a header).")


def _unreadable(label: str, reason: str) -> DataError:
    return DataError(f"cannot read reports file {label!r}: {reason}")


def _check_columns(columns: list[str]) -> None:
    for c in REQUIRED:
        if c not in columns:
            raise DataError(f"reports file must have columns user, h, j, bit; missing {c!r}.")


def _not_integers(reason: str) -> DataError:
    return DataError(f"reports file columns h, j and bit must be integers: {reason}")


def _raise_non_integers(counts: dict[str, int]) -> None:
    for c in VALUE_COLUMNS:
        if counts.get(c):
            raise _not_integers(f"column {c!r} has {counts[c]} value(s) that are not 64-bit "
                                "integers.")


def _raise_row_rules(nulls: int, unknown: list[str | None], bad: tuple[int, int, int],
                     params: ProtocolParams) -> None:
    """Rules 3-5 in order; ``unknown`` holds the param_id to name (empty if all are known)."""
    if nulls:
        raise DataError(f"rejected: {nulls} reports with a null user, h, j or bit.")
    if unknown:
        raise DataError(f"rejected: unknown parameter id {unknown[0]!r} (this aggregator serves "
                        f"{params.param_id!r}).")
    d, orders = params.padded_periods, params.orders
    if bad[0]:
        raise DataError(f"rejected: {bad[0]} reports with order h outside 0..{orders - 1}.")
    if bad[1]:
        raise DataError(f"rejected: {bad[1]} reports with interval j out of range 1..d/2^h for "
                        f"their order (d = {d}).")
    if bad[2]:
        raise DataError(f"rejected: {bad[2]} reports with bit not in {{0, 1}}.")


def _raise_group_rules(dups: int, multi: int) -> None:
    if dups:
        raise DataError(f"rejected: {dups} duplicate reports (same user, h and j).")
    if multi:
        raise DataError(f"rejected: {multi} users report more than one order h (a user is "
                        "enrolled with one order).")


# -- DuckDB -------------------------------------------------------------------------------------
_DUCK_FLOAT = re.compile(r"^(FLOAT|REAL|DOUBLE|DECIMAL.*|NUMERIC.*)$")
_DUCK_TEXT = re.compile(r"^(VARCHAR.*|TEXT|STRING)$")


def _duck_lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@contextmanager
def check_reports_duckdb(path: Path, label: str,
                         params: ProtocolParams) -> Iterator[CheckedReports]:
    """Rules 1-6 on a local CSV/Parquet file or Parquet directory with an in-process DuckDB.

    A context manager: inside it, ``frame`` is a DuckDB relation of the validated int64
    columns ``h, j, bit`` (materialized once; its connection closes on exit).
    """
    import duckdb

    con = duckdb.connect()
    try:
        nh = _duckdb_rules(con, path, label, params)
        yield CheckedReports(users_per_order=nh, frame=con.sql("SELECT h, j, bit FROM r"))
    finally:
        con.close()


def _duckdb_rules(con: Any, path: Path, label: str, params: ProtocolParams) -> NDArray[np.int64]:
    import duckdb

    if path.is_dir():
        src = f"read_parquet({_duck_lit((path / '**' / '*.parquet').as_posix())})"
    else:
        reader = "read_parquet" if path.suffix in (".parquet", ".pq") else "read_csv_auto"
        src = f"{reader}({_duck_lit(path.as_posix())})"
    try:
        desc = con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()
    except duckdb.Error as exc:
        raise _unreadable(label, str(exc).splitlines()[0]) from None
    types = {row[0]: str(row[1]).upper() for row in desc}
    _check_columns(list(types))
    checks = []
    for c in VALUE_COLUMNS:
        q = f'"{c}"'
        if _DUCK_FLOAT.match(types[c]):
            checks.append((c, f"{q} IS NOT NULL AND (NOT isfinite(CAST({q} AS DOUBLE)) OR "
                              f"abs(CAST({q} AS DOUBLE)) >= {_TWO_63!r} OR {q} <> trunc({q}))"))
        elif _DUCK_TEXT.match(types[c]):
            checks.append((c, f"{q} IS NOT NULL AND NOT regexp_full_match({q}, "
                              f"{_duck_lit(INT_TEXT)})"))
    if checks:
        sel = ", ".join(f"count(*) FILTER (WHERE {cond})" for _, cond in checks)
        try:
            got = con.execute(f"SELECT {sel} FROM {src}").fetchone() or ()
        except duckdb.Error as exc:
            raise _unreadable(label, str(exc).splitlines()[0]) from None
        _raise_non_integers({c: int(n) for (c, _), n in zip(checks, got, strict=True)})
    pid_col = ', CAST("param_id" AS VARCHAR) AS param_id' if "param_id" in types else ""
    try:
        con.execute(
            f'CREATE TEMP TABLE r AS SELECT CAST("user" AS VARCHAR) AS u, '
            f'CAST("h" AS BIGINT) AS h, CAST("j" AS BIGINT) AS j, '
            f'CAST("bit" AS BIGINT) AS bit{pid_col} FROM {src}'
        )
    except duckdb.Error as exc:
        raise _not_integers(str(exc).splitlines()[0]) from None
    d, orders = params.padded_periods, params.orders
    row = con.execute(
        "SELECT count(*) FILTER (WHERE u IS NULL OR h IS NULL OR j IS NULL OR bit IS NULL), "
        f"count(*) FILTER (WHERE h < 0 OR h >= {orders}), "
        f"count(*) FILTER (WHERE h >= 0 AND h < {orders} AND "
        f"(j < 1 OR j > ({d} >> CAST(h AS INTEGER)))), "
        "count(*) FILTER (WHERE bit NOT IN (0, 1)) FROM r"
    ).fetchone() or (0, 0, 0, 0)
    unknown: list[str | None] = []
    if pid_col and not row[0]:
        unknown = [r[0] for r in con.execute(
            "SELECT param_id FROM r WHERE param_id IS DISTINCT FROM ? "
            "ORDER BY param_id NULLS FIRST LIMIT 1", [params.param_id]).fetchall()]
    _raise_row_rules(int(row[0]), unknown, (int(row[1]), int(row[2]), int(row[3])), params)
    dup = con.execute(
        "SELECT count(*) FROM (SELECT u FROM r GROUP BY u, h, j HAVING count(*) > 1)"
    ).fetchone()
    multi = con.execute(
        "SELECT count(*) FROM (SELECT u FROM r GROUP BY u HAVING count(DISTINCT h) > 1)"
    ).fetchone()
    _raise_group_rules(int(dup[0]) if dup else 0, int(multi[0]) if multi else 0)
    nh = np.zeros(orders, dtype=np.int64)
    for h, c in con.execute("SELECT h, count(DISTINCT u) FROM r GROUP BY h").fetchall():
        nh[int(h)] = int(c)
    return nh


# -- Spark --------------------------------------------------------------------------------------
def _spark_frame(engine: Any, source: Any, label: str, func: str) -> Any:
    """The source as a DataFrame through the engine's public reader; a read failure becomes
    "cannot read reports file ..." (the engine's reason without its "source of ..." prefix)."""
    try:
        return engine.dataframe(source, func)
    except DataError as exc:
        text = str(exc)
        for prefix in (f"source of {func}: cannot read {label!r}: ", f"source of {func}: "):
            if text.startswith(prefix):
                text = text[len(prefix):]
                break
        raise _unreadable(label, text) from None


def check_reports_spark(engine: Any, source: Any, label: str,
                        params: ProtocolParams) -> CheckedReports:
    """Rules 1-6 on a Spark DataFrame or a path/URI read by a Spark engine, on the executors.

    Two jobs: one ``agg`` of conditional counts (rules 2-5) and, if those pass, one pipeline
    ``repartition(user) → groupBy(user, h, j) → groupBy(user) → groupBy(order)`` (rule 6 and
    the users per order; a single shuffle of the rows). ``engine`` is a
    :class:`dpfreq.engines.spark.SparkEngine` (only its public ``dataframe`` is used).
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    # the Spark engine's own error classes and one-line reasons (Java root cause included)
    from dpfreq.engines.spark import _SPARK_ERRORS as errors
    from dpfreq.engines.spark import _one_line as _first_line

    func = "aggregate_reports_file"
    df = _spark_frame(engine, source, label, func)
    _check_columns(list(df.columns))
    integral = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.BooleanType)
    value: dict[str, Any] = {}
    nonint: dict[str, Any] = {}
    for c in VALUE_COLUMNS:
        ty = df.schema[c].dataType
        col = F.col(f"`{c}`")
        if isinstance(ty, integral):
            value[c] = col.cast("long")
        elif isinstance(ty, T.FloatType | T.DoubleType | T.DecimalType):
            dbl = col.cast("double")
            nonint[c] = col.isNotNull() & (F.isnan(dbl) | (F.abs(dbl) >= F.lit(_TWO_63))
                                           | (col != F.floor(col)))
            value[c] = col.try_cast("long")
        elif isinstance(ty, T.StringType):
            nonint[c] = col.isNotNull() & ~col.rlike(f"^{INT_TEXT}$")
            value[c] = F.trim(col).try_cast("long")
        else:
            raise _not_integers(f"column {c!r} has type {ty.simpleString().upper()}.")
    uty = df.schema["user"].dataType
    user = F.col("`user`")
    if not isinstance(uty, (*integral, T.StringType)):
        user = user.cast("string")  # the DuckDB engine compares users as text
    h, j, b = value["h"], value["j"], value["bit"]
    d, orders = params.padded_periods, params.orders

    def count_if(cond: Any, name: str) -> Any:
        return F.count(F.when(cond, 1)).alias(name)

    h_ok = (h >= 0) & (h < orders)
    j_max = F.element_at(F.array(*[F.lit(d >> k) for k in range(orders)]),
                         F.when(h_ok, h).cast("int") + 1)
    aggs = [count_if(nonint[c], f"nonint_{c}") for c in nonint]
    aggs += [count_if(user.isNull() | h.isNull() | j.isNull() | b.isNull(), "nulls"),
             count_if((h < 0) | (h >= orders), "bad_h"),
             count_if(h_ok & ((j < 1) | (j > j_max)), "bad_j"),
             count_if(~b.isin(0, 1), "bad_bit")]
    if "param_id" in df.columns:
        pid = F.col("`param_id`").cast("string")
        aggs += [count_if(pid.isNull(), "pid_nulls"),
                 F.min(F.when(pid != F.lit(params.param_id), pid)).alias("pid_other")]
    try:
        row = df.agg(*aggs).collect()[0].asDict()
    except errors as exc:
        raise _unreadable(label, _first_line(exc)) from exc
    _raise_non_integers({c: int(row[f"nonint_{c}"]) for c in nonint})
    unknown: list[str | None] = []
    if row.get("pid_nulls"):
        unknown = [None]
    elif row.get("pid_other") is not None:
        unknown = [row["pid_other"]]
    _raise_row_rules(int(row["nulls"]), unknown,
                     (int(row["bad_h"]), int(row["bad_j"]), int(row["bad_bit"])), params)
    # rule 6 and users per order: hash-partitioned by user once, then grouped within partitions
    per_report = (df.select(user.alias("u"), h.alias("h"), j.alias("j")).repartition("u")
                  .groupBy("u", "h", "j").agg(F.count(F.lit(1)).alias("c")))
    per_user = per_report.groupBy("u").agg(count_if(F.col("c") > 1, "dups"),
                                           F.min("h").alias("h"), F.max("h").alias("hmax"))
    per_order = per_user.groupBy(
        F.when(F.col("h") == F.col("hmax"), F.col("h")).otherwise(F.lit(-1)).alias("hk")
    ).agg(F.count(F.lit(1)).alias("users"), F.sum("dups").alias("dups"))
    try:
        rows = per_order.collect()
    except errors as exc:
        raise _unreadable(label, _first_line(exc)) from exc
    dups = sum(int(r["dups"] or 0) for r in rows)
    multi = sum(int(r["users"]) for r in rows if r["hk"] == -1)
    _raise_group_rules(dups, multi)
    nh = np.zeros(orders, dtype=np.int64)
    for r in rows:
        nh[int(r["hk"])] = int(r["users"])
    frame = df.select(h.alias("h"), j.alias("j"), b.alias("bit"))
    return CheckedReports(users_per_order=nh, frame=frame)
