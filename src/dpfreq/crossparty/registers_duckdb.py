"""Register frequencies of a log in DuckDB: one SQL query over one scan of the source.

Impressions per user (``GROUP BY`` the user column in its own type; rows outside the period or
campaigns are not counted) and the keyed hash of each distinct user in SQL (``sha256`` of the
secret prefix and the id's text, as :class:`~dpfreq.crossparty.vid.VidHash` defines it); one
row per sampled user — its register and capped count — is fetched, and the capped sum per
register is a :func:`numpy.bincount` (faster than a second ``GROUP BY``, measured). The secret
prefix travels in the query text to the connection (in process) and never appears in an error
message.
"""

from __future__ import annotations

from typing import Any

import duckdb
import numpy as np
from numpy.typing import NDArray

from dpfreq.crossparty.vid import VidHash
from dpfreq.engines import column_error
from dpfreq.errors import DataError, public_caller

__all__ = ["duckdb_registers"]

_INTEGER = {"tinyint", "smallint", "integer", "bigint", "hugeint", "utinyint", "usmallint",
            "uinteger", "ubigint", "uhugeint"}
_TEXT = {"varchar"}
_LABELS = {"enum"}  # a pandas categorical or a DuckDB ENUM: its labels, as text
_TIME = {"date", "timestamp", "timestamp_s", "timestamp_ms", "timestamp_ns",
         "timestamp with time zone", "timestamptz", "timestamptz_ns"}
_NULL_USERS, _OUTSIDE = -1, -2


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _quote_text(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _types(rel: duckdb.DuckDBPyRelation) -> dict[str, str]:
    func = public_caller()
    try:
        return {c: str(t.id).lower() for c, t in zip(rel.columns, rel.types, strict=True)}
    except duckdb.Error as exc:
        raise DataError(f"source of {func}: DuckDB cannot read its columns "
                        f"({type(exc).__name__}).") from None


def _typed(types: dict[str, str], column: str, role: str, allowed: set[str],
           rule: str) -> str:
    func = public_caller()
    if types[column] not in allowed:  # every column of the spec is there (duckdb_registers)
        raise DataError(f"{role} column {column!r} of {func} must hold {rule}; got type "
                        f"{types[column].upper()}.")
    return types[column]


def _query(types: dict[str, str], spec: Any, vh: VidHash, K: int) -> str:
    user_type = _typed(types, spec.user, "user", _INTEGER | _TEXT | _LABELS,
                       "integers or text")
    user = _quote_ident(spec.user)  # grouped in its own type, written as text after
    text = "u" if user_type in _TEXT else "CAST(u AS VARCHAR)"
    cond, null_time = "TRUE", "0"
    if spec.time is not None:
        time_type = _typed(types, spec.time, "time", _INTEGER | _TIME,
                           "integers or timestamps")
        t = _quote_ident(spec.time)
        zoned = "tz" in time_type or "zone" in time_type
        texpr = (f"CAST({t} AS HUGEINT)" if time_type in _INTEGER else
                 f"epoch_us(CAST({t} AS {'TIMESTAMPTZ' if zoned else 'TIMESTAMP'}))")
        start, end = spec.period
        cond = f"({texpr} >= {start} AND {texpr} < {end})"
        null_time = f"count(*) FILTER (WHERE {t} IS NULL)"
    if spec.campaign is not None:
        _typed(types, spec.campaign, "campaign", _INTEGER | _TEXT | _LABELS,
               "integers or text")
        listed = ", ".join(_quote_text(c) for c in spec.campaigns)
        cond += f" AND CAST({_quote_ident(spec.campaign)} AS VARCHAR) IN ({listed})"
    vid = f"CAST(('0x' || substr(sha256('{vh.prefix}' || {text}), 1, 15)) AS BIGINT)"
    sampled = "TRUE" if (vh.lo, vh.hi) == (0, 2**60) else f"v >= {vh.lo} AND v < {vh.hi}"
    if cond == "TRUE":  # no filter: a plain count per user, no null times to count
        counts, times, keep = "count(*) AS c", "", ""
    else:
        counts = f"count(*) FILTER (WHERE {cond}) AS c"
        times, keep = f", {null_time} AS nt", "WHERE c > 0 OR u IS NULL OR nt > 0"
    # per user: its register (-1: the null user; -2: outside the sampling interval, kept for
    # its null times) and its count
    return f"""
SELECT CASE WHEN u IS NULL THEN {_NULL_USERS} WHEN {sampled} THEN v % {vh.registers}
            ELSE {_OUTSIDE} END AS r, c{", nt" if times else ""} FROM (
    SELECT u, c{", nt" if times else ""}, {vid} AS v FROM (
        SELECT {user} AS u, {counts}{times} FROM dpfreq_src GROUP BY 1) {keep})
"""


def duckdb_registers(rel: duckdb.DuckDBPyRelation, spec: Any, vh: VidHash,
                     max_frequency: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``(registers, values)`` of the non-empty registers of a DuckDB relation (``spec``: a
    :class:`~dpfreq.crossparty.registers.LogSpec`)."""
    func = public_caller()
    types = _types(rel)
    for column in (spec.user, spec.time, spec.campaign):
        if column is not None and column not in types:
            raise column_error(rel, column)
    sql = _query(types, spec, vh, max_frequency)
    try:
        result = rel.query("dpfreq_src", sql)
        res = result.fetchnumpy() if result is not None else {}
    except duckdb.Error as exc:  # the query text holds the secret prefix: never shown
        raise DataError(f"{func} failed in DuckDB ({type(exc).__name__}).") from None
    regs = np.asarray(res.get("r", []), dtype=np.int64)
    if (regs == _NULL_USERS).any():
        raise DataError(f"user column {spec.user!r} of {func} holds missing values (null).")
    if np.asarray(res.get("nt", []), dtype=np.int64).sum():
        raise DataError(f"time column {spec.time!r} of {func} holds missing values (null).")
    kept = regs >= 0
    capped = np.minimum(np.asarray(res.get("c", []), dtype=np.int64)[kept], max_frequency)
    capped = capped.astype(np.float64)
    sums = np.bincount(regs[kept], weights=capped, minlength=vh.registers)
    nonzero = np.flatnonzero(sums)
    return nonzero.astype(np.int64), np.minimum(sums[nonzero], max_frequency).astype(np.int64)
