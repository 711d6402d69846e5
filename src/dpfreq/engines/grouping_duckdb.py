"""Contribution bounding over groups and per-group count-of-counts in DuckDB SQL.

The same rule as :mod:`dpfreq.engines.grouping_memory` (which states it and why it is
uniform), computed in one query where the data lives: filter to the listed groups (or keep all
with ``groups=None``), count rows per (item, group), keep each item's ``m`` pairs of smallest
``md5`` rank (none dropped with ``max_groups_per_item=None``; the rank is computed only for
items with more than ``m`` groups, :func:`bounded_sql`), count-of-counts per group.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpfreq.engines import _common as common
from dpfreq.engines.grouping_memory import SEP, GroupedPrevalences, check_group_args

__all__ = ["bounded_sql", "duckdb_grouped_count_of_counts", "pair_rank_sql", "sql_literal"]


def sql_literal(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def pair_rank_sql(key_hex: str, item: str, group: str) -> str:
    """The bounding rank of an (item, group) pair in DuckDB SQL (text expressions ``item`` and
    ``group``): :func:`~dpfreq.engines.grouping_memory.pair_rank`'s 16 hex digits."""
    sep = sql_literal(SEP)
    return f"substr(md5({sql_literal(key_hex)} || {sep} || {item} || {sep} || {group}), 1, 16)"


def bounded_sql(rows: str, m: int, key_hex: str, pairs: str, window: str,
                columns: str) -> str:
    """The rows of ``rows`` (a SELECT with columns ``k`` and ``g``) whose (item, group) pair is
    among its item's ``m`` first by (keyed rank, group), computed only where needed: an item
    with at most ``m`` groups keeps all (no rank is computed for it), the others keep the rows
    of their ``m`` pairs of smallest :func:`pair_rank_sql` (``window``: ``row_number`` when
    ``rows`` has one row per pair, ``dense_rank`` when several). ``pairs`` is the SELECT of
    the distinct (k, g) pairs of ``rows``; ``columns`` the columns returned."""
    rank = pair_rank_sql(key_hex, "CAST(k AS VARCHAR)", "g")
    over = f"(SELECT k FROM ({pairs}) GROUP BY k HAVING count(*) > {m})"
    return (f"SELECT {columns} FROM ({rows}) ANTI JOIN {over} USING (k) UNION ALL "
            f"SELECT {columns} FROM (SELECT * FROM ({rows}) SEMI JOIN {over} USING (k)) "
            f"QUALIFY {window}() OVER (PARTITION BY k ORDER BY {rank}, g) <= {m}")


def duckdb_grouped_count_of_counts(engine: Any, source: Any, *, item: str, group: str,
                                   groups: Any, max_groups_per_item: int | None,
                                   hash_key: bytes,
                                   max_count: int | None) -> GroupedPrevalences:
    """Bound each item to ``m`` groups and count-of-counts per group (one DuckDB query)."""
    func = "DuckDBEngine.grouped_count_of_counts"
    group, names, m, key_hex, n = check_group_args(item, group, groups, max_groups_per_item,
                                                   hash_key, max_count, func)
    rel = engine.relation(source, func, text_columns=(item, group))
    k = engine._key_expr(rel, item, func)
    g = engine._key_expr(rel, group, func)
    if names is None:  # every group of the data (names private until selected): no join
        pairs = ("pairs AS (SELECT k, g, 0 AS gi, count(*) AS c FROM raw WHERE g IS NOT NULL "
                 "GROUP BY ALL)")
    else:
        listed = ", ".join(f"({sql_literal(x)}, {i})" for i, x in enumerate(names))
        pairs = (f"listed(g, gi) AS (VALUES {listed}), "
                 f"pairs AS (SELECT raw.k, listed.g, listed.gi, count(*) AS c FROM raw "
                 f"JOIN listed ON raw.g = listed.g GROUP BY ALL)")
    kept = ("SELECT g, gi, c FROM pairs" if m is None else
            bounded_sql("SELECT * FROM pairs", m, key_hex, "SELECT k, g FROM pairs",
                        "row_number", "g, gi, c"))
    value = "c" if n is None else f"least(c, {n})"
    # items keep their own type (the rank hashes their text, as the memory engine does)
    sql = (
        f"WITH raw AS (SELECT {k} AS k, CAST({g} AS VARCHAR) AS g "
        f"FROM dpfreq_src), "
        f"nulls AS (SELECT count(*) FILTER (WHERE k IS NULL) AS nk, "
        f"count(*) FILTER (WHERE g IS NULL) AS ng FROM raw), {pairs}, "
        f"kept AS ({kept}) "
        f"SELECT g, gi, {value} AS v, count(*) AS p, "
        f"(SELECT nk FROM nulls) AS nk, (SELECT ng FROM nulls) AS ng "
        f"FROM kept GROUP BY 1, 2, 3 "
        f"UNION ALL SELECT NULL, -1, 0, 0, nk, ng FROM nulls ORDER BY 2, 1, 3")
    res = engine._run(rel, sql, func)
    gi = np.asarray(res["gi"], dtype=np.int64)
    nk, ng = np.asarray(res["nk"], dtype=np.int64), np.asarray(res["ng"], dtype=np.int64)
    if nk.size and nk.max() > 0:
        raise common.null_error(func, item)
    if ng.size and ng.max() > 0:
        raise common.null_error(func, group)
    body = gi >= 0
    v = np.asarray(res["v"], dtype=np.int64)[body]
    p = np.asarray(res["p"], dtype=np.int64)[body]
    if names is None:
        text = np.asarray(res["g"], dtype=object)[body].astype(str)
        present, gi_all = np.unique(text, return_inverse=True)
        order = np.lexsort((v, gi_all.reshape(-1)))
        return GroupedPrevalences(groups=tuple(str(x) for x in present),
                                  group_index=gi_all.reshape(-1)[order].astype(np.int64),
                                  counts=v[order], prevalences=p[order])
    return GroupedPrevalences(groups=names, group_index=gi[body], counts=v, prevalences=p)
