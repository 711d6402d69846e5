"""The one rule of an id column's type (:mod:`dpfreq.engines.columns`): what it holds and
whether every value fits the 64 signed bits of a BIGINT key, over DuckDB's and Spark's names."""

from __future__ import annotations

import pytest

from dpfreq.engines import id_key, id_kind
from dpfreq.stream.items.reader import key_kind

#: every integer type name, DuckDB's and Spark's, and whether every value fits 64 signed bits
WIDTHS = {"tinyint": True, "smallint": True, "int": True, "integer": True, "bigint": True,
          "utinyint": True, "usmallint": True, "uinteger": True, "ubigint": False,
          "hugeint": False, "uhugeint": False, "decimal(1,0)": True, "decimal(18,0)": True,
          "decimal(18, 0)": True, "decimal(19,0)": False, "decimal(20,0)": False,
          "decimal(38,0)": False}
TEXT = ("varchar", "string", "char(3)", "varchar(10)", "uuid", "enum('a', 'b')")
NO_ID = ("decimal(10,2)", "decimal(18,1)", "float", "double", "boolean", "date", "timestamp",
         "timestamp with time zone", "timestamp_ntz", "interval", "blob", "binary",
         "integer[]", "struct(a integer)", "map(varchar, integer)", '"null"', "void")


@pytest.mark.parametrize("name", list(WIDTHS))
def test_width_of_integer_types(name: str) -> None:
    for spelled in (name, name.upper()):
        assert id_kind(spelled) == "integer"
        assert id_key(spelled) == ("integer" if WIDTHS[name] else "text")
        assert key_kind(spelled, False, lambda: False) == id_key(spelled)
        assert key_kind(spelled, True, lambda: False) == "text"


def test_text_and_no_id_types() -> None:
    for name in TEXT:
        assert id_key(name) == id_key(name.upper()) == "text", name
    for name in NO_ID:
        assert id_kind(name) is None, name
        assert id_key(name.upper()) is None, name
