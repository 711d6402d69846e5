"""Engines benchmark: memory (numpy) vs DuckDB vs Spark local[2] on a Parquet event log.

    python benchmarks/bench_engines.py [--quick | --full] [--no-spark] [--sketch-d D]
    python benchmarks/bench_engines.py --windows [--quick | --full]

* ``item_counts`` and ``count_of_counts`` on 10^7 events (10^6 with --quick, 10^8 with --full)
  read from one Parquet file: wall time, events/s, and peak memory of the driver. Each engine
  runs in its own subprocess, so peak RSS (``resource.getrusage(RUSAGE_SELF).ru_maxrss``) is
  that engine's alone; for Spark local mode the JVM (driver = executor here) is reported
  separately (VmHWM of the JVM process). The memory engine's time includes reading the Parquet
  columns into numpy (reported separately too). Baseline for the ratios: DuckDB.
* ``occurrence_times`` with no ``k_max`` (every event, sorted, to the driver: what
  ``release_window_counts`` asks an engine for): time and the driver's peak memory.
* ``--windows``: ``release_window_counts(windows=["cumulative", 7], k_values=[1, 3])`` on a
  Parquet log with integer periods ``1..365``: Spark and DuckDB, each computing the window
  summaries in one SQL statement (``Summarizing.summaries``: only the summaries reach the
  Python process). Wall time (session start excluded) and peak memory of the Python driver and
  of the local-mode JVM.
* The distributed profile sketch: creation (noise drawn on executors) + write to Parquet, and
  the reduction to the noisy profile, at the ``--sketch-d`` domain sizes; driver (Python) RSS.
* A *projection* (labelled as such) of the number of machines at which Spark overtakes DuckDB
  on a 10^10-event log, from the measured throughputs.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ITEMS = 10**6  # distinct item ids drawn from (heavy-tailed)


def _bench_session(memory: str):
    """The benchmarks' Spark session: local[2], UTC, driver memory ``memory``."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").appName("bench")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "8")
             .config("spark.driver.memory", memory)
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _run_worker(cmd: list[str], eng: str) -> dict[str, Any] | None:
    """Run one engine's worker process; its ``RESULT {json}`` line, or None (failure printed)."""
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if proc.returncode or not line:
        print(f"# {eng} failed:\n{proc.stderr[-2000:]}")
        return None
    out: dict[str, Any] = json.loads(line[0][7:])
    return out


def make_log(path: Path, n_events: int, seed: int = 2026, horizon: int | None = None) -> None:
    """A Parquet log of n events: heavy-tailed int64 item ids and int64 times (uniform in
    ``0..10^6-1``, or in the periods ``1..horizon`` when given)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    gen = np.random.Generator(np.random.PCG64(seed))
    chunk = 5 * 10**6
    schema = pa.schema([("item", pa.int64()), ("time", pa.int64())])
    with pq.ParquetWriter(path, schema) as w:
        for start in range(0, n_events, chunk):
            m = min(chunk, n_events - start)
            items = (gen.pareto(1.1, m) * 50).astype(np.int64) % ITEMS
            times = (gen.integers(0, 10**6, m, dtype=np.int64) if horizon is None
                     else gen.integers(1, horizon + 1, m, dtype=np.int64))
            w.write_table(pa.table({"item": items, "time": times}), row_group_size=10**6)


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _now_mb() -> float:
    """Current (not peak) RSS of this process."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def _jvm_pid(spark: Any) -> int:
    return int(spark._jvm.java.lang.ProcessHandle.current().pid())


def _hwm_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


def profile_release(eng: Any, src: Any, max_count: int = 100) -> Any:
    """A full profile release through the engine: ``release_profile`` at item level with the
    default method (direct: exact count-of-counts from the engine, exact discrete Laplace noise
    on its ``max_count + 1`` classes, projection onto non-negative integer counts summing to the
    public domain size ITEMS)."""
    from dpfreq.profile import release_profile

    return release_profile(src, item="item", domain_size=ITEMS, max_count=max_count,
                           epsilon=1.0, unit="item", engine=eng, rng=None)


WINDOW_HORIZON = 365


def _spark(args: argparse.Namespace) -> Any:

    spark = _bench_session(args.spark_memory)
    return spark


def _python_workers_peak(stop: Any, out: dict[str, float]) -> None:
    """Poll the RSS of Spark's Python worker processes (executor side; ``pyspark.daemon`` and
    its forks) every 0.2 s; record the largest single worker and the largest sum."""
    me = os.getpid()

    def descends_from_me(pid: int) -> bool:
        for _ in range(8):
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            if pid == me:
                return True
            if pid <= 1:
                return False
        return False

    while not stop.wait(0.2):
        total = 0.0
        for d in Path("/proc").iterdir():
            if not d.name.isdigit() or int(d.name) == me:
                continue
            try:
                cmd = (d / "cmdline").read_bytes()
                if (b"pyspark.daemon" not in cmd and b"pyspark.worker" not in cmd) \
                        or not descends_from_me(int(d.name)):
                    continue
                rss = next(int(x.split()[1]) / 1024.0 for x in
                           (d / "status").read_text().splitlines() if x.startswith("VmRSS:"))
            except (OSError, StopIteration, ValueError, IndexError):
                continue
            total += rss
            out["one"] = max(out.get("one", 0.0), rss)
        out["sum"] = max(out.get("sum", 0.0), total)


def windows_worker(engine: str, path: str, args: argparse.Namespace) -> dict[str, Any]:
    """One window release in this (fresh) process: engine "spark" or "duckdb"; time and peak
    memory (driver = this Python process; JVM separately)."""
    from dpfreq.engines import get_engine
    from dpfreq.windows import release_window_counts

    out: dict[str, Any] = {"engine": engine, "baseline_rss_mb": _rss_mb()}
    spark = None
    if engine == "duckdb":
        eng: Any = get_engine("duckdb")
    else:
        t0 = time.perf_counter()
        spark = _spark(args)
        out["session_s"] = time.perf_counter() - t0
        eng = get_engine("spark", spark=spark)
    import threading

    stop, workers = threading.Event(), {}  # type: ignore[var-annotated]
    sampler = threading.Thread(target=_python_workers_peak, args=(stop, workers), daemon=True)
    sampler.start()
    for run in ("", "_warm"):  # first (cold: JVM and Python workers warm up) and second run
        t0 = time.perf_counter()
        try:
            rel = release_window_counts(path, item="item", time="time", horizon=WINDOW_HORIZON,
                                        epsilon=1.0, unit="event", k_values=[1, 3],
                                        windows=["cumulative", 7], engine=eng, rng=2026)
        except Exception as exc:  # e.g. the driver runs out of memory: a result, not a crash
            out["error"] = str(exc).splitlines()[0][:200]
            out[f"release{run}_s"] = time.perf_counter() - t0
            break
        out[f"release{run}_s"] = time.perf_counter() - t0
        out["reach_T"] = int(rel.value["cumulative"][1][-1])
    out["driver_rss_mb"] = _rss_mb()
    stop.set()
    sampler.join()
    out["py_worker_mb"], out["py_workers_mb"] = workers.get("one", 0.0), workers.get("sum", 0.0)
    if spark is not None:
        out["jvm_hwm_mb"] = _hwm_mb(_jvm_pid(spark))
        spark.stop()
    return out


def windows_main(n: int, args: argparse.Namespace) -> None:
    engines = ["duckdb"] + ([] if args.no_spark else ["spark"])
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        path = Path(tmp) / "events.parquet"
        t0 = time.perf_counter()
        make_log(path, n, horizon=WINDOW_HORIZON)
        print(f"# windows: {n:.0e} events, periods 1..{WINDOW_HORIZON}, Parquet "
              f"{path.stat().st_size / 2**20:.0f} MiB written in {time.perf_counter() - t0:.1f} s")
        results = {}
        for eng in engines:
            cmd = [sys.executable, __file__, "--worker", f"windows:{eng}", str(path),
                   "--spark-memory", args.spark_memory]
            res = _run_worker(cmd, eng)
            if res is not None:
                results[eng] = res
    print(f"\n{'engine':<14} {'cold s':>8} {'warm s':>8} {'events/s':>10} {'driver MB':>10} "
          f"{'(idle MB)':>10} {'JVM MB':>8} {'py worker':>10}  result")
    for eng, r in results.items():
        jvm = f"{r['jvm_hwm_mb']:.0f}" if "jvm_hwm_mb" in r else "-"
        res = r.get("error", f"noisy reach(T) = {r.get('reach_T')}")
        warm = r.get("release_warm_s", float("nan"))
        pyw = (f"{r['py_worker_mb']:.0f}/{r['py_workers_mb']:.0f}" if r.get("py_workers_mb")
               else "-")
        print(f"{eng:<14} {r['release_s']:8.2f} {warm:8.2f} {n / warm:10.3e} "
              f"{r['driver_rss_mb']:10.0f} {r['baseline_rss_mb']:10.0f} {jvm:>8} {pyw:>10}  "
              f"{res}")
    print("(release_window_counts(windows=['cumulative', 7], k_values=[1, 3], horizon=365, "
          "unit='event', "
          "rng=2026: same noise, so equal results mean equal exact counts); "
          "spark and duckdb: the summaries in one SQL statement; driver MB = peak RSS of the "
          "Python driver; JVM MB = peak of "
          f"the local[2] JVM (driver and executor in one process, -Xmx {args.spark_memory}); "
          "py worker = peak RSS of one / all executor Python workers (sampled every 0.2 s); "
          "session start not included)")


def worker(engine: str, path: str, args: argparse.Namespace) -> dict[str, Any]:
    """Run one engine in this (fresh) process; returns timings and peak memory."""
    from dpfreq.engines import get_engine

    if engine.startswith("windows:"):
        return windows_worker(engine.split(":", 1)[1], path, args)

    out: dict[str, Any] = {"engine": engine}
    import pyarrow.parquet as pq

    out["baseline_rss_mb"] = _rss_mb()
    if engine == "memory":
        t0 = time.perf_counter()
        col = pq.read_table(path, columns=["item"]).column("item").to_numpy()
        out["load_s"] = time.perf_counter() - t0
        src: Any = {"item": col}
        eng = get_engine("memory")
    elif engine == "duckdb":
        src, eng = path, get_engine("duckdb")
        out["load_s"] = 0.0
    else:

        t0 = time.perf_counter()

        spark = _bench_session(args.spark_memory)
        out["session_s"] = time.perf_counter() - t0
        out["load_s"] = 0.0
        src, eng = path, get_engine("spark", spark=spark)
    for run in ("", "_warm"):  # first (cold) and second run
        t0 = time.perf_counter()
        ic = eng.item_counts(src, item="item")
        out[f"item_counts{run}_s"] = time.perf_counter() - t0 + out["load_s"]
        t0 = time.perf_counter()
        eng.count_of_counts(src, item="item", max_count=100)
        out[f"count_of_counts{run}_s"] = time.perf_counter() - t0 + out["load_s"]
        t0 = time.perf_counter()
        profile_release(eng, src)
        out[f"profile_release{run}_s"] = time.perf_counter() - t0 + out["load_s"]
    out["n_items"] = len(ic.keys)
    out["n_events"] = int(ic.counts.sum())
    out["driver_rss_mb"] = _rss_mb()
    if args.occurrences:
        # what release_window_counts asks for: every (item, time) pair, sorted, on the driver
        t0 = time.perf_counter()
        if engine == "memory":
            src = {"item": src["item"],
                   "time": pq.read_table(path, columns=["time"]).column("time").to_numpy()}
        try:
            occ = eng.occurrence_times(src, item="item", time="time", k_max=None)
        except Exception as exc:  # e.g. the driver runs out of memory: a result, not a crash
            out["occurrence_error"] = str(exc).splitlines()[0][:160]
            out["occurrence_times_s"] = time.perf_counter() - t0
        else:
            out["occurrence_times_s"] = time.perf_counter() - t0
            out["occurrence_rows"] = int(occ.times.size)
            del occ
        out["occurrence_rss_mb"] = _rss_mb()
    if engine == "spark":
        out["jvm_hwm_mb"] = _hwm_mb(_jvm_pid(spark))
        if args.sketch_d:
            out["sketch"] = sketch_worker(spark, args)
        spark.stop()
    return out


def sketch_worker(spark: Any, args: argparse.Namespace) -> list[dict[str, Any]]:
    from dpfreq.profile import DistributedProfileSketch

    rows = []
    for d in args.sketch_d:
        with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
            t0 = time.perf_counter()
            sk = DistributedProfileSketch.create(engine=spark, domain_size=d, max_count=100,
                                                 epsilon=1.0)
            sk.save(Path(tmp) / "sketch")
            create_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            counts = sk.noisy_profile_counts(20)
            reduce_s = time.perf_counter() - t0
            assert int(counts.sum()) <= d
            rows.append({"d": d, "create_save_s": create_s, "profile_counts_s": reduce_s,
                         "driver_rss_mb": _rss_mb(), "driver_now_mb": _now_mb(),
                         "jvm_hwm_mb": _hwm_mb(_jvm_pid(spark))})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="10^6 events")
    ap.add_argument("--full", action="store_true", help="10^8 events")
    ap.add_argument("--no-spark", action="store_true")
    ap.add_argument("--sketch-d", type=int, nargs="*", default=None,
                    help="domain sizes of the distributed sketch (default 10^6 10^7)")
    ap.add_argument("--spark-memory", default="4g")
    ap.add_argument("--no-occurrences", dest="occurrences", action="store_false",
                    help="skip occurrence_times (all events to the driver)")
    ap.add_argument("--windows", action="store_true",
                    help="only the window-release benchmark (DuckDB and Spark)")
    ap.add_argument("--tmp", default=None, help="directory for the Parquet log")
    ap.add_argument("--worker", nargs=2, metavar=("ENGINE", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.sketch_d is None:
        args.sketch_d = [10**5] if args.quick else [10**6, 10**7]
    if args.worker:
        print("RESULT " + json.dumps(worker(args.worker[0], args.worker[1], args)))
        return

    n = 10**6 if args.quick else 10**8 if args.full else 10**7
    if args.windows:
        windows_main(n, args)
        return
    engines = ["memory", "duckdb"] + ([] if args.no_spark else ["spark"])
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        path = Path(tmp) / "events.parquet"
        t0 = time.perf_counter()
        make_log(path, n)
        print(f"# {n:.0e} events, {ITEMS:.0e} possible items, Parquet "
              f"{path.stat().st_size / 2**20:.0f} MiB written in {time.perf_counter() - t0:.1f} s")
        results = {}
        for eng in engines:
            cmd = [sys.executable, __file__, "--worker", eng, str(path),
                   "--spark-memory", args.spark_memory]
            if not args.occurrences:
                cmd.append("--no-occurrences")
            if eng == "spark":
                cmd += ["--sketch-d", *map(str, args.sketch_d)]
            if args.tmp:
                cmd += ["--tmp", args.tmp]
            res = _run_worker(cmd, eng)
            if res is not None:
                results[eng] = res

    base = results.get("duckdb")
    print(f"\n{'engine':<8} {'op':<16} {'cold s':>8} {'warm s':>8} {'events/s':>11} "
          f"{'vs duckdb':>10} {'driver MB':>10} {'(idle MB)':>10} {'JVM MB':>8}")
    for eng, r in results.items():
        for op in ("item_counts", "count_of_counts", "profile_release"):
            t, tw = r[f"{op}_s"], r[f"{op}_warm_s"]
            ratio = tw / base[f"{op}_warm_s"] if base else float("nan")
            jvm = f"{r['jvm_hwm_mb']:.0f}" if "jvm_hwm_mb" in r else "-"
            print(f"{eng:<8} {op:<16} {t:8.2f} {tw:8.2f} {n / tw:11.3e} {ratio:10.2f} "
                  f"{r['driver_rss_mb']:10.0f} {r['baseline_rss_mb']:10.0f} {jvm:>8}")
    print("(events/s and ratios from the warm run; idle MB = driver RSS before the engine ran;\n"
          f" profile_release = release_profile(unit='item', method 'auto' = direct): "
          f"count_of_counts + discrete Laplace on n + 1 = 101 classes + projection, "
          f"d = {ITEMS:.0e})")
    if "memory" in results:
        print(f"(memory includes {results['memory']['load_s']:.2f} s Parquet -> numpy)")
    if any("occurrence_times_s" in r for r in results.values()):
        print(f"\n{'engine':<8} {'occurrence_times s':>19} {'events/s':>11} {'driver MB':>10}")
        for eng, r in results.items():
            if "occurrence_error" in r:
                print(f"{eng:<8} failed after {r['occurrence_times_s']:.0f} s: "
                      f"{r['occurrence_error']}")
                continue
            print(f"{eng:<8} {r['occurrence_times_s']:19.2f} "
                  f"{n / r['occurrence_times_s']:11.3e} {r['occurrence_rss_mb']:10.0f}")
        print("(occurrence_times(k_max=None): every (item, time) pair sorted and collected to the "
              "driver, as release_window_counts needs; one run after the others; driver MB = "
              "peak RSS after it)")
    if "spark" in results:
        r = results["spark"]
        print(f"(spark session start {r['session_s']:.1f} s, not included)")
        print(f"\n{'sketch d':>10} {'create+save s':>14} {'items/s':>10} {'profile s':>10} "
              f"{'driver MB':>10} {'(now MB)':>9} {'JVM MB':>8}")
        for s in r.get("sketch", []):
            print(f"{s['d']:10.0e} {s['create_save_s']:14.2f} {s['d'] / s['create_save_s']:10.2e} "
                  f"{s['profile_counts_s']:10.2f} {s['driver_rss_mb']:10.0f} "
                  f"{s['driver_now_mb']:9.0f} {s['jvm_hwm_mb']:8.0f}")
        print("(driver MB = peak RSS of the Python driver since it started, incl. the engine "
              "runs above; now MB = its current RSS; JVM = peak of the local-mode JVM, which is "
              "driver and executors at once)")
    if "spark" in results and base:
        rd = n / base["item_counts_warm_s"]
        rs = n / results["spark"]["item_counts_warm_s"]
        machines = rd / rs
        big = 10**10
        print("\nPROJECTION (not a measurement): item_counts on a 10^10-event log. Assumes the "
              "measured per-machine throughputs (2 cores) scale linearly, Spark across machines "
              "with a fixed ~10 s job overhead, DuckDB on one such machine (out-of-core).")
        print(f"  DuckDB, 1 machine: {big / rd / 60:.0f} min; Spark per 2-core machine: "
              f"{rs:.2e} events/s")
        m_star = (np.ceil(machines * big / (big - 10 * rd))) if big > 10 * rd else -1
        m_star = int(m_star)
        print(f"  Spark overtakes DuckDB at about {m_star} machines "
              f"(throughput ratio DuckDB/Spark = {machines:.1f}).")


if __name__ == "__main__":
    main()
