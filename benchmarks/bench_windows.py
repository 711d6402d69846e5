"""Benchmark of dpfreq.windows (issue 5): accuracy against the spec §7.6 baselines, and speed.

Run ``python benchmarks/bench_windows.py [--quick]``. Prints tables:

1. RMSE vs T (event level, k = 1, ε = 1) for cumulative, rolling W = 7 and arbitrary windows,
   with the log–log slope of RMSE against log2 T and the closed-form prediction.
2. RMSE vs k at T = 365.
3. Baselines on the same data at T = 365 (event and item level): every strategy forced, the
   ``auto`` choice, ratio auto / best baseline (must be <= 1) and per-window composition / auto.
4. Speed: ingest events/s, release time and random window queries/s.

RMSE is measured: |estimate − exact count| over random queries and several independent
releases (different seeds), where the exact count is brute-force-verified in the tests.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from dpfreq.windows import release_window_counts
from dpfreq.windows.counts import _Axis, _bucket, _load_log


def make_log(rng: np.random.Generator, n_events: int, horizon: int, n_items: int):
    item = rng.integers(0, n_items, size=n_events)
    times = rng.integers(1, horizon + 1, size=n_events)
    return item, times


def measured_rmse(item, times, horizon, family, k, level, strategy, reps, n_queries, seed,
                  delta=0.0):
    rng = np.random.default_rng(seed)
    errs = []
    pred = []
    for r in range(reps):
        fam = family if family != "fixed" else 7
        strat = "auto" if strategy == "auto" else {fam: strategy}
        rel = release_window_counts((item, times), horizon=horizon, epsilon=1.0, k_values=[k],
                                    level=level, windows=[fam], strategy=strat, delta=delta,
                                    rng=seed * 1000 + r)
        if family == "cumulative":
            t2 = rng.integers(1, horizon + 1, size=n_queries)
            t1 = np.ones_like(t2)
        elif family == "fixed":
            t2 = rng.integers(1, horizon + 1, size=n_queries)
            t1 = np.maximum(1, t2 - 6)
        else:
            a = rng.integers(1, horizon + 1, size=(2, n_queries))
            t1, t2 = a.min(axis=0), a.max(axis=0)
        ans = rel.window(t1, t2, k)
        _label, s = next(iter(rel._state.structures.items()))
        exact = rel._state.exact(s, t1, t2)
        errs.append(np.asarray(ans.estimate) - exact)
        pred.append(np.asarray(ans.sd) ** 2 + s.bias_bound() ** 2)
        chosen = s.strategy if delta == 0 else f"{s.strategy}/{s.noise_kind}"
    e = np.concatenate(errs)
    return float(np.sqrt(np.mean(e.astype(np.float64) ** 2))), float(
        np.sqrt(np.mean(np.concatenate(pred)))), chosen


def table(rows, header):
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(header)]
    print("  ".join(str(h).rjust(w) for h, w in zip(header, widths, strict=True)))
    for r in rows:
        print("  ".join(str(v).rjust(w) for v, w in zip(r, widths, strict=True)))
    print()


def bench_vs_t(quick: bool) -> None:
    print("## 1. RMSE vs T (event level, k=1, eps=1, auto strategy; measured vs predicted)")
    exps = range(6, 11) if quick else range(6, 15)
    rng = np.random.default_rng(1)
    rows = []
    series: dict[str, list[tuple[int, float]]] = {}
    for e in exps:
        horizon = 2**e
        item, times = make_log(rng, 20 * horizon, horizon, 2 * horizon)
        for fam in ("cumulative", "fixed", "all"):
            for strat in (("auto",) if fam != "fixed" else ("auto", "blocks")):
                reps = 3 if fam == "all" else 5
                nq = 300 if fam == "all" else 1000
                rm, pr, chosen = measured_rmse(item, times, horizon, fam, 1, "event", strat,
                                               reps, nq, e)
                name = f"{fam}/{strat}"
                series.setdefault(name, []).append((horizon, rm))
                rows.append((horizon, name, chosen, f"{rm:.1f}", f"{pr:.1f}"))
    table(rows, ("T", "family/strategy", "chosen", "RMSE", "predicted"))
    rows = []
    for name, pts in series.items():
        lt = np.log([math.log2(t) for t, _ in pts])
        lr = np.log([r for _, r in pts])
        slope = float(np.polyfit(lt, lr, 1)[0])
        expect = {"cumulative/auto": "1.5 (log^1.5 T)", "fixed/auto": "0 (per-window, W only)",
                  "fixed/blocks": "0 (log^1.5 W)", "all/auto": "3 (log^3 T)"}[name]
        rows.append((name, f"{slope:.2f}", expect))
    table(rows, ("series", "slope d log RMSE / d log log2 T", "polylog prediction"))


def bench_vs_k(quick: bool) -> None:
    print("## 2. RMSE vs k (event level, T=365, eps=1, auto)")
    horizon = 365
    rng = np.random.default_rng(2)
    item, times = make_log(rng, 20 * horizon, horizon, 1500)
    rows = []
    for k in (1, 2, 4, 8):
        row = [k]
        for fam in ("cumulative", "fixed", "all"):
            rm, _pr, chosen = measured_rmse(item, times, horizon, fam, k, "event", "auto",
                                           2 if quick else 4, 300, 10 + k)
            row += [f"{rm:.0f} ({chosen})"]
        rows.append(tuple(row))
    table(rows, ("k", "cumulative", "fixed W=7", "all windows"))


BASELINES = {
    "cumulative": ("tree", "per_query"),
    "fixed": ("blocks", "single", "per_query"),
    "all": ("tree2d", "per_start", "per_query"),
}


def bench_baselines(quick: bool) -> None:
    print("## 3. Against the spec §7.6 baselines on the same data (T=365, eps=1)")
    print("   per_query = independent noise per window with composition (a), (c);"
          " per_start = one tree per start (b)")
    horizon = 365
    rng = np.random.default_rng(3)
    item, times = make_log(rng, 20 * horizon, horizon, 1500)
    rows = []
    for level in ("event", "item"):
        for k in ((1, 4) if not quick else (1,)):
            for fam, strats in BASELINES.items():
                res = {}
                for s in strats:
                    if level == "item" and s in ("single", "tree2d"):
                        continue
                    res[s] = measured_rmse(item, times, horizon, fam, k, level, s,
                                           2 if quick else 3, 300, 7)[0]
                auto, _, chosen = measured_rmse(item, times, horizon, fam, k, level, "auto",
                                                2 if quick else 3, 300, 7)
                best = min(res.values())
                rows.append((level, k, fam, " ".join(f"{s}={v:.0f}" for s, v in res.items()),
                             f"{auto:.0f} ({chosen})", f"{auto / best:.2f}",
                             f"{res['per_query'] / auto:.1f}x"))
    table(rows, ("level", "k", "family", "strategies (RMSE)", "auto", "auto/best",
                 "per-window/auto"))


def bench_approx(quick: bool) -> None:
    print("## 3b. (eps, delta) = (1, 1e-6): zCDP with discrete Gaussian vs pure eps = 1 (T=365)")
    horizon = 365
    rng = np.random.default_rng(5)
    item, times = make_log(rng, 20 * horizon, horizon, 1500)
    rows = []
    for level in ("event", "item"):
        for fam in ("cumulative", "fixed", "all"):
            pure = measured_rmse(item, times, horizon, fam, 1, level, "auto", 2, 300, 9)
            appr = measured_rmse(item, times, horizon, fam, 1, level, "auto", 2, 300, 9,
                                 delta=1e-6)
            rows.append((level, fam, f"{pure[0]:.0f} ({pure[2]})", f"{appr[0]:.0f} ({appr[2]})",
                         f"{pure[0] / appr[0]:.1f}x"))
    table(rows, ("level", "family", "pure eps=1 (auto)", "eps=1, delta=1e-6 (auto)",
                 "pure/approx"))


def bench_speed(quick: bool) -> None:
    n = 10**6 if quick else 10**7
    horizon = 2**16
    print(f"## 4. Speed: {n:.0e} events over T = 2^16 periods"
          + (" (--quick: scaled down from 1e7)" if quick else ""))
    rng = np.random.default_rng(4)
    item, times = make_log(rng, n, horizon, n // 10)
    axis = _Axis(horizon)
    t0 = time.perf_counter()
    codes, raw, _ = _load_log((item, times), None, None, None, axis)
    _bucket(codes, raw, axis, "error")
    t_in = time.perf_counter() - t0
    rows = [("ingest from memory (item codes, range check, sort by (item, period))",
             f"{t_in:.2f} s", f"{n / t_in:.2e} events/s")]
    t0 = time.perf_counter()
    rel = release_window_counts((item, times), horizon=horizon, epsilon=1.0, k_values=[1],
                                windows=["cumulative", 7], rng=1)
    t_rel = time.perf_counter() - t0
    rows.append(("full release cumulative + rolling W=7 (ingest, reductions, noise, curves)",
                 f"{t_rel:.2f} s", f"{n / t_rel:.2e} events/s"))
    q = rng.integers(1, horizon + 1, size=10**5)
    t0 = time.perf_counter()
    rel.cumulative(q, 1)
    dt = time.perf_counter() - t0
    rows.append(("1e5 random cumulative queries", f"{dt:.2f} s", f"{1e5 / dt:.2e} queries/s"))
    t0 = time.perf_counter()
    rel.fixed(q, 1)
    dt = time.perf_counter() - t0
    rows.append(("1e5 random rolling-window queries", f"{dt:.2f} s",
                 f"{1e5 / dt:.2e} queries/s"))
    n2 = n // 10
    item2, times2 = item[:n2], times[:n2]
    t0 = time.perf_counter()
    rel2 = release_window_counts((item2, times2), horizon=horizon, epsilon=1.0, k_values=[1],
                                 windows=["all"], rng=1)
    t_rel2 = time.perf_counter() - t0
    rows.append((f"release all windows ({n2:.0e} events, 2d points + merge-sort counter)",
                 f"{t_rel2:.2f} s", f"{n2 / t_rel2:.2e} events/s"))
    nq = 10**4 if quick else 10**5
    a = rng.integers(1, horizon + 1, size=(2, nq))
    t0 = time.perf_counter()
    rel2.window(a.min(axis=0), a.max(axis=0), 1)
    dt = time.perf_counter() - t0
    rows.append((f"{nq:.0e} random arbitrary-window queries (2d lazy noise)", f"{dt:.2f} s",
                 f"{nq / dt:.2e} queries/s"))
    table(rows, ("step", "time", "rate"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes (minutes, not tens)")
    ap.add_argument("--only", choices=["t", "k", "baselines", "approx", "speed"], default=None)
    args = ap.parse_args()
    parts = {"t": bench_vs_t, "k": bench_vs_k, "baselines": bench_baselines,
             "approx": bench_approx, "speed": bench_speed}
    for name, fn in parts.items():
        if args.only in (None, name):
            t0 = time.perf_counter()
            fn(args.quick)
            print(f"   ({name}: {time.perf_counter() - t0:.1f} s)\n")


if __name__ == "__main__":
    main()
