"""Grouped and ungrouped window releases at scale against the engine's own exact floor, one run.

    python benchmarks/bench_scale.py [--rows 10000000] [--groups 1000] [--engines duckdb spark]
    python benchmarks/bench_scale.py --rows 100000000 --engines duckdb   # the 10^8 row

A seeded Parquet ad log (``user``, ``campaign``, ``day``): users and campaigns log-uniform (a
Zipf law of exponent 1: heavy users and campaigns, a long tail), 30 days. Per engine, in the
same process and run:

* **grouped floor**: the bounded exact aggregate in the engine's own SQL — distinct (user,
  campaign) pairs with their first day, a hash rank per user (the engine's own ``hash()``),
  keep ≤ 5, count per campaign and first day (DuckDB SQL, or Spark SQL on the same file); the
  ratio is against this floor; the same with an MD5 rank per pair is printed beside it;
* **grouped release**: ``release_window_counts(..., group="campaign", groups=[all 1,000],
  max_groups_per_item=5, windows=["total"], k_values=[1], unit="item")`` on that engine;
* **ungrouped floor**: first day per user, count per day (the cumulative reach's exact
  aggregate), and the release ``windows=["cumulative"], k_values=[1]``.

Each row prints the wall time of both and their ratio (target ≤ 2), and the process's peak
resident memory (``ru_maxrss``; for Spark local mode the driver's Python only — the JVM's heap
is capped by ``--spark-memory``). Timings are wall-clock on a shared machine: ``uptime`` is
printed at the start and the end. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HORIZON = 30
M = 5


def uptime() -> str:
    return os.popen("uptime").read().strip()


def make_log(path: Path, rows: int, users: int, groups: int, seed: int = 7) -> None:
    """The log, written by DuckDB (seeded): log-uniform user and campaign ids, uniform day."""
    import duckdb

    con = duckdb.connect()
    con.execute(f"SELECT setseed({1.0 / (seed + 1)})")
    con.execute(
        f"COPY (SELECT CAST(floor(exp(random() * ln({users}))) AS BIGINT) - 1 AS user, "
        f"'c' || CAST(CAST(floor(exp(random() * ln({groups}))) AS BIGINT) - 1 AS VARCHAR) "
        f"AS campaign, CAST(floor(random() * {HORIZON}) AS BIGINT) + 1 AS day "
        f"FROM range({rows})) TO '{path}' (FORMAT parquet)")
    con.close()


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# -- the floors: each engine's own best exact query -----------------------------------------
#: the bounded exact aggregate with the engine's own (unkeyed, non-cryptographic) hash rank
GROUPED_FLOOR = (
    "WITH pairs AS (SELECT user, campaign, min(day) AS first FROM {src} GROUP BY 1, 2), "
    "ranked AS (SELECT campaign, first, row_number() OVER (PARTITION BY user ORDER BY "
    "hash(user, campaign)) AS r FROM pairs) "
    "SELECT campaign, first, count(*) AS n FROM ranked WHERE r <= {m} GROUP BY 1, 2")
#: the same with an MD5 rank of every pair (what a keyed string hash per pair costs)
GROUPED_FLOOR_MD5 = GROUPED_FLOOR.replace("hash(user, campaign)",
                                          "md5(CAST(user AS STRING) || campaign)")
UNGROUPED_FLOOR = ("SELECT first, count(*) AS n FROM (SELECT user, min(day) AS first FROM {src} "
                   "GROUP BY 1) GROUP BY 1")


def duckdb_floor(path: Path, sql: str) -> float:
    import duckdb

    con = duckdb.connect()
    t0 = time.perf_counter()
    con.sql(sql.format(src=f"read_parquet('{path}')", m=M)).fetchall()
    dt = time.perf_counter() - t0
    con.close()
    return dt


def spark_floor(spark: Any, path: Path, sql: str) -> float:
    spark.read.parquet(str(path)).createOrReplaceTempView("bench_log")
    t0 = time.perf_counter()
    spark.sql(sql.format(src="bench_log", m=M)).collect()
    return time.perf_counter() - t0


def release(path: Path, engine: Any, grouped: bool, names: list[str]) -> float:
    from dpfreq.windows import release_window_counts

    kw: dict[str, Any] = {"item": "user", "time": "day", "horizon": HORIZON, "epsilon": 1.0,
                          "unit": "item", "k_values": [1], "rng": 1, "engine": engine}
    if grouped:
        kw.update(group="campaign", groups=names, max_groups_per_item=M, windows=["total"])
    else:
        kw.update(windows=["cumulative"])
    t0 = time.perf_counter()
    rel = release_window_counts(str(path), **kw)
    dt = time.perf_counter() - t0
    assert len(rel.groups if grouped else [1]) >= 1
    return dt


def spark_session(memory: str) -> Any:
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").appName("bench-scale")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "8")
             .config("spark.driver.memory", memory)
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=10**7)
    ap.add_argument("--users", type=int, default=None, help="default: rows / 10")
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--engines", nargs="+", default=["duckdb"],
                    choices=["duckdb", "spark", "memory"])
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--spark-memory", default="6g")
    ap.add_argument("--tmp", default=None)
    ap.add_argument("--no-md5-floor", action="store_true",
                    help="skip the MD5-rank floor (slow at 10^8 rows)")
    args = ap.parse_args()
    users = args.users or max(10, args.rows // 10)
    names = [f"c{i}" for i in range(args.groups)]
    print(f"rows={args.rows:,} users={users:,} groups={args.groups:,} m={M} T={HORIZON}; "
          f"uptime: {uptime()}")
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        path = Path(tmp) / "log.parquet"
        t0 = time.perf_counter()
        make_log(path, args.rows, users, args.groups)
        print(f"log written in {time.perf_counter() - t0:.1f} s "
              f"({path.stat().st_size / 2**20:.0f} MiB)")
        print(f"{'engine':7} {'release':9} {'floor_s':>8} {'md5_floor_s':>11} {'dpfreq_s':>9} "
              f"{'ratio':>6} {'peak_MB':>8}")
        for eng in args.engines:
            spark = spark_session(args.spark_memory) if eng == "spark" else None
            engine: Any = eng
            if spark is not None:
                from dpfreq.engines import get_engine

                engine = get_engine(spark)
            for grouped in (True, False):
                for _ in range(args.reps):
                    floors = []
                    for sql in ((GROUPED_FLOOR, GROUPED_FLOOR_MD5) if grouped
                                else (UNGROUPED_FLOOR,)):
                        if sql is GROUPED_FLOOR_MD5 and args.no_md5_floor:
                            continue
                        floors.append(spark_floor(spark, path, sql) if spark is not None
                                      else duckdb_floor(path, sql))
                    ours = release(path, engine, grouped, names)
                    label = "grouped" if grouped else "cumul."
                    md5 = f"{floors[1]:11.2f}" if len(floors) > 1 else f"{'-':>11}"
                    print(f"{eng:7} {label:9} {floors[0]:8.2f} {md5} {ours:9.2f} "
                          f"{ours / floors[0]:6.2f} {peak_mb():8.0f}", flush=True)
            if spark is not None:
                spark.stop()
    print(f"uptime at the end: {uptime()}")


if __name__ == "__main__":
    main()
