"""Register frequencies of a log in Spark: DataFrame expressions run on the executors.

The same two aggregations as the DuckDB query (impressions per user, then the capped sum per
register), with the keyed hash as ``sha2`` of the secret prefix and the id's text (Spark's
``sha2`` of a string is SHA-256 of its UTF-8 bytes). Only the non-empty registers are
collected to the driver. The columns follow the rule of the DuckDB version
(:mod:`dpfreq.crossparty.registers_duckdb`): integers include ``DECIMAL(p,0)`` (Spark's type of
an unsigned 64-bit Parquet column), a ``DECIMAL`` with a fraction is refused, and a log with no
rows has all-zero registers whatever its column types. pyspark is imported when this runs,
never by ``import dpfreq``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.crossparty.period_unit import check_time_kind
from dpfreq.crossparty.vid import VidHash
from dpfreq.engines import column_error, id_error, id_kind
from dpfreq.errors import DataError, public_caller

__all__ = ["spark_registers"]

_NULL_USERS, _OUTSIDE = -1, -2


class _NoRows(Exception):
    """The log has no rows (raised instead of a column type error: nothing to count)."""


def _check_type(df: Any, column: str, role: str, allowed: tuple[type, ...] | None,
                rule: str) -> Any:
    """The column's type, when ``allowed`` (a DECIMAL only without a fraction, as in DuckDB;
    None: an id column, by the one rule of every engine, :func:`dpfreq.engines.id_kind`); a
    log with no rows passes whatever its types (:class:`_NoRows`)."""
    func = public_caller()
    from pyspark.sql import types as T

    if column not in df.columns:
        raise column_error(df, column)
    ty = df.schema[column].dataType
    if allowed is None:
        ok = id_kind(ty.simpleString()) in ("integer", "text")
    else:
        ok = isinstance(ty, allowed) and not (isinstance(ty, T.DecimalType) and ty.scale != 0)
    if ok:
        return ty
    if not df.limit(1).collect():  # no rows: no value of the wrong type to count
        raise _NoRows
    if allowed is None:  # an id column: the one message of every engine
        raise id_error(ty.simpleString().upper(), column)
    raise DataError(f"{role} column {column!r} of {func} must hold {rule}; got type "
                    f"{ty.simpleString().upper()}.")


def _conditions(df: Any, spec: Any) -> tuple[Any, Any]:
    """(the condition a row counts under, the indicator of a null time)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    integer = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.DecimalType)
    cond, null_time = F.lit(True), F.lit(0)
    if spec.time is not None:
        ty = _check_type(df, spec.time, "time", (*integer, T.TimestampType,
                                                 T.TimestampNTZType, T.DateType),
                         "integers or timestamps")
        check_time_kind(spec, isinstance(ty, integer))
        t = F.col(f"`{spec.time}`")
        if isinstance(ty, T.TimestampNTZType):  # naive: read as UTC
            t = F.unix_micros(F.to_utc_timestamp(t.cast("timestamp"), "UTC"))
        elif isinstance(ty, T.DateType):
            t = F.unix_micros(F.to_utc_timestamp(t.cast("timestamp_ntz").cast("timestamp"),
                                                 "UTC"))
        elif isinstance(ty, T.TimestampType):
            t = F.unix_micros(t)
        else:
            t = t.cast("decimal(38,0)")
        start, end = spec.period
        cond = (t >= F.lit(start)) & (t < F.lit(end))
        null_time = F.when(F.col(f"`{spec.time}`").isNull(), 1).otherwise(0)
    if spec.campaign is not None:
        _check_type(df, spec.campaign, "campaign", None, "integers or text")
        cond = cond & F.col(f"`{spec.campaign}`").cast("string").isin(list(spec.campaigns))
    return cond, null_time


def _user(df: Any, spec: Any) -> Any:
    from pyspark.sql import functions as F

    _check_type(df, spec.user, "user", None, "integers or text")
    return F.col(f"`{spec.user}`").cast("string")


def spark_registers(df: Any, spec: Any, vh: VidHash, max_frequency: int
                    ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``(registers, values)`` of the non-empty registers of a Spark DataFrame (``spec``: a
    :class:`~dpfreq.crossparty.registers.LogSpec`)."""
    func = public_caller()
    from pyspark.sql import functions as F

    try:
        user = _user(df, spec)
        cond, null_time = _conditions(df, spec)
    except _NoRows:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    users = df.select(user.alias("u"), F.when(cond, 1).otherwise(0).alias("k"),
                      null_time.alias("t")).groupBy("u").agg(
        F.sum("k").alias("c"), F.count(F.lit(1)).alias("n"), F.sum("t").alias("nt"))
    digest = F.sha2(F.concat(F.lit(vh.prefix), F.col("u")), 256)
    coord = F.conv(F.substring(F.col("d"), 1, 15), 16, 10).cast("long")
    register = F.pmod(coord, F.lit(vh.registers))
    # null users go to register -1, users outside the sampling interval to -2
    located = users.withColumn("d", digest).select(
        F.when(F.col("u").isNull(), F.lit(_NULL_USERS)).when(
            (coord >= F.lit(vh.lo)) & (coord < F.lit(vh.hi)), register).otherwise(
            F.lit(_OUTSIDE)).alias("r"),
        F.least(F.col("c"), F.lit(max_frequency)).alias("c"), "n", "nt")
    per_register = located.groupBy("r").agg(
        F.least(F.sum("c"), F.lit(max_frequency)).cast("long").alias("f"),
        F.sum("n").cast("long").alias("n"), F.coalesce(F.sum("nt"), F.lit(0)).cast(
            "long").alias("nt"))
    try:
        table = per_register.toArrow()
    except Exception as exc:  # the plan holds the secret prefix: never shown
        raise DataError(f"{func} failed in Spark ({type(exc).__name__}).") from None
    regs = np.asarray(table.column("r").to_numpy(), dtype=np.int64)
    values = np.asarray(table.column("f").to_numpy(), dtype=np.int64)
    rows = np.asarray(table.column("n").to_numpy(), dtype=np.int64)
    if rows[regs == _NULL_USERS].sum():
        raise DataError(f"user column {spec.user!r} of {func} holds missing values (null).")
    if np.asarray(table.column("nt").to_numpy(), dtype=np.int64).sum():
        raise DataError(f"time column {spec.time!r} of {func} holds missing values (null).")
    kept = regs >= 0
    return regs[kept], values[kept]
