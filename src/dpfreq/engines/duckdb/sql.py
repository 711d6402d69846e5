"""What the DuckDB engine needs to know about DuckDB itself: source suffixes and SQL shapes,
how each column type is treated, the NaN test, one-line error reasons that do not quote the
data, and fetched columns as plain arrays."""

from __future__ import annotations

import re
from typing import Any

import duckdb
import numpy as np
from numpy.typing import NDArray

import dpfreq.engines._common as common
from dpfreq.engines._common import CSV_SUFFIXES, PARQUET_SUFFIXES

__all__ = [
    "CSV_SUFFIXES",
    "IDENT",
    "INT64_LIMIT",
    "PARQUET_SUFFIXES",
    "SQL_START",
    "column_category",
    "is_nan_sql",
    "plain_column",
    "reads_text_file",
    "reason",
]

_INT_TYPES = {"tinyint", "smallint", "integer", "bigint", "utinyint", "usmallint", "uinteger",
              "ubigint"}
#: time zone aware types are instants: their epoch is the same in every zone (UTC)
_TIME_TYPES = {"timestamp", "timestamp with time zone", "date", "timestamp_s", "timestamp_ms",
               "timestamp_ns", "timestamptz_ns"}
_FLOAT_TYPES = {"float", "double", "decimal"}
_NESTED_TYPES = {"list", "struct", "map", "array", "union"}
SQL_START = re.compile(r"^\s*(select|with|from|values|\(|table\b|pivot|unpivot)", re.IGNORECASE)
IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*){0,2}$")
#: errors about names, syntax and files, not about values in the data: shown in full
_SCHEMA_ERRORS = (duckdb.CatalogException, duckdb.BinderException, duckdb.ParserException,
                  duckdb.IOException)
INT64_LIMIT = "9223372036854775807"


def column_category(type_id: str) -> str:
    """How every engine treats a DuckDB column type (``rel.types[i].id``): ``"integer"``,
    ``"float"`` (NaN possible), ``"nested"`` (refused), ``"time"`` or ``"text"``."""
    ty = type_id.lower()
    if ty in _INT_TYPES:
        return "integer"
    if ty in _FLOAT_TYPES:
        return "float"
    if ty in _NESTED_TYPES:
        return "nested"
    if ty in _TIME_TYPES:
        return "time"
    return "text"


def is_nan_sql(col: str) -> str:
    """SQL test for NaN. Not ``isnan``: DuckDB folds it to false from Parquet statistics that
    do not count NaN."""
    return f"(NOT isfinite({col}) AND NOT isinf({col}))"


def _one_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type name when it has none)."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def reason(exc: BaseException) -> str:
    """DuckDB's reason in one line. Errors about values (conversions, CSV rows) may quote the
    data, so by default only their kind is shown; ``DPFREQ_DEBUG=1`` shows the whole line."""
    line = _one_line(exc)
    if common.debug_enabled() or isinstance(exc, _SCHEMA_ERRORS):
        return line
    kind = line.split(":", 1)[0] if ":" in line else type(exc).__name__
    return f"{kind} (DuckDB's message may quote the data; DPFREQ_DEBUG=1 shows it)"


def plain_column(arr: Any, column: str) -> NDArray[Any]:
    """A fetched result column as a plain ndarray; nulls are a DataError."""
    if isinstance(arr, np.ma.MaskedArray):
        mask = np.ma.getmaskarray(arr)
        if mask.any():
            raise common.null_error(column, f"{int(mask.sum())} value(s)")
        return np.ma.getdata(arr)
    return np.asarray(arr)


def reads_text_file(rel: duckdb.DuckDBPyRelation) -> bool:
    """Whether the relation scans a CSV file (a ``READ_CSV`` operator in its plan), whose column
    names are a line of the file; True when the plan cannot be had (names are then not shown)."""
    try:
        return "READ_CSV" in rel.explain().upper()
    except duckdb.Error:
        return True
