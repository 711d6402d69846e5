"""Profile release from a Parquet event log through DuckDB, against the memory engine.

    python benchmarks/bench_profile_duckdb.py [--events N | --full] [--domain-size D]
                                              [--max-count N] [--repeat R]

A Parquet file of ``--events`` events (default 10^7; ``--full``: 10^8) with heavy-tailed int64
item ids (about 10^6 distinct) is written once. Then, for each engine, in the same run:

* ``item_counts``: the exact per-item counts (DuckDB ``GROUP BY`` on the file; memory: numpy
  ``np.unique`` on the column read into memory),
* ``count_of_counts``: the exact count-of-counts clamped at ``n`` (what ``release_profile`` asks
  the engine for),
* ``release_profile``: the full ε-DP release by the default (direct) mechanism at item level
  (aggregate, exact discrete Laplace noise on the ``n + 1`` classes, exact projection),

each the best of ``--repeat`` runs, as wall time and events/s. The memory engine's reading of
the Parquet column (pyarrow → numpy) is timed separately and reported both excluded and
included. The baseline of the ratio column is the memory engine (ratio = memory time / DuckDB
time, > 1 means DuckDB is faster). ``noise+solve`` is ``release_profile`` from the exact count
vector (no engine), i.e. the part of the release that does not depend on the engine.

A last table compares the direct release with the sketch route (``method="fft"``, event level:
noise for every one of the ``d`` domain items, FFT reconstruction) on the same file through
DuckDB, in the same run (ratio = sketch time / direct time).
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

# The same synthetic Parquet log as the engine benchmark (benchmarks/ is on sys.path when a
# script in it runs).
from bench_engines import make_log


def best_of(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Minimum wall time over ``repeat`` calls, and the last result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=10**7)
    ap.add_argument("--full", action="store_true", help="10^8 events")
    ap.add_argument("--domain-size", type=int, default=10**7)
    ap.add_argument("--max-count", type=int, default=1000)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0, help="DuckDB threads (0: its default)")
    args = ap.parse_args()
    n_events = 10**8 if args.full else args.events

    import duckdb
    import pyarrow.parquet as pq

    from dpfreq.engines import get_engine
    from dpfreq.profile import release_profile

    d, n, eps, rep = args.domain_size, args.max_count, args.epsilon, args.repeat
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "events.parquet"
        t0 = time.perf_counter()
        make_log(path, n_events)
        gen_s = time.perf_counter() - t0
        size_mb = path.stat().st_size / 2**20
        print(f"# {n_events:.3g} events, {size_mb:.0f} MiB Parquet (written in {gen_s:.1f} s); "
              f"d = {d:.3g}, n = {n}, ε = {eps}; best of {rep}; {os.cpu_count()} CPUs")

        con = duckdb.connect()
        if args.threads:
            con.execute(f"SET threads = {args.threads}")
        duck = get_engine("duckdb", connection=con)
        mem = get_engine("memory")

        load_s, col = best_of(
            lambda: pq.read_table(path, columns=["item"]).column("item").to_numpy(), rep)
        msrc = {"item": col}
        src = str(path)

        def release(eng: Any, source: Any, method: str = "direct", unit: str = "item") -> Any:
            return release_profile(source, item="item", domain_size=d, max_count=n,
                                   epsilon=eps, unit=unit, method=method, engine=eng, rng=None)

        rows: list[tuple[str, float, float]] = []
        t_ic_d, ic = best_of(lambda: duck.item_counts(src, item="item"), rep)
        t_ic_m, ic_m = best_of(lambda: mem.item_counts(msrc, item="item"), rep)
        assert np.array_equal(ic.counts, ic_m.counts)
        assert int(ic.counts.sum()) == n_events
        rows.append(("item_counts", t_ic_d, t_ic_m))
        t_cc_d, _ = best_of(lambda: duck.count_of_counts(src, item="item", max_count=n), rep)
        t_cc_m, _ = best_of(lambda: mem.count_of_counts(msrc, item="item", max_count=n), rep)
        rows.append(("count_of_counts", t_cc_d, t_cc_m))
        t_rel_d, rel = best_of(lambda: release(duck, src), rep)
        t_rel_m, _ = best_of(lambda: release(mem, msrc), rep)
        rows.append(("release_profile", t_rel_d, t_rel_m))
        counts = ic.counts
        t_ns, _ = best_of(lambda: release_profile(counts, domain_size=d, max_count=n,
                                                  epsilon=eps, unit="item"), rep)
        t_fft, _ = best_of(lambda: release(duck, src, method="fft", unit="event"), rep)

        print(f"\nmemory engine: reading the Parquet column into numpy {load_s:.2f} s "
              f"({n_events / load_s / 1e6:.1f} M events/s); distinct items {ic.keys.size}; "
              f"mechanism {rel.mechanism}")
        hdr = (f"{'stage':<17}{'duckdb s':>10}{'duckdb Mev/s':>14}{'memory s':>10}"
               f"{'memory Mev/s':>14}{'ratio':>8}{'mem+load s':>12}{'ratio+load':>12}")
        print(hdr)
        print("-" * len(hdr))
        for name, td, tm in rows:
            print(f"{name:<17}{td:>10.3f}{n_events / td / 1e6:>14.1f}{tm:>10.3f}"
                  f"{n_events / tm / 1e6:>14.1f}{tm / td:>8.2f}{tm + load_s:>12.3f}"
                  f"{(tm + load_s) / td:>12.2f}")
        print(f"\nnoise+solve (release_profile from the exact count vector, d = {d:.3g}): "
              f"{t_ns:.3f} s; engine share of the DuckDB release: "
              f"{max(0.0, t_rel_d - t_ns) / t_rel_d:.0%}")
        print("ratio = memory time / DuckDB time (baseline: memory engine, same run); "
              f"peak RSS of this process {peak_rss_mb():.0f} MiB")
        print(f"\nthrough DuckDB on the same file: direct {t_rel_d:.3f} s, sketch route (fft) "
              f"{t_fft:.3f} s; ratio sketch / direct = {t_fft / t_rel_d:.2f}")


if __name__ == "__main__":
    main()
