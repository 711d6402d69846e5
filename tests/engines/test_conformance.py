"""Engine conformance: the same cases through every engine and source kind, identical aggregates.

The expected aggregates come from a plain-Python oracle (``collections.Counter``/``sorted``),
independent of numpy; the memory engine is checked against it like every other engine.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpfreq.engines import get_engine

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

_DATA_RNG = np.random.Generator(np.random.PCG64(20261122))  # fixed test data, not noise
_MANY_ITEMS = _DATA_RNG.integers(0, 300, size=4000)
_MANY_TIMES = _DATA_RNG.integers(0, 50, size=4000)

CASES: dict[str, dict[str, np.ndarray]] = {
    "empty": {"item": np.zeros(0, dtype=np.int64), "time": np.zeros(0, dtype=np.int64)},
    "single_item": {"item": np.full(6, 7, dtype=np.int64),
                    "time": np.array([3, 1, 2, 2, 5, 1], dtype=np.int64)},
    "many_items": {"item": _MANY_ITEMS.astype(np.int64), "time": _MANY_TIMES.astype(np.int64)},
    "ties_negative": {"item": np.array([-3, 5, -3, 5, 5, -3, 0], dtype=np.int64),
                      "time": np.array([4, 4, 4, 4, -1, 2, 0], dtype=np.int64)},
    "string_items": {"item": np.array(["b", "a", "é", "Z", "10", "9", "a", "b", "a", "Z"]),
                     "time": np.array([5, 1, 2, 3, 9, 9, 0, 5, 1, 8], dtype=np.int64)},
    "timestamps": {
        "item": np.array([2, 1, 2, 2, 1, 3], dtype=np.int64),
        "time": np.array(["2024-03-01T10:00:00", "1969-12-31T23:59:59.5", "2024-03-01T09:00:00",
                          "2024-03-01T10:00:00", "2000-01-01T00:00:00.000001",
                          "2024-02-29T00:00:00"], dtype="datetime64[us]"),
    },
}

INTERVAL_COUNTS = (4, 4, 2)  # public: intervals 1..4 of orders 0 and 1, 1..2 of order 2
REPORT_CASES: dict[str, dict[str, np.ndarray]] = {
    "reports": {"device": np.array(["a", "b", "b", "a", "c", "b", "007", "7"]),
                "order": np.array([0, 1, 1, 0, 2, 1, 0, 0], dtype=np.int64),
                "interval": np.array([1, 3, 2, 2, 1, 1, 3, 3], dtype=np.int64),
                "bit": np.array([1, 0, 1, 1, 0, 1, 0, 1], dtype=np.int64)},
    "reports_empty": {"device": np.zeros(0, dtype="<U1"),
                      "order": np.zeros(0, dtype=np.int64),
                      "interval": np.zeros(0, dtype=np.int64),
                      "bit": np.zeros(0, dtype=np.int64)},
}


# -- plain-Python oracle --------------------------------------------------------------------
def _py_times(col: np.ndarray) -> list[int]:
    if col.dtype.kind == "M":
        return [int(x) for x in col.astype("datetime64[us]").astype(np.int64)]
    return [int(x) for x in col]


def _py_keys(col: np.ndarray) -> list[Any]:
    return [int(x) for x in col] if col.dtype.kind in "iu" else [str(x) for x in col]


def oracle_item_counts(case: dict[str, np.ndarray],
                       text: bool = False) -> tuple[list[Any], list[int]]:
    """Per-item counts; ``text``: the keys as text (an item column read from CSV)."""
    c = Counter(str(k) if text else k for k in _py_keys(case["item"]))
    keys = sorted(c)
    return keys, [c[k] for k in keys]


def oracle_count_of_counts(case: dict[str, np.ndarray], m: int | None) -> tuple[list, list]:
    _, counts = oracle_item_counts(case)
    c = Counter(min(x, m) if m else x for x in counts)
    vals = sorted(c)
    return vals, [c[v] for v in vals]


def oracle_occurrences(case: dict[str, np.ndarray], k: int | None,
                       text: bool = False) -> tuple[list, list, int]:
    keys = [str(x) if text else x for x in _py_keys(case["item"])]
    times = _py_times(case["time"])
    code = {key: i for i, key in enumerate(sorted(set(keys)))}
    pairs = sorted((code[a], t) for a, t in zip(keys, times, strict=True))
    seen: Counter[int] = Counter()
    out = []
    for a, t in pairs:
        seen[a] += 1
        if k is None or seen[a] <= k:
            out.append((a, t))
    return [a for a, _ in out], [t for _, t in out], len(code)


def oracle_reports(case: dict[str, np.ndarray]) -> tuple[list, list, list, list, list]:
    """Sums and counts per (order, interval), and distinct devices (as text) per order."""
    sums: Counter[tuple[int, int]] = Counter()
    counts: Counter[tuple[int, int]] = Counter()
    devices: dict[int, set[str]] = {o: set() for o in range(len(INTERVAL_COUNTS))}
    for d, h, j, b in zip(case["device"], case["order"], case["interval"], case["bit"],
                          strict=True):
        sums[(int(h), int(j))] += int(b)
        counts[(int(h), int(j))] += 1
        devices[int(h)].add(str(d))
    keys = sorted(counts)
    return ([h for h, _ in keys], [j for _, j in keys], [sums[k] for k in keys],
            [counts[k] for k in keys], [len(devices[o]) for o in sorted(devices)])


# -- source makers --------------------------------------------------------------------------
def _arrow_table(case: dict[str, np.ndarray]) -> Any:
    arrays = {}
    for name, col in case.items():
        if col.dtype.kind == "M":
            arrays[name] = pa.array(col.astype("datetime64[us]"), type=pa.timestamp("us"))
        elif col.dtype.kind == "U":
            arrays[name] = pa.array(col.tolist(), type=pa.string())
        else:
            arrays[name] = pa.array(col, type=pa.int64())
    return pa.table(arrays)


def _csv_value(x: Any) -> str:
    if isinstance(x, np.datetime64):
        return str(x.astype("datetime64[us]")).replace("T", " ")
    return str(x)


def write_csv(case: dict[str, np.ndarray], path: Path) -> Path:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(list(case))
        for row in zip(*case.values(), strict=True):
            w.writerow([_csv_value(x) for x in row])
    return path


def write_parquet(case: dict[str, np.ndarray], path: Path) -> Path:
    pq.write_table(_arrow_table(case), path)
    return path


def _duckdb_connection_with_table(case: dict[str, np.ndarray]) -> Any:
    import duckdb

    con = duckdb.connect()
    tbl = _arrow_table(case)  # noqa: F841 - referenced by name in the SQL below
    con.execute("CREATE TABLE events AS SELECT * FROM tbl")
    return con


Maker = Callable[[dict[str, np.ndarray], Path, Any], tuple[Any, Any]]


def make_memory(case, tmp_path, spark):  # type: ignore[no-untyped-def]
    return get_engine("memory"), dict(case)


def make_memory_csv(case, tmp_path, spark):  # type: ignore[no-untyped-def]
    return get_engine("memory"), write_csv(case, tmp_path / "events.csv")


def make_memory_parquet(case, tmp_path, spark):  # type: ignore[no-untyped-def]
    return get_engine("memory"), str(write_parquet(case, tmp_path / "events.parquet"))


def _pandas(case: dict[str, np.ndarray]) -> Any:
    pd = pytest.importorskip("pandas")
    return pd.DataFrame({k: (v.tolist() if v.dtype.kind == "U" else v) for k, v in case.items()})


def _polars(case: dict[str, np.ndarray]) -> Any:
    pl = pytest.importorskip("polars")
    return pl.DataFrame({k: (v.tolist() if v.dtype.kind == "U" else v) for k, v in case.items()})


def make_memory_pandas(case, tmp_path, spark):  # type: ignore[no-untyped-def]
    return get_engine("memory"), _pandas(case)


def make_duckdb_pandas(case, tmp_path, spark):  # type: ignore[no-untyped-def]
    return get_engine(None, _pandas(case)), _pandas(case)


def make_duckdb_polars(case, tmp_path, spark):  # type: ignore[no-untyped-def]
    return get_engine(None, _polars(case)), _polars(case)


def make_duckdb_arrow(case, tmp_path, spark):  # type: ignore[no-untyped-def]
    return get_engine(None, _arrow_table(case)), _arrow_table(case)


def make_memory_polars(case, tmp_path, spark):  # type: ignore[no-untyped-def]
    return get_engine("memory"), _polars(case)


def make_spark_pandas(case, tmp_path, spark):  # type: ignore[no-untyped-def]
    return get_engine("spark", spark=spark), _pandas(case)


def make_spark_arrow(case, tmp_path, spark):  # type: ignore[no-untyped-def]
    return get_engine("spark", spark=spark), _arrow_table(case)


def make_duckdb_csv(case, tmp_path, spark):  # type: ignore[no-untyped-def]
    return get_engine("duckdb"), write_csv(case, tmp_path / "events.csv")


def make_duckdb_parquet(case, tmp_path, spark):  # type: ignore[no-untyped-def]
    return get_engine("duckdb"), str(write_parquet(case, tmp_path / "events.parquet"))


def make_duckdb_parquet_dir(case, tmp_path, spark):  # type: ignore[no-untyped-def]
    d = tmp_path / "dataset"
    d.mkdir()
    write_parquet(case, d / "part-0.parquet")
    return get_engine("duckdb"), d


def make_duckdb_relation(case, tmp_path, spark):  # type: ignore[no-untyped-def]
    con = _duckdb_connection_with_table(case)
    return get_engine("duckdb"), con.table("events")


def make_duckdb_sql(case, tmp_path, spark):  # type: ignore[no-untyped-def]
    con = _duckdb_connection_with_table(case)
    return get_engine("duckdb", connection=con), "SELECT * FROM events"


def make_duckdb_table_name(case, tmp_path, spark):  # type: ignore[no-untyped-def]
    con = _duckdb_connection_with_table(case)
    return get_engine("duckdb", connection=con), "events"


def make_spark_dataframe(case, tmp_path, spark):  # type: ignore[no-untyped-def]
    path = write_parquet(case, tmp_path / "events.parquet")
    return get_engine("spark", spark=spark), spark.read.parquet(str(path))


def make_spark_parquet(case, tmp_path, spark):  # type: ignore[no-untyped-def]
    return get_engine("spark", spark=spark), str(write_parquet(case, tmp_path / "ev.parquet"))


def make_spark_csv(case, tmp_path, spark):  # type: ignore[no-untyped-def]
    return get_engine("spark", spark=spark), write_csv(case, tmp_path / "events.csv")


def make_spark_sql(case, tmp_path, spark):  # type: ignore[no-untyped-def]
    path = write_parquet(case, tmp_path / "events.parquet")
    spark.read.parquet(str(path)).createOrReplaceTempView("dpfreq_events_sql")
    return get_engine("spark", spark=spark), "SELECT * FROM dpfreq_events_sql"


def make_spark_table(case, tmp_path, spark):  # type: ignore[no-untyped-def]
    path = write_parquet(case, tmp_path / "events.parquet")
    spark.read.parquet(str(path)).createOrReplaceTempView("dpfreq_events")
    return get_engine("spark", spark=spark), "dpfreq_events"


# (maker, max_count values, k_max values): Spark jobs cost ~0.2 s each even on tiny data, so the
# Spark path sources check fewer parameter values (the DataFrame source checks the same code).
_ALL = ([None, 1, 2, 5], [None, 1, 2, 3])
_SPARK = ([None, 2], [None, 2])
_SPARK_PATH: tuple[list[int | None], list[int | None]] = ([3], [2])
BACKENDS = [
    pytest.param(make_memory, _ALL, id="memory"),
    pytest.param(make_memory_csv, _ALL, id="memory-csv"),
    pytest.param(make_memory_parquet, _ALL, id="memory-parquet"),
    pytest.param(make_memory_pandas, _ALL, id="memory-pandas"),
    pytest.param(make_memory_polars, _ALL, id="memory-polars"),
    pytest.param(make_duckdb_pandas, _ALL, id="duckdb-pandas"),
    pytest.param(make_duckdb_polars, _ALL, id="duckdb-polars"),
    pytest.param(make_duckdb_arrow, _ALL, id="duckdb-arrow"),
    pytest.param(make_duckdb_csv, _ALL, id="duckdb-csv"),
    pytest.param(make_duckdb_parquet, _ALL, id="duckdb-parquet"),
    pytest.param(make_duckdb_parquet_dir, _ALL, id="duckdb-parquet-dir"),
    pytest.param(make_duckdb_relation, _ALL, id="duckdb-relation"),
    pytest.param(make_duckdb_sql, _ALL, id="duckdb-sql"),
    pytest.param(make_duckdb_table_name, _ALL, id="duckdb-table"),
    pytest.param(make_spark_dataframe, _SPARK, id="spark-dataframe", marks=pytest.mark.spark),
    pytest.param(make_spark_parquet, _SPARK_PATH, id="spark-parquet", marks=pytest.mark.spark),
    pytest.param(make_spark_csv, _SPARK_PATH, id="spark-csv", marks=pytest.mark.spark),
    pytest.param(make_spark_sql, _SPARK_PATH, id="spark-sql", marks=pytest.mark.spark),
    pytest.param(make_spark_table, _SPARK_PATH, id="spark-table", marks=pytest.mark.spark),
    pytest.param(make_spark_pandas, _SPARK_PATH, id="spark-pandas", marks=pytest.mark.spark),
    pytest.param(make_spark_arrow, _SPARK_PATH, id="spark-arrow", marks=pytest.mark.spark),
]
#: sources whose item column is read from CSV: always text (identifiers keep leading zeros)
CSV_MAKERS = {make_memory_csv, make_duckdb_csv, make_spark_csv}


@pytest.fixture
def spark_or_none(request: pytest.FixtureRequest) -> Any:
    """The shared Spark session for spark-marked backends, else None (no session started)."""
    if request.node.get_closest_marker("spark") is None:
        return None
    return request.getfixturevalue("spark")


# -- the suite --------------------------------------------------------------------------------
# Spark path sources (Parquet, CSV) only re-check reading and typing on the cases that exercise
# the readers' type inference; the aggregation code is the DataFrame source's.
_PATH_CASES = ("empty", "string_items", "timestamps")
AGGREGATE_PARAMS = [
    pytest.param(p.values[0], p.values[1], case, id=f"{p.id}-{case}", marks=p.marks)
    for p in BACKENDS for case in CASES
    if p.values[1] is not _SPARK_PATH or case in _PATH_CASES
]


@pytest.mark.parametrize(("maker", "params", "case_name"), AGGREGATE_PARAMS)
def test_aggregates(maker: Maker, params: tuple[list[Any], list[Any]], case_name: str,
                    tmp_path: Path, spark_or_none: Any) -> None:
    """item_counts, count_of_counts (several caps) and occurrence_times (several k_max)."""
    case = CASES[case_name]
    engine, source = maker(case, tmp_path, spark_or_none)

    got = engine.item_counts(source, item="item")
    text = maker in CSV_MAKERS
    keys, counts = oracle_item_counts(case, text=text)
    assert got.keys.tolist() == keys
    assert got.counts.dtype == np.int64
    assert got.counts.tolist() == counts
    if case_name != "empty":
        int_keys = case["item"].dtype.kind == "i" and not text
        assert got.keys.dtype == (np.int64 if int_keys else object)

    for max_count in params[0]:
        coc = engine.count_of_counts(source, item="item", max_count=max_count)
        vals, prev = oracle_count_of_counts(case, max_count)
        assert coc.counts.dtype == np.int64
        assert coc.prevalences.dtype == np.int64
        assert (coc.counts.tolist(), coc.prevalences.tolist()) == (vals, prev), max_count

    expected_kind = "timestamp_us" if case["time"].dtype.kind == "M" else "integer"
    for k_max in params[1]:
        occ = engine.occurrence_times(source, item="item", time="time", k_max=k_max)
        codes, times, n_items = oracle_occurrences(case, k_max, text)
        assert occ.item_index.dtype == np.int64
        assert occ.times.dtype == np.int64
        assert occ.item_index.tolist() == codes, k_max
        assert occ.times.tolist() == times, k_max
        assert occ.n_items == n_items
        assert occ.n_events == len(case["item"])
        assert occ.time_kind == expected_kind


@pytest.mark.parametrize("case_name", list(REPORT_CASES))
@pytest.mark.parametrize(("maker", "params"), BACKENDS)
def test_report_sums(maker: Maker, params: Any, case_name: str, tmp_path: Path,
                     spark_or_none: Any) -> None:
    case = REPORT_CASES[case_name]
    engine, source = maker(case, tmp_path, spark_or_none)
    got = engine.report_sums(source, param_id=None, interval_counts=INTERVAL_COUNTS)
    h, j, s, c, devices = oracle_reports(case)
    for arr in (got.order, got.interval, got.sums, got.counts, got.devices_per_order):
        assert arr.dtype == np.int64
    assert (got.order.tolist(), got.interval.tolist()) == (h, j)
    assert (got.sums.tolist(), got.counts.tolist()) == (s, c)
    assert got.devices_per_order.tolist() == devices


def test_string_keys_sorted_by_code_point() -> None:
    """'10' < '9' < 'Z' < 'a' < 'é': the text order every engine must use."""
    got = get_engine("memory").item_counts(CASES["string_items"], item="item")
    assert got.keys.tolist() == ["10", "9", "Z", "a", "b", "é"]
    assert all(type(k) is str for k in got.keys)
