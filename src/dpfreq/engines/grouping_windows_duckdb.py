"""Grouped per-item reductions in DuckDB: filter, periods and bounding in SQL.

The rule of :mod:`dpfreq.engines.grouping_windows` (which states it): the events (item key,
group, time, period, listed-group index) are projected once into a temporary table; one query
checks the columns and counts the listed-group events outside the range; the (item, group)
pairs of in-range events of listed groups are ranked by the keyed ``md5`` of
:mod:`dpfreq.engines.grouping_memory` and each item keeps its ``m`` (a ``dense_rank`` window
over the events of the items with more than ``m`` groups only,
:func:`~dpfreq.engines.grouping_duckdb.bounded_sql`); the kept events are
fetched sorted by (group, item, period) in passes over the items split by ``hash(item)`` (as
:meth:`DuckDBEngine.reduce_items` does) and reduced per group in numpy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpfreq.engines import _common as common
from dpfreq.engines.base import ItemReducer, TimeBuckets
from dpfreq.engines.grouping_duckdb import bounded_sql, sql_literal
from dpfreq.engines.grouping_windows import (
    GroupedReduction,
    check_grouped_reduce_args,
    empty_reduction,
    reduce_grouped_sorted,
    sum_grouped,
)
from dpfreq.engines.periods import duckdb_period_sql

__all__ = ["duckdb_grouped_reduce_items"]

_EVENTS_PER_PASS = 1 << 23


def _kept_sql(table: str, bad: str, m: int | None, key_hex: str, where: str) -> str:
    """SELECT of the kept in-range events ``(gi, k, p)`` of listed groups, sorted. The pairs of
    an item are ordered by (rank, group), unique per pair, so the ``dense_rank`` of an event is
    its pair's place in that order: an event is kept when its pair is among the item's ``m``
    first (one window over the events, no join back)."""
    ev = f"SELECT k, g, gi, p FROM {table} WHERE gi IS NOT NULL AND NOT {bad}{where}"
    if m is None:
        return f"SELECT gi, k, p FROM ({ev}) ORDER BY gi, k, p"
    return (bounded_sql(ev, m, key_hex, f"SELECT DISTINCT k, g FROM ({ev})", "dense_rank",
                        "gi, k, p") + " ORDER BY 1, 2, 3")


def duckdb_grouped_reduce_items(engine: Any, source: Any, *, item: str, time: str, group: str,
                                groups: Any, max_groups_per_item: int | None, hash_key: Any,
                                buckets: TimeBuckets, reducer: ItemReducer,
                                drop_out_of_range: bool = False) -> GroupedReduction:
    """Grouped :meth:`reduce_items` in DuckDB (see the module)."""
    func = "DuckDBEngine.grouped_reduce_items"
    names, m, key_hex = check_grouped_reduce_args(item, time, group, groups, max_groups_per_item,
                                                  hash_key, buckets, func)
    rel = engine.relation(source, func, text_columns=(item, group))
    select, kind = engine._events(rel, item, time, func)
    common.check_time_kind(kind, buckets, time, func)
    gexpr = f"CAST({engine._key_expr(rel, group, func)} AS VARCHAR)"
    select = select.replace(" FROM dpfreq_src", f", {gexpr} AS g FROM dpfreq_src", 1)
    listed = ", ".join(f"({sql_literal(x)}, {i})" for i, x in enumerate(names))
    projected = (f"SELECT e.k, e.g, e.t, e.f, {duckdb_period_sql(buckets)} AS p, l.gi FROM "
                 f"({select}) e LEFT JOIN (VALUES {listed}) l(g, gi) ON e.g = l.g")
    bad = f"(p < 1 OR p > {int(buckets.horizon)})"
    parts = []
    with engine._events_table(rel, projected, func) as table:
        stats = engine._check_events(rel, table, item, time, func,
                                     f", count(g) AS ng, count(*) FILTER (WHERE gi IS NOT NULL "
                                     f"AND {bad}) AS nbad, count(gi) AS nl")
        if int(stats["ng"][0]) < int(stats["n"][0]):
            raise common.null_error(func, group)
        n_bad, n_in = int(stats["nbad"][0]), int(stats["nl"][0]) - int(stats["nbad"][0])
        if n_bad and not drop_out_of_range:
            return empty_reduction(names, n_out_of_range=n_bad)
        passes = max(1, -(-n_in // _EVENTS_PER_PASS))
        for b in range(passes if n_in else 0):
            where = f" AND hash(k) % {passes} = {b}" if passes > 1 else ""
            res = engine._run(rel, _kept_sql(table, bad, m, key_hex, where), func)
            gi = np.asarray(res["gi"], dtype=np.int64)
            if not gi.size:
                continue
            keys = np.asarray(res["k"])
            new = np.zeros(gi.size, dtype=np.int64)
            new[1:] = (gi[1:] != gi[:-1]) | (keys[1:] != keys[:-1])
            parts.append(reduce_grouped_sorted(gi, np.cumsum(new), np.asarray(
                res["p"], dtype=np.int64), reducer))
    if not parts:
        return empty_reduction(names, n_events=n_in, n_out_of_range=n_bad)
    g, s, k, w = sum_grouped(*(np.concatenate(v) for v in zip(*parts, strict=True)))
    return GroupedReduction(groups=names, group_index=g, slots=s, keys=k, weights=w,
                            n_events=n_in, n_out_of_range=n_bad)
