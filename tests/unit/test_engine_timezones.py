"""Time zone aware Parquet timestamps (pandas/pyarrow write ``timestamp[ns, tz]``) are read as
instants: the same events as the naive UTC timestamps of those instants."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from dpfreq.engines.duckdb import DuckDBEngine


def test_tz_aware_nanosecond_timestamps_are_read_as_utc_instants(tmp_path):
    local = pd.to_datetime(["2024-01-01 00:30", "2024-01-02 10:00", "2024-01-03 23:59"])
    aware = local.tz_localize("Europe/Berlin")
    naive_utc = aware.tz_convert("UTC").tz_localize(None)
    users = ["a", "b", "a"]
    pq.write_table(pa.table({"user": users, "ts": aware}), tmp_path / "aware.parquet")
    pq.write_table(pa.table({"user": users, "ts": naive_utc}), tmp_path / "naive.parquet")
    engine = DuckDBEngine()
    got = engine.occurrence_times(str(tmp_path / "aware.parquet"), item="user", time="ts")
    want = engine.occurrence_times(str(tmp_path / "naive.parquet"), item="user", time="ts")
    assert got.time_kind == want.time_kind == "timestamp_us"
    assert sorted(map(int, got.times)) == sorted(map(int, want.times))
