"""Cross-party reach and frequency: WFA-style scenarios and criteria, SFM comparison, speed.

    python benchmarks/bench_crossparty.py [--quick] [--runs N] [--registers R]
        [--sections table,overlap,parties,sfm,speed,shuffle-speed] [--events N] [--plots DIR]
        [--modes reach,reach+freq,shuffle] [--delta D]

A simulator in the manner of the WFA cardinality-estimation evaluation framework, run on the
library's own mechanism and estimators (:func:`dpfreq.crossparty.sketch.draw_sketch` draws each
party's sketch with the exact samplers; :func:`dpfreq.crossparty.merge_sketches` estimates):

* **Scenarios.** ``P`` publishers, each reaching ``n`` users; overlap ``independent`` (disjoint
  reach in a large population), ``half`` (each publisher's reach is half a common pool of
  ``n/2`` users, half its own) or ``nested`` (every publisher reaches the same ``n`` users).
  Impressions per (user, publisher): ``poisson`` (1 + Poisson(1.5)) or ``heavy`` (Zipf(2.2),
  capped at 10^4). Only the users whose VID falls in the sampling interval are simulated (the
  others cannot touch a sketch); their placement in the registers is uniform, as the keyed
  hash's is. The true reach is exact; the true frequency distribution is the law of the
  union's impression counts (a convolution of the per-publisher laws).
* **Design.** ``R`` registers (``--registers``, default 2^17), ``K = 5``, and a VID sampling
  width chosen from public plans only: ``min(1, 1.5 R / (P n))`` (the sum of the publishers'
  planned reaches; the true union is smaller when they overlap). Modes: ``reach`` (reach-only
  sketch, all of ε on the bits) and ``reach+freq`` (ε/4 on the bits, 3ε/4 on the frequency
  registers), both with local noise; and ``shuffle``: noise added once, by the two workers of
  :mod:`dpfreq.crossparty.shuffle` (``(ε, δ)`` for the union's one noisy histogram, ``--delta``,
  default 1e-10), simulated with :func:`~dpfreq.crossparty.shuffle.simulate_shuffle` (the
  workers' exact dummy draws on the exact histogram; shares and permutation do not change it).
* **Criteria** (WFA): reach within 5 % relative error in 95 % of runs; frequency distribution
  (``1..K−1``, ``K+``) within 20 % shuffle distance (total variation) in 80 % of runs. The
  table gives, per ε and reach size, the largest number of parties ``P`` (from 1, 2, 3, 4, 5,
  6, 8, 10, 12, 16, 20, 25, 32, 50, 64, 100, stopping at the first that fails) whose merge
  meets each criterion (the shuffle mode scans 1, 2, 3, 5, 10, 20, 50, 100). A last table
  puts local noise (reach+freq) and the shuffle side by side.
* **SFM.** Sketch-Flip-Merge (Hehir, Ting & Cormode 2023) as we implement it from its
  construction: an FM sketch of ``B × L`` bits (each user sets one bit: bucket uniform, level
  geometric), randomized response at ε, a merge whose output law depends only on the OR of the
  true bits (00 → 0, 01/10 → 1, 11 → 1 with probability (1−2p)/(1−p)), and the maximum
  likelihood estimate of the union from the merged bits. Compared at equal memory (``B·L =
  R`` bits) with our reach bits, two parties, ε = ln 3, in the same run.
* **Speed.** Building a sketch from a Parquet log of ``--events`` impressions on DuckDB,
  against DuckDB's own exact per-user ``GROUP BY`` of the same file (ratio = build / GROUP BY);
  merging 100 sketches of 10^6 registers from their files, against summing their arrays in
  memory (ratio = merge / sum). ``shuffle-speed``: 10 parties × 10^6 registers end to end on
  localhost, three services and ten party processes (``benchmarks/shuffle_e2e.py``).

Every number is measured in this run; ``uptime`` is printed first.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from dpfreq.crossparty import Coverage, CrossPartyParams, key_fingerprint, merge_sketches
from dpfreq.crossparty.shuffle import ShuffleParams, simulate_shuffle
from dpfreq.crossparty.sketch import draw_sketch
from dpfreq.rng import resolve_rng

KEY = bytes(range(32))  # simulations only
K = 5
LN3 = math.log(3)
EPSILONS = [("2 ln 3", 2 * LN3), ("ln 3", LN3), ("0.5", 0.5), ("0.25", 0.25), ("0.1", 0.1)]
REACHES = [3_000, 10_000, 100_000, 1_000_000, 10_000_000]
PARTIES = [1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 25, 32, 50, 64, 100]
SHUFFLE_PARTIES = [1, 2, 3, 5, 10, 20, 50, 100]
OVERLAP = {"independent": 0.0, "half": 0.5, "nested": 1.0}
MEAN_IMPRESSIONS = 1.5


# -- scenarios --------------------------------------------------------------------------------
def impressions(kind: str, size: int, gen: np.random.Generator) -> np.ndarray:
    """Impressions of ``size`` (user, publisher) pairs."""
    if kind == "poisson":
        return 1 + gen.poisson(MEAN_IMPRESSIONS, size)
    return np.minimum(gen.zipf(2.2, size), 10_000)


def one_publisher_law(kind: str, top: int) -> np.ndarray:
    """pmf of one publisher's impressions on 0..top (top collects the tail)."""
    from scipy import stats

    c = np.arange(top + 1)
    if kind == "poisson":
        pmf = np.where(c >= 1, stats.poisson.pmf(c - 1, MEAN_IMPRESSIONS), 0.0)
    else:
        pmf = np.where(c >= 1, stats.zipfian.pmf(c, 2.2, 10_000), 0.0)
    pmf[top] += 1.0 - pmf.sum()
    return pmf


def true_frequency(kind: str, parties: int, overlap: float) -> np.ndarray:
    """The union's frequency law on ``1..K−1, K+``: pool users are reached by every publisher
    (their counts add up), the others by one."""
    one = one_publisher_law(kind, K)
    pool = np.array([1.0])
    for _ in range(parties):
        pool = np.convolve(pool, one)[: K + 1]
        pool[K] = 1.0 - pool[:K].sum()
    pool_share = overlap / (overlap + parties * (1.0 - overlap))
    law = pool_share * pool + (1.0 - pool_share) * one
    return np.append(law[1:K], law[K])


def union_reach(n: int, parties: int, overlap: float) -> int:
    pool = round(n * overlap)
    return pool + parties * (n - pool)


def simulate_registers(n: int, parties: int, overlap: float, kind: str, params: Any,
                       gen: np.random.Generator) -> np.ndarray:
    """Exact capped register frequencies of every publisher (``P × R``), sampled users only."""
    R, rho = params.registers, float(params.sampling_rate)
    pool = round(n * overlap)
    pool_s = gen.binomial(pool, rho)
    own_s = gen.binomial(n - pool, rho, size=parties)
    pool_place = gen.integers(0, R, pool_s)
    out = np.empty((parties, R), dtype=np.int64)
    for p in range(parties):
        place = np.concatenate([pool_place, gen.integers(0, R, own_s[p])])
        counts = np.minimum(impressions(kind, place.size, gen), K).astype(np.float64)
        out[p] = np.minimum(np.bincount(place, weights=counts, minlength=R), K)
    return out


def design(n: int, parties: int, epsilon: float, mode: str, registers: int) -> CrossPartyParams:
    width = min(1.0, 1.5 * registers / (parties * n))
    eps_r, eps_f = (epsilon, None) if mode == "reach" else (epsilon / 4, 3 * epsilon / 4)
    return CrossPartyParams(
        measurement="bench", registers=registers, sampling_start=0,
        sampling_width=f"{max(1, round(width * 2**40))}/{2**40}", max_frequency=K,
        epsilon_reach=eps_r, epsilon_frequency=eps_f, hash="sha256-prefix/v1",
        key_id=key_fingerprint(KEY))


def design_shuffle(n: int, parties: int, epsilon: float, registers: int,
                   delta: float) -> ShuffleParams:
    """The shuffle mode's parameters: the same registers and sampling as local noise."""
    local = design(n, parties, epsilon, "reach", registers)
    return ShuffleParams(
        measurement="bench", registers=registers, sampling_start=0,
        sampling_width=local.sampling_width, max_frequency=K, epsilon=epsilon, delta=delta,
        parties=[f"p{p}" for p in range(parties)], per_party=False, coverage=Coverage(),
        deadline="2030-01-01",
        hash="sha256-prefix/v1", key_id=key_fingerprint(KEY))


def _release(mode: str, regs: np.ndarray, params: Any, gen: np.random.Generator) -> Any:
    """The union's release: merged local-noise sketches, or the shuffle."""
    if mode == "shuffle":
        return simulate_shuffle(regs, params=params, confidence=0.95, rng=gen)
    sketches = [draw_sketch(regs[p], params=params, party=f"p{p}", rng=resolve_rng(gen),
                            engine="simulation") for p in range(regs.shape[0])]
    return merge_sketches(sketches, confidence=0.95)


def run_errors(n: int, parties: int, overlap: float, kind: str, epsilon: float, mode: str,
               registers: int, runs: int, gen: np.random.Generator, delta: float = 1e-10
               ) -> tuple[np.ndarray, np.ndarray]:
    """Per run: the relative error of the union's reach and the shuffle distance of its
    frequency distribution (NaN for reach-only sketches)."""
    params: Any = (design_shuffle(n, parties, epsilon, registers, delta) if mode == "shuffle"
                   else design(n, parties, epsilon, mode, registers))
    truth = union_reach(n, parties, overlap)
    law = true_frequency(kind, parties, overlap)
    rel, shuffle = np.empty(runs), np.full(runs, np.nan)
    for i in range(runs):
        regs = simulate_registers(n, parties, overlap, kind, params, gen)
        out = _release(mode, regs, params, gen)
        rel[i] = out.reach / truth - 1.0 if math.isfinite(out.reach) else math.inf
        if out.frequency is not None:
            f = np.asarray(out.frequency)
            shuffle[i] = 0.5 * np.abs(f - law).sum() if np.all(np.isfinite(f)) else math.inf
    return rel, shuffle


def meets(rel: np.ndarray, shuffle: np.ndarray) -> tuple[bool, bool]:
    reach_ok = float(np.mean(np.abs(rel) <= 0.05)) >= 0.95
    freq_ok = bool(np.all(np.isfinite(shuffle)) or np.any(np.isfinite(shuffle))) and float(
        np.mean(shuffle <= 0.20)) >= 0.80
    return reach_ok, freq_ok


def max_parties(n: int, overlap: float, kind: str, epsilon: float, mode: str, registers: int,
                runs: int, gen: np.random.Generator, limit: int, delta: float = 1e-10
                ) -> tuple[int, int]:
    """Largest P meeting the reach criterion and the frequency criterion (0: not even one),
    stopping at the first P that fails both that still count."""
    best_reach = best_freq = 0
    reach_alive, freq_alive = True, mode != "reach"
    scan = SHUFFLE_PARTIES if mode == "shuffle" else PARTIES
    for P in [p for p in scan if p <= limit]:
        rel, shuffle = run_errors(n, P, overlap, kind, epsilon, mode, registers, runs, gen,
                                  delta)
        reach_ok, freq_ok = meets(rel, shuffle)
        reach_alive = reach_alive and reach_ok
        freq_alive = freq_alive and freq_ok
        best_reach = P if reach_alive else best_reach
        best_freq = P if freq_alive else best_freq
        if not (reach_alive or freq_alive):
            break
    return best_reach, best_freq


# -- sections ----------------------------------------------------------------------------------
def table_section(args: argparse.Namespace, gen: np.random.Generator) -> None:
    cells_of: dict[str, dict[tuple[str, int], str]] = {}
    for mode in args.modes:
        noise = (f"noise added once (δ = {args.delta:g})" if mode == "shuffle"
                 else "local noise")
        print(f"\n### Largest number of merged sketches within the criteria — mode {mode}, "
              f"{noise}, overlap half, poisson impressions, R = {args.registers}, "
              f"{args.runs} runs\n")
        what = "reach" if mode == "reach" else "reach / frequency"
        print("| ε \\ reach per publisher | " + " | ".join(f"{n:,}" for n in args.reaches)
              + " |")
        print("|---" * (len(args.reaches) + 1) + "|")
        for label, eps in EPSILONS:
            cells = []
            for n in args.reaches:
                t0 = time.perf_counter()
                r, f = max_parties(n, 0.5, "poisson", eps, mode, args.registers, args.runs,
                                   gen, args.max_parties, args.delta)
                cells.append(str(r) if mode == "reach" else f"{r} / {f}")
                cells_of.setdefault(mode, {})[(label, n)] = cells[-1]
                args.log(f"{mode} ε={label} n={n}: {cells[-1]} ({time.perf_counter() - t0:.0f} s)")
            print(f"| {label} | " + " | ".join(cells) + " |", flush=True)
        print(f"\n(cells: largest P meeting the {what} criterion; 0 = not even one party)")
    if {"reach+freq", "shuffle"} <= set(cells_of):
        side_by_side(args, cells_of)


def side_by_side(args: argparse.Namespace, cells: dict[str, dict[tuple[str, int], str]]
                 ) -> None:
    """Local noise (reach+freq) and the shuffle, per ε and reach: ``reach / frequency``."""
    top = max(p for p in SHUFFLE_PARTIES if p <= args.max_parties)
    print(f"\n### Side by side: local noise (reach+freq) ‖ shuffle (δ = {args.delta:g}) — "
          f"largest P meeting the reach / frequency criteria (shuffle scanned up to {top})\n")
    print("| ε \\ reach per publisher | " + " | ".join(f"{n:,}" for n in args.reaches) + " |")
    print("|---" * (len(args.reaches) + 1) + "|")
    for label, _ in EPSILONS:
        row = [f"{cells['reach+freq'][(label, n)]} ‖ {cells['shuffle'][(label, n)]}"
               for n in args.reaches]
        print(f"| {label} | " + " | ".join(row) + " |", flush=True)


def overlap_section(args: argparse.Namespace, gen: np.random.Generator) -> None:
    print(f"\n### Reach-only sketches at ε = ln 3, by overlap and impressions law "
          f"(largest P meeting the reach criterion; R = {args.registers}, {args.runs} runs)\n")
    print("| overlap / impressions | " + " | ".join(f"{n:,}" for n in args.reaches) + " |")
    print("|---" * (len(args.reaches) + 1) + "|")
    for overlap in OVERLAP:
        for kind in ("poisson", "heavy"):
            cells = [str(max_parties(n, OVERLAP[overlap], kind, LN3, "reach", args.registers,
                                     args.runs, gen, args.max_parties)[0])
                     for n in args.reaches]
            print(f"| {overlap} / {kind} | " + " | ".join(cells) + " |", flush=True)


def parties_section(args: argparse.Namespace, gen: np.random.Generator) -> None:
    n = args.curve_reach
    counts = [p for p in PARTIES if p <= min(args.max_parties, 16)]
    print(f"\n### Error vs number of parties: ε = ln 3, {n:,} users per publisher, overlap "
          f"half, poisson impressions, R = {args.registers}, {args.runs} runs\n")
    print("| mode | P | reach: 95th pct of abs. rel. error | within 5 % | "
          "frequency: 80th pct of shuffle distance | within 20 % |")
    print("|---|---|---|---|---|---|")
    curves: dict[str, list[tuple[int, float, float]]] = {}
    for mode in args.modes:
        for P in counts:
            rel, shuffle = run_errors(n, P, 0.5, "poisson", LN3, mode, args.registers,
                                      args.runs, gen, args.delta)
            q95 = float(np.quantile(np.abs(rel), 0.95, method="inverted_cdf"))
            within = float(np.mean(np.abs(rel) <= 0.05))
            s80 = (float(np.quantile(shuffle, 0.80, method="inverted_cdf")) if mode != "reach"
                   else math.nan)
            s_in = float(np.mean(shuffle <= 0.2)) if mode != "reach" else math.nan
            curves.setdefault(mode, []).append((P, q95, s80))
            print(f"| {mode} | {P} | {q95:.4f} | {within:.2f} | {s80:.3f} | {s_in:.2f} |",
                  flush=True)
    if args.plots:
        plot_curves(curves, Path(args.plots), n, args.registers)


def plot_curves(curves: dict[str, list[tuple[int, float, float]]], out: Path, n: int,
                registers: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for mode, rows in curves.items():
        P = [r[0] for r in rows]
        axes[0].plot(P, [r[1] for r in rows], "o-", label=mode)
        if mode != "reach":
            axes[1].plot(P, [r[2] for r in rows], "o-", label=mode)
    axes[0].axhline(0.05, color="gray", ls=":", label="criterion 5 %")
    axes[1].axhline(0.20, color="gray", ls=":", label="criterion 20 %")
    axes[0].set(xlabel="parties merged", ylabel="95th percentile |relative error| of reach",
                yscale="log", title=f"reach, {n:,} users/publisher, R={registers}")
    axes[1].set(xlabel="parties merged", ylabel="80th percentile shuffle distance",
                title="frequency distribution (1..K-1, K+)")
    for ax in axes:
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(out / "crossparty_error_vs_parties.png", dpi=110)
    plt.close(fig)
    print(f"\nwrote {out / 'crossparty_error_vs_parties.png'}")


# -- Sketch-Flip-Merge, as we implement it -------------------------------------------------------
def sfm_weights(levels: int) -> np.ndarray:
    w = 0.5 ** np.arange(1, levels + 1)
    w[-1] = 0.5 ** (levels - 1)  # the last level takes the tail
    return w


def sfm_merged_ones(n: int, overlap: float, buckets: int, levels: int, p: float,
                    gen: np.random.Generator) -> np.ndarray:
    """Ones per level of the merged SFM sketch of two publishers (Poissonized cells)."""
    w = sfm_weights(levels)
    pool = n * overlap
    lam_pool = pool * w / buckets
    lam_own = (n - pool) * w / buckets
    shared = gen.poisson(np.broadcast_to(lam_pool, (buckets, levels)))
    a = (shared + gen.poisson(np.broadcast_to(lam_own, (buckets, levels)))) > 0
    b = (shared + gen.poisson(np.broadcast_to(lam_own, (buckets, levels)))) > 0
    ya = a ^ (gen.random(a.shape) < p)
    yb = b ^ (gen.random(b.shape) < p)
    keep11 = gen.random(a.shape) < (1 - 2 * p) / (1 - p)
    merged = (ya ^ yb) | (ya & yb & keep11)
    return merged.sum(axis=0)


def sfm_estimate(ones: np.ndarray, buckets: int, p: float) -> float:
    from scipy.optimize import minimize_scalar

    levels = ones.size
    w = sfm_weights(levels)
    p0 = 2 * p * (1 - p) + p * p * (1 - 2 * p) / (1 - p)
    p1 = 1 - p

    def nll(log_n: float) -> float:
        occ = -np.expm1(-math.exp(log_n) * w / buckets)
        pi = np.clip(p0 + (p1 - p0) * occ, 1e-300, 1 - 1e-16)
        return -float((ones * np.log(pi) + (buckets - ones) * np.log1p(-pi)).sum())

    res = minimize_scalar(nll, bounds=(0.0, 40.0), method="bounded",
                          options={"xatol": 1e-6})
    return math.exp(res.x)


def sfm_section(args: argparse.Namespace, gen: np.random.Generator) -> None:
    bits = args.registers
    levels = 32
    buckets = bits // levels
    p = 1 / (1 + math.exp(LN3))
    print(f"\n### Reach of two publishers at ε = ln 3, equal memory ({bits} bits): our reach "
          f"bits vs Sketch-Flip-Merge (FM {buckets}×{levels}), overlap half, "
          f"{args.runs} runs\n")
    print("| users per publisher | union | ours (sampling from plan): 95th pct / within 5 % | "
          "ours (no sampling): 95th pct / within 5 % | SFM: 95th pct / within 5 % | "
          "SFM / ours (95th pct) |")
    print("|---|---|---|---|---|---|")
    for n in args.sfm_reaches:
        truth = union_reach(n, 2, 0.5)
        ours = run_errors(n, 2, 0.5, "poisson", LN3, "reach", bits, args.runs, gen)[0]
        fixed = fixed_rate_errors(n, bits, args.runs, gen)
        sfm = np.array([sfm_estimate(sfm_merged_ones(n, 0.5, buckets, levels, p, gen),
                                     buckets, p) / truth - 1 for _ in range(args.runs)])
        q = [float(np.quantile(np.abs(e), 0.95, method="inverted_cdf")) for e in (ours, fixed, sfm)]
        inside = [float(np.mean(np.abs(e) <= 0.05)) for e in (ours, fixed, sfm)]
        print(f"| {n:,} | {truth:,} | {q[0]:.4f} / {inside[0]:.2f} | {q[1]:.4f} / "
              f"{inside[1]:.2f} | {q[2]:.4f} / {inside[2]:.2f} | {q[2] / q[0]:.1f} |",
              flush=True)


def fixed_rate_errors(n: int, registers: int, runs: int, gen: np.random.Generator
                      ) -> np.ndarray:
    params = CrossPartyParams(
        measurement="bench", registers=registers, sampling_start=0, sampling_width=1,
        max_frequency=K, epsilon_reach=LN3, epsilon_frequency=None, hash="sha256-prefix/v1",
        key_id=key_fingerprint(KEY))
    truth = union_reach(n, 2, 0.5)
    out = np.empty(runs)
    for i in range(runs):
        regs = simulate_registers(n, 2, 0.5, "poisson", params, gen)
        sketches = [draw_sketch(regs[p], params=params, party=f"p{p}", rng=resolve_rng(gen),
                                engine="simulation") for p in range(2)]
        reach = merge_sketches(sketches, confidence=0.95).reach
        out[i] = reach / truth - 1 if math.isfinite(reach) else math.inf
    return out


# -- speed ---------------------------------------------------------------------------------------
def best_of(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """Best wall time and best CPU time (this process, every thread) over ``repeat`` calls.

    CPU time is the steadier measure on a shared machine: other people's load lengthens the
    wall time of both sides of a ratio, but not the work done."""
    wall = cpu = math.inf
    for _ in range(repeat):
        c0, t0 = _cpu(), time.perf_counter()
        fn()
        wall = min(wall, time.perf_counter() - t0)
        cpu = min(cpu, _cpu() - c0)
    return wall, cpu


def _cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def write_log(path: Path, events: int) -> None:
    """A Parquet log of ``events`` impressions of about events/10 heavy-tailed users."""
    import duckdb

    users = max(events // 10, 1)
    con = duckdb.connect()
    con.execute(f"""COPY (SELECT CAST(floor({users} * pow(random(), 2)) AS BIGINT) AS user_id,
                         CAST(i % 86400 AS BIGINT) AS t FROM range({events}) r(i))
                    TO '{path}' (FORMAT parquet)""")
    con.close()


def speed_section(args: argparse.Namespace, gen: np.random.Generator) -> None:
    import duckdb

    from dpfreq.crossparty import build_sketch

    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "log.parquet"
        t0 = time.perf_counter()
        write_log(log, args.events)
        args.log(f"wrote {args.events:,} impressions in {time.perf_counter() - t0:.1f} s")
        con = duckdb.connect()
        distinct = con.sql(f"SELECT count(DISTINCT user_id) FROM '{log}'").fetchall()[0][0]
        params = CrossPartyParams(
            measurement="speed", registers=2**20, sampling_start=0, sampling_width=1,
            max_frequency=K, epsilon_reach=LN3 / 4, epsilon_frequency=3 * LN3 / 4,
            hash="sha256-prefix/v1", key_id=key_fingerprint(KEY))
        steps = {
            "DuckDB exact per-user GROUP BY, counts summed in DuckDB (baseline)":
                f"SELECT sum(c) FROM (SELECT user_id, count(*) AS c FROM '{log}' "
                "GROUP BY user_id)",
            "the same, per-user counts fetched to numpy":
                f"SELECT user_id, count(*) AS c FROM '{log}' GROUP BY user_id",
            "distinct users only (DuckDB drops the counts)":
                f"SELECT count(*) FROM (SELECT user_id, count(*) FROM '{log}' "
                "GROUP BY user_id)",
        }
        times = {name: best_of(lambda q=q: con.sql(q).fetchnumpy(), args.repeat)
                 for name, q in steps.items()}
        times["build_sketch (GROUP BY, keyed hash, registers, noise; engine duckdb)"] = best_of(
            lambda: build_sketch(str(log), user="user_id", party="p", params=params, key=KEY,
                                 rng=1, engine="duckdb"), args.repeat)
        base = next(iter(times.values()))
        print(f"\n### Building a sketch on DuckDB ({args.events:,} impressions, {distinct:,} "
              f"users, R = 2^20, best of {args.repeat})\n")
        print("| step | wall s | ratio | CPU s | ratio |")
        print("|---|---|---|---|---|")
        for name, (wall, cpu) in times.items():
            print(f"| {name} | {wall:.2f} | {wall / base[0]:.2f} | {cpu:.2f} | "
                  f"{cpu / base[1]:.2f} |", flush=True)
        merge_speed(Path(tmp), args, gen)


def merge_speed(tmp: Path, args: argparse.Namespace, gen: np.random.Generator) -> None:
    R, count = 10**6, args.merge_sketches
    params = CrossPartyParams(
        measurement="speed", registers=R, sampling_start=0, sampling_width=1, max_frequency=K,
        epsilon_reach=LN3 / 4, epsilon_frequency=3 * LN3 / 4, hash="sha256-prefix/v1",
        key_id=key_fingerprint(KEY))
    paths, sketches = [], []
    for p in range(count):
        regs = np.minimum(gen.poisson(0.3, R), K).astype(np.int64)
        s = draw_sketch(regs, params=params, party=f"p{p}", rng=resolve_rng(gen), engine="sim")
        paths.append(s.save(tmp / f"p{p}.sketch"))
        sketches.append(s)

    def plain_sum() -> None:
        total = np.zeros(R, dtype=np.int64)
        ones = np.zeros(R, dtype=np.int64)
        for s in sketches:
            total += s.frequency
            ones += s.reach_bits

    times = {
        "numpy sum of the arrays in memory (baseline)": best_of(plain_sum, args.repeat),
        "merge_sketches of the objects (checks, estimates, consistency)":
            best_of(lambda: merge_sketches(sketches, confidence=0.95), args.repeat),
        "merge_sketches of the files (read, verify, merge)":
            best_of(lambda: merge_sketches(paths, confidence=0.95), args.repeat),
    }
    base = next(iter(times.values()))
    print(f"\n### Merging {count} sketches of {R:,} registers (reach and frequency; best of "
          f"{args.repeat})\n")
    print("| step | wall s | ratio | CPU s | ratio |")
    print("|---|---|---|---|---|")
    for name, (wall, cpu) in times.items():
        print(f"| {name} | {wall:.2f} | {wall / base[0]:.1f} | {cpu:.2f} | "
              f"{cpu / base[1]:.1f} |", flush=True)


def shuffle_speed_section(args: argparse.Namespace, gen: np.random.Generator) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import shuffle_e2e

    parties, registers, users = (3, 10**5, 20_000) if args.quick else (10, 10**6, 200_000)
    shuffle_e2e.report(shuffle_e2e.run(parties, registers, users), parties, registers, users)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, few runs (a smoke run)")
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--registers", type=int, default=2**17)
    ap.add_argument("--sections", default="table,overlap,parties,sfm,speed,shuffle-speed")
    ap.add_argument("--modes", default="reach,reach+freq,shuffle",
                    help="modes of the table and parties sections")
    ap.add_argument("--delta", type=float, default=1e-10, help="δ of the shuffle mode")
    ap.add_argument("--events", type=int, default=10**7)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--merge-sketches", type=int, default=100)
    ap.add_argument("--plots", default=None, help="directory for the figures")
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--reaches", default=None,
                    help="comma-separated reaches per publisher for the tables")
    args = ap.parse_args()
    args.reaches = REACHES if args.reaches is None else [int(float(x)) for x in
                                                         args.reaches.split(",")]
    args.modes = args.modes.split(",")
    args.sfm_reaches = [100_000, 1_000_000, 10_000_000]
    args.max_parties = 100
    args.curve_reach = 1_000_000
    if args.quick:
        args.runs, args.registers = min(args.runs, 10), min(args.registers, 2**12)
        args.reaches = [10_000, 100_000] if args.reaches == REACHES else args.reaches
        args.sfm_reaches = [100_000]
        args.max_parties, args.curve_reach = 4, 100_000
        args.events, args.merge_sketches, args.repeat = 10**5, 5, 1
    args.log = lambda text: print(f"  [{text}]", flush=True) if os.environ.get(
        "BENCH_VERBOSE") else None
    gen = np.random.default_rng(args.seed)
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    sections = {"table": table_section, "overlap": overlap_section,
                "parties": parties_section, "sfm": sfm_section, "speed": speed_section,
                "shuffle-speed": shuffle_speed_section}
    for name in args.sections.split(","):
        t0 = time.perf_counter()
        sections[name](args, gen)
        print(f"\n({name}: {time.perf_counter() - t0:.0f} s)", flush=True)
    print("\nuptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
