"""aggregate_reports_file through the engines' validated ``report_sums``: the same good and
bad reports give identical estimates and identical messages on memory, DuckDB and Spark;
identifiers are read as text; messages never carry data-derived numbers."""

from __future__ import annotations

import csv
import io
import re
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

HORIZON = 8  # d = 8: orders 0..3, interval in 1..8 >> order
HEAD = "device,order,interval,bit"


def _params() -> ProtocolParams:
    return make_params(horizon=HORIZON, max_changes=3, epsilon=1.0, method="futurerand")


PID = _params().param_id
MANY = [100] * 4  # an enrolment larger than any file's devices (for the refusals)


def _pop(rows: Any) -> list[int]:
    """Devices per order of the reports (each device counted once): their enrolment."""
    seen = {(r[0], r[1]) for r in rows}
    return [sum(1 for _, h in seen if h == order) for order in range(4)]


def _device_rows(n: int) -> list[tuple[int, int, int, int]]:
    """Reports of simulated devices (seeded client randomness, fixed test data)."""
    p = _params()
    rows = []
    for u in range(n):
        client = LongitudinalClient(p, rng=2000 + u)
        for t in range(p.horizon):
            for r in client.step(int((u + 2 * t) % 5 < 2)):
                rows.append((u, int(r["order"]), int(r["interval"]), int(r["bit"])))
    return rows


def _reference(rows: list[tuple[int, int, int, int]]) -> Any:
    p = _params()
    arr = np.asarray(rows, dtype=np.int64).reshape(-1, 4)
    agg = LongitudinalAggregator(p)
    devices, first = np.unique(arr[:, 0], return_index=True)
    if devices.size:
        agg.enrol(devices, arr[first, 1])
        agg.ingest(arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3], param_id=p.param_id)
    return agg.estimate(confidence=0.95)


def _csv_text(rows: list[tuple[int, int, int, int]], pid: str | None = None) -> str:
    head = HEAD + (",param_id" if pid is not None else "")
    tail = f",{pid}" if pid is not None else ""
    return head + "\n" + "".join(f"{u},{h},{j},{b}{tail}\n" for u, h, j, b in rows)


def _columns(text: str) -> dict[str, list[Any]]:
    """A CSV text as a mapping of text columns (empty cells are None), for the memory engine."""
    rows = list(csv.reader(io.StringIO(text)))
    head, body = rows[0], rows[1:]
    return {c: [r[i] if r[i] != "" else None for r in body] for i, c in enumerate(head)}


GOOD_CSV: dict[str, tuple[str, list[tuple[int, int, int, int]]]] = {
    "header_only": (HEAD + "\n", []),
    "devices": (_csv_text(_device_rows(12)), _device_rows(12)),
    "devices_param_id": (_csv_text(_device_rows(5), PID), _device_rows(5)),
}

#: one source per rejection rule -> a fragment of the expected message
BAD_CSV: dict[str, tuple[str, str]] = {
    "missing_column": ("device,order,interval\n1,0,1\n", "'bit' is missing"),
    "text_not_integer": (f"{HEAD}\n1,0,1,x\n2,0,1,1\n", "'bit' must hold integers"),
    "fraction": (f"{HEAD}\n1,0,1,1.5\n2,0,2,1\n", "'bit' must hold integers"),
    "null_bit": (f"{HEAD}\n1,0,1,\n2,0,1,1\n", "null device, order, interval or bit"),
    "null_device": (f"{HEAD}\n,0,1,1\n2,0,1,1\n", "null device, order, interval or bit"),
    "other_param_id": (f"{HEAD},param_id\n1,0,1,1,{PID}\n2,0,1,1,{'f' * 16}\n", "param_id"),
    "null_param_id": (f"{HEAD},param_id\n1,0,1,1,\n", "param_id"),
    "order_range": (f"{HEAD}\n1,4,1,1\n2,-1,1,0\n3,0,1,1\n", "order must be in 0..3"),
    "interval_range": (f"{HEAD}\n1,1,5,1\n2,3,2,1\n3,0,0,1\n", "interval must be in"),
    "bit_value": (f"{HEAD}\n1,0,1,2\n2,0,1,-1\n3,0,2,1\n", "bit must be 0 or 1"),
    "duplicate": (f"{HEAD}\n1,0,1,1\n1,0,1,0\n2,1,1,0\n", "duplicate reports"),
    "two_orders": (f"{HEAD}\n1,0,1,1\n1,1,1,1\n2,0,1,1\n", "more than one order"),
}


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / f"{name}.csv"
    path.write_text(text)
    return str(path)


def _message(source: Any, engine: Any) -> str:
    with pytest.raises(DataError) as info:
        aggregate_reports_file(source, _params(), enrolled=MANY, engine=engine)
    return str(info.value)


@pytest.mark.parametrize("case", sorted(GOOD_CSV))
def test_good_reports_local_engines(case: str, tmp_path: Path) -> None:
    text, rows = GOOD_CSV[case]
    ref = _reference(rows).to_dict()
    for engine, source in (("duckdb", _write(tmp_path, case, text)), (None, tmp_path / case),
                           ("memory", _columns(text))):
        if engine is None:
            source = Path(_write(tmp_path, case, text))
        got = aggregate_reports_file(source, _params(), enrolled=_pop(rows), engine=engine)
        assert got.to_dict() == ref, engine
        assert got.devices == len({r[0] for r in rows})


@pytest.mark.parametrize("case", sorted(BAD_CSV))
def test_bad_reports_same_message_memory_and_duckdb(case: str, tmp_path: Path) -> None:
    text, fragment = BAD_CSV[case]
    msg = _message(_write(tmp_path, case, text), "duckdb")
    assert fragment in msg
    assert msg.startswith("reports rejected:")
    assert not re.search(r"\b[1-9]\d* (reports|devices|rows)\b", msg)  # no data-derived counts
    if case != "missing_column":
        assert msg == _message(_columns(text), "memory")


def test_identifiers_read_as_text(tmp_path: Path) -> None:
    """Devices "007" and "7" differ; a digits-only param_id keeps its leading zeros."""
    text = f"{HEAD}\n007,3,1,1\n7,3,1,0\n"
    assert aggregate_reports_file(_write(tmp_path, "ids", text), _params(),
                                  enrolled=[0, 0, 0, 2]).devices == 2
    pid = "00" + "1" * 14
    got = make_params(horizon=HORIZON, max_changes=3, epsilon=1.0, method="futurerand")
    path = _write(tmp_path, "pid", f"{HEAD},param_id\n1,3,1,1,{pid}\n")
    eng = __import__("dpfreq.engines", fromlist=["get_engine"]).get_engine("duckdb")
    sums = eng.report_sums(path, param_id=pid, interval_counts=(8, 4, 2, 1))
    assert sums.devices_per_order.tolist() == [0, 0, 0, 1]
    with pytest.raises(DataError, match="param_id"):
        eng.report_sums(path, param_id=pid.lstrip("0"), interval_counts=(8, 4, 2, 1))
    assert got.param_id != pid


def test_missing_file_and_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(DataError):
        aggregate_reports_file(tmp_path / "nope.csv", _params(), enrolled=MANY)
    with pytest.raises(ParameterError):
        aggregate_reports_file(12, _params(), enrolled=MANY)
    with pytest.raises(ParameterError, match="params"):
        aggregate_reports_file(str(tmp_path / "x.csv"), "nope",  # type: ignore[arg-type]
                               enrolled=MANY)
    with pytest.raises(ParameterError, match="enrolled"):
        aggregate_reports_file(str(tmp_path / "x.csv"), _params(), enrolled=[1, 2])


def test_parquet_directory_duckdb(tmp_path: Path) -> None:
    """A local Parquet directory (several part files) is read whole."""
    rows = _device_rows(10)
    arr = np.asarray(rows, dtype=np.int64)
    folder = tmp_path / "reports"
    folder.mkdir()
    names = ("device", "order", "interval", "bit")
    for i, part in enumerate(np.array_split(arr, 3)):
        pq.write_table(pa.table({c: part[:, k] for k, c in enumerate(names)}),
                       folder / f"part-{i}.parquet")
    got = aggregate_reports_file(str(folder), _params(), enrolled=_pop(rows), engine="duckdb")
    assert got.to_dict() == _reference(rows).to_dict()


def test_typed_parquet_duckdb(tmp_path: Path) -> None:
    """Boolean bit, floating order without fraction and text interval are accepted; a
    fractional order is rejected."""
    rows = _device_rows(8)
    arr = np.asarray(rows, dtype=np.int64)
    good = {"device": pa.array([f"dev-{u}" for u in arr[:, 0]]),
            "order": pa.array(arr[:, 1].astype(np.float64)),
            "interval": pa.array([f" {j}" for j in arr[:, 2]]),
            "bit": pa.array(arr[:, 3].astype(bool))}
    path = tmp_path / "typed.parquet"
    pq.write_table(pa.table(good), path)
    assert aggregate_reports_file(str(path), _params(), enrolled=_pop(rows)).to_dict() == \
        _reference(rows).to_dict()
    frac = arr[:, 1].astype(np.float64)
    frac[3] = 0.5
    bad = tmp_path / "frac.parquet"
    pq.write_table(pa.table({**good, "order": pa.array(frac)}), bad)
    assert "'order' must hold integers" in _message(str(bad), "duckdb")


def test_cli_aggregate_csv(tmp_path: Path) -> None:
    ppath = tmp_path / "params.json"
    ppath.write_text(_params().to_json())
    rep = _write(tmp_path, "r", _csv_text(_device_rows(12)))
    rows = _device_rows(12)
    res = CliRunner().invoke(command, ["aggregate", rep, "--params", str(ppath), "--devices",
                                       ",".join(map(str, _pop(rows)))])
    assert res.exit_code == 0, res.output
    assert "estimate" in res.output


@pytest.mark.spark
def test_spark_agrees_with_duckdb(tmp_path: Path, spark: Any) -> None:
    """Every good file gives the identical release on Spark; every bad file the identical
    message; a Spark DataFrame works with the inferred engine."""
    from dpfreq.engines import get_engine

    engine = get_engine("spark", spark=spark)
    for case, (text, _rows) in GOOD_CSV.items():
        path = _write(tmp_path, case, text)
        duck = aggregate_reports_file(path, _params(), enrolled=MANY, engine="duckdb")
        assert aggregate_reports_file(path, _params(), enrolled=MANY,
                                      engine=engine).to_dict() == duck.to_dict(), case
    for case, (text, _fragment) in BAD_CSV.items():
        path = _write(tmp_path, case, text)
        assert _message(path, engine) == _message(path, "duckdb"), case
    rows = _device_rows(15)
    df = spark.createDataFrame(rows, "device long, order int, interval int, bit int")
    assert aggregate_reports_file(df, _params(), enrolled=_pop(rows)).to_dict() == \
        _reference(rows).to_dict()
    with pytest.raises(DataError, match="duplicate"):
        aggregate_reports_file(df.union(df.limit(1)), _params(), enrolled=MANY, engine=spark)
