"""Release conformance: the same cases through memory, DuckDB and Spark.

Every engine computes the same exact aggregate, and a release draws its noise from ``rng`` only
(never from the engine), so with one fixed seed the *releases* must be identical — value, error
statement, mechanism parameters — whatever engine computed the aggregate. The reference is the
library's no-engine path (arrays for windows, per-item counts for profiles and anonymized
histograms, the in-memory aggregator for longitudinal reports). On top of that, the exact
(noise-free) window counts kept in a window release's private state are checked against a
plain-Python oracle.

Cases: an empty log, a single item, counts above the cap, ties in time, items with fewer than
``k`` events. Spark runs on the one shared local session (``conftest.spark``) with tiny data.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpfreq.anonymized import release_anonymized_histogram
from dpfreq.engines import get_engine
from dpfreq.longitudinal import (
    LongitudinalAggregator,
    LongitudinalClient,
    ProtocolParams,
    aggregate_reports_file,
    make_params,
)
from dpfreq.profile import release_profile
from dpfreq.windows import release_window_counts

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pd = pytest.importorskip("pandas")
pl = pytest.importorskip("polars")

HORIZON = 6
MAX_COUNT = 3  # profile cap: the "above_cap" case has counts 5 and 7
DOMAIN = 12  # public profile domain (>= distinct items of every case)
K_VALUES = [1, 2, 3]

CASES: dict[str, tuple[list[int], list[int]]] = {
    "empty": ([], []),
    "single_item": ([7] * 5, [3, 1, 2, 2, 6]),
    "above_cap": ([1] * 7 + [2] * 5 + [3], [1, 2, 2, 3, 4, 5, 6, 1, 1, 3, 5, 6, 4]),
    "ties_in_time": ([4, 5, 4, 5, 6, 4, 6, 5], [2, 2, 2, 2, 2, 5, 5, 5]),
    "fewer_than_k": ([10, 11, 11, 12, 12, 12, 13], [6, 1, 6, 2, 3, 3, 4]),
}


# -- sources ----------------------------------------------------------------------------------
def _columns(case: str) -> dict[str, np.ndarray]:
    items, times = CASES[case]
    return {"item": np.asarray(items, dtype=np.int64), "time": np.asarray(times, dtype=np.int64)}


def _parquet(cols: dict[str, np.ndarray], path: Path) -> str:
    pq.write_table(pa.table({k: pa.array(v, type=pa.int64()) for k, v in cols.items()}), path)
    return str(path)


def _csv(cols: dict[str, np.ndarray], path: Path) -> str:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(list(cols))
        w.writerows(zip(*(v.tolist() for v in cols.values()), strict=True))
    return str(path)


def source_for(backend: str, cols: dict[str, np.ndarray], tmp_path: Path,
               spark: Any) -> tuple[Any, Any]:
    """(source, engine argument) for a backend; the engine argument exercises the selection
    forms: a name, an engine instance, and None with a Spark DataFrame."""
    if backend == "memory":
        return dict(cols), "memory"
    if backend == "duckdb-parquet":
        return _parquet(cols, tmp_path / "events.parquet"), "duckdb"
    if backend == "duckdb-csv":
        return _csv(cols, tmp_path / "events.csv"), get_engine("duckdb")
    if backend == "duckdb-pandas":  # inferred: DataFrames go to DuckDB
        return pd.DataFrame(cols), None
    if backend == "duckdb-arrow":
        return pa.table(cols), None
    if backend == "memory-polars":
        return pl.DataFrame(cols), "memory"
    if backend == "spark-dataframe":
        return spark.read.parquet(_parquet(cols, tmp_path / "events.parquet")), None
    if backend == "spark-parquet":
        return _parquet(cols, tmp_path / "events.parquet"), get_engine("spark", spark=spark)
    if backend == "spark-csv":  # the name: get_engine("spark") reuses the active session
        return _csv(cols, tmp_path / "events.csv"), "spark"
    raise AssertionError(backend)


LOCAL = ["memory", "duckdb-parquet", "duckdb-csv", "duckdb-pandas", "duckdb-arrow",
         "memory-polars"]
SPARK = [pytest.param(b, marks=pytest.mark.spark) for b in ("spark-dataframe", "spark-parquet",
                                                            "spark-csv")]


@pytest.fixture
def spark_or_none(request: pytest.FixtureRequest) -> Any:
    """The shared Spark session for spark-marked parameters, else None (no session started)."""
    if request.node.get_closest_marker("spark") is None:
        return None
    return request.getfixturevalue("spark")


def _without(d: dict[str, Any], *keys: str) -> dict[str, Any]:
    """A release's dict without the fields naming where the aggregate was computed."""
    out = json.loads(json.dumps(d))
    for key in keys:
        out["mechanism_params"].pop(key, None)
    return out


# -- windows ----------------------------------------------------------------------------------
def oracle_at_least_k(case: str, t1: int, t2: int, k: int) -> int:
    """Plain Python: the number of items with at least k events in periods t1..t2."""
    items, times = CASES[case]
    per: dict[int, int] = {}
    for a, t in zip(items, times, strict=True):
        if t1 <= t <= t2:
            per[a] = per.get(a, 0) + 1
    return sum(1 for c in per.values() if c >= k)


def _window_release(source: Any, engine: Any, level: str, seed: int) -> Any:
    return release_window_counts(source, item="item", time="time", horizon=HORIZON, epsilon=1.0,
                                 k_values=K_VALUES, unit=level,
                                 windows=["cumulative", 3, "all"], engine=engine, rng=seed)


_WINDOW_CASES = [(case, level) for case in CASES for level in ("event", "item")]
# Spark: each release is two small Spark jobs (~0.3 s); item level on two cases suffices there,
# the point-set reductions after the engine are the same code as for the local engines.
_SPARK_WINDOW_CASES = [(c, lv) for c, lv in _WINDOW_CASES
                       if lv == "event" or c in ("ties_in_time", "fewer_than_k")]
WINDOW_PARAMS = (
    [pytest.param(b, c, lv, id=f"{b}-{c}-{lv}") for b in LOCAL for c, lv in _WINDOW_CASES]
    + [pytest.param("spark-dataframe", c, lv, id=f"spark-dataframe-{c}-{lv}",
                    marks=pytest.mark.spark) for c, lv in _SPARK_WINDOW_CASES]
    + [pytest.param(b, "ties_in_time", "event", id=f"{b}-ties_in_time-event",
                    marks=pytest.mark.spark) for b in ("spark-parquet", "spark-csv")]
)


@pytest.mark.parametrize(("backend", "case", "level"), WINDOW_PARAMS)
def test_window_counts(backend: str, case: str, level: str, tmp_path: Path, seed: int,
                       spark_or_none: Any) -> None:
    cols = _columns(case)
    ref = _window_release(cols, None, level, seed)  # arrays path, no engine
    source, engine = source_for(backend, cols, tmp_path, spark_or_none)
    got = _window_release(source, engine, level, seed)
    assert _without(got.to_dict(), "source") == _without(ref.to_dict(), "source")
    assert got.mechanism_params["source"] != "arrays"
    # every window [t1, t2] of every k: identical answers (same noise, same exact counts)
    t1, t2 = np.triu_indices(HORIZON)
    t1, t2 = t1 + 1, t2 + 1
    for k in K_VALUES:
        a, b = got.window(t1, t2, k), ref.window(t1, t2, k)
        np.testing.assert_array_equal(a.estimate, b.estimate)
        np.testing.assert_array_equal(a.upper, b.upper)
        # the exact counts behind the release (private state) against the plain-Python oracle
        state = got._state
        for s in state.structures_for(k):
            ok = state.can_answer(s, t1, t2)
            exact = state.exact(s, t1[ok], t2[ok])
            want = [oracle_at_least_k(case, int(x), int(y), k)
                    for x, y in zip(t1[ok], t2[ok], strict=True)]
            assert exact.tolist() == want, (s.family, s.method, k)


# -- profile ----------------------------------------------------------------------------------
def _count_vector(case: str) -> np.ndarray:
    items, _ = CASES[case]
    _, counts = np.unique(np.asarray(items, dtype=np.int64), return_counts=True)
    return counts.astype(np.int64)


PROFILE_PARAMS = ([pytest.param(b, c, id=f"{b}-{c}") for b in LOCAL for c in CASES]
                  + [pytest.param("spark-dataframe", c, id=f"spark-dataframe-{c}",
                                  marks=pytest.mark.spark) for c in CASES]
                  + [pytest.param(b, "above_cap", id=f"{b}-above_cap", marks=pytest.mark.spark)
                     for b in ("spark-parquet", "spark-csv")])


@pytest.mark.parametrize(("backend", "case"), PROFILE_PARAMS)
def test_profile(backend: str, case: str, tmp_path: Path, seed: int,
                 spark_or_none: Any) -> None:
    kw = {"domain_size": DOMAIN, "max_count": MAX_COUNT, "epsilon": 1.0, "unit": "event",
          "rng": seed}
    ref = release_profile(_count_vector(case), **kw)  # count vector, no engine
    source, engine = source_for(backend, _columns(case), tmp_path, spark_or_none)
    got = release_profile(source, item="item", engine=engine, **kw)
    assert _without(got.to_dict(), "engine") == _without(ref.to_dict(), "engine")
    assert got.mechanism_params["engine"] == backend.split("-")[0]


# -- anonymized histogram ---------------------------------------------------------------------
@pytest.mark.parametrize(("backend", "case"), PROFILE_PARAMS)
def test_anonymized_histogram(backend: str, case: str, tmp_path: Path, seed: int,
                              spark_or_none: Any) -> None:
    # per-item counts, no engine
    ref = release_anonymized_histogram(_count_vector(case), epsilon=1.0, rng=seed, unit="event")
    source, engine = source_for(backend, _columns(case), tmp_path, spark_or_none)
    got = release_anonymized_histogram(source, item="item", epsilon=1.0, engine=engine,
                                       rng=seed, unit="event")
    assert _without(got.to_dict(), "engine") == _without(ref.to_dict(), "engine")
    assert got.mechanism_params["engine"] == backend.split("-")[0]


# -- longitudinal report files ---------------------------------------------------------------
PERIODS = 8


def _params() -> ProtocolParams:
    return make_params(horizon=PERIODS, max_changes=3, epsilon=1.0, method="futurerand")


def _reports(case: str) -> dict[str, np.ndarray]:
    """Reports of a few simulated devices (seeded client randomness, fixed test data)."""
    p = _params()
    rows: list[tuple[int, int, int, int]] = []
    n_users = {"empty": 0, "single_user": 1, "devices": 9}[case]
    for u in range(n_users):
        client = LongitudinalClient(p, rng=1000 + u)
        for t in range(p.horizon):
            for r in client.step(int((u + t) % 3 == 0)):
                rows.append((u, int(r["order"]), int(r["interval"]), int(r["bit"])))
    arr = np.asarray(rows, dtype=np.int64).reshape(-1, 4)
    names = ("device", "order", "interval", "bit")
    return {name: arr[:, i].copy() for i, name in enumerate(names)}


def _aggregate_in_memory(cols: dict[str, np.ndarray]) -> Any:
    p = _params()
    agg = LongitudinalAggregator(p)
    devices, first = np.unique(cols["device"], return_index=True)
    if devices.size:
        agg.enrol(devices, cols["order"][first])
        agg.ingest(cols["device"], cols["order"], cols["interval"], cols["bit"],
                   param_id=p.param_id)
    return agg.estimate(confidence=0.95)


LONGITUDINAL_PARAMS = (
    [pytest.param(b, c, id=f"{b}-{c}") for b in ("duckdb-parquet", "duckdb-csv")
     for c in ("empty", "single_user", "devices")]
    + [pytest.param("spark-parquet", c, id=f"spark-parquet-{c}", marks=pytest.mark.spark)
       for c in ("empty", "devices")]
    + [pytest.param("spark-csv", "devices", id="spark-csv-devices", marks=pytest.mark.spark)]
)


@pytest.mark.parametrize(("backend", "case"), LONGITUDINAL_PARAMS)
def test_longitudinal_report_file(backend: str, case: str, tmp_path: Path,
                                  spark_or_none: Any) -> None:
    """Per-(order, interval) sums from a report file: identical estimates from every engine (the
    reports are randomized on the devices; the server adds no noise)."""
    cols = _reports(case)
    ref = _aggregate_in_memory(cols)
    path, engine = source_for(backend, cols, tmp_path, spark_or_none)
    orders = {int(d): int(h) for d, h in zip(cols["device"], cols["order"], strict=True)}
    enrolled = np.bincount(list(orders.values()), minlength=_params().orders).tolist()
    got = aggregate_reports_file(path, _params(), enrolled=enrolled, engine=engine,
                                 confidence=0.95)
    assert got.to_dict() == ref.to_dict()
    np.testing.assert_array_equal(got.value, ref.value)
    np.testing.assert_array_equal(got.sd, ref.sd)
    assert got.devices == ref.devices == len(np.unique(cols["device"]))


# -- Spark with generated code ----------------------------------------------------------------
@pytest.mark.spark
def test_spark_with_generated_code(tmp_path: Path, seed: int, spark: Any) -> None:
    """The suite's Spark session interprets expressions (much faster on tiny data); here the
    three engine releases run with whole-stage and expression code generation, as Spark runs by
    default, and equal the engine-free releases."""
    conf = {"spark.sql.codegen.wholeStage": "true",
            "spark.sql.codegen.factoryMode": "CODEGEN_ONLY"}
    before = {key: spark.conf.get(key) for key in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        cols = _columns("above_cap")
        source, engine = source_for("spark-dataframe", cols, tmp_path, spark)
        got = _window_release(source, engine, "item", seed)
        assert _without(got.to_dict(), "source") == _without(
            _window_release(cols, None, "item", seed).to_dict(), "source")
        kw = {"domain_size": DOMAIN, "max_count": MAX_COUNT, "epsilon": 1.0, "unit": "event",
              "rng": seed}
        assert _without(release_profile(source, item="item", engine=engine, **kw).to_dict(),
                        "engine") == _without(
            release_profile(_count_vector("above_cap"), **kw).to_dict(), "engine")
        hist = release_anonymized_histogram(source, item="item", epsilon=1.0, engine=engine,
                                            rng=seed, unit="event")
        assert _without(hist.to_dict(), "engine") == _without(release_anonymized_histogram(
            _count_vector("above_cap"), epsilon=1.0, rng=seed, unit="event").to_dict(), "engine")
    finally:
        for key, value in before.items():
            spark.conf.set(key, value)
