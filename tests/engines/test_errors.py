"""Engine input errors: one-line DataError/ParameterError naming the column or file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest

from dpfreq import release_window_counts
from dpfreq.engines import get_engine
from dpfreq.engines._common import missing_file
from dpfreq.engines.duckdb import DuckDBEngine
from dpfreq.engines.memory import MemoryEngine
from dpfreq.errors import DataError, ParameterError


def _one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


def _csv(tmp_path: Path, text: str, name: str = "ev.csv") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# -- memory -----------------------------------------------------------------------------------
def test_memory_unknown_column() -> None:
    with pytest.raises(DataError) as e:
        MemoryEngine().item_counts({"a": [1, 2]}, item="user")
    assert "'user'" in _one_line(e)


def test_memory_nulls_rejected() -> None:
    with pytest.raises(DataError, match=r"'item'.*null"):
        MemoryEngine().item_counts({"item": np.array(["a", None], dtype=object)}, item="item")
    with pytest.raises(DataError, match=r"'time'.*null"):
        MemoryEngine().occurrence_times({"item": [1, 2], "time": [1.0, np.nan]},
                                        item="item", time="time")


def test_memory_bad_time_and_bits() -> None:
    with pytest.raises(DataError, match="'time'"):
        MemoryEngine().occurrence_times({"item": [1, 2], "time": ["x", "y"]},
                                        item="item", time="time")
    with pytest.raises(DataError, match="'time'"):
        MemoryEngine().occurrence_times({"item": [1, 2], "time": [1.5, 2.0]},
                                        item="item", time="time")
    with pytest.raises(DataError, match="bit must be 0 or 1"):
        MemoryEngine().report_sums({"device": ["a", "b"], "order": [0, 0], "interval": [1, 2],
                                    "bit": [0, 2]}, param_id=None, interval_counts=(2,))


def test_memory_unequal_lengths_and_params() -> None:
    with pytest.raises(DataError, match="equal length"):
        MemoryEngine().item_counts({"item": [1, 2], "time": [1]}, item="item")
    with pytest.raises(ParameterError, match="max_count"):
        MemoryEngine().count_of_counts({"item": [1]}, item="item", max_count=0)
    with pytest.raises(ParameterError, match="k_max"):
        MemoryEngine().occurrence_times({"item": [1], "t": [1]}, item="item", time="t",
                                        k_max=1.5)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="options"):
        get_engine("memory", bogus=1)


def test_memory_integral_float_times_and_bool_bits() -> None:
    got = MemoryEngine().occurrence_times({"item": [1, 1], "time": [2.0, 1.0]},
                                          item="item", time="time")
    assert got.times.tolist() == [1, 2]
    assert got.time_kind == "integer"
    rs = MemoryEngine().report_sums({"device": ["a", "b"], "order": [0, 0], "interval": [1, 1],
                                     "bit": [True, False]}, param_id=None, interval_counts=(2,))
    assert (rs.sums.tolist(), rs.counts.tolist()) == ([1], [2])


# -- duckdb -----------------------------------------------------------------------------------
def test_duckdb_unknown_column(tmp_path: Path) -> None:
    src = _csv(tmp_path, "item,time\n1,2\n")
    with pytest.raises(DataError) as e:
        DuckDBEngine().item_counts(src, item="user")
    assert "'user'" in _one_line(e)


def test_duckdb_missing_empty_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(DataError) as e:
        DuckDBEngine().item_counts(tmp_path / "nope.csv", item="item")
    assert "nope.csv" in _one_line(e)
    assert str(missing_file("nope.csv")) == "source: file 'nope.csv' does not exist."  # no call
    with pytest.raises(DataError) as e:
        DuckDBEngine().item_counts(_csv(tmp_path, "", "empty.csv"), item="item")
    assert "empty.csv" in _one_line(e)
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"this is not parquet at all")
    with pytest.raises(DataError) as e:
        DuckDBEngine().item_counts(bad, item="item")
    assert "bad.parquet" in _one_line(e)
    with pytest.raises(DataError) as e:
        DuckDBEngine().item_counts(str(tmp_path / "*.parquet.missing"), item="item")
    _one_line(e)
    with pytest.raises(DataError, match="format"):
        DuckDBEngine().item_counts(_csv(tmp_path, "a\n1\n", "x.txt"), item="a")


def test_duckdb_nulls_rejected(tmp_path: Path) -> None:
    src = _csv(tmp_path, "item,time\n1,2\n,3\n2,\n")
    eng = DuckDBEngine()
    with pytest.raises(DataError, match=r"'item'.*null"):
        eng.item_counts(src, item="item")
    with pytest.raises(DataError, match=r"'item'.*null"):
        eng.count_of_counts(src, item="item", max_count=3)
    with pytest.raises(DataError, match=r"'item'.*null"):
        eng.occurrence_times(src, item="item", time="time")
    src2 = _csv(tmp_path, "item,time\n1,2\n3,\n", "t.csv")
    with pytest.raises(DataError, match=r"'time'.*null"):
        eng.occurrence_times(src2, item="item", time="time")
    src3 = _csv(tmp_path, "device,order,interval,bit\na,0,1,1\nb,0,1,\n", "r.csv")
    with pytest.raises(DataError, match="null device, order, interval or bit"):
        eng.report_sums(src3, param_id=None, interval_counts=(2,))


def test_duckdb_bad_time_types(tmp_path: Path) -> None:
    eng = DuckDBEngine()
    with pytest.raises(DataError, match=r"'time'.*VARCHAR"):
        eng.occurrence_times(_csv(tmp_path, "item,time\n1,abc\n"), item="item", time="time")
    with pytest.raises(DataError, match=r"'time'.*fractional"):
        eng.occurrence_times(_csv(tmp_path, "item,time\n1,1.5\n", "f.csv"),
                             item="item", time="time")
    got = eng.occurrence_times(_csv(tmp_path, "item,time\n1,2.0\n1,1.0\n", "g.csv"),
                               item="item", time="time")
    assert got.times.tolist() == [1, 2]


def test_duckdb_dates_are_microseconds(tmp_path: Path) -> None:
    src = _csv(tmp_path, "item,day\na,1970-01-02\na,1969-12-31\n")
    got = DuckDBEngine().occurrence_times(src, item="item", time="day")
    assert got.time_kind == "timestamp_us"
    assert got.times.tolist() == [-86_400_000_000, 86_400_000_000]
    mem = MemoryEngine().occurrence_times(
        {"item": ["a", "a"], "day": np.array(["1970-01-02", "1969-12-31"], "datetime64[D]")},
        item="item", time="day")
    assert mem.times.tolist() == got.times.tolist()


def test_duckdb_bits_not_binary(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="bit must be 0 or 1"):
        DuckDBEngine().report_sums(_csv(tmp_path, "device,order,interval,bit\na,0,1,1\n"
                                        "b,0,1,3\n"), param_id=None, interval_counts=(2,))
    with pytest.raises(DataError, match="'order'"):
        DuckDBEngine().report_sums(_csv(tmp_path, "device,order,interval,bit\na,x,1,1\n",
                                        "s.csv"), param_id=None, interval_counts=(2,))


def test_duckdb_sources_and_connection() -> None:
    con = duckdb.connect()
    with pytest.raises(DataError, match="no table"):
        DuckDBEngine(connection=con).item_counts("missing_table", item="a")
    with pytest.raises(DataError, match="SQL"):
        DuckDBEngine(connection=con).item_counts("SELECT * FROM nowhere", item="a")
    with pytest.raises(ParameterError, match="connection"):
        DuckDBEngine(connection="memory")  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="source"):
        DuckDBEngine().item_counts(42, item="a")
    rel = con.sql("SELECT * FROM (VALUES (2), (1), (2)) t(a)")
    got: Any = get_engine(None, rel).item_counts(rel, item="a")
    assert (got.keys.tolist(), got.counts.tolist()) == ([1, 2], [1, 2])


def test_boolean_items(tmp_path: Path) -> None:
    """An id column read from CSV is text, ``true`` included; a boolean column is no id."""
    src = _csv(tmp_path, "flag\ntrue\nfalse\ntrue\n")
    for eng in (DuckDBEngine(), MemoryEngine()):
        got = eng.item_counts(src, item="flag")
        assert (got.keys.tolist(), got.counts.tolist()) == (["false", "true"], [1, 2])
    for eng, typed in ((MemoryEngine(), {"flag": np.array([True, False, True])}),
                       (DuckDBEngine(), "SELECT true AS flag")):
        with pytest.raises(DataError) as e:
            eng.item_counts(typed, item="flag")
        assert _one_line(e).endswith("a boolean is no id); got type BOOLEAN.")


# -- spark ------------------------------------------------------------------------------------
@pytest.mark.spark
def test_spark_errors(spark: Any, tmp_path: Path) -> None:
    eng = get_engine("spark", spark=spark)
    df = spark.createDataFrame([(1, 2), (None, 3), (2, None)], "item long, time long")
    with pytest.raises(DataError) as e:
        eng.item_counts(df, item="user")
    assert "'user'" in _one_line(e)
    with pytest.raises(DataError, match=r"'item'.*null"):
        eng.item_counts(df, item="item")
    with pytest.raises(DataError, match=r"'item'.*null"):
        eng.count_of_counts(df, item="item")
    with pytest.raises(DataError, match=r"'item'.*null"):
        eng.occurrence_times(df, item="item", time="time")
    with pytest.raises(DataError) as e:
        eng.item_counts(tmp_path / "nope.parquet", item="item")
    assert "nope.parquet" in _one_line(e)
    with pytest.raises(DataError) as e:  # URIs are checked by Spark, still one line
        eng.item_counts(f"file://{tmp_path}/nope_dir", item="item")
    assert "nope_dir" in _one_line(e)
    spark.createDataFrame([(1,), (2,)], "a long").write.parquet(str(tmp_path / "ok"))
    got = eng.item_counts(f"file://{tmp_path}/ok", item="a")
    assert got.counts.tolist() == [1, 1]
    with pytest.raises(DataError, match=r"'time'.*STRING"):
        eng.occurrence_times(spark.createDataFrame([(1, "x")], "item long, time string"),
                             item="item", time="time")
    with pytest.raises(DataError, match="bit must be 0 or 1"):
        eng.report_sums(spark.createDataFrame([("a", 0, 1, 2)], "device string, order long, "
                                              "interval long, bit long"),
                        param_id=None, interval_counts=(2,))
    with pytest.raises(ParameterError, match="spark"):
        get_engine("spark", spark="local")
    # SQL strings and catalog names: Spark's own error, in one line
    with pytest.raises(DataError, match="the SQL query failed") as e:
        eng.item_counts("SELECT * FROM dpfreq_no_such_view", item="item")
    assert "\n" not in str(e.value)
    with pytest.raises(DataError, match="no table 'dpfreq_no_such_table' in the Spark catalog"):
        eng.item_counts("dpfreq_no_such_table", item="item")
    with pytest.raises(ParameterError, match="a Spark DataFrame, a Parquet/CSV path, a SQL"):
        eng.item_counts(42, item="item")


@pytest.mark.spark
def test_spark_engine_gets_or_creates_session(spark: Any) -> None:
    """Without ``spark=``, the engine gets (here: reuses) a session with the given master."""
    eng = get_engine("spark", master="local[2]")
    df = spark.createDataFrame([(3,), (1,), (3,)], "a int")
    got = eng.item_counts(df, item="a")
    assert (got.keys.tolist(), got.counts.tolist()) == ([1, 3], [1, 2])
    assert get_engine(None, df).name == "spark"


def test_spark_missing_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without pyspark, asking for the spark engine names the pip extra (no traceback)."""
    import sys

    from dpfreq.errors import EngineUnavailableError

    for name in [m for m in sys.modules if m == "pyspark" or m.startswith("pyspark.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "pyspark", None)
    for name in [m for m in sys.modules if m.startswith("dpfreq.engines.spark")]:
        monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.raises(EngineUnavailableError, match=r"pip install 'dpfreq\[spark\]'"):
        get_engine("spark")


class FakeJava:
    """A py4j Java exception object: its text and its cause."""

    def __init__(self, text: str, cause: FakeJava | None = None) -> None:
        self.text, self.cause = text, cause

    def toString(self) -> str:
        return self.text

    def getCause(self) -> FakeJava | None:
        return self.cause


class FakePy4JError(Exception):
    """What py4j raises for a Java exception: a call id in the message, the Java object."""

    def __init__(self, java: FakeJava) -> None:
        super().__init__("An error occurred while calling o403.getResult.\n: trace")
        self.java_exception = java


def test_spark_java_errors_are_one_line_with_root_cause() -> None:
    """A py4j Java error shows the Java exception and its root cause, not py4j's call id."""
    pytest.importorskip("pyspark")
    from dpfreq.engines.spark.session import one_line as _one_line

    root = FakeJava("java.lang.OutOfMemoryError: Java heap space\n\tat ...")
    exc = FakePy4JError(FakeJava("org.apache.spark.SparkException: Job aborted.\n\tat x",
                                 FakeJava("java.util.concurrent.ExecutionException", root)))
    assert _one_line(exc) == ("org.apache.spark.SparkException: Job aborted. (cause: "
                              "java.lang.OutOfMemoryError: Java heap space)")
    assert _one_line(FakePy4JError(FakeJava("org.apache.spark.SparkException: alone"))) == \
        "org.apache.spark.SparkException: alone"
    assert _one_line(ValueError("first\nsecond")) == "first"
    assert _one_line(ValueError("")) == "ValueError"


def test_spark_reasons_hide_values_unless_debug(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed Spark job shows the Java exception classes (a JVM Error such as
    OutOfMemoryError in full), not its message, which may quote the data; debug shows all."""
    pytest.importorskip("pyspark")
    from dpfreq.engines.spark import session as spark_engine

    leak = FakePy4JError(FakeJava(
        "org.apache.spark.SparkException: Job aborted: value 'alice@example.org' is bad",
        FakeJava("java.lang.NumberFormatException: For input string: 'alice@example.org'")))
    oom = FakePy4JError(FakeJava("org.apache.spark.SparkException: Job aborted.",
                                 FakeJava("java.lang.OutOfMemoryError: Java heap space")))
    monkeypatch.delenv("DPFREQ_DEBUG", raising=False)
    reason = spark_engine.reason(leak)
    assert "alice" not in reason
    assert reason.startswith("org.apache.spark.SparkException (cause: "
                             "java.lang.NumberFormatException)")
    assert "java.lang.OutOfMemoryError: Java heap space" in spark_engine.reason(oom)
    monkeypatch.setenv("DPFREQ_DEBUG", "1")
    assert "alice@example.org" in spark_engine.reason(leak)


# -- CSV headers: the first line of a CSV file is its header, and may be data ------------------
#: A headerless event log: its first line (taken as the header) holds private-looking values.
_HEADERLESS = ("81723,2026-03-02,alice@example.com\n90211,2026-03-03,bob@example.com\n"
               "81723,2026-03-04,carol@example.com\n")
_PRIVATE = ("81723", "90211", "2026-03", "alice", "bob", "carol", "example.com")
_CSV_ENGINES = ["memory", "duckdb", pytest.param("spark", marks=pytest.mark.spark)]


def _engine(name: str, request: pytest.FixtureRequest) -> Any:
    if name == "spark":
        return get_engine("spark", spark=request.getfixturevalue("spark"))
    return get_engine(name)


def _refused(call: Any) -> str:
    with pytest.raises(DataError) as e:
        call()
    return _one_line(e)


@pytest.mark.parametrize("name", _CSV_ENGINES)
def test_csv_header_errors_never_echo_data(name: str, request: pytest.FixtureRequest,
                                           tmp_path: Path) -> None:
    """A CSV file's first line is always its header (never sniffed); a missing column of a CSV
    source does not list that line's fields (they may be data), and a header that repeats or
    leaves out a name is refused without quoting it: the same one-line message on every engine.
    A header-only file is an empty source; a byte order mark is not part of the first name."""
    eng = _engine(name, request)
    src = _csv(tmp_path, _HEADERLESS, "headerless.csv")
    missing = ("column 'user' is not in the header of the CSV source (its first line, 3 "
               "names); the first line of a CSV file must name its columns.")
    texts = [_refused(lambda: eng.item_counts(src, item="user")),
             _refused(lambda: eng.count_of_counts(src, item="user")),
             _refused(lambda: eng.occurrence_times(src, item="user", time="time"))]
    assert texts == [missing] * 3
    numeric = _csv(tmp_path, "81723,90211\n81723,90212\n", "numbers.csv")  # sniffed as data
    assert _refused(lambda: eng.item_counts(numeric, item="user")) == missing.replace("3", "2")
    for header, rule in (("a,b,A\n1,2,3\n", "repeats a name"),
                         ("81723,,90211\n1,2,3\n", "has an empty name")):
        text = _refused(lambda h=header: eng.item_counts(_csv(tmp_path, h, "bad.csv"),
                                                          item="a"))
        assert text == ("the header of the CSV source (its first line) must name each column "
                        f"once; it {rule}.")
        texts.append(text)
    # a 0-byte file: one message, naming neither the engine nor its method
    empty = _csv(tmp_path, "", "empty.csv")
    texts.append(_refused(lambda: eng.item_counts(empty, item="user")))
    assert texts[-1] == (f"file {str(empty)!r} of the source must be a CSV file whose first "
                         "line names its columns; got an empty file (0 bytes).")
    assert _refused(lambda: release_window_counts(
        empty, item="user", time="time", horizon=3, epsilon=1.0, unit="item", k_values=1,
        windows="all", engine=eng, rng=1)) == texts[-1]
    empty_pq = _csv(tmp_path, "", "empty.parquet")
    assert _refused(lambda: eng.occurrence_times(empty_pq, item="user", time="time")) == \
        f"file {str(empty_pq)!r} of the source must be a Parquet file; got an empty file " \
        "(0 bytes)."
    # a file that does not exist: the public call the user made, never the engine's method
    absent = str(tmp_path / "absent.csv")
    assert _refused(lambda: eng.count_of_counts(absent, item="user")) == \
        f"source: file {absent!r} does not exist."
    assert _refused(lambda: release_window_counts(
        absent, item="user", time="time", horizon=3, epsilon=1.0, unit="item", k_values=1,
        windows="all", engine=eng, rng=1)) == \
        f"source of release_window_counts: file {absent!r} does not exist."
    # every other refusal of the source names it the same way (a glob matching nothing)
    nothing = str(tmp_path / "none-*.csv")
    if name == "duckdb":
        assert _refused(lambda: eng.count_of_counts(nothing, item="user")) == \
            f"source: no file matches {nothing!r}."
        assert _refused(lambda: release_window_counts(
            nothing, item="user", time="time", horizon=3, epsilon=1.0, unit="item",
            k_values=1, windows="all", engine=eng, rng=1)) == \
            f"source of release_window_counts: no file matches {nothing!r}."
    assert not [t for t in texts for value in _PRIVATE if value in t]
    # a typed source's names are its schema: listed
    import pandas as pd

    typed = pd.DataFrame({"item": [1], "time": [2]})
    assert _refused(lambda: eng.item_counts(typed, item="user")) == \
        "column 'user' is not in the source; available: item, time."
    # a header-only file: no rows; a BOM before the header is not part of the first name
    only = _csv(tmp_path, "user,time\n", "only.csv")
    assert eng.item_counts(only, item="user").counts.tolist() == []
    assert eng.occurrence_times(only, item="user", time="time").n_events == 0
    bom = tmp_path / "bom.csv"
    bom.write_text("user,time\n7,1\n7,2\n8,1\n", encoding="utf-8-sig")
    assert eng.item_counts(bom, item="user").counts.tolist() == [2, 1]
