"""Benchmark of dpfreq.stream: accuracy against the offline release and daily re-releases, the
online counters under zCDP, the horizon-free stream, and the speed of an append.

Run ``python benchmarks/bench_stream.py [--quick]`` (state ``uptime`` beside the numbers).
Prints tables:

1. Per-period RMSE of cumulative reach (k = 1, unit="item", ε = 1; δ = 0 and δ = 1e-6),
   T ∈ {30, 365}: the stream (``method="auto"``; predicted from the exact variances of its
   answers, and measured over independent seeded streams), the best offline structure for the
   same T (``release_window_counts``' plan: it knows all data at the end), and re-releasing
   each day at ε/T (the best one-query release of ``[1, t]`` at (ε/T, δ/T), every day t), and
   re-releasing in the best accounting (with δ > 0 the T releases compose in zCDP, ρ/T each:
   the baseline of ``plan_reach_stream``, stronger at δ > 0). Targets: stream/offline <= 1.1,
   re-release/stream >= 10.
1b. Online trees of every shape: the best mixed-radix online tree (up to four radices) with the
   best per-level split of ε in a continuous relaxation, against the stream's counter — what
   no online tree beats.
2. Under zCDP (ε = 1, δ = 1e-6): mean answer variance of the online factorization, the smooth
   binary mechanism, the binary tree (B = 2) as the stream runs it (noise on the released nodes
   only) and the classic binary mechanism (noise on every node of the complete tree, log2 T + 1
   levels), T ∈ {30, 365}. Target: binary / best >= 3.5.
3. Horizon-free: the stream without a horizon against a stream declared with T = 365, at
   t = 365 and over t = 1..365. Target <= 1.5.
4. Speed: an append of 10^6 events (10^5 with --quick) to a stream of 10^7 known users (10^6)
   in DuckDB, against DuckDB's exact update of the same per-item state (read the Parquet
   state, aggregate the events, full outer join, write Parquet) in the same run; and an append
   of the same events spread over 1,000 groups. Target: stream / DuckDB <= 2. The same rows on
   Spark (``engine="spark"``, a local[2] session): the append against Spark's own exact update
   of the same state (the same query in Spark SQL, Parquet directories), same run.
   ``--engines duckdb`` skips Spark; ``--only-speed`` prints table 4 only.
5. The dropped fraction's cost: an append of 10^6 events (10^5 with --quick) over 100
   campaigns to a grouped stream of 10^6 known users (10^5) at ``unit="item"``, ``m = 2``,
   with ``capping_epsilon=0.1`` (the store also remembers up to 4m pairs per user and counts
   what the cap dropped) against the same stream without it, same events, same run, per engine
   of ``--engines`` (``memory`` may be added); ``--only-capping`` prints table 5 only. (The
   fraction's interval coverage over seeded streams is a test:
   ``tests/statistical/test_stream_dropped_coverage.py``.)
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
import warnings
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from dpfreq.errors import DPFreqWarning
from dpfreq.stream import ReachStream, plan_reach_stream
from dpfreq.stream.auto import plan_stream
from dpfreq.stream.measure import measure_periods
from dpfreq.stream.mechanisms import BOUNDED_METHODS, Budget, best_counters
from dpfreq.stream.publish import curve
from dpfreq.windows.params import PlanRequest
from dpfreq.windows.structures import make_plan


def _offline_best(horizon: int, delta: float) -> tuple[float, str]:
    plan = make_plan(PlanRequest(("cumulative",), (1,), horizon, "item", 1.0, delta, "auto", False))
    s = plan.structures[("cumulative", 1)]
    return math.sqrt(s.mean_mse()), s.describe(s.method)


def _rerelease(horizon: int, delta: float) -> float:
    """Each day t: the best one-query release of [1, t] at (ε/T, δ/T); mean variance."""
    var = []
    for t in range(1, horizon + 1):
        plan = make_plan(PlanRequest(("total",), (1,), t, "item", 1.0 / horizon,
                                     delta / horizon, "auto", False))
        var.append(plan.structures[("total", 1)].mean_mse())
    return math.sqrt(float(np.mean(var)))


def _measured(counter, horizon: int, streams: int, seed: int) -> float:
    """RMSE over ``streams`` independent seeded streams (groups of one measurement)."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 100, size=(streams, 1, horizon))
    noisy = measure_periods(counter, rng.bytes(32), (1,), x,
                            np.zeros((1, streams, 0), dtype=np.int64), 0, horizon, True)
    err = curve(counter, noisy[0], horizon)[0] - np.cumsum(x[:, 0, :], axis=1)
    return float(np.sqrt(np.mean(err.astype(np.float64) ** 2)))


def accuracy(streams: int) -> None:
    print("\n## 1. per-period RMSE of cumulative reach, k=1, unit=item, epsilon=1")
    print("| T | delta | stream method | stream predicted | stream measured | offline best "
          "| stream/offline | re-release daily | re-release/stream | re-release, best "
          "accounting | its ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for horizon in (30, 365):
        for delta in (0.0, 1e-6):
            plan = plan_stream(horizon=horizon, unit="item", epsilon=1.0, delta=delta, n_k=1,
                               method="auto", max_groups_per_item=None)
            pred = math.sqrt(plan.counter.mean_variance(horizon))
            meas = _measured(plan.counter, horizon, streams, horizon)
            off, off_name = _offline_best(horizon, delta)
            rer = _rerelease(horizon, delta)
            # a user composing the T re-releases in zCDP (ρ/T each) when δ > 0: the plan's
            # baseline, stronger than (ε/T, δ/T) each
            best = plan_reach_stream(horizon=horizon, k_values=[1], unit="item", epsilon=1.0,
                                     delta=delta, method="auto").rerelease_sd or math.inf
            print(f"| {horizon} | {delta:g} | {plan.counter.name} | {pred:.2f} | {meas:.2f} | "
                  f"{off:.2f} ({off_name}) | {pred / off:.2f} | {rer:.1f} | {rer / pred:.1f} | "
                  f"{best:.1f} | {best / pred:.1f} |")


def _relaxed_online_tree(radices: tuple[int, ...], horizon: int) -> float:
    """Mean variance over 1..T of an online mixed-radix tree (plain digit cover, complete
    blocks only) with continuous Laplace noise and the best per-level split of ε = 1: level
    ℓ uses ``n_ℓ`` nodes on average, so the split ``ε_ℓ ∝ n_ℓ^{1/3}`` gives ``2 (Σ n_ℓ^{1/3})³``."""
    sizes = np.cumprod((1, *radices))
    rem = np.arange(1, horizon + 1)
    used = []
    for size in sizes[::-1]:
        digit = rem // size
        rem = rem - digit * size
        used.append(digit.mean())
    n = np.asarray([u for u in used if u > 0])
    return float(2 * np.cbrt(n).sum() ** 3)


def tree_shapes() -> None:
    import itertools

    print("\n## 1b. online trees of every shape (unit=item, epsilon=1, continuous relaxation)")
    print("| T | best mixed radix (up to 4 radices, each 2..40) | its RMSE, best per-level split "
          "| the stream's counter (exact, discrete) |")
    print("|---|---|---|---|")
    for horizon in (30, 365):
        best = (math.inf, ())
        for levels in range(5):
            for rad in itertools.product(range(2, 41), repeat=levels):
                if math.prod(rad) <= horizon:
                    best = min(best, (_relaxed_online_tree(rad, horizon), rad))
        plan = plan_stream(horizon=horizon, unit="item", epsilon=1.0, delta=0.0, n_k=1,
                           method="auto", max_groups_per_item=None)
        print(f"| {horizon} | {list(best[1]) or 'none (simple counter)'} | "
              f"{math.sqrt(best[0]):.2f} | {math.sqrt(plan.counter.mean_variance(horizon)):.2f} "
              f"({plan.counter.name}) |")


def zcdp_variances() -> None:
    from dpfreq.accounting.zcdp import zcdp_rho
    from dpfreq.stream.mechanisms.counter import Counter
    from dpfreq.stream.mechanisms.intervals import TreeLayout
    from dpfreq.stream.mechanisms.law import calibrate

    print("\n## 2. zCDP (epsilon=1, delta=1e-6): mean answer variance")
    print("| T | factorization | smooth binary | binary tree (B=2, released nodes) | classic "
          "binary mechanism | binary/factorization | classic/factorization | binary/smooth |")
    print("|---|---|---|---|---|---|---|---|")
    budget = Budget(epsilon=Fraction(1), rho=zcdp_rho(1.0, 1e-6))
    for horizon in (30, 365):
        found = {lab: c for lab, c, _ in best_counters(horizon, "item", budget, BOUNDED_METHODS)}
        fact = found["factorization/gaussian"].mean_variance(horizon)
        smooth = found["smooth/gaussian"].mean_variance(horizon)
        lay = TreeLayout(horizon, 2, False)
        law = calibrate(budget, "gaussian", *lay.sensitivity("item"))
        binary = Counter(lay, law).mean_variance(horizon)
        # Dwork et al. / Chan, Shi and Song: noise on every node of the complete binary tree
        # over 2^L >= T leaves, L + 1 levels, popcount(t) nodes per answer
        levels = math.ceil(math.log2(horizon)) + 1
        full = TreeLayout(horizon, 2, True)
        classic = Counter(full, calibrate(budget, "gaussian", levels, levels)).mean_variance(
            horizon)
        print(f"| {horizon} | {fact:.1f} | {smooth:.1f} | {binary:.1f} | {classic:.1f} | "
              f"{binary / fact:.2f} | {classic / fact:.2f} | {binary / smooth:.2f} |")


def unbounded(streams: int) -> None:
    print("\n## 3. no horizon against T=365 (unit=item, epsilon=1)")
    print("| delta | unbounded method | RMSE at t=365 | T=365 RMSE at t=365 | ratio | "
          "per-period RMSE 1..365 | T=365 per-period | ratio | measured unbounded |")
    print("|---|---|---|---|---|---|---|---|---|")
    for delta in (0.0, 1e-6):
        free = plan_stream(horizon=None, unit="item", epsilon=1.0, delta=delta, n_k=1,
                           method="auto", max_groups_per_item=None).counter
        bound = plan_stream(horizon=365, unit="item", epsilon=1.0, delta=delta, n_k=1,
                            method="auto", max_groups_per_item=None).counter
        a, b = math.sqrt(free.variance(365)), math.sqrt(bound.variance(365))
        c, d = math.sqrt(free.mean_variance(365)), math.sqrt(bound.mean_variance(365))
        meas = _measured(free, 365, streams, 7)
        print(f"| {delta:g} | {free.name} | {a:.2f} | {b:.2f} | {a / b:.2f} | {c:.2f} | "
              f"{d:.2f} | {c / d:.2f} | {meas:.2f} |")


def _events(path: Path, n: int, users: int, period: int, seed: int, groups: int = 0,
            every: bool = False) -> None:
    """``n`` events of ``users`` users in one period (``every``: each user once, in order)."""
    rng = np.random.default_rng(seed)
    who = np.arange(n) if every else rng.integers(0, users, n)
    cols = {"user": who, "day": np.full(n, period)}
    if groups:
        cols["campaign"] = np.array([f"c{g}" for g in range(groups)],
                                    dtype=object)[rng.integers(0, groups, n)]
    con = duckdb.connect()
    con.register("ev", cols)
    con.sql(f"COPY ev TO '{path}' (FORMAT parquet)")
    con.close()


def _duckdb_exact(state: Path, events: Path, out: Path, cap: int, grouped: bool) -> float:
    """DuckDB's exact update of the same per-item state: the baseline."""
    g = "campaign" if grouped else "0"
    t0 = time.perf_counter()
    con = duckdb.connect()
    con.sql(f"COPY (SELECT k, g, CAST(least(coalesce(s.c, 0) + coalesce(e.n, 0), {cap}) AS "
            f"UTINYINT) AS c FROM read_parquet('{state}') s FULL OUTER JOIN (SELECT "
            f"CAST(user AS BIGINT) AS k, {'gi' if grouped else '0'} AS g, count(*) AS n FROM "
            f"read_parquet('{events}') " + (
                f"JOIN (SELECT {g} AS name, row_number() OVER () - 1 AS gi FROM (SELECT "
                f"DISTINCT {g} FROM read_parquet('{events}'))) ON {g} = name "
                if grouped else "") + "GROUP BY ALL) e USING (k, g)) TO "
            f"'{out}' (FORMAT parquet)")
    con.close()
    return time.perf_counter() - t0


def _spark_exact(spark: Any, state: Path, events: Path, out: Path, cap: int,
                 grouped: bool) -> float:
    """Spark's exact update of the same per-item state (the same query as DuckDB's): the
    baseline of the Spark rows."""
    t0 = time.perf_counter()
    spark.read.parquet(str(state)).createOrReplaceTempView("bench_state")
    ev = spark.read.parquet(str(events))
    ev.createOrReplaceTempView("bench_events")
    if grouped:
        n = spark.sql("SELECT count(DISTINCT campaign) AS n FROM bench_events").first()["n"]
        spark.createDataFrame([(f"c{i}", i) for i in range(int(n))],  # the stream's codes
                              "name string, gi bigint").createOrReplaceTempView("bench_names")
        agg = ("SELECT CAST(user AS BIGINT) AS k, gi AS g, count(*) AS n FROM bench_events "
               "JOIN bench_names ON campaign = name GROUP BY 1, 2")
    else:
        agg = ("SELECT CAST(user AS BIGINT) AS k, CAST(0 AS BIGINT) AS g, count(*) AS n FROM "
               "bench_events GROUP BY 1")
    spark.sql(f"SELECT coalesce(s.k, e.k) AS k, coalesce(s.g, e.g) AS g, CAST(least("
              f"coalesce(CAST(s.c AS BIGINT), 0) + coalesce(e.n, 0), {cap}) AS TINYINT) AS c "
              f"FROM bench_state s FULL OUTER JOIN ({agg}) e ON s.k = e.k AND s.g = e.g"
              ).write.mode("overwrite").parquet(str(out))
    return time.perf_counter() - t0


def _bytes(path: Path) -> int:
    """Bytes of a per-item file, or of the data files of a Spark directory."""
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.glob("part-*"))


def _copy(src: Path, dst: Path) -> None:
    (shutil.copytree if src.is_dir() else shutil.copy)(src, dst)


def speed(users: int, events: int, groups: int, engines: tuple[str, ...],
          repeats: int = 3) -> None:
    print(f"\n## 4. append of {events:,} events to a stream of {users:,} known users (best of "
          f"{repeats}, each on a fresh copy of the stream; the baseline is the same engine's "
          "exact update of the same per-item state)")
    print("| engine | stream | known pairs after | append (s) | exact update (s) | ratio | "
          "state bytes per pair |")
    print("|---|---|---|---|---|---|---|")
    spark = _spark_session() if "spark" in engines else None
    root = Path(tempfile.mkdtemp(prefix="bench-stream-"))
    try:
        _events(root / "d1-0.parquet", users, users, 1, 1, 0, every=True)
        _events(root / "d2-0.parquet", events, 2 * users, 2, 2, 0)
        if groups:
            _events(root / f"d1-{groups}.parquet", users, users, 1, 1, groups, every=True)
            _events(root / f"d2-{groups}.parquet", events, 2 * users, 2, 2, groups)
        for engine in engines:
            for g in (0, groups):
                _speed_row(root, engine, spark, g, repeats)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _speed_row(root: Path, engine: str, spark: Any, g: int, repeats: int) -> None:
    names = [f"c{i}" for i in range(g)] if g else None
    s = ReachStream.create(root / f"{engine}{g}", item="user", time="day", horizon=30,
                           k_values=[1, 3], unit="event" if g else "item", epsilon=1.0,
                           delta=0.0, method="auto", late="error",
                           group="campaign" if g else None, groups=names, engine=engine,
                           rng=1)
    s.append(str(root / f"d1-{g}.parquet"), through=1)
    kept = root / f"state-{engine}{g}.parquet"
    _copy(s.path / s.state.items_file, kept)
    d2, exact = root / f"d2-{g}.parquet", root / "exact.parquet"
    t_stream, t_exact = [], []
    for r in range(repeats):
        copy = root / f"copy{engine}{g}-{r}"
        shutil.copytree(s.path, copy)
        c = ReachStream.open(copy)
        t0 = time.perf_counter()
        c.append(str(d2), through=2)
        t_stream.append(time.perf_counter() - t0)
        t_exact.append(_duckdb_exact(kept, d2, exact, 3, bool(g)) if engine == "duckdb"
                       else _spark_exact(spark, kept, d2, exact, 3, bool(g)))
        shutil.rmtree(copy)
    size = _bytes(kept) / max(1, s.state.n_pairs)
    label = f"{g} groups (event level)" if g else "ungrouped (item level)"
    print(f"| {engine} | {label} | {c.state.n_pairs:,} | {min(t_stream):.2f} | "
          f"{min(t_exact):.2f} | {min(t_stream) / min(t_exact):.2f} | {size:.1f} |", flush=True)


def capping(users: int, events: int, engines: tuple[str, ...], repeats: int = 3) -> None:
    groups, m = 100, 2
    print(f"\n## 5. the dropped fraction: append of {events:,} events over {groups} campaigns "
          f"to a stream of {users:,} known users (unit=item, m={m}; best of {repeats}, each on "
          "a fresh copy) with capping_epsilon=0.1 against without, same events, same run")
    print("| engine | append without (s) | append with capping_epsilon (s) | ratio | pairs "
          "without | pairs with (capped-out ones remembered) |")
    print("|---|---|---|---|---|---|")
    if "spark" in engines:
        _spark_session()  # the active session the Spark streams use
    root = Path(tempfile.mkdtemp(prefix="bench-capping-"))
    try:
        _events(root / "d1.parquet", users, users, 1, 1, groups, every=True)
        _events(root / "d2.parquet", events, users, 2, 2, groups)
        for engine in engines:
            row = []
            for cap_eps in (None, 0.1):
                s = ReachStream.create(root / f"{engine}-{cap_eps}", item="user", time="day",
                                       horizon=30, k_values=[1, 3], unit="item",
                                       epsilon=1.0, delta=0.0, method="auto", late="error",
                                       group="campaign", groups=[f"c{i}" for i in range(groups)],
                                       max_groups_per_item=m, capping_epsilon=cap_eps,
                                       engine=engine, rng=1)
                s.append(str(root / "d1.parquet"), through=1)
                times = []
                for r in range(repeats):
                    copy = root / f"copy-{engine}-{cap_eps}-{r}"
                    shutil.copytree(s.path, copy)
                    c = ReachStream.open(copy)
                    t0 = time.perf_counter()
                    with warnings.catch_warnings():  # the cap drops much here: by design
                        warnings.simplefilter("ignore", DPFreqWarning)
                        c.append(str(root / "d2.parquet"), through=2)
                    times.append(time.perf_counter() - t0)
                    shutil.rmtree(copy)
                row.append((min(times), c.state.n_pairs))
            (t0_, p0), (t1, p1) = row
            print(f"| {engine} | {t0_:.2f} | {t1:.2f} | {t1 / t0_:.2f} | {p0:,} | {p1:,} |",
                  flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _spark_session() -> Any:
    """A local[2] session for the Spark rows (the machine's 2 cores; 4 GB of driver heap)."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").appName("bench-stream")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "4g")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    ap.add_argument("--engines", nargs="+", default=["duckdb", "spark"],
                    choices=["memory", "duckdb", "spark"],
                    help="engines of the speed and capping tables (memory: capping only)")
    ap.add_argument("--only-speed", action="store_true", help="the speed table only")
    ap.add_argument("--only-capping", action="store_true", help="the capping table only")
    args = ap.parse_args()
    streams = 300 if args.quick else 2000
    if not (args.only_speed or args.only_capping):
        accuracy(streams)
        tree_shapes()
        zcdp_variances()
        unbounded(streams)
    engines = tuple(args.engines)
    if not args.only_capping:
        speed(*((10**6, 10**5) if args.quick else (10**7, 10**6)), 1000,
              tuple(e for e in engines if e != "memory"))
    if not args.only_speed:
        capping(*((10**5, 10**5) if args.quick else (10**6, 10**6)), engines)


if __name__ == "__main__":
    main()
