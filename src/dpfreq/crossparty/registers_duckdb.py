"""Register frequencies of a log in DuckDB: one SQL query over one scan of the source.

Impressions per user (``GROUP BY`` the user column in its own type; rows outside the period or
campaigns are not counted) and the keyed hash of each distinct user in SQL (``sha256`` of the
secret prefix and the id's text, as :class:`~dpfreq.crossparty.vid.VidHash` defines it); one
row per sampled user — its register and capped count — is fetched, and the capped sum per
register is a :func:`numpy.bincount` (faster than a second ``GROUP BY``, measured). The secret
prefix travels in the query text to the connection (in process) and never appears in an error
message.

Integer columns include ``DECIMAL(p,0)`` (what DuckDB reads for an unsigned 64-bit or a decimal
Parquet column, and what a ``sum`` gives) — ids are their decimal text, as in Spark; a
``DECIMAL`` with a fraction is refused, as in Spark. The column checks are
:func:`checked_columns`, which the memory engine applies too when it reads a file or table
through DuckDB. A log with no rows has all-zero registers whatever its column types (a
header-only CSV has no types to read).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
from numpy.typing import NDArray

from dpfreq.crossparty.period_unit import check_time_kind
from dpfreq.crossparty.vid import VidHash
from dpfreq.engines import column_error, id_error, id_kind
from dpfreq.errors import DataError, public_caller

__all__ = ["checked_columns", "duckdb_registers", "log_columns"]

_TIME = {"date", "timestamp", "timestamp_s", "timestamp_ms", "timestamp_ns",
         "timestamp with time zone", "timestamptz", "timestamptz_ns"}
_IDS = ("integer", "text", "labels")
_TIMES = ("integer", "timestamp", "timestamptz")
_NULL_USERS, _OUTSIDE = -1, -2
_NONE = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _quote_text(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _type_name(ty: Any) -> str:
    """A column type's name: its id, with precision and scale for a DECIMAL (never an ENUM's
    labels: they are data)."""
    name = str(ty.id).lower()
    if name == "decimal":
        params = dict(ty.children)
        return f"decimal({params['precision']},{params['scale']})"
    return name


def _types(rel: duckdb.DuckDBPyRelation) -> dict[str, str]:
    func = public_caller()
    try:
        return {c: _type_name(t) for c, t in zip(rel.columns, rel.types, strict=True)}
    except duckdb.Error as exc:
        raise DataError(f"source of {func}: DuckDB cannot read its columns "
                        f"({type(exc).__name__}).") from None


def _is_empty(rel: duckdb.DuckDBPyRelation) -> bool:
    func = public_caller()
    try:
        first = rel.query("dpfreq_src", "SELECT 1 FROM dpfreq_src LIMIT 1")
        return first is None or not first.fetchall()
    except duckdb.Error as exc:
        raise DataError(f"{func} failed in DuckDB ({type(exc).__name__}).") from None


class _NoRows(Exception):
    """The log has no rows (raised instead of a column type error: nothing to count)."""


@dataclass(frozen=True)
class _Columns:
    """The checked kind of each column of a log: ``"integer"``, ``"text"`` or ``"labels"`` for
    the user and campaign, ``"integer"``, ``"timestamp"`` or ``"timestamptz"`` for the time."""

    user: str
    time: str | None
    campaign: str | None


def checked_columns(rel: duckdb.DuckDBPyRelation, spec: Any) -> _Columns | None:
    """The kinds of the log's columns under the one rule of every engine (see the module
    docstring), or None for a log with no rows whose columns are of other types (nothing to
    count). A missing column, or a column of another type in a log with rows, is one
    DataError."""
    types = _types(rel)
    try:
        user = _kind(types, spec.user, "user", _IDS, "integers or text", rel)
        time = None if spec.time is None else _kind(types, spec.time, "time", _TIMES,
                                                    "integers or timestamps", rel)
        campaign = None if spec.campaign is None else _kind(
            types, spec.campaign, "campaign", _IDS, "integers or text", rel)
    except _NoRows:
        return None
    if time is not None:
        check_time_kind(spec, time == "integer")
    return _Columns(user, time, campaign)


def _kind(types: dict[str, str], column: str, role: str, kinds: tuple[str, ...], rule: str,
          rel: duckdb.DuckDBPyRelation) -> str:
    func = public_caller()
    if column not in types:
        raise column_error(rel, column)
    ty = types[column]
    kind = id_kind(ty) or (  # integers (DECIMAL(p,0) too), text, an ENUM's labels
        "timestamptz" if ty in _TIME and ("tz" in ty or "zone" in ty) else
        "timestamp" if ty in _TIME else "")
    if kind in kinds:
        return kind
    if _is_empty(rel):  # no rows: no value of the wrong type to count
        raise _NoRows
    if kinds == _IDS:  # an id column: the one message of every engine
        raise id_error(ty.upper(), column)
    raise DataError(f"{role} column {column!r} of {func} must hold {rule}; got type "
                    f"{ty.upper()}.")


def _query(cols: _Columns, spec: Any, vh: VidHash) -> str:
    user = _quote_ident(spec.user)  # grouped in its own type, written as text after
    text = "u" if cols.user == "text" else "CAST(u AS VARCHAR)"
    cond, null_time = "TRUE", "0"
    if spec.time is not None:
        t = _quote_ident(spec.time)
        texpr = (f"CAST({t} AS HUGEINT)" if cols.time == "integer" else
                 f"epoch_us(CAST({t} AS "
                 f"{'TIMESTAMPTZ' if cols.time == 'timestamptz' else 'TIMESTAMP'}))")
        start, end = spec.period
        cond = f"({texpr} >= {start} AND {texpr} < {end})"
        null_time = f"count(*) FILTER (WHERE {t} IS NULL)"
    if spec.campaign is not None:
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
    cols = checked_columns(rel, spec)
    if cols is None:
        return _NONE
    sql = _query(cols, spec, vh)
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


#: period bounds lie in -2^62..2^62: integer times are clipped just outside, never wrapped
_CLIP = (-(2**62) - 1, 2**62)


def log_columns(engine: Any, rel: duckdb.DuckDBPyRelation, spec: Any) -> dict[str, Any]:
    """The log's columns as numpy arrays for the memory engine, checked as
    :func:`duckdb_registers` checks them: ids held as DECIMAL or 128-bit integers as their
    decimal text, integer times clipped to the range of periods (``engine``: the DuckDB engine
    that read ``rel``)."""
    names = list(dict.fromkeys(c for c in (spec.user, spec.time, spec.campaign)
                               if c is not None))
    cols = checked_columns(rel, spec)
    if cols is None:
        return {name: np.zeros(0, dtype=np.int64) for name in names}
    if cols.time == "integer" and spec.time != spec.user:
        t = _quote_ident(spec.time)
        clipped = (f"CAST(greatest(least(CAST({t} AS HUGEINT), {_CLIP[1]}), {_CLIP[0]}) "
                   f"AS BIGINT) AS {t}")
        rel = rel.project(", ".join(clipped if c == spec.time else _quote_ident(c)
                                    for c in names))
    text = (spec.user,) if spec.campaign is None else (spec.user, spec.campaign)
    return dict(engine.read_columns(rel, names, text_columns=text))
