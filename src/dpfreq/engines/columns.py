"""The columns of a source as every engine reads them: the error for a column missing from a
source (one message from every engine), and the rule of an id column's type: what it holds
(:func:`id_kind`), how engines key it (:func:`id_key`: BIGINT when every value fits 64 signed
bits, else text) and the one error for a column that holds no id (:func:`id_error`).

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

import numpy as np

import dpfreq.engines._common as common
from dpfreq._validate import message
from dpfreq.errors import DataError

__all__ = ["ID_RULE", "column_error", "id_error", "id_key", "id_kind"]

#: integer types (DuckDB's and Spark's names) whose every value fits 64 signed bits
_NARROW = {"tinyint", "smallint", "int", "integer", "bigint", "utinyint", "usmallint",
           "uinteger"}
_INTEGER = _NARROW | {"hugeint", "ubigint", "uhugeint"}
_WHOLE_DECIMAL = re.compile(r"decimal\((\d+),\s*0\)")
#: the widest ``DECIMAL(p,0)`` whose every value fits 64 signed bits (10^18 - 1 < 2^63)
_NARROW_DIGITS = 18
_TEXT = re.compile(r"varchar|string|(var)?char\(\d+\)|uuid")

#: the SQL engines' names of the numpy types that hold no id
_NUMPY_NAMES = {"float32": "FLOAT", "float64": "DOUBLE", "bool": "BOOLEAN"}

#: what an id column must hold (the rule of :func:`id_kind`, as every error states it)
ID_RULE = ("a column of integers or text (an integer, DECIMAL(p,0) included, is the id of its "
           "decimal text; a fraction, a float, a time or a boolean is no id)")


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
        compared as its decimal text (:func:`id_key`: how wide); ``"text"`` for text (a ``UUID``
        too: its text); ``"labels"`` for an ``ENUM`` (a
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


def id_key(type_name: str) -> str | None:
    """How every engine keys the ids of a column of a type (:func:`id_kind`'s rule).

    Parameters
    ----------
    type_name : str
        The column's type as DuckDB or Spark SQL spells it, any case.

    Returns
    -------
    str or None
        ``"integer"`` (BIGINT keys) for an integer type whose every value fits 64 signed bits:
        ``TINYINT`` to ``BIGINT`` (Spark's ``INT`` too), ``UTINYINT`` to ``UINTEGER`` and
        ``DECIMAL(p,0)`` with ``p <= 18``; ``"text"`` (the id's text, an integer's decimal
        text) for text, an ``ENUM``'s labels and the wider integers (``UBIGINT``,
        ``HUGEINT``, ``UHUGEINT``, ``DECIMAL(p,0)`` with ``p >= 19``); None for a type that
        holds no id (:func:`id_error`).

    Examples
    --------
    >>> [id_key(t) for t in ("INTEGER", "UBIGINT", "decimal(18,0)", "DECIMAL(19,0)", "DOUBLE")]
    ['integer', 'text', 'integer', 'text', None]
    """
    name = type_name.strip().lower()
    kind = id_kind(name)
    if kind is None:
        return None
    whole = _WHOLE_DECIMAL.fullmatch(name)
    narrow = name in _NARROW or (whole is not None and int(whole.group(1)) <= _NARROW_DIGITS)
    return "integer" if kind == "integer" and narrow else "text"


def id_error(got: str | np.dtype[Any], column: str | None = None) -> DataError:
    """The one error for an id column (an item, a user, a campaign, a group) whose type holds
    no id (:data:`ID_RULE`), from every engine and the stream.

    Parameters
    ----------
    got : str or numpy.dtype
        The column's type as the engine names it (``"DECIMAL(10,2)"``, ``"DOUBLE"``), or a
        numpy dtype (named as the SQL engines name it: ``float64`` is ``DOUBLE``).
    column : str or None
        The column; None for a stream's item column, named by its parameter ``item`` and the
        public call under way.

    Returns
    -------
    DataError
        One line naming the column (or parameter), the rule and the type.

    Examples
    --------
    >>> print(id_error("DECIMAL(10,2)", "user"))  # doctest: +NORMALIZE_WHITESPACE
    column 'user' of the source must be a column of integers or text (an integer,
    DECIMAL(p,0) included, is the id of its decimal text; a fraction, a float, a time or a
    boolean is no id); got type DECIMAL(10,2).
    """
    if isinstance(got, np.dtype):
        got = _NUMPY_NAMES.get(str(got), str(got).upper())
    if column is None:
        return DataError(message("item", ID_RULE, got))
    return common.data_error(column, ID_RULE, f"type {got}")


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
