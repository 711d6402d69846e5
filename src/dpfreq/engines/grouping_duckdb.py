"""Contribution bounding over groups and per-group count-of-counts in DuckDB SQL.

The same rule as :mod:`dpfreq.engines.grouping_memory` (which states it and why it is
uniform), computed in one query where the data lives: filter to the listed groups, count rows
per (item, group), keep each item's ``m`` pairs of smallest ``md5`` rank, count-of-counts per
group.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpfreq.engines import _common as common
from dpfreq.engines.grouping_memory import SEP, GroupedPrevalences, check_group_args

__all__ = ["duckdb_grouped_count_of_counts"]


def _literal(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def duckdb_grouped_count_of_counts(engine: Any, source: Any, *, item: str, group: str,
                                   groups: Any, max_groups_per_item: int, hash_key: bytes,
                                   max_count: int) -> GroupedPrevalences:
    """Bound each item to ``m`` groups and count-of-counts per group (one DuckDB query)."""
    func = "DuckDBEngine.grouped_count_of_counts"
    group, names, m, key_hex, n = check_group_args(item, group, groups, max_groups_per_item,
                                                   hash_key, max_count, func)
    rel = engine.relation(source, func, text_columns=(item, group))
    k = engine._key_expr(rel, item, func)
    g = engine._key_expr(rel, group, func)
    listed = "(" + ", ".join(f"({_literal(x)}, {i})" for i, x in enumerate(names)) + ")"
    sep = _literal(SEP)
    sql = (
        f"WITH raw AS (SELECT CAST({k} AS VARCHAR) AS k, CAST({g} AS VARCHAR) AS g "
        f"FROM dpfreq_src), "
        f"nulls AS (SELECT count(*) FILTER (WHERE k IS NULL) AS nk, "
        f"count(*) FILTER (WHERE g IS NULL) AS ng FROM raw), "
        f"listed(g, gi) AS (VALUES {listed[1:-1]}), "
        f"pairs AS (SELECT raw.k, listed.g, listed.gi, count(*) AS c FROM raw "
        f"JOIN listed ON raw.g = listed.g GROUP BY ALL), "
        f"kept AS (SELECT gi, c FROM pairs QUALIFY row_number() OVER (PARTITION BY k ORDER BY "
        f"substr(md5({_literal(key_hex)} || {sep} || k || {sep} || g), 1, 16), g) <= {m}) "
        f"SELECT gi, least(c, {n}) AS v, count(*) AS p, "
        f"(SELECT nk FROM nulls) AS nk, (SELECT ng FROM nulls) AS ng "
        f"FROM kept GROUP BY 1, 2 "
        f"UNION ALL SELECT -1, 0, 0, nk, ng FROM nulls ORDER BY 1, 2")
    res = engine._run(rel, sql, func)
    gi = np.asarray(res["gi"], dtype=np.int64)
    nk, ng = np.asarray(res["nk"], dtype=np.int64), np.asarray(res["ng"], dtype=np.int64)
    if nk.size and nk.max() > 0:
        raise common.null_error(func, item)
    if ng.size and ng.max() > 0:
        raise common.null_error(func, group)
    body = gi >= 0
    return GroupedPrevalences(groups=names, group_index=gi[body],
                              counts=np.asarray(res["v"], dtype=np.int64)[body],
                              prevalences=np.asarray(res["p"], dtype=np.int64)[body])
