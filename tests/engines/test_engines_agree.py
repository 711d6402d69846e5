"""Engines agree: float, null, list and struct item
columns are refused with one identical message by memory, DuckDB and Spark; identifiers read
from CSV stay text; data errors carry no private numbers unless ``DPFREQ_DEBUG`` is set; and
every event reader reads its source once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest

from dpfreq.engines import SummaryRequest, TimeBuckets, get_engine
from dpfreq.errors import DataError

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pd = pytest.importorskip("pandas")

NULLS = "column 'item' of the source must be free of nulls and NaN; got null or NaN value(s)."
FLOAT = ("column 'item' of the source must be a column of integers or text (an integer, "
         "DECIMAL(p,0) included, is the id of its decimal text; a fraction, a float, a time or "
         "a boolean is no id); got type DOUBLE.")
NESTED = ("column 'item' of the source must be a column of scalar values (integers, text, "
          "numbers or dates); got a nested (list, struct or map) column.")

#: bad item columns (Arrow, so that every engine gets the very same typed column)
BAD_ITEMS: dict[str, tuple[Any, str]] = {
    "nan": (pa.array([1.5, float("nan"), 2.5]), FLOAT),  # a float is no id, NaN or not
    "null_text": (pa.array(["a", None, "b"]), NULLS),
    "null_int": (pa.array([1, None, 2], type=pa.int64()), NULLS),
    "list": (pa.array([[1], [2, 3], []]), NESTED),
    "struct": (pa.array([{"a": 1}, {"a": 2}, {"a": 3}]), NESTED),
    "map": (pa.array([[("k", 1)], [], [("j", 2)]], type=pa.map_(pa.string(), pa.int64())),
            NESTED),
}


CALLS: dict[str, Callable[[Any, Any], Any]] = {
    "item_counts": lambda e, s: e.item_counts(s, item="item"),
    "count_of_counts": lambda e, s: e.count_of_counts(s, item="item", max_count=2),
    "occurrence_times": lambda e, s: e.occurrence_times(s, item="item", time="time"),
    "summaries": lambda e, s: e.summaries(s, SummaryRequest("item", "time", TimeBuckets(3),
                                                            ())),
}


def _table(name: str) -> Any:
    return pa.table({"item": BAD_ITEMS[name][0], "time": pa.array([1, 2, 3], pa.int64())})


def _local_sources(name: str, tmp_path: Path) -> list[tuple[str, Any]]:
    tbl = _table(name)
    path = tmp_path / f"{name}.parquet"
    pq.write_table(tbl, path)
    out: list[tuple[str, Any]] = [
        ("memory", tbl), ("memory", str(path)), ("duckdb", tbl), ("duckdb", str(path)),
        ("duckdb", tbl.to_pandas()),
        ("memory", {"item": tbl.column("item").to_numpy(zero_copy_only=False),
                    "time": np.array([1, 2, 3])}),
    ]
    return out


@pytest.mark.parametrize("call", list(CALLS))
@pytest.mark.parametrize("bad", list(BAD_ITEMS))
def test_bad_item_columns_refused_identically(bad: str, call: str, tmp_path: Path) -> None:
    for engine, source in _local_sources(bad, tmp_path):
        # pandas and numpy hold integers with a null as floats: a DOUBLE column, no id
        as_float = bad == "null_int" and isinstance(source, dict | pd.DataFrame)
        want = FLOAT if as_float else BAD_ITEMS[bad][1]
        with pytest.raises(DataError) as exc:
            CALLS[call](get_engine(engine), source)
        assert str(exc.value) == want, (engine, type(source).__name__)


@pytest.mark.spark
def test_bad_item_columns_refused_identically_spark(spark: Any, tmp_path: Path) -> None:
    eng = get_engine("spark", spark=spark)
    for bad, (_, want) in BAD_ITEMS.items():
        path = tmp_path / f"{bad}.parquet"
        pq.write_table(_table(bad), path)
        df = spark.read.parquet(str(path))
        for call in ("count_of_counts", "summaries"):
            with pytest.raises(DataError) as exc:
                CALLS[call](eng, df)
            assert str(exc.value) == want, (bad, call)


BAD_TIMES = {"nan": [1.0, float("nan"), 2.0], "fraction": [1.0, 1.5, 2.0],
             "inf": [1.0, float("inf"), 2.0], "huge": [1.0, 1e30, 2.0]}


@pytest.mark.parametrize("bad", list(BAD_TIMES))
def test_bad_float_times_refused_identically(bad: str, tmp_path: Path) -> None:
    """A NaN time is a null; a fractional, infinite or too large time is no period (never a
    wrapped int64 such as -9223372036854775808)."""
    tbl = pa.table({"item": pa.array([1, 2, 3]), "time": pa.array(BAD_TIMES[bad])})
    path = tmp_path / "times.parquet"
    pq.write_table(tbl, path)
    messages = set()
    for engine, source in (("memory", tbl), ("duckdb", tbl), ("duckdb", path),
                           ("memory", {"item": [1, 2, 3], "time": np.array(BAD_TIMES[bad])})):
        for call in ("occurrence_times", "summaries"):
            with pytest.raises(DataError) as exc:
                CALLS[call](get_engine(engine), source)
            messages.add(str(exc.value))
    assert len(messages) == 1
    assert "'time'" in messages.pop()


def test_identifiers_from_csv_stay_text(tmp_path: Path) -> None:
    """'007' and '7' are two items in every engine; a number-only CSV column is not re-typed."""
    path = tmp_path / "ids.csv"
    path.write_text("item,time\n007,1\n7,2\n7,3\n0x1,1\n")
    for engine in ("memory", "duckdb"):
        got = get_engine(engine).item_counts(path, item="item")
        assert (got.keys.tolist(), got.counts.tolist()) == (["007", "0x1", "7"], [1, 1, 2])
    path.write_text("item,time\n007,1\n7,2\n7,3\n")
    for engine in ("memory", "duckdb"):
        got = get_engine(engine).count_of_counts(str(path), item="item")
        assert (got.counts.tolist(), got.prevalences.tolist()) == ([1, 2], [1, 1])


@pytest.mark.spark
def test_identifiers_from_csv_stay_text_spark(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "ids.csv"
    path.write_text("item,time\n007,1\n7,2\n7,3\n")
    got = get_engine("spark", spark=spark).item_counts(path, item="item")
    assert (got.keys.tolist(), got.counts.tolist()) == (["007", "7"], [1, 2])


def test_data_errors_without_private_numbers(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    """By default a data error states the rule and the column only; DPFREQ_DEBUG=1 appends
    the count (and, in memory, the first row) for the data owner."""
    source = {"item": np.array([1] * 40 + [None] * 37, dtype=object), "time": np.arange(77)}
    path = tmp_path / "bad.csv"
    path.write_text("item,time\n" + "".join(f"{i},{i % 5}.5\n" for i in range(23)))
    monkeypatch.delenv("DPFREQ_DEBUG", raising=False)
    for engine, src in (("memory", source), ("duckdb", path), ("memory", path)):
        with pytest.raises(DataError) as exc:
            get_engine(engine).occurrence_times(src, item="item", time="time")
        assert not any(ch.isdigit() for ch in str(exc.value)), str(exc.value)
    monkeypatch.setenv("DPFREQ_DEBUG", "1")
    with pytest.raises(DataError, match=r"\[debug, MemoryEngine.item_counts: 37 value\(s\)"):
        get_engine("memory").item_counts(source, item="item")
    with pytest.raises(DataError, match=r"\[debug, DuckDBEngine.summaries: 23 value\(s\)"):
        CALLS["summaries"](get_engine("duckdb"), path)


def test_duckdb_errors_hide_values_unless_debug(monkeypatch: pytest.MonkeyPatch) -> None:
    """A DuckDB conversion error quotes the value; by default only its kind is shown."""
    eng = get_engine("duckdb", connection=duckdb.connect())
    eng.connection.execute("CREATE TABLE rel AS SELECT 'secret-value-42' AS item, 'x' AS t")
    query = "SELECT item, CAST(t AS INTEGER) AS time FROM rel"
    monkeypatch.delenv("DPFREQ_DEBUG", raising=False)
    with pytest.raises(DataError) as exc:
        CALLS["occurrence_times"](eng, query)
    assert "Conversion Error" in str(exc.value)
    assert "'x'" not in str(exc.value)
    assert "\n" not in str(exc.value)
    monkeypatch.setenv("DPFREQ_DEBUG", "1")
    with pytest.raises(DataError, match="'x'"):
        CALLS["occurrence_times"](eng, query)


# -- one read per call -------------------------------------------------------------------------
def _counting_source(rows: int) -> tuple[Any, Any, list[int]]:
    """A DuckDB engine and SQL source whose every row read calls a Python function (counted)."""
    reads = [0]

    def tick(x: int) -> int:
        reads[0] += 1
        return x

    con = duckdb.connect()
    con.create_function("dpfreq_tick", tick, ["BIGINT"], "BIGINT", side_effects=True)
    sql = f"SELECT dpfreq_tick(range % 7) AS item, range % 5 + 1 AS time FROM range({rows})"
    return get_engine("duckdb", connection=con), sql, reads


@pytest.mark.parametrize("call", ["occurrence_times", "summaries"])
def test_duckdb_event_readers_read_the_source_once(call: str) -> None:
    eng, sql, reads = _counting_source(100)
    got = CALLS[call](eng, sql)  # summaries: horizon 3 < times up to 5, still one read
    if call == "summaries":
        assert got.n_out_of_range == 40
    assert reads[0] == 100
    got = eng.summaries(sql, SummaryRequest("item", "time", TimeBuckets(5), ()))
    assert reads[0] == 200
    assert got.n_events == 100
    assert got.weights.sum() == 100


@pytest.mark.spark
def test_spark_window_reduction_reads_the_source_once(spark: Any) -> None:
    """Checks and reduction in one read: a UDF in the source runs once per row."""
    import sys

    from pyspark import cloudpickle
    from pyspark.sql import functions as F

    # the executors cannot import this test module: ship the UDF by value
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    acc = spark.sparkContext.accumulator(0)

    def tick(x):  # type: ignore[no-untyped-def]  # no hints: Spark reads them as a pandas UDF
        acc.add(1)
        return x

    udf = F.udf(tick, "long").asNondeterministic()
    df = spark.range(200).select(udf(F.col("id") % 7).alias("item"),
                                 (F.col("id") % 5 + 1).alias("time"))
    got = get_engine("spark", spark=spark).summaries(
        df, SummaryRequest("item", "time", TimeBuckets(5), ()))
    assert got.n_events == 200
    assert got.weights.sum() == 200
    assert acc.value == 200
