"""Benchmark of dpfreq.longitudinal: RMSE vs k, throughput, ingest, client step, peer.

Usage: python benchmarks/bench_longitudinal.py [--quick] [--full] [--seed S]
  default: n = 10^5 for the RMSE table, 10^6 users × 1024 periods for the throughput;
  --full: also the RMSE table at n = 10^6;  --quick: n = 2·10^4 and 10^5 × 1024.

Baselines named in each table: Erlingsson et al. (accuracy; with its estimator's bias corrected),
plain randomized response over the full n × d bit matrix (throughput; numpy float threshold as
in the issue, and dpfreq's exact sampler), and multi-freq-ldpy's L-GRR / dBitFlipPM (peer,
optional ``[bench]`` dependency; skipped cleanly when absent).
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

import numpy as np

from dpfreq.longitudinal import (
    LongitudinalAggregator,
    LongitudinalClient,
    make_params,
    simulate_longitudinal,
)
from dpfreq.longitudinal.laws import distance_law, erlingsson_c_gap
from dpfreq.longitudinal.simulate import synthetic_changes
from dpfreq.noise import randomized_response

MODES = ["rr", "erlingsson", "futurerand", "calibrated", "threshold", "auto"]
KS = [4, 16, 64, 256]
D, EPS = 1024, 1.0


def c_gap(mode: str, k: int) -> float:
    return erlingsson_c_gap(k, EPS) if mode == "erlingsson" else distance_law(mode, k, EPS).c_gap


def predicted_rmse(mode: str, k: int, n: int, truth: np.ndarray) -> float:
    """√(mean_t Var f̂_t) from the exact variance n(log d+1)popcount(t)/c_gap² − f_t ."""
    lg1 = D.bit_length()
    pc = np.array([bin(t).count("1") for t in range(1, D + 1)])
    return math.sqrt(float(np.mean(n * lg1 * pc / c_gap(mode, k) ** 2 - truth)))


def rmse_table(n: int, seed: int) -> dict[str, Any]:
    print(f"\n## RMSE over t = 1..{D} (one run per cell, same data and seed for every mode),"
          f" n = {n}, d = {D}, ε = {EPS}")
    print(f"{'k':>5}" + "".join(f"{m:>12}" for m in MODES) + f"{'auto/best':>11}{'auto/erl':>10}")
    res: dict[str, Any] = {m: [] for m in MODES}
    ratio_emp: list[float] = []
    t0 = time.perf_counter()
    for k in KS:
        row = []
        for m in MODES:
            rel = simulate_longitudinal(
                devices=n, horizon=D, max_changes=k, epsilon=EPS, method=m, rng=seed + k
            )
            err = np.asarray(rel.unclamped) - np.asarray(rel.truth)  # unbiased, as predicted
            res[m].append(float(np.sqrt(np.mean(err**2))))
            ratio_emp.append(res[m][-1] / predicted_rmse(m, k, n, np.asarray(rel.truth)))
            row.append(res[m][-1])
        best = min(v for m, v in zip(MODES, row, strict=True) if m != "auto")
        print(f"{k:>5}" + "".join(f"{v:>12.0f}" for v in row)
              + f"{row[-1] / best:>11.3f}{row[-1] / row[1]:>10.3f}")
    print(f"(empirical/predicted RMSE over all {len(ratio_emp)} cells: "
          f"min {min(ratio_emp):.3f}, max {max(ratio_emp):.3f}; {time.perf_counter() - t0:.1f} s)")
    print("exact ratios (RMSE ∝ 1/c_gap at fixed n, d):")
    for k in KS:
        pred = {m: 1 / c_gap(m, k) for m in MODES}
        best = min(v for m, v in pred.items() if m != "auto")
        ratio_erl = pred["auto"] / pred["erlingsson"]
        print(f"  k={k:<4} auto = {distance_law('auto', k, EPS).name:<10} auto/best = "
              f"{pred['auto'] / best:.3f}  auto/erlingsson = {ratio_erl:.3f}")
    print("per-order sparsity (not in the paper), exact predicted RMSE ratio "
          "per-order/plain for auto:")
    lg1 = D.bit_length()
    tt = np.arange(1, D + 1)
    for k in KS:
        name = distance_law("auto", k, EPS).name
        g_plain = distance_law(name, k, EPS).c_gap
        g_ord = [distance_law(name, min(k, D >> h), EPS).c_gap for h in range(lg1)]
        v_plain = np.mean([bin(t).count("1") for t in tt]) / g_plain**2
        v_ord = np.mean(sum(((tt >> h) & 1) / g**2 for h, g in enumerate(g_ord)))
        print(f"  k={k:<4} {math.sqrt(v_ord / v_plain):.3f}")
    print("log–log slopes of RMSE vs k (least squares over k ∈ {4, 16, 64, 256}):")
    lk = np.log(KS)
    for m in MODES:
        emp = np.polyfit(lk, np.log(res[m]), 1)[0]
        exact = np.polyfit(lk, np.log([1 / c_gap(m, k) for k in KS]), 1)[0]
        print(f"  {m:<12} empirical {emp:.3f}   exact 1/c_gap {exact:.3f}")
    return res


def crossovers() -> None:
    print("\n## Crossovers (exact c_gap, k = 1..256): smallest k from which A beats B for every"
          " larger k ≤ 256")
    ks = np.arange(1, 257)
    gaps = {m: np.array([c_gap(m, int(k)) for k in ks]) for m in MODES if m != "auto"}
    for a, b in [("futurerand", "rr"), ("futurerand", "erlingsson"), ("calibrated", "rr"),
                 ("calibrated", "erlingsson"), ("threshold", "rr"), ("rr", "erlingsson")]:
        wins = gaps[a] > gaps[b]
        tail = np.flatnonzero(~wins)
        first = 1 if tail.size == 0 else (int(ks[tail[-1]]) + 1 if tail[-1] + 1 < ks.size
                                          else None)
        print(f"  {a:<11} beats {b:<11} from k = {first}")


def throughput(n: int, seed: int) -> None:
    print(f"\n## Throughput: simulate {n} users × {D} periods, k = 8")
    times = {}
    for m in ["auto", "futurerand", "rr", "erlingsson"]:
        t0 = time.perf_counter()
        simulate_longitudinal(devices=n, horizon=D, max_changes=8, epsilon=EPS, method=m,
                              rng=seed)
        times[m] = time.perf_counter() - t0
    # baseline: plain RR over the whole n × D matrix, in 8 row blocks (memory)
    gen = np.random.default_rng(seed)
    block = synthetic_changes(max(1, n // 8), D, 8, rng=seed)
    t0 = time.perf_counter()
    for _ in range(8):
        _ = block ^ (gen.random(block.shape) < 1 / (1 + math.e)).astype(np.int8)
    t_float = time.perf_counter() - t0
    t0 = time.perf_counter()
    randomized_response(block[: max(1, block.shape[0] // 8)], EPS, rng=seed)
    t_exact = (time.perf_counter() - t0) * 64
    print(f"{'what':<52}{'seconds':>9}{'vs float RR':>13}")
    for m, t in times.items():
        print(f"{'simulate_longitudinal(' + m + ')':<52}{t:>9.2f}{t / t_float:>13.2f}")
    print(f"{'baseline: float-threshold RR on n × d bits':<52}{t_float:>9.2f}{1.0:>13.2f}")
    print(f"{'exact RR (dpfreq.noise) on n × d bits, extrapolated':<52}{t_exact:>9.2f}"
          f"{t_exact / t_float:>13.2f}")
    print(f"target ≤ 10 s for auto: {'MET' if times['auto'] <= 10 else 'NOT MET'}")


def ingest(seed: int) -> None:
    print("\n## Server ingest from arrays (validation included), d = 1024")
    p = make_params(horizon=D, max_changes=8, epsilon=EPS, method="threshold")
    gen = np.random.default_rng(seed)
    m = 10**6
    agg = LongitudinalAggregator(p)
    users = np.arange(m)
    h = gen.integers(0, p.orders, size=m)
    t0 = time.perf_counter()
    agg.enrol(users, h, param_id=p.param_id)
    t_enrol = time.perf_counter() - t0
    # 5 batches: batch b holds each user's report j = b + 1 (when its order has one)
    total, t_ing = 0, 0.0
    for b in range(5):
        has = (D >> h) > b
        u, hh = users[has], h[has]
        bits = gen.integers(0, 2, size=u.size)
        t0 = time.perf_counter()
        total += agg.ingest(u, hh, np.full(u.size, b + 1), bits, param_id=p.param_id)
        t_ing += time.perf_counter() - t0
    t0 = time.perf_counter()
    agg.estimate(confidence=0.95)
    t_est = time.perf_counter() - t0
    rate = total / t_ing
    print(f"enrol {m} users: {t_enrol:.2f} s; ingest {total} reports in 5 batches: {t_ing:.2f} s"
          f" = {rate:,.0f} reports/s (target ≥ 1e6: {'MET' if rate >= 1e6 else 'NOT MET'});"
          f" estimate all {D} periods: {t_est * 1e3:.1f} ms")


def client_cost(seed: int) -> None:
    print(f"\n## Client cost (d = {D}, k = 8, ε = {EPS}); step with h = 0 reports on every call")
    print(f"{'method':<12}{'enrol (ms)':>12}{'step (µs/call)':>16}")
    x = synthetic_changes(1, D, 8, rng=seed)[0].tolist()
    for m in ["futurerand", "calibrated", "threshold", "rr", "erlingsson"]:
        p = make_params(horizon=D, max_changes=8, epsilon=EPS, method=m)
        t0 = time.perf_counter()
        clients = [LongitudinalClient(p, rng=s) for s in range(200)]
        t_init = (time.perf_counter() - t0) / 200
        c = next(c for c in clients if c.order == 0)
        t0 = time.perf_counter()
        for xt in x:
            c.step(xt)
        t_step = (time.perf_counter() - t0) / D
        print(f"{m:<12}{t_init * 1e3:>12.3f}{t_step * 1e6:>16.1f}")
    t0 = time.perf_counter()
    state = c.to_json()
    LongitudinalClient.from_json(state)
    print(f"JSON state round trip: {(time.perf_counter() - t0) * 1e3:.2f} ms, {len(state)} bytes")


def peer(n: int, seed: int) -> None:
    try:
        from multi_freq_ldpy.long_freq_est.dBitFlipPM import (
            dBitFlipPM_Aggregator_MI,
            dBitFlipPM_Client,
        )
        from multi_freq_ldpy.long_freq_est.L_GRR import L_GRR_Aggregator_MI
        from multi_freq_ldpy.pure_frequency_oracles.GRR import GRR_Client
    except ImportError:
        print("\n## Peer: multi-freq-ldpy not installed; skipped "
              "(pip install 'dpfreq[bench]' or pip install multi-freq-ldpy)")
        return
    eps_perm, eps_1 = EPS, EPS / 2
    print(f"\n## Peer multi-freq-ldpy on the same simulated data (n = {n}, d = {D}; peer ε_perm ="
          f" {eps_perm}, L-GRR ε_1 = {eps_1}); RMSE/√n over t, lower is better")
    print("   NB: the peers are not ε-LDP for whole sequences with ≤ k changes: dBitFlipPM"
          " memoizes one report per value (change times visible when the two differ); L-GRR"
          " memoizes per value and re-randomizes each report (loss grows with the reports).")
    print("   The peer draws from numpy's global RNG, seeded here for repeatability.")
    print(f"{'k':>5}{'L-GRR':>10}{'dBitFlipPM':>12}{'auto (ours)':>13}{'erlingsson':>12}")
    # second-round GRR parameter of L-GRR, as in multi_freq_ldpy.long_freq_est.L_GRR (k = 2)
    p1 = math.exp(eps_perm) / (math.exp(eps_perm) + 1)
    q1 = 1 - p1
    e1 = math.exp(eps_1)
    p2 = (q1 - e1 * p1) / (-p1 * e1 + 2 * q1 * e1 - q1 * e1 - p1 + q1)
    eps_sec = math.log(p2 / (1 - p2))
    np.random.seed(seed)  # noqa: NPY002 - the peer's global RNG (benchmark only)
    for k in KS:
        x = synthetic_changes(n, D, k, rng=seed + k)
        truth = x.sum(axis=0)
        # L-GRR: permanent memoization per (user, value), fresh second round per report
        memo = [[GRR_Client(v, 2, eps_perm) for v in (0, 1)] for _ in range(n)]
        rep = np.array([[GRR_Client(memo[u][x[u, t]], 2, eps_sec) for t in range(D)]
                        for u in range(n)])
        est = np.array([L_GRR_Aggregator_MI(rep[:, t], 2, eps_perm, eps_1)[1] * n
                        for t in range(D)])
        r_grr = math.sqrt(np.mean((est - truth) ** 2) / n)
        # dBitFlipPM (b = 2 buckets, 1 bit): one permanent memoized report per (user, value)
        mem = [[dBitFlipPM_Client(v, 2, 2, 1, eps_perm) for v in (0, 1)] for _ in range(n)]
        est2 = np.array([dBitFlipPM_Aggregator_MI([mem[u][x[u, t]] for u in range(n)], 2, 1,
                                                  eps_perm)[1] * n for t in range(D)])
        r_dbf = math.sqrt(np.mean((est2 - truth) ** 2) / n)
        ours = []
        for m in ("auto", "erlingsson"):
            runs = [simulate_longitudinal(horizon=D, max_changes=k, epsilon=EPS, method=m,
                                          data=x, rng=seed + 100 * r) for r in range(5)]
            errs = [np.asarray(rel.unclamped) - np.asarray(rel.truth) for rel in runs]
            ours.append(math.sqrt(float(np.mean(np.square(errs))) / n))
        print(f"{k:>5}{r_grr:>10.2f}{r_dbf:>12.2f}{ours[0]:>13.2f}{ours[1]:>12.2f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--seed", type=int, default=20261122)
    a = ap.parse_args()
    rmse_table(20_000 if a.quick else 10**5, a.seed)
    if a.full:
        rmse_table(10**6, a.seed)
    crossovers()
    throughput(10**5 if a.quick else 10**6, a.seed)
    ingest(a.seed)
    client_cost(a.seed)
    peer(100 if a.quick else 300, a.seed)


if __name__ == "__main__":
    main()
