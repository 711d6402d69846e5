"""Time columns on Spark give exactly the memory engine's times and periods.

Every engine reads a time zone aware timestamp by its instant and a naive one by its wall
clock as UTC. Cases: Parquet written by pandas (nanosecond timestamps, which Spark refuses
without ``dpfreq.engines.spark.times``), by pyarrow in microseconds (Spark ``TIMESTAMP`` for
aware values, ``TIMESTAMP_NTZ`` for naive ones) and in milliseconds; pandas tables; integer
times of every width. Each under a UTC and a non-UTC Spark session (``America/New_York``, whose
DST change on 2024-03-10 lies inside the data): the session's zone must change nothing. The
periods are compared through full releases under one seed (days from 2024-03-09, so events on
both sides of midnight and of the DST change fall into neighbouring periods).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpfreq.engines import get_engine
from dpfreq.engines.spark.times import NANOS_AS_LONG
from dpfreq.windows import release_window_counts

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

#: around midnights and the New York DST change (02:00 local on 2024-03-10 = 07:00 UTC),
#: with sub-microsecond parts (the nanosecond file floors them as numpy does)
TIMES = pd.to_datetime(["2024-03-09T00:00:00", "2024-03-09T23:59:59.999999999",
                        "2024-03-10T00:00:00", "2024-03-10T06:59:59.5", "2024-03-10T07:00:00",
                        "2024-03-10T23:30:00.000001", "2024-03-11T00:00:00.000000999",
                        "2024-03-11T04:00:00", "2024-03-11T23:59:59", "2024-03-08T23:00:00"],
                       format="ISO8601")
USERS = [1, 1, 2, 2, 3, 1, 3, 4, 4, 2]
KW: dict[str, Any] = {"item": "u", "time": "t", "start": "2024-03-09", "end": "2024-03-11",
                      "period": "1d", "epsilon": 1.0, "unit": "event", "k_values": [1, 2],
                      "windows": ["cumulative", 2], "out_of_range": "drop", "rng": 7}


@pytest.fixture(params=["UTC", "America/New_York"])
def session_zone(request: pytest.FixtureRequest, spark: Any) -> Iterator[Any]:
    """The shared session with its time zone set, restored (and nanosAsLong unset) after."""
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", request.param)
    try:
        yield spark
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)
        spark.conf.unset(NANOS_AS_LONG)


def _tables() -> dict[str, pd.DataFrame]:
    return {"naive": pd.DataFrame({"u": USERS, "t": TIMES}),
            "aware_new_york": pd.DataFrame({"u": USERS, "t": TIMES.tz_localize("UTC")
                                            .tz_convert("America/New_York")}),
            "aware_tokyo": pd.DataFrame({"u": USERS, "t": TIMES.tz_localize("Asia/Tokyo")})}


def _parquet_files(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name, df in _tables().items():
        table = pa.Table.from_pandas(df, preserve_index=False)
        for unit in ("ns", "us", "ms"):
            path = tmp_path / f"{name}_{unit}.parquet"
            if unit == "ns":
                df.to_parquet(path)  # pandas' default: nanoseconds
            else:
                pq.write_table(table, path, coerce_timestamps=unit,
                               allow_truncated_timestamps=True)
            out[f"{name}_{unit}"] = path
    return out


def _same_release(source: Any, spark: Any, reference: Any = None) -> None:
    """Spark's release of ``source`` is the memory engine's of ``reference`` (or ``source``)."""
    memory_source = source if reference is None else reference
    want = release_window_counts(memory_source, engine="memory", **KW).to_dict()
    got = release_window_counts(source, engine=get_engine(spark), **KW).to_dict()
    for d in (want, got):
        d["mechanism_params"].pop("source")
    assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)


def test_parquet_timestamps_give_the_memory_times_and_periods(
        tmp_path: Path, session_zone: Any) -> None:
    spark = get_engine(session_zone)
    mem = get_engine("memory")
    for name, path in _parquet_files(tmp_path).items():
        want = mem.occurrence_times(str(path), item="u", time="t")
        got = spark.occurrence_times(str(path), item="u", time="t")
        assert sorted(got.times.tolist()) == sorted(want.times.tolist()), name
        assert (got.n_items, got.n_events) == (want.n_items, want.n_events), name
        _same_release(str(path), session_zone)


def test_nanosecond_parquet_is_floored_to_microseconds(tmp_path: Path, spark: Any) -> None:
    path = _parquet_files(tmp_path)["aware_tokyo_ns"]
    got = get_engine(spark).occurrence_times(str(path), item="u", time="t").times
    expected = np.sort(TIMES.tz_localize("Asia/Tokyo").as_unit("ns").asi8 // 1000)
    assert sorted(got.tolist()) == expected.tolist()
    spark.conf.unset(NANOS_AS_LONG)


def test_pandas_and_arrow_timestamps_give_the_memory_periods(session_zone: Any) -> None:
    for name, df in _tables().items():
        _same_release(df, session_zone)
        _same_release(pa.Table.from_pandas(df, preserve_index=False), session_zone)
        if name != "naive":  # Spark itself reads a naive pandas column in the session's zone
            micro = df.assign(t=df["t"].dt.floor("us"))
            _same_release(session_zone.createDataFrame(micro), session_zone, micro)


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "float64"])
def test_integer_times_give_the_memory_periods(dtype: str, session_zone: Any) -> None:
    df = pd.DataFrame({"u": USERS, "t": np.array([1, 2, 2, 3, 1, 4, 5, 6, 6, 7], dtype=dtype)})
    kw = {k: v for k, v in KW.items() if k not in ("start", "end", "period")}
    want = release_window_counts(df, engine="memory", horizon=6, **kw).to_dict()
    got = release_window_counts(df, engine=get_engine(session_zone), horizon=6, **kw).to_dict()
    for d in (want, got):
        d["mechanism_params"].pop("source")
    assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)
