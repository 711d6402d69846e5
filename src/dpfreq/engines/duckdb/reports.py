"""Validated sums of longitudinal reports with DuckDB (rules in :mod:`dpfreq.engines.reports`).

The source is read **once**: its rows are cast into a temporary table on the relation's
connection (identifiers as text, values as BIGINT plus one flag per value column that is not
an integer), every rule is checked on that table with a few aggregate queries, the sums are
computed from it, and the table is dropped. Only counts and the per-(order, interval) sums
reach this process.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import duckdb
import numpy as np

import dpfreq.engines.reports as rules
from dpfreq.engines._common import quote_ident, quote_literal
from dpfreq.engines.base import ReportSums

__all__ = ["duckdb_report_sums"]

_INTEGER = {"tinyint", "smallint", "integer", "bigint", "utinyint", "usmallint", "uinteger",
            "boolean"}
_FLOAT = {"float", "double", "decimal"}
_TEXT = {"varchar"}


def _value_expr(column: str, type_id: str) -> tuple[str, str]:
    """(BIGINT value or NULL, "not an integer" flag) of one value column."""
    q = quote_ident(column)
    if type_id in _INTEGER:
        return f"CAST({q} AS BIGINT)", "false"
    if type_id in _FLOAT:
        flag = (f"({q} IS NOT NULL AND (NOT isfinite(CAST({q} AS DOUBLE)) OR "
                f"abs(CAST({q} AS DOUBLE)) >= {rules.TWO_63!r} OR {q} <> trunc({q})))")
        return f"CASE WHEN {flag} THEN NULL ELSE CAST({q} AS BIGINT) END", flag
    if type_id in _TEXT:
        flag = f"({q} IS NOT NULL AND NOT regexp_full_match({q}, {quote_literal(rules.INT_TEXT)}))"
        return f"TRY_CAST(trim({q}) AS BIGINT)", flag
    if type_id in {"hugeint", "ubigint", "uhugeint"}:  # may exceed 64 bits
        return f"TRY_CAST({q} AS BIGINT)", f"({q} IS NOT NULL AND TRY_CAST({q} AS BIGINT) IS NULL)"
    raise rules.report_error(f"column {column!r} must hold integers.")


def duckdb_report_sums(engine: Any, source: Any, *, param_id: str | None,
                       interval_counts: tuple[int, ...]) -> ReportSums:
    """The reports rules and sums on a DuckDB engine (``engine.relation`` reads the source)."""
    param_id, interval_counts = rules.check_report_args(param_id, interval_counts)
    rel = engine.relation(source, text_columns=rules.ID_COLUMNS)
    columns = list(rel.columns)
    rules.check_columns(columns)
    types = {c: str(t.id).lower() for c, t in zip(columns, rel.types, strict=True)}
    exprs = {c: _value_expr(c, types[c]) for c in rules.VALUE_COLUMNS}
    pid = "CAST(param_id AS VARCHAR)" if "param_id" in columns else "NULL"
    table = f"dpfreq_reports_{uuid.uuid4().hex}"
    select = ", ".join([f"CAST({quote_ident('device')} AS VARCHAR) AS u",
                        *(f"{exprs[c][0]} AS v_{c}" for c in rules.VALUE_COLUMNS),
                        *(f"{exprs[c][1]} AS n_{c}" for c in rules.VALUE_COLUMNS),
                        f"{pid} AS pid"])
    try:
        rel.query("dpfreq_src", f"CREATE TEMP TABLE {table} AS SELECT {select} FROM dpfreq_src")
    except duckdb.Error as exc:
        raise rules.unreadable_source(exc) from None
    try:
        return _checked_sums(rel, table, param_id, interval_counts,
                             has_pid="param_id" in columns)
    finally:
        with contextlib.suppress(duckdb.Error):  # the connection may be closed meanwhile
            rel.query("dpfreq_src", f"DROP TABLE IF EXISTS {table}")


def _checked_sums(rel: Any, table: str, param_id: str | None, sizes: tuple[int, ...],
                  has_pid: bool) -> ReportSums:
    def run(sql: str) -> Any:
        try:
            return rel.query("dpfreq_src", sql).fetchall()
        except duckdb.Error as exc:
            raise rules.unreadable_source(exc) from None

    orders = len(sizes)
    jmax = "[" + ", ".join(str(s) for s in sizes) + "]"
    pid_rule = (f"count(*) FILTER (WHERE pid IS DISTINCT FROM {quote_literal(param_id)})"
                if has_pid and param_id is not None else "0")
    row = run(
        "SELECT count(*) FILTER (WHERE n_order), count(*) FILTER (WHERE n_interval), "
        "count(*) FILTER (WHERE n_bit), "
        "count(*) FILTER (WHERE u IS NULL OR v_order IS NULL OR v_interval IS NULL "
        f"OR v_bit IS NULL), {pid_rule}, "
        f"count(*) FILTER (WHERE v_order < 0 OR v_order >= {orders}), "
        f"count(*) FILTER (WHERE v_order >= 0 AND v_order < {orders} AND (v_interval < 1 OR "
        f"v_interval > {jmax}[v_order + 1])), "
        f"count(*) FILTER (WHERE v_bit NOT IN (0, 1)) FROM {table}")[0]
    rules.raise_row_rules({c: int(n) for c, n in zip(rules.VALUE_COLUMNS, row[:3], strict=True)},
                          int(row[3]), int(row[4]), (int(row[5]), int(row[6]), int(row[7])), orders)
    groups = run(
        "SELECT count(*) FILTER (WHERE cmax > 1), count(*) FILTER (WHERE hmin <> hmax) FROM "
        "(SELECT u, min(v_order) AS hmin, max(v_order) AS hmax, max(c) AS cmax FROM "
        f"(SELECT u, v_order, v_interval, count(*) AS c FROM {table} "
        "GROUP BY u, v_order, v_interval) GROUP BY u)")[0]
    rules.raise_group_rules(int(groups[0] or 0), int(groups[1] or 0))
    sums = run(f"SELECT v_order, v_interval, sum(v_bit), count(*) FROM {table} GROUP BY 1, 2")
    devices = np.zeros(orders, dtype=np.int64)
    for h, c in run(f"SELECT v_order, count(DISTINCT u) FROM {table} GROUP BY 1"):
        devices[int(h)] = int(c)
    arr = np.array(sums, dtype=np.int64).reshape(-1, 4)
    return rules.finish_reports(arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3], devices)
