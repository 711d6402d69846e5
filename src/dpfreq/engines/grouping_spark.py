"""Contribution bounding over groups and per-group count-of-counts on Spark.

The same rule as :mod:`dpfreq.engines.grouping_memory` (which states it and why it is
uniform), on the executors: filter to the listed groups (all with ``groups=None``), count rows
per (item, group), keep each item's ``m`` pairs of smallest ``md5`` rank (none dropped with
``max_groups_per_item=None``) (``row_number()`` over a window per item), then
count-of-counts per group. Only the per-group prevalences are collected.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from pyspark.sql import Window
from pyspark.sql import functions as F

from dpfreq.engines import _common as common
from dpfreq.engines.grouping_memory import SEP, GroupedPrevalences, check_group_args

__all__ = ["spark_grouped_count_of_counts", "spark_pair_rank"]


def spark_pair_rank(key_hex: str, item: Any) -> Any:
    """The bounding rank of (item, column ``g``) in Spark (``item`` a string column):
    :func:`~dpfreq.engines.grouping_memory.pair_rank`'s 16 hex digits."""
    return F.substring(F.md5(F.concat_ws(SEP, F.lit(key_hex), item, F.col("g"))), 1, 16)


def spark_grouped_count_of_counts(engine: Any, source: Any, *, item: str, group: str,
                                  groups: Any, max_groups_per_item: int | None,
                                  hash_key: bytes, max_count: int | None,
                                  collect: Callable[..., dict[str, Any]]) -> GroupedPrevalences:
    """Bound each item to ``m`` groups and count-of-counts per group (Spark); ``collect``
    brings a small DataFrame back as numpy columns (the Spark engine's collector)."""
    func = "SparkEngine.grouped_count_of_counts"
    group, names, m, key_hex, n = check_group_args(item, group, groups, max_groups_per_item,
                                                   hash_key, max_count, func)
    df = engine.dataframe(source, func, text_columns=(item, group))
    raw = df.select(engine._key(df, item, func).cast("string").alias("k"),
                    engine._key(df, group, func).cast("string").alias("g"))
    def n_null(col: str) -> Any:
        return F.coalesce(F.sum(F.col(col).isNull().cast("long")), F.lit(0)).alias(f"n{col}")

    nulls = collect(raw.agg(n_null("k"), n_null("g")), func)
    if nulls["nk"].size and (nulls["nk"][0] or 0) > 0:
        raise common.null_error(func, item)
    if nulls["ng"].size and (nulls["ng"][0] or 0) > 0:
        raise common.null_error(func, group)
    if names is None:  # every group of the data (names private until selected)
        pairs = raw.where(F.col("g").isNotNull()).withColumn("gi", F.lit(0).cast("long"))
    else:
        listed = engine.spark.createDataFrame([(x, i) for i, x in enumerate(names)],
                                              "g string, gi long")
        pairs = raw.join(F.broadcast(listed), "g")
    pairs = pairs.groupBy("k", "g", "gi").agg(F.count(F.lit(1)).alias("c"))
    if m is not None:
        rank = spark_pair_rank(key_hex, F.col("k"))
        w = Window.partitionBy("k").orderBy(rank, F.col("g"))
        pairs = pairs.withColumn("r", F.row_number().over(w)).where(F.col("r") <= m)
    value = F.col("c") if n is None else F.least(F.col("c"), F.lit(n))
    res = collect(pairs.groupBy("g", "gi", value.alias("v")).agg(
        F.count(F.lit(1)).alias("p")), func)
    gi = np.asarray(res["gi"], dtype=np.int64)
    v = np.asarray(res["v"], dtype=np.int64)
    p = np.asarray(res["p"], dtype=np.int64)
    if names is None:
        present, inv = np.unique(np.asarray(res["g"], dtype=object).astype(str),
                                 return_inverse=True)
        gi = inv.reshape(-1).astype(np.int64)
        names = tuple(str(x) for x in present)
    order = np.lexsort((v, gi))
    return GroupedPrevalences(groups=names, group_index=gi[order], counts=v[order],
                              prevalences=p[order])
