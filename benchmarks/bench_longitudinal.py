"""Benchmark of dpfreq.longitudinal (issue 6): RMSE vs k, throughput, client step cost, peer.

Usage: python benchmarks/bench_longitudinal.py [--quick | --full]
  default: n = 10^5 for the RMSE table, 10^6 × 1024 for the simulation throughput;
  --quick: n = 2·10^4 and 10^5 × 1024;  --full: n = 10^6 for the RMSE table.
Baselines named in each table: plain randomized response over the full n × d bit matrix
(throughput), Erlingsson et al. (accuracy), multi-freq-ldpy L-GRR / dBitFlipPM (peer, optional).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from dpfreq.longitudinal import (
    LongitudinalAggregator,
    LongitudinalClient,
    distance_law,
    erlingsson_c_gap,
    make_params,
    simulate_longitudinal,
    synthetic_changes,
)
from dpfreq.noise import randomized_response

MODES = ["rr", "erlingsson", "futurerand", "calibrated", "threshold", "auto"]
KS = [4, 16, 64, 256]
D, EPS = 1024, 1.0


def c_gap(mode: str, k: int) -> float:
    return erlingsson_c_gap(k, EPS) if mode == "erlingsson" else distance_law(mode, k, EPS).c_gap


def rmse_table(n: int, seed: int) -> dict:
    print(f"\n## RMSE over t = 1..{D} (one run each), n = {n}, d = {D}, ε = {EPS}")
    print(f"{'k':>5}" + "".join(f"{m:>14}" for m in MODES) + f"{'auto/erl':>10}")
    res: dict = {m: [] for m in MODES}
    for k in KS:
        row = []
        for m in MODES:
            rel = simulate_longitudinal(
                users=n, periods=D, changes=k, epsilon=EPS, randomizer=m, rng=seed + k
            )
            err = rel.errors
            res[m].append(float(np.sqrt(np.mean(err**2))))
            row.append(res[m][-1])
        print(f"{k:>5}" + "".join(f"{v:>14.0f}" for v in row) + f"{row[-1] / row[1]:>10.3f}")
    print("predicted RMSE (exact variance, √mean_t Var) ratio to best non-auto:")
    for k in KS:
        pred = {m: 1 / c_gap(m, k) for m in MODES}  # RMSE ∝ 1/c_gap at fixed n, d
        best = min(v for m, v in pred.items() if m != "auto")
        print(
            f"  k={k:<4} auto/best = {pred['auto'] / best:.3f}  auto/erlingsson = "
            f"{pred['auto'] / pred['erlingsson']:.3f}  (auto = {distance_law('auto', k, EPS).name})"
        )
    print("log–log slopes of RMSE vs k (least squares over k ∈ {4,16,64,256}):")
    lk = np.log(KS)
    for m in MODES:
        print(
            f"  {m:<12} empirical {np.polyfit(lk, np.log(res[m]), 1)[0]:.3f}   "
            f"exact 1/c_gap {np.polyfit(lk, np.log([1 / c_gap(m, k) for k in KS]), 1)[0]:.3f}"
        )
    print("crossovers (smallest k ≤ 256 from which the first has a larger exact c_gap):")
    for a, b in [
        ("futurerand", "rr"),
        ("futurerand", "erlingsson"),
        ("calibrated", "rr"),
        ("threshold", "rr"),
        ("rr", "erlingsson"),
    ]:
        ks = [k for k in range(1, 257) if c_gap(a, k) > c_gap(b, k)]
        first = next(
            (k for k in ks if all(c_gap(a, q) > c_gap(b, q) for q in range(k, 257, 17))), None
        )
        print(f"  {a} beats {b}: from k = {first}")
    return res


def throughput(n: int, seed: int) -> None:
    print(
        f"\n## Throughput: simulate {n} users × {D} periods, k = 8"
        " (baseline: plain RR on the matrix)"
    )
    t0 = time.perf_counter()
    simulate_longitudinal(users=n, periods=D, changes=8, epsilon=EPS, randomizer="auto", rng=seed)
    t_sim = time.perf_counter() - t0
    rows = max(1, n // 8)  # RR over n/8 rows of the matrix, scaled ×8 (memory)
    x = synthetic_changes(min(rows, 50_000), D, 8, rng=seed)
    t0 = time.perf_counter()
    reps = rows // x.shape[0] if rows >= x.shape[0] else 1
    for _ in range(reps):
        randomized_response(x, EPS, rng=seed)
    t_rr = (time.perf_counter() - t0) * n / (reps * x.shape[0])
    print(f"{'what':<40}{'seconds':>10}{'ratio':>8}")
    print(f"{'simulate_longitudinal (auto)':<40}{t_sim:>10.2f}{t_sim / t_rr:>8.2f}")
    print(f"{'plain RR over n × d bits (extrapolated)':<40}{t_rr:>10.2f}{1.0:>8.2f}")

    p = make_params(D, 8, EPS, "rr")
    agg = LongitudinalAggregator(p)
    m = 10**6
    gen = np.random.default_rng(seed)
    users = np.arange(m)
    h = gen.integers(0, p.orders, size=m)
    agg.enrol(users, h)
    j = 1 + (gen.random(m) * (D >> h)).astype(np.int64)
    bits = gen.integers(0, 2, size=m)
    t0 = time.perf_counter()
    agg.ingest(users, h, j, bits, p.param_id)
    t_ing = time.perf_counter() - t0
    t0 = time.perf_counter()
    agg.estimate(beta=0.05)
    t_est = time.perf_counter() - t0
    print(
        f"server ingest of {m} reports from arrays: {t_ing:.2f} s = {m / t_ing:,.0f} reports/s;"
        f" estimate all {D} periods: {t_est * 1e3:.1f} ms"
    )

    c = LongitudinalClient(make_params(D, 8, EPS, "auto"), rng=seed)
    c.h = 0
    xs = synthetic_changes(1, D, 8, rng=seed)[0]
    t0 = time.perf_counter()
    for x in xs:
        c.step(int(x))
    t_step = (time.perf_counter() - t0) / D
    t0 = time.perf_counter()
    for _ in range(100):
        LongitudinalClient(make_params(D, 8, EPS, "auto"), rng=seed)
    t_init = (time.perf_counter() - t0) / 100
    print(
        f"client step (h = 0, reports every call): {t_step * 1e6:.1f} µs/call; "
        f"enrolment incl. make_params(auto): {t_init * 1e3:.2f} ms"
    )


def peer(n: int, seed: int, ours: dict | None) -> None:
    try:
        from multi_freq_ldpy.long_freq_est.dBitFlipPM import (
            dBitFlipPM_Aggregator_MI,
            dBitFlipPM_Client,
        )
        from multi_freq_ldpy.long_freq_est.L_GRR import L_GRR_Aggregator_MI, L_GRR_Client
    except ImportError:
        print("\n## Peer: multi-freq-ldpy not installed; skipped (pip install multi-freq-ldpy)")
        return
    print(
        f"\n## Peer multi-freq-ldpy (n = {n}, d = {D}, ε_perm = {EPS}, L-GRR ε_1 = {EPS / 2}):"
        " RMSE/√n, lower is better"
    )
    print(
        "   NB: not ε-LDP over whole sequences: dBitFlipPM memoizes per value (change times leak),"
    )
    print("   L-GRR as called here re-randomizes both rounds per report (loss grows with d).")
    print(f"{'k':>5}{'L-GRR':>10}{'dBitFlipPM':>12}{'auto (ours)':>13}{'erlingsson':>12}")
    # the peer draws from numba's/numpy's global RNG: its rows are not seeded
    for k in KS:
        x = synthetic_changes(n, D, k, rng=seed + k)
        # L-GRR: the package's client runs both rounds on every call (no memoization kept
        # across calls), so it is called once per report, as its API offers
        rep = np.empty((n, D), dtype=np.int64)
        for u in range(n):
            for t in range(D):
                rep[u, t] = L_GRR_Client(int(x[u, t]), 2, EPS, EPS / 2)
        est = np.array([L_GRR_Aggregator_MI(rep[:, t], 2, EPS, EPS / 2)[1] * n for t in range(D)])
        truth = x.sum(axis=0)
        r_grr = math.sqrt(np.mean((est - truth) ** 2) / n)
        # dBitFlipPM: one permanent memoized report per (user, value)
        mem = [[dBitFlipPM_Client(v, 2, 2, 1, EPS) for v in (0, 1)] for _ in range(n)]
        est2 = np.array(
            [
                dBitFlipPM_Aggregator_MI([mem[u][x[u, t]] for u in range(n)], 2, 1, EPS)[1] * n
                for t in range(D)
            ]
        )
        r_dbf = math.sqrt(np.mean((est2 - truth) ** 2) / n)
        o = [
            ours[m][KS.index(k)] / math.sqrt(ours["n"]) if ours else float("nan")
            for m in ("auto", "erlingsson")
        ]
        print(f"{k:>5}{r_grr:>10.2f}{r_dbf:>12.2f}{o[0]:>13.2f}{o[1]:>12.2f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--seed", type=int, default=20261122)
    a = ap.parse_args()
    n_rmse = 20_000 if a.quick else (10**6 if a.full else 10**5)
    n_sim = 10**5 if a.quick else 10**6
    res = rmse_table(n_rmse, a.seed)
    res["n"] = n_rmse
    throughput(n_sim, a.seed)
    peer(100 if a.quick else 300, a.seed, res)


if __name__ == "__main__":
    main()
