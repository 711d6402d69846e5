"""Grouped per-item reductions on Spark: filter, periods and bounding on the executors.

The rule of :mod:`dpfreq.engines.grouping_windows` (which states it): the projected events
(item key, group, time, period, listed-group index) are persisted; one aggregation checks the
columns and counts the listed-group events outside the range; the (item, group) pairs of
in-range events are ranked by the keyed ``md5`` of :mod:`dpfreq.engines.grouping_memory`
(``row_number()`` over a window per item) and each item keeps ``m``; the kept events are
hash-partitioned by item and reduced per (group, item) in numpy inside ``mapInArrow`` (as
:meth:`SparkEngine.reduce_items`); only the summed ``(group, slot, key, w)`` rows are collected.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pyspark.sql import Window
from pyspark.sql import functions as F

from dpfreq.engines import _common as common
from dpfreq.engines.base import ItemReducer, TimeBuckets
from dpfreq.engines.grouping_spark import spark_pair_rank
from dpfreq.engines.grouping_windows import (
    GroupedReduction,
    check_grouped_reduce_args,
    empty_reduction,
    sum_grouped,
)
from dpfreq.engines.periods import spark_period_sql

__all__ = ["spark_grouped_reduce_items"]

_PARTITION_EVENTS = 1 << 22


def _partition_reducer(reducer: ItemReducer, horizon: int) -> Any:
    """The ``mapInArrow`` function: the (group, key, period) rows of one partition (every event
    of an item is in its key's partition), keys dictionary-encoded, reduced per (group, item)
    by :func:`~dpfreq.engines.grouping_windows.reduce_grouped`."""

    def run(batches: Any) -> Any:
        import pyarrow as pa
        import pyarrow.compute as pc

        from dpfreq.engines.grouping_windows import reduce_grouped

        parts = [b for b in batches if b.num_rows]
        if not parts:
            return
        tbl = pa.Table.from_batches(parts)
        gi = np.asarray(tbl.column(0).to_numpy(), dtype=np.int64)
        codes = pc.dictionary_encode(tbl.column(1)).combine_chunks().indices
        codes_np = np.asarray(codes.to_numpy(zero_copy_only=False), dtype=np.int64)
        periods = np.asarray(tbl.column(2).to_numpy(), dtype=np.int64)
        g, s, k, w = reduce_grouped(gi, codes_np, periods, reducer, horizon)
        yield pa.RecordBatch.from_arrays([pa.array(a, pa.int64()) for a in (g, s, k, w)],
                                         names=["gi", "slot", "key", "w"])

    return run


def _kept(ev: Any, m: int | None, key_hex: str) -> Any:
    """The events of the pairs each item keeps (all of them without a bound)."""
    if m is None:
        return ev
    pairs = ev.select("k", "g", "gi").distinct()
    rank = spark_pair_rank(key_hex, F.col("k").cast("string"))
    w = Window.partitionBy("k").orderBy(rank, F.col("g"))
    kept = pairs.withColumn("r", F.row_number().over(w)).where(F.col("r") <= m)
    return ev.join(kept.select("k", "gi"), ["k", "gi"])


def spark_grouped_reduce_items(engine: Any, source: Any, *, item: str, time: str, group: str,
                               groups: Any, max_groups_per_item: int | None, hash_key: Any,
                               buckets: TimeBuckets, reducer: ItemReducer,
                               drop_out_of_range: bool = False, collect: Any,
                               agg_row: Any, persisted: Any) -> GroupedReduction:
    """Grouped :meth:`reduce_items` on Spark (see the module); ``collect``, ``agg_row`` and
    ``persisted`` are the Spark engine's collector, one-row aggregate and persisting context
    (its own helpers, so that failures read as every other Spark job's)."""
    func = "SparkEngine.grouped_reduce_items"
    names, m, key_hex = check_grouped_reduce_args(item, time, group, groups, max_groups_per_item,
                                                  hash_key, buckets, func)
    df = engine.dataframe(source, func, text_columns=(item, group))
    texpr, kind, frac = engine._time(df, time, func)
    common.check_time_kind(kind, buckets, time, func)
    raw = df.select(engine._key(df, item, func).alias("k"),
                    engine._key(df, group, func).cast("string").alias("g"),
                    texpr.alias("t"), frac.alias("f"))
    period = F.expr(spark_period_sql(buckets))
    listed = engine.spark.createDataFrame([(x, i) for i, x in enumerate(names)],
                                          "g string, gi long")
    bad = (F.col("p") < 1) | (F.col("p") > int(buckets.horizon))
    in_listed = F.col("gi").isNotNull()
    aggs = [*engine._event_checks(), F.count("g").alias("ng"), F.count("gi").alias("nl"),
            F.count(F.when(in_listed & bad, 1)).alias("nbad")]
    projected = raw.withColumn("p", period).join(F.broadcast(listed), "g", "left")
    with persisted(projected) as events:
        row = agg_row(events, aggs, func)
        n, ni, nt, nf, ng, nl, n_bad = (int(row[c] or 0)
                                        for c in ("n", "ni", "nt", "nf", "ng", "nl", "nbad"))
        common.check_event_counts(func, item, time, n, ni, nt + nf, nf)
        if ng < n:
            raise common.null_error(func, group)
        n_in = nl - n_bad
        if n_bad and not drop_out_of_range:
            return empty_reduction(names, n_out_of_range=n_bad)
        if n_in == 0:
            return empty_reduction(names, n_out_of_range=n_bad)
        ev = _kept(events.where(in_listed & ~bad).select("k", "g", "gi", "p"), m, key_hex)
        setting = str(engine.spark.conf.get("spark.sql.shuffle.partitions") or "1")
        n_parts = max(int(setting) if setting.isdigit() else 1, -(-n_in // _PARTITION_EVENTS))
        out = (ev.select("gi", "k", "p").repartition(n_parts, "k")
               .mapInArrow(_partition_reducer(reducer, int(buckets.horizon)),
                           "gi long, slot long, key long, w long")
               .groupBy("gi", "slot", "key").agg(F.sum("w").alias("w")))
        res = collect(out, func)
    g, s, k, w = sum_grouped(*(np.asarray(res[c], dtype=np.int64)
                               for c in ("gi", "slot", "key", "w")))
    return GroupedReduction(groups=names, group_index=g, slots=s, keys=k, weights=w,
                            n_events=n_in, n_out_of_range=n_bad)
