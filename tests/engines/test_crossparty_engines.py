"""Cross-party register frequencies and sketches: identical on memory, DuckDB and Spark.

The same seeded log, read by each engine in the forms it takes (a mapping of columns, pandas,
CSV, Parquet, a Spark DataFrame), gives the same exact registers and, under the same seed, the
same sketch bit for bit. The Spark cases use the session fixture (marked ``spark``).
"""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpfreq.crossparty import CrossPartyParams, build_sketch, key_fingerprint
from dpfreq.crossparty.registers import check_log_spec, register_frequencies
from dpfreq.errors import DataError

KEY = bytes(range(32))
PARAMS = CrossPartyParams(
    measurement="m", registers=256, sampling_start="1/8", sampling_width="3/4",
    max_frequency=3, epsilon_reach=math.log(3), epsilon_frequency=1.0, hash="sha256-prefix/v1",
    key_id=key_fingerprint(KEY))
EPOCH = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)


def _log(seed: int = 1, n: int = 3000) -> pd.DataFrame:
    g = np.random.default_rng(seed)
    users = g.integers(0, 1200, n)
    seconds = g.integers(0, 10 * 86_400, n)
    return pd.DataFrame({
        "user": users,
        "suser": [f"{u:06d}" for u in users],
        "t": g.integers(0, 100, n),
        "ts": pd.to_datetime(EPOCH) + pd.to_timedelta(seconds, unit="s"),
        "campaign": g.choice(["spring", "summer", "autumn"], n),
        "cid": g.integers(1, 4, n),
    })


SPECS = {
    "integers": {"user": "user"},
    "text": {"user": "suser"},
    "period": {"user": "user", "time": "t", "period": (20, 75)},
    "timestamps": {"user": "suser", "time": "ts",
                   "period": (EPOCH + dt.timedelta(days=2), EPOCH + dt.timedelta(days=6))},
    "campaigns": {"user": "user", "campaign": "campaign", "campaigns": ["spring", "autumn"]},
    "campaign ids": {"user": "suser", "campaign": "cid", "campaigns": [1, "3"], "time": "t",
                     "period": (0, 50)},
}


def _spec(case: str) -> Any:
    fields = {"time": None, "period": None, "campaign": None, "campaigns": None, **SPECS[case]}
    return check_log_spec(**fields)


def _memory(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    out = {c: frame[c].to_numpy() for c in frame.columns}
    out["suser"] = frame["suser"].to_numpy(dtype=object)
    out["campaign"] = frame["campaign"].to_numpy(dtype=object)
    return out


def _values(source: Any, case: str, engine: Any) -> np.ndarray:
    return register_frequencies(source, spec=_spec(case), params=PARAMS, key=KEY,
                                engine=engine).values


@pytest.mark.parametrize("case", list(SPECS))
def test_memory_and_duckdb_agree(case: str, tmp_path: Path) -> None:
    frame = _log()
    expected = _values(_memory(frame), case, "memory")
    assert expected.sum() > 0
    assert expected.max() == 3
    assert np.array_equal(_values(frame, case, "duckdb"), expected)
    frame.to_parquet(tmp_path / "log.parquet")
    assert np.array_equal(_values(str(tmp_path / "log.parquet"), case, None), expected)


def test_csv_identifiers_keep_their_leading_zeros(tmp_path: Path) -> None:
    """A CSV user column is text: ``000123`` is not the user ``123``."""
    frame = _log()[["suser"]]
    frame.to_csv(tmp_path / "log.csv", index=False)
    from_csv = _values(str(tmp_path / "log.csv"), "text", "duckdb")
    assert np.array_equal(from_csv, _values(_memory(_log()), "text", "memory"))
    assert not np.array_equal(from_csv, _values(_memory(_log()), "integers", "memory"))


def test_same_seed_same_sketch_on_every_engine(tmp_path: Path) -> None:
    frame = _log()
    frame.to_parquet(tmp_path / "log.parquet")
    sketches = [build_sketch(source, user="user", party="tv", params=PARAMS, key=KEY, rng=7,
                             engine=engine)
                for source, engine in [(_memory(frame), "memory"), (frame, "duckdb"),
                                       (str(tmp_path / "log.parquet"), "duckdb")]]
    for other in sketches[1:]:
        assert other.sketch_id == sketches[0].sketch_id
        assert np.array_equal(other.reach_bits, sketches[0].reach_bits)
        assert np.array_equal(other.frequency, sketches[0].frequency)  # type: ignore[arg-type]
    assert [s.engine for s in sketches] == ["memory", "duckdb", "duckdb"]


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
@pytest.mark.parametrize(("column", "values", "match"), [
    ("user", [1.5, 2.0], "integers or text"),
    ("user", [1, None], "missing values|integers or text"),
    ("t", [1.0, 2.0], "integers or timestamps"),
])
def test_bad_columns_are_refused_in_one_line(engine: str, column: str, values: list[Any],
                                             match: str) -> None:
    frame = pd.DataFrame({"user": [1, 2], "t": [1, 2]})
    frame[column] = values
    source: Any = _memory(frame.assign(suser="a", campaign="x")) if engine == "memory" else frame
    spec = check_log_spec(user="user", time="t", period=(0, 9), campaign=None,
                          campaigns=None)
    with pytest.raises(DataError, match=match) as info:
        register_frequencies(source, spec=spec, params=PARAMS, key=KEY, engine=engine)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
def test_missing_column_names_the_column(engine: str, tmp_path: Path) -> None:
    source: Any = _memory(_log()) if engine == "memory" else _log()
    spec = check_log_spec(user="who", time=None, period=None, campaign=None, campaigns=None)
    with pytest.raises(DataError, match="column 'who' is not in the source; available: user"):
        register_frequencies(source, spec=spec, params=PARAMS, key=KEY, engine=engine)
    headerless = tmp_path / "log.csv"  # its first line, read as the header, is data: not shown
    headerless.write_text("81723,2026-03-02\n90211,2026-03-03\n", encoding="utf-8")
    with pytest.raises(DataError, match="'who' is not in the header of the CSV source") as info:
        register_frequencies(str(headerless), spec=spec, params=PARAMS, key=KEY, engine=engine)
    assert "81723" not in str(info.value)


def test_spark_agrees(spark: Any) -> None:
    """The filters that involve Spark's own types (text users, timestamps, integer campaigns
    compared as text, integer periods), on one DataFrame."""
    frame = _log()
    df = spark.createDataFrame(frame)
    for case in ("timestamps", "campaign ids"):
        expected = _values(_memory(frame), case, "memory")
        assert np.array_equal(_values(df, case, spark), expected)


def test_spark_same_sketch_and_null_users(spark: Any) -> None:
    frame = _log()
    ref = build_sketch(_memory(frame), user="user", party="tv", params=PARAMS, key=KEY, rng=7)
    got = build_sketch(spark.createDataFrame(frame), user="user", party="tv", params=PARAMS,
                       key=KEY, rng=7, engine=spark)
    assert got.sketch_id == ref.sketch_id
    assert got.engine == "spark"
    assert np.array_equal(got.reach_bits, ref.reach_bits)
    assert np.array_equal(got.frequency, ref.frequency)  # type: ignore[arg-type]
    nulls = spark.createDataFrame(pd.DataFrame({"user": ["a", None, "b"]}))
    with pytest.raises(DataError, match="missing values"):
        register_frequencies(nulls, spec=check_log_spec(user="user", time=None,
                                                        period=None, campaign=None,
                                                        campaigns=None),
                             params=PARAMS, key=KEY, engine=spark)


def test_spark_reads_decimal_ids_and_empty_logs_as_duckdb_does(spark: Any,
                                                               tmp_path: Path) -> None:
    """Spark reads an unsigned 64-bit Parquet column as DECIMAL(20,0), DuckDB as UBIGINT or
    DECIMAL(20,0): the same registers; a DECIMAL with a fraction is refused in the same line
    (Spark once took it for a campaign); a log with no rows, whose columns Spark reads as
    text, has all-zero registers (it was refused as a time column of text)."""
    import decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    whole = [decimal.Decimal(v) for v in (2**64 - 1, 5, 5, -12)]
    spec = check_log_spec(user="user", time="t", period=(0, 9), campaign="c",
                          campaigns=["5", "-12"])
    pq.write_table(pa.table({"user": pa.array(whole, pa.decimal128(20, 0)),
                             "c": pa.array(whole, pa.decimal128(20, 0)),
                             "t": pa.array([2**64 - 1, 2**63, 3, 4], pa.uint64())}),
                   tmp_path / "log.parquet")
    # as Spark reads that file (an unsigned 64-bit column is DECIMAL(20,0) to Spark)
    frame = spark.createDataFrame([(w, w, decimal.Decimal(t)) for w, t in zip(
        whole, [2**64 - 1, 2**63, 3, 4], strict=True)],
        "user decimal(20,0), c decimal(20,0), t decimal(20,0)")
    got = register_frequencies(frame, spec=spec, params=PARAMS, key=KEY, engine=spark).values
    assert np.array_equal(got, register_frequencies(str(tmp_path / "log.parquet"), spec=spec,
                                                    params=PARAMS, key=KEY,
                                                    engine="duckdb").values)
    assert got.sum() == 2  # user 5 at t = 3, user -12 at t = 4; t >= 2^63 is after the period
    fraction = pd.DataFrame({"user": [1], "t": [1], "c": [decimal.Decimal("1.50")]})
    errors = []
    for source, engine in ((pa.Table.from_pandas(fraction).cast(pa.schema([
            ("user", pa.int64()), ("t", pa.int64()), ("c", pa.decimal128(10, 2))])), "duckdb"),
            (spark.createDataFrame([(1, 1, decimal.Decimal("1.50"))],
                                   "user long, t long, c decimal(10,2)"), spark)):
        with pytest.raises(DataError) as info:
            register_frequencies(source, spec=spec, params=PARAMS, key=KEY, engine=engine)
        errors.append(str(info.value))
    assert errors[0] == errors[1] == (
        "column 'c' of the source must be a column of integers or text (an integer, "
        "DECIMAL(p,0) included, is the id of its decimal text; a fraction, a float, a time or "
        "a boolean is no id); got type DECIMAL(10,2).")
    none = spark.createDataFrame([], "user string, t string, c string")  # a header-only CSV
    empty = register_frequencies(none, spec=spec, params=PARAMS, key=KEY, engine=spark)
    assert not empty.values.any()
