"""Register frequencies of a log in DuckDB: one SQL query over one scan of the source.

Impressions per user (``GROUP BY`` user, the rows outside the period or campaigns filtered
first), the keyed hash of each distinct user in SQL (``sha256`` over the HMAC pads, as
:class:`~dpfreq.crossparty.vid.VidHash` defines it), then the capped sum per register. Only the
non-empty registers are fetched. The secret pads travel in the query text to the connection
(in process) and never appear in an error message.
"""

from __future__ import annotations

from typing import Any

import duckdb
import numpy as np
from numpy.typing import NDArray

from dpfreq.crossparty.vid import VidHash
from dpfreq.errors import DataError

__all__ = ["duckdb_registers"]

_INTEGER = {"tinyint", "smallint", "integer", "bigint", "hugeint", "utinyint", "usmallint",
            "uinteger", "ubigint", "uhugeint"}
_TEXT = {"varchar"}
_TIME = {"date", "timestamp", "timestamp_s", "timestamp_ms", "timestamp_ns",
         "timestamp with time zone", "timestamptz", "timestamptz_ns"}
_NULL_USERS, _NULL_TIMES = -1, -2


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _quote_text(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _types(rel: duckdb.DuckDBPyRelation, func: str) -> dict[str, str]:
    try:
        return {c: str(t.id).lower() for c, t in zip(rel.columns, rel.types, strict=True)}
    except duckdb.Error as exc:
        raise DataError(f"source of {func}: DuckDB cannot read its columns "
                        f"({type(exc).__name__}).") from None


def _typed(types: dict[str, str], column: str, role: str, allowed: set[str], func: str,
           rule: str) -> str:
    if column not in types:
        raise DataError(f"source of {func} has no column {column!r} (it has "
                        f"{', '.join(map(repr, types))}).")
    if types[column] not in allowed:
        raise DataError(f"{role} column {column!r} of {func} must hold {rule}; got type "
                        f"{types[column].upper()}.")
    return types[column]


def _query(types: dict[str, str], spec: Any, vh: VidHash, K: int, func: str) -> str:
    user_type = _typed(types, spec.user, "user", _INTEGER | _TEXT, func, "integers or text")
    u = _quote_ident(spec.user)
    user = u if user_type in _TEXT else f"CAST({u} AS VARCHAR)"
    cond, null_time = "TRUE", "0"
    if spec.time is not None:
        time_type = _typed(types, spec.time, "time", _INTEGER | _TIME, func,
                           "integers or timestamps")
        t = _quote_ident(spec.time)
        zoned = "tz" in time_type or "zone" in time_type
        texpr = (f"CAST({t} AS HUGEINT)" if time_type in _INTEGER else
                 f"epoch_us(CAST({t} AS {'TIMESTAMPTZ' if zoned else 'TIMESTAMP'}))")
        start, end = spec.period
        cond = f"({texpr} >= {start} AND {texpr} < {end})"
        null_time = f"count(*) FILTER (WHERE {t} IS NULL)"
    if spec.campaign is not None:
        _typed(types, spec.campaign, "campaign", _INTEGER | _TEXT, func, "integers or text")
        listed = ", ".join(_quote_text(c) for c in spec.campaigns)
        cond += f" AND CAST({_quote_ident(spec.campaign)} AS VARCHAR) IN ({listed})"
    inner = f"sha256(from_hex('{vh.ipad.hex()}') || encode(u))"
    digest = f"sha256(from_hex('{vh.opad.hex()}') || from_hex({inner}))"
    return f"""
WITH users AS (
    SELECT {user} AS u, count(*) FILTER (WHERE {cond}) AS c, {null_time} AS nt
    FROM dpfreq_src GROUP BY 1
), hashed AS (
    SELECT least(c, {K}) AS c, {digest} AS d FROM users WHERE u IS NOT NULL AND c > 0
), located AS (
    SELECT CAST(('0x' || substr(d, 16, 15)) AS BIGINT) % {vh.registers} AS r, c FROM hashed
    WHERE CAST(('0x' || substr(d, 1, 15)) AS BIGINT) >= {vh.lo}
      AND CAST(('0x' || substr(d, 1, 15)) AS BIGINT) < {vh.hi}
)
SELECT r, least(sum(c), {K}) AS f FROM located GROUP BY r
UNION ALL SELECT {_NULL_USERS}, count(*) FROM users WHERE u IS NULL
UNION ALL SELECT {_NULL_TIMES}, coalesce(sum(nt), 0) FROM users
"""


def duckdb_registers(rel: duckdb.DuckDBPyRelation, spec: Any, vh: VidHash, max_frequency: int,
                     func: str) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``(registers, values)`` of the non-empty registers of a DuckDB relation (``spec``: a
    :class:`~dpfreq.crossparty.registers.LogSpec`)."""
    sql = _query(_types(rel, func), spec, vh, max_frequency, func)
    try:
        result = rel.query("dpfreq_src", sql)
        res = result.fetchnumpy() if result is not None else {}
    except duckdb.Error as exc:  # the query text holds the secret pads: never shown
        raise DataError(f"{func} failed in DuckDB ({type(exc).__name__}).") from None
    regs = np.asarray(res.get("r", []), dtype=np.int64)
    values = np.asarray(res.get("f", []), dtype=np.int64)
    flags = regs < 0
    found = dict(zip(regs[flags].tolist(), values[flags].tolist(), strict=True))
    if found.get(_NULL_USERS, 0):
        raise DataError(f"user column {spec.user!r} of {func} holds missing values (null).")
    if found.get(_NULL_TIMES, 0):
        raise DataError(f"time column {spec.time!r} of {func} holds missing values (null).")
    return regs[~flags], values[~flags]
