"""Integer epochs (``time_unit``) and wall-clock periods in a zone (``timezone``): every engine
buckets the same events into the same periods, computed here by hand.

The events straddle local midnights in New York and its DST change (2024-03-10, 02:00 EST →
03:00 EDT, i.e. 07:00 UTC): with ``timezone="America/New_York"`` the day 2024-03-10 is
``[05:00Z, 04:00Z next day)``, 23 hours long. The same instants are given as tz-aware
timestamps and as integer epochs in each unit. Spark runs the same cases (marked spark).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpfreq import Accountant
from dpfreq.engines import SummaryRequest, TimeBuckets, get_engine
from dpfreq.errors import DataError, ParameterError
from dpfreq.windows import WindowCountsRelease, release_window_counts
from dpfreq.windows.params import time_axis

NY = "America/New_York"
#: (UTC instant, period of the day axis 2024-03-09..2024-03-11 in New York, in UTC) — by hand;
#: 0 and 4 are outside 1..3
CASES = [
    ("2024-03-09T04:59:59.999999Z", 0, 1),  # 23:59:59.999999 EST on 03-08
    ("2024-03-09T05:00:00Z", 1, 1),  # local midnight of 03-09
    ("2024-03-10T04:59:59Z", 1, 2),  # 23:59:59 EST on 03-09
    ("2024-03-10T05:00:00Z", 2, 2),  # local midnight of 03-10 (EST)
    ("2024-03-10T06:59:59Z", 2, 2),  # 01:59:59 EST, just before the change
    ("2024-03-10T07:00:00Z", 2, 2),  # 03:00:00 EDT, just after
    ("2024-03-11T03:59:59Z", 2, 3),  # 23:59:59 EDT on 03-10: the 23-hour day ends
    ("2024-03-11T04:00:00Z", 3, 3),  # local midnight of 03-11 (EDT)
    ("2024-03-12T03:59:59Z", 3, 4),  # 23:59:59 EDT on 03-11
    ("2024-03-12T04:00:00Z", 4, 4),  # local midnight of 03-12: past the end
    ("1969-12-31T23:59:59.999999Z", 0, 0),  # before the epoch (floor division of epochs)
]
INSTANTS = pd.to_datetime([c[0] for c in CASES], utc=True, format="ISO8601")
DAYS = {"start": "2024-03-09", "end": "2024-03-11", "period": "1d"}
FACTOR = {"s": 10**6, "ms": 10**3, "us": 1, "ns": 10**-3}


def _periods(engine: Any, source: Any, buckets: TimeBuckets) -> list[int]:
    """The periods of the events inside the range, sorted (from the events per period the
    engine sums, slot 0 of its summaries)."""
    red = get_engine(engine).summaries(source, SummaryRequest("u", "t", buckets, (),
                                                              drop_out_of_range=True))
    return [int(k) for k, w in zip(red.keys.tolist(), red.weights.tolist(), strict=True)
            for _ in range(w)]


def _expected(column: int, keep: Any = None) -> list[int]:
    rows = range(len(CASES)) if keep is None else keep
    return sorted(CASES[i][column] for i in sorted(rows) if 1 <= CASES[i][column] <= 3)


def _epochs(unit: str) -> np.ndarray:
    """The instants as integer epochs (the sub-unit part floored, as the engines floor it)."""
    us = INSTANTS.as_unit("us").asi8
    if unit == "ns":
        return us * 1000 + 999  # the same microsecond, with nanoseconds to floor away
    return us // int(FACTOR[unit]) if unit != "us" else us


def _floored(unit: str) -> list[int]:
    """Rows whose instant is unchanged by flooring to ``unit`` (whole units)."""
    us = INSTANTS.as_unit("us").asi8
    f = max(1, int(FACTOR[unit]))
    return [i for i, v in enumerate(us) if v % f == 0]


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
@pytest.mark.parametrize("zone", ["UTC", NY])
def test_aware_timestamps_in_a_zone(engine: str, zone: str) -> None:
    src = pd.DataFrame({"u": range(len(CASES)), "t": INSTANTS.tz_convert("Asia/Tokyo")})
    buckets = time_axis(None, **DAYS, timezone=zone).buckets()
    assert _periods(engine, src, buckets) == _expected(1 if zone == NY else 2)


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
@pytest.mark.parametrize("zone", ["UTC", NY])
def test_integer_epochs_in_each_unit(engine: str, unit: str, zone: str) -> None:
    keep = _floored(unit)
    src = pd.DataFrame({"u": keep, "t": _epochs(unit)[keep]})
    buckets = time_axis(None, **DAYS, time_unit=unit, timezone=zone).buckets()
    assert _periods(engine, src, buckets) == _expected(1 if zone == NY else 2, keep)


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
def test_hourly_periods_skip_the_missing_hour(engine: str) -> None:
    """Hours of 2024-03-10 in New York: 02:00–03:00 local does not exist, so period 3 is
    empty and 07:00Z falls into period 4 (03:00 EDT)."""
    t = pd.to_datetime(["2024-03-10T05:00:00Z", "2024-03-10T06:59:59Z", "2024-03-10T07:00:00Z",
                        "2024-03-10T08:00:00Z"], utc=True)
    buckets = time_axis(None, "2024-03-10T00:00", "2024-03-10T05:59", "1h",
                        timezone=NY).buckets()
    src = pd.DataFrame({"u": range(4), "t": t})
    assert _periods(engine, src, buckets) == [1, 2, 4, 5]


def test_far_epochs_stay_outside() -> None:
    """Epochs whose microseconds overflow int64 are outside the range, not wrapped in."""
    big = np.array([2**62, -(2**62), 2**63 - 1, -(2**63)], dtype=np.int64)
    for engine in ("memory", "duckdb"):
        for zone in ("UTC", NY):
            buckets = time_axis(None, **DAYS, time_unit="s", timezone=zone).buckets()
            red = get_engine(engine).summaries(
                pd.DataFrame({"u": range(4), "t": big}),
                SummaryRequest("u", "t", buckets, (), drop_out_of_range=True))
            assert red.n_out_of_range == 4


KW: dict[str, Any] = {"item": "u", "time": "t", **DAYS, "epsilon": 1.0, "unit": "event",
                      "k_values": [1, 2], "windows": ["cumulative", 2], "out_of_range": "drop",
                      "rng": 7}


def _log() -> pd.DataFrame:
    rows = [i for i in range(len(CASES)) if i != len(CASES) - 1]
    return pd.DataFrame({"u": [i % 3 for i in rows], "t": INSTANTS[rows],
                         "g": ["a" if i % 2 else "b" for i in rows]})


def test_release_states_its_zone_and_engines_agree(tmp_path: Any) -> None:
    df = _log()
    epochs = df.assign(t=df["t"].astype("int64") // 10**6)
    rels = [release_window_counts(df, **KW, timezone=NY, engine="memory"),
            release_window_counts(df, **KW, timezone=NY, engine="duckdb"),
            release_window_counts(epochs, **KW, timezone=NY, time_unit="ms", engine="duckdb")]
    assert rels[0].mechanism_params["timezone"] == rels[0].time_axis["timezone"] == NY
    assert rels[2].mechanism_params["time_unit"] == rels[2].time_axis["time_unit"] == "ms"
    assert rels[0].to_dict()["time_axis"]["timezone"] == NY
    for rel in rels[1:]:
        for fam, curves in rels[0].value.items():
            for k, v in curves.items():
                np.testing.assert_array_equal(rel.value[fam][k], v)
    path = tmp_path / "r.dpfreq"
    rels[0].save(path)
    assert WindowCountsRelease.load(path).time_axis["timezone"] == NY


def test_grouped_release_uses_the_zone() -> None:
    df = _log()
    kw = {**KW, "group": "g", "groups": ["a", "b"]}
    a = release_window_counts(df, **kw, timezone=NY, engine="memory")
    b = release_window_counts(df, **kw, timezone=NY, engine="duckdb")
    for name in ("a", "b"):
        assert a.releases[name].mechanism_params["timezone"] == NY
        for fam, curves in a.releases[name].value.items():
            for k, v in curves.items():
                np.testing.assert_array_equal(b.releases[name].value[fam][k], v)


@pytest.mark.parametrize(("kwargs", "error", "text"), [
    ({"timezone": "Mars/Olympus"}, ParameterError, "timezone of release_window_counts"),
    ({"timezone": ""}, ParameterError, "timezone of release_window_counts"),
    ({"time_unit": "min"}, ParameterError, "time_unit of release_window_counts"),
    ({"time_unit": "s"}, DataError, "integer epochs (time_unit='s' given"),
    ({"horizon": 3, "start": None, "end": None, "period": None, "timezone": NY},
     ParameterError, "timezone of release_window_counts must be 'UTC' with integer periods"),
    ({"horizon": 3, "start": None, "end": None, "period": None, "time_unit": "s"},
     ParameterError, "time_unit of release_window_counts must be None with integer periods"),
])
@pytest.mark.parametrize("engine", ["memory", "duckdb"])
def test_bad_inputs_spend_nothing(kwargs: dict[str, Any], error: type, text: str,
                                  engine: str) -> None:
    acct = Accountant(epsilon=5.0)
    with pytest.raises(error) as info:
        release_window_counts(_log(), **{**KW, **kwargs}, engine=engine, accountant=acct)
    assert text in str(info.value)
    assert "\n" not in str(info.value)
    assert (acct.spent.epsilon, acct.spent.delta) == (0.0, 0.0)


def test_timestamp_epochs_refused_as_periods() -> None:
    """Integer epochs without time_unit on a start/end axis: the engine says to give it."""
    df = _log().assign(t=lambda d: d["t"].astype("int64") // 10**9)
    with pytest.raises(DataError, match="integer epochs need time_unit"):
        release_window_counts(df, **KW, engine="duckdb")


def _histogram(periods: list[int]) -> dict[int, int]:
    return {p: periods.count(p) for p in sorted(set(periods))}


@pytest.mark.spark
def test_spark_matches_memory(spark: Any) -> None:
    """Spark's events per period (slot 0 of its summaries, in Spark SQL) are the
    hand-computed ones."""

    def spark_periods(src: Any, buckets: TimeBuckets) -> dict[int, int]:
        red = get_engine(spark).summaries(src, SummaryRequest("u", "t", buckets, (),
                                                              drop_out_of_range=True))
        return dict(zip(red.keys.tolist(), red.weights.tolist(), strict=True))

    for zone in ("UTC", NY):
        src = pd.DataFrame({"u": range(len(CASES)), "t": INSTANTS})
        buckets = time_axis(None, **DAYS, timezone=zone).buckets()
        assert spark_periods(src, buckets) == _histogram(_expected(1 if zone == NY else 2))
        for unit in ("s", "ns"):
            keep = _floored(unit)
            src = pd.DataFrame({"u": keep, "t": _epochs(unit)[keep]})
            buckets = time_axis(None, **DAYS, time_unit=unit, timezone=zone).buckets()
            assert spark_periods(src, buckets) == _histogram(
                _expected(1 if zone == NY else 2, keep))
    df = _log()
    kw = {**KW, "group": "g", "groups": ["a", "b"], "timezone": NY}
    a = release_window_counts(df, **kw, engine=spark)
    b = release_window_counts(df, **kw, engine="memory")
    for name in ("a", "b"):
        for fam, curves in a.releases[name].value.items():
            for k, v in curves.items():
                np.testing.assert_array_equal(b.releases[name].value[fam][k], v)
    epochs = df.assign(t=df["t"].astype("int64") // 10**6)
    c = release_window_counts(epochs, **KW, timezone=NY, time_unit="ms", engine=spark)
    d = release_window_counts(df, **KW, timezone=NY, engine="memory")
    for fam, curves in d.value.items():
        for k, v in curves.items():
            np.testing.assert_array_equal(c.value[fam][k], v)


def test_plan_takes_the_same_time_options() -> None:
    from dpfreq.windows import plan_window_counts

    kw = {**DAYS, "epsilon": 1.0, "unit": "event", "k_values": [1], "windows": ["cumulative"]}
    plan = plan_window_counts(**kw, timezone=NY, time_unit="ms")
    assert plan.horizon == plan_window_counts(**kw).horizon == 3
    with pytest.raises(ParameterError, match="timezone of plan_window_counts"):  # the call made
        plan_window_counts(**kw, timezone="Nowhere/Else")


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
def test_parquet_aware_nanoseconds(engine: str, tmp_path: Any) -> None:
    """A pandas-written Parquet file of tz-aware nanosecond timestamps (DuckDB's
    TIMESTAMPTZ_NS) is read by its instants and bucketed in the zone."""
    path = tmp_path / "log.parquet"
    pd.DataFrame({"u": range(len(CASES)), "t": INSTANTS.tz_convert(NY)}).to_parquet(path)
    source: Any = str(path) if engine == "duckdb" else pd.read_parquet(path)
    buckets = time_axis(None, **DAYS, timezone=NY).buckets()
    assert _periods(engine, source, buckets) == _expected(1)
