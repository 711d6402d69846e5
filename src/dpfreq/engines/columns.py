"""The columns of a source as every engine reads them: the error for a column missing from a
source (one message from every engine), and the rule of an id column's type (:func:`id_kind`).

A CSV file's column names are its first line, which every engine reads as the header without
sniffing whether it is one; when the file has no header that line is data (user ids, times), so
the error names none of its fields. Every other source's names (Parquet, DataFrames, Arrow,
tables, mappings) are its schema and are listed. Whether a relation or DataFrame reads a CSV
file is asked of its plan (a DuckDB ``READ_CSV`` scan, a Spark ``csv``/``text`` relation), so a
filtered relation, a SQL query over a CSV file or a caller's own ``read_csv`` counts too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import dpfreq.engines._common as common
from dpfreq.errors import DataError

__all__ = ["column_error", "id_kind"]

_INTEGER = {"tinyint", "smallint", "int", "integer", "bigint", "hugeint", "utinyint",
            "usmallint", "uinteger", "ubigint", "uhugeint"}
_WHOLE_DECIMAL = re.compile(r"decimal\(\d+,\s*0\)")
_TEXT = re.compile(r"varchar|string|(var)?char\(\d+\)")


def id_kind(type_name: str) -> str | None:
    """How every engine reads an id column (a user, an item, a campaign) of a type.

    Parameters
    ----------
    type_name : str
        The column's type as DuckDB or Spark SQL spells it, any case (``"BIGINT"``,
        ``"decimal(20,0)"``, ``"VARCHAR"``, ``"string"``, ``"ENUM"``).

    Returns
    -------
    str or None
        ``"integer"`` for an integer type of any width or a ``DECIMAL(p,0)`` (an unsigned
        64-bit Parquet column as Spark reads it, a sum): the id is the integer, hashed and
        compared as its decimal text; ``"text"`` for text; ``"labels"`` for an ``ENUM`` (a
        pandas categorical): its labels, as text; None for any other type — a ``DECIMAL``
        with a fraction, a float, a time, a boolean, a nested type — which is no id (the
        caller refuses it, naming the type).

    Examples
    --------
    >>> [id_kind(t) for t in ("UBIGINT", "decimal(20,0)", "DECIMAL(10,2)", "string", "DOUBLE")]
    ['integer', 'integer', None, 'text', None]
    """
    name = type_name.strip().lower()
    if name in _INTEGER or _WHOLE_DECIMAL.fullmatch(name):
        return "integer"
    if _TEXT.fullmatch(name):
        return "text"
    if name == "enum" or name.startswith("enum("):
        return "labels"
    return None


def column_error(table: Any, column: str) -> DataError:
    """The error for ``column`` missing from a source as an engine read it.

    Parameters
    ----------
    table : mapping, duckdb.DuckDBPyRelation or pyspark.sql.DataFrame
        The source's columns: a mapping of columns, or the relation or DataFrame an engine
        made of the source.
    column : str
        The column asked for.

    Returns
    -------
    DataError
        One line, the same from every engine: a CSV source's names are not shown (they are its
        first line, which is data when the file has no header), only how many there are and
        what the first line must be; any other source's names (a schema) are listed.

    Examples
    --------
    >>> import duckdb
    >>> con = duckdb.connect()
    >>> print(column_error(con.sql("SELECT 1 AS item, 2 AS time"), "user"))
    column 'user' is not in the source; available: item, time.
    >>> from pathlib import Path
    >>> _ = Path("log.csv").write_text("81723,2026-03-02\\n90211,2026-03-03\\n")
    >>> print(column_error(con.sql("SELECT * FROM read_csv('log.csv', header = true)"), "user"))
    column 'user' is not in the header of the CSV source (its first line, 2 names); ...
    """
    if isinstance(table, Mapping):
        return common.missing_column(column, list(table), header=False)
    module = type(table).__module__
    if module.startswith("duckdb"):
        from dpfreq.engines.duckdb.sql import reads_text_file as duckdb_reads

        header = duckdb_reads(table)
    elif module.startswith("pyspark"):
        from dpfreq.engines.spark.session import reads_text_file as spark_reads

        header = spark_reads(table)
    else:  # pragma: no cover - every engine's table is one of the above
        header = True
    return common.missing_column(column, list(table.columns), header=header)
