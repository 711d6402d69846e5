"""Validated sums of longitudinal reports on Spark (rules in :mod:`dpfreq.engines.reports`).

The source's rows are cast once (identifiers as strings, values as long plus one flag per value
column that is not an integer) and persisted, so that every check and the sums see the same
rows; the checks run on the executors as one ``agg`` of conditional counts and one grouped
pipeline (duplicates and devices with two orders); only counts and the per-(order, interval)
sums reach the driver.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import dpfreq.engines.reports as rules
from dpfreq.engines.base import ReportSums

__all__ = ["spark_report_sums"]


def _errors() -> tuple[type[BaseException], ...]:
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    return (PySparkException, Py4JError)


def _value(df: Any, column: str) -> tuple[Any, Any]:
    """(long value or null, "not an integer" flag) of one value column."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    ty = df.schema[column].dataType
    col = F.col(f"`{column}`")
    if isinstance(ty, T.ByteType | T.ShortType | T.IntegerType | T.LongType | T.BooleanType):
        return col.cast("long"), F.lit(False)
    if isinstance(ty, T.FloatType | T.DoubleType | T.DecimalType):
        dbl = col.cast("double")
        flag = col.isNotNull() & (F.isnan(dbl) | (F.abs(dbl) >= F.lit(rules.TWO_63))
                                  | (dbl != F.floor(dbl)))
        return F.when(flag, F.lit(None)).otherwise(dbl.cast("long")), flag
    if isinstance(ty, T.StringType):
        flag = col.isNotNull() & ~col.rlike(f"^{rules.INT_TEXT}$")
        return F.when(flag, F.lit(None)).otherwise(F.trim(col).cast("long")), flag
    raise rules.report_error(f"column {column!r} must hold integers.")


def spark_report_sums(engine: Any, source: Any, *, param_id: str | None,
                      interval_counts: tuple[int, ...]) -> ReportSums:
    """The reports rules and sums on a Spark engine (``engine.dataframe`` reads the source)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    param_id, interval_counts = rules.check_report_args(param_id, interval_counts)
    errors = _errors()
    df = engine.dataframe(source, text_columns=rules.ID_COLUMNS)
    rules.check_columns(list(df.columns))
    cols = [F.col("`device`").cast("string").alias("u")]
    flags = []
    for c in rules.VALUE_COLUMNS:
        value, flag = _value(df, c)
        cols.append(value.alias(f"v_{c}"))
        flags.append(flag.alias(f"n_{c}"))
    pid = (F.col("`param_id`").cast("string") if "param_id" in df.columns
           else F.lit(None).cast("string"))
    rows = df.select(*cols, *flags, pid.alias("pid")).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        return _checked(rows, param_id, interval_counts, "param_id" in df.columns)
    except errors as exc:
        raise rules.unreadable_source(exc) from None
    finally:
        rows.unpersist()


def _checked(rows: Any, param_id: str | None, sizes: tuple[int, ...],
             has_pid: bool) -> ReportSums:
    from pyspark.sql import functions as F

    def count_if(cond: Any, name: str) -> Any:
        return F.count(F.when(cond, 1)).alias(name)

    orders = len(sizes)
    h, j, b = F.col("v_order"), F.col("v_interval"), F.col("v_bit")
    h_ok = (h >= 0) & (h < orders)
    jmax = F.element_at(F.array(*[F.lit(s) for s in sizes]), F.when(h_ok, h).cast("int") + 1)
    aggs = [count_if(F.col(f"n_{c}"), f"n_{c}") for c in rules.VALUE_COLUMNS]
    aggs += [count_if(F.col("u").isNull() | h.isNull() | j.isNull() | b.isNull(), "nulls"),
             count_if(~h_ok, "bad_h"), count_if(h_ok & ((j < 1) | (j > jmax)), "bad_j"),
             count_if(~b.isin(0, 1), "bad_b")]
    if has_pid and param_id is not None:
        aggs.append(count_if(~F.col("pid").eqNullSafe(F.lit(param_id)), "pid"))
    row = rows.agg(*aggs).collect()[0].asDict()
    rules.raise_row_rules({c: int(row[f"n_{c}"]) for c in rules.VALUE_COLUMNS}, int(row["nulls"]),
                          int(row.get("pid", 0)), (int(row["bad_h"]), int(row["bad_j"]),
                                             int(row["bad_b"])), orders)
    per_device = (rows.groupBy("u", "v_order", "v_interval").agg(F.count(F.lit(1)).alias("c"))
                  .groupBy("u").agg(F.max("c").alias("cmax"), F.min("v_order").alias("hmin"),
                                    F.max("v_order").alias("hmax")))
    groups = per_device.agg(count_if(F.col("cmax") > 1, "dups"),
                            count_if(F.col("hmin") != F.col("hmax"), "multi")).collect()[0]
    rules.raise_group_rules(int(groups["dups"]), int(groups["multi"]))
    devices = np.zeros(orders, dtype=np.int64)
    for r in per_device.groupBy("hmin").count().collect():
        devices[int(r["hmin"])] = int(r["count"])
    sums = rows.groupBy("v_order", "v_interval").agg(
        F.sum(b).alias("s"), F.count(F.lit(1)).alias("c")).collect()
    arr = np.array([(r["v_order"], r["v_interval"], r["s"], r["c"]) for r in sums],
                   dtype=np.int64).reshape(-1, 4)
    return rules.finish_reports(arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3], devices)
