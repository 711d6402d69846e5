"""aggregate_reports_file through DuckDB and Spark: the same good and bad report files give
identical estimates and identical error messages; Spark reads URIs, Parquet directories and
DataFrames and validates on the executors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from dpfreq.cli.longitudinal import command
from dpfreq.errors import DataError, ParameterError
from dpfreq.longitudinal import (
    LongitudinalAggregator,
    LongitudinalClient,
    ProtocolParams,
    aggregate_reports_file,
    make_params,
)

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

PERIODS = 8  # d = 8: orders h = 0..3, j in 1..8 >> h


def _params() -> ProtocolParams:
    return make_params(PERIODS, 3, 1.0, "futurerand")


PID = _params().param_id


def _device_rows(n_users: int) -> list[tuple[int, int, int, int]]:
    """Reports of simulated devices (seeded client randomness, fixed test data)."""
    p = _params()
    rows = []
    for u in range(n_users):
        client = LongitudinalClient(p, rng=2000 + u)
        for t in range(p.periods):
            r = client.step(int((u + 2 * t) % 5 < 2))
            if r is not None:
                rows.append((u, int(r["h"]), int(r["j"]), int(r["bit"])))
    return rows


def _reference(rows: list[tuple[int, int, int, int]]) -> Any:
    p = _params()
    arr = np.asarray(rows, dtype=np.int64).reshape(-1, 4)
    agg = LongitudinalAggregator(p)
    users, first = np.unique(arr[:, 0], return_index=True)
    if users.size:
        agg.enrol(users, arr[first, 1])
        agg.ingest(arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3], p.param_id)
    return agg.estimate(beta=0.05)


def _csv_text(rows: list[tuple[int, int, int, int]], pid: str | None = None) -> str:
    head = "user,h,j,bit" + (",param_id" if pid is not None else "")
    tail = f",{pid}" if pid is not None else ""
    return head + "\n" + "".join(f"{u},{h},{j},{b}{tail}\n" for u, h, j, b in rows)


GOOD_CSV: dict[str, tuple[str, list[tuple[int, int, int, int]]]] = {
    "header_only": ("user,h,j,bit\n", []),
    "devices": (_csv_text(_device_rows(12)), _device_rows(12)),
    "devices_param_id": (_csv_text(_device_rows(5), PID), _device_rows(5)),
}

#: one file per rejection rule -> a fragment of the expected message
BAD_CSV: dict[str, tuple[str, str]] = {
    "missing_column": ("user,h,j\n1,0,1\n", "missing 'bit'"),
    "text_not_integer": ("user,h,j,bit\n1,0,1,x\n2,0,1,1\n", "must be integers"),
    "fraction": ("user,h,j,bit\n1,0,1,1.5\n2,0,2,1\n", "must be integers"),
    "null_bit": ("user,h,j,bit\n1,0,1,\n2,0,1,1\n", "null user, h, j or bit"),
    "null_user": ("user,h,j,bit\n,0,1,1\n2,0,1,1\n", "null user, h, j or bit"),
    "unknown_param_id": (f"user,h,j,bit,param_id\n1,0,1,1,{PID}\n2,0,1,1,{'f' * 16}\n"
                         f"3,0,1,1,{'e' * 16}\n", "unknown parameter id 'eeee"),
    "null_param_id": ("user,h,j,bit,param_id\n1,0,1,1,\n", "unknown parameter id None"),
    "order_range": ("user,h,j,bit\n1,4,1,1\n2,-1,1,0\n3,0,1,1\n", "2 reports with order h"),
    "interval_range": ("user,h,j,bit\n1,1,5,1\n2,3,2,1\n3,0,0,1\n4,0,8,1\n",
                       "3 reports with interval j"),
    "bit_value": ("user,h,j,bit\n1,0,1,2\n2,0,1,-1\n3,0,2,1\n", "2 reports with bit not in"),
    "duplicate": ("user,h,j,bit\n1,0,1,1\n1,0,1,0\n1,0,1,1\n2,1,1,0\n2,1,1,0\n",
                  "2 duplicate reports"),
    "two_orders": ("user,h,j,bit\n1,0,1,1\n1,1,1,1\n2,0,1,1\n", "1 users report more than one"),
}


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / f"{name}.csv"
    path.write_text(text)
    return str(path)


def _message(path: Any, engine: Any) -> str:
    with pytest.raises(DataError) as info:
        aggregate_reports_file(path, _params(), engine=engine, beta=0.05)
    return str(info.value)


# -- local engines (no Spark) --------------------------------------------------------------------
@pytest.mark.parametrize("case", sorted(GOOD_CSV))
@pytest.mark.parametrize("engine", ["duckdb", "memory", None])
def test_good_files_local_engines(case: str, engine: Any, tmp_path: Path) -> None:
    text, rows = GOOD_CSV[case]
    got = aggregate_reports_file(_write(tmp_path, case, text), _params(), engine=engine,
                                 beta=0.05)
    ref = _reference(rows)
    assert got.to_dict() == ref.to_dict()
    assert got.n_users == len({r[0] for r in rows})


@pytest.mark.parametrize("case", sorted(BAD_CSV))
def test_bad_files_duckdb(case: str, tmp_path: Path) -> None:
    text, fragment = BAD_CSV[case]
    msg = _message(_write(tmp_path, case, text), "duckdb")
    assert fragment in msg
    assert msg == _message(_write(tmp_path, case, text), "memory")  # validation is DuckDB's


def test_missing_and_remote_paths_local_engines(tmp_path: Path) -> None:
    missing = tmp_path / "nope.csv"
    for arg in (missing, str(missing)):
        assert _message(arg, "duckdb") == f"reports file {str(missing)!r} does not exist."
    uri = "hdfs://namenode:8020/reports/day=1"
    msg = _message(uri, "duckdb")
    assert msg.startswith(f"reports file {uri!r} does not exist.")
    assert "engine='spark'" in msg
    glob = str(tmp_path / "*.csv")
    assert "engine='spark'" in _message(glob, None)
    with pytest.raises(ParameterError, match="path of aggregate_reports_file"):
        aggregate_reports_file(12, _params(), beta=0.05)


def test_parquet_directory_duckdb(tmp_path: Path) -> None:
    """A local Parquet directory (several part files) is read whole by the DuckDB checks and
    sums."""
    rows = _device_rows(10)
    arr = np.asarray(rows, dtype=np.int64)
    folder = tmp_path / "reports"
    folder.mkdir()
    for i, part in enumerate(np.array_split(arr, 3)):
        pq.write_table(pa.table({c: part[:, k] for k, c in enumerate(("user", "h", "j", "bit"))}),
                       folder / f"part-{i}.parquet")
    got = aggregate_reports_file(folder, _params(), engine="duckdb", beta=0.05)
    assert got.to_dict() == _reference(rows).to_dict()


def test_cli_missing_reports_file(tmp_path: Path) -> None:
    ppath = tmp_path / "params.json"
    ppath.write_text(_params().to_json())
    res = CliRunner().invoke(command, ["aggregate", str(tmp_path / "nope.parquet"),
                                       "--params", str(ppath)])
    assert res.exit_code != 0
    assert isinstance(res.exception, DataError)
    assert "does not exist" in str(res.exception)


# -- Spark: the same files, identical results and messages ---------------------------------------
def _prefix(msg: str) -> str:
    """The engine-independent part of a message: an unreadable file's or a failed cast's
    reason comes from the engine."""
    for head in ("cannot read reports file", "reports file columns h, j and bit must be"):
        if msg.startswith(head):
            return msg.split(": ")[0]
    return msg


@pytest.mark.spark
def test_csv_cases_duckdb_and_spark_agree(tmp_path: Path, spark: Any) -> None:
    """Every good file: identical releases; every bad file (each rejection rule, plus an empty
    file and a missing one): the identical message from DuckDB and from Spark."""
    from dpfreq.engines import get_engine

    engine = get_engine("spark", spark=spark)
    for case, (text, _rows) in GOOD_CSV.items():
        path = _write(tmp_path, case, text)
        duck = aggregate_reports_file(path, _params(), engine="duckdb", beta=0.05)
        spk = aggregate_reports_file(path, _params(), engine=engine, beta=0.05)
        assert spk.to_dict() == duck.to_dict(), case
    bad = dict(BAD_CSV)
    bad["empty_file"] = ("", "cannot read reports file")
    for case, (text, fragment) in bad.items():
        path = _write(tmp_path, case, text)
        duck_msg, spark_msg = _message(path, "duckdb"), _message(path, engine)
        assert fragment in duck_msg, case
        assert _prefix(spark_msg) == _prefix(duck_msg), case
        if case != "text_not_integer":
            assert spark_msg == duck_msg, case
    missing = str(tmp_path / "nope.csv")
    assert _message(missing, spark) == _message(missing, "duckdb")  # a SparkSession as engine


@pytest.mark.spark
def test_typed_parquet_duckdb_and_spark_agree(tmp_path: Path, spark: Any) -> None:
    """Parquet columns of other types: boolean bit, floating h without fraction, text j are
    accepted alike; a fractional value, non-numeric text or a NaN rejected alike."""
    rows = _device_rows(8)
    arr = np.asarray(rows, dtype=np.int64)
    good = {"user": pa.array([f"dev-{u}" for u in arr[:, 0]]),
            "h": pa.array(arr[:, 1].astype(np.float64)),
            "j": pa.array([f" {j}" for j in arr[:, 2]]),
            "bit": pa.array(arr[:, 3].astype(bool))}
    path = tmp_path / "typed.parquet"
    pq.write_table(pa.table(good), path)
    ref = _reference(rows).to_dict()
    assert aggregate_reports_file(path, _params(), engine="duckdb", beta=0.05).to_dict() == ref
    assert aggregate_reports_file(path, _params(), engine="spark", beta=0.05).to_dict() == ref
    h_frac = arr[:, 1].astype(np.float64)
    h_frac[3] = 0.5
    h_nan = arr[:, 1].astype(np.float64)
    h_nan[[0, 5]] = np.nan
    for name, column, value in (("frac", "h", h_frac), ("nan", "h", h_nan),
                                ("text", "j", np.asarray(["1"] * (len(arr) - 1) + ["1a"]))):
        bad_path = tmp_path / f"bad_{name}.parquet"
        pq.write_table(pa.table({**good, column: pa.array(value)}), bad_path)
        duck_msg, spark_msg = _message(bad_path, "duckdb"), _message(bad_path, "spark")
        assert spark_msg == duck_msg, name
        assert f"column {column!r} has" in duck_msg, name


@pytest.mark.spark
def test_spark_directory_uri_and_dataframe(tmp_path: Path, spark: Any) -> None:
    """A Parquet directory written by Spark, its file:// URI, a glob and a DataFrame work with
    engine="spark" (and engine=None for the DataFrame); the CLI takes the directory with
    --engine spark; a DataFrame with the DuckDB engine is a ParameterError."""
    rows = _device_rows(15)
    ref = _reference(rows).to_dict()
    df = spark.createDataFrame(rows, "user long, h int, j int, bit int").repartition(3)
    folder = tmp_path / "spark_reports"
    df.write.parquet(str(folder))
    assert len(list(folder.glob("part-*.parquet"))) >= 2
    for source in (str(folder), folder.resolve().as_uri(), str(folder / "part-*.parquet")):
        got = aggregate_reports_file(source, _params(), engine="spark", beta=0.05)
        assert got.to_dict() == ref, source
    assert aggregate_reports_file(df, _params(), beta=0.05).to_dict() == ref
    with pytest.raises(ParameterError, match="Spark DataFrame"):
        aggregate_reports_file(df, _params(), engine="duckdb", beta=0.05)
    dup = df.union(df.limit(1))
    with pytest.raises(DataError, match="1 duplicate reports"):
        aggregate_reports_file(dup, _params(), engine=spark, beta=0.05)
    missing_uri = (tmp_path / "absent").resolve().as_uri()
    assert _message(missing_uri, "spark").startswith(
        f"cannot read reports file {missing_uri!r}:")
    ppath = tmp_path / "params.json"
    ppath.write_text(_params().to_json())
    res = CliRunner().invoke(command, ["aggregate", folder.resolve().as_uri(), "--params",
                                       str(ppath), "--engine", "spark"])
    assert res.exit_code == 0, res.output
    est = np.asarray(ref["value"])
    assert f"{est[0]:>14.1f}" in res.output
