"""Grouped releases: per-campaign reach and profile, dpfreq against PipelineDP, one run.

A seeded ad log (users in up to 5 of 20 campaigns, 30 days). dpfreq releases the per-campaign
profile (t = 0..20) at unit="item" with max_groups_per_item = 5, and per-campaign reach as
post-processing of it (d · (1 − r[0])). PipelineDP (when installed) releases per-campaign reach
as PRIVACY_ID_COUNT with public partitions, max_partitions_contributed = 5, Laplace noise, same ε
and unit (whole user).

Grouped reach (second table): dpfreq's ``release_window_counts(windows=["total"], group=...)``
answers per-campaign reach over the whole period as one query with the whole per-group budget
(ε/m), against the same PipelineDP run: the RMSE ratio measured in this run and the exact ratio
of the two noise laws (discrete Laplace of ``release_window_counts`` against PipelineDP's
continuous Laplace, both at sensitivity m/ε). Per-campaign cumulative reach (t = 1..30) comes
from one grouped ``windows=["cumulative"]`` release; PipelineDP has no cumulative query, so it
would need one release per day (30 releases at ε/30 each, basic composition): its RMSE is
given analytically, √2 · 30 · m/ε. Tumult Analytics is not compared: its install pins
numpy < 2, pandas < 2 and pyspark < 4, which the project's environment cannot take. Prints
error and wall-time ratios measured in this run; no timed asserts.

Defaults are the issue's benchmark: 2·10^6 rows, a domain of 10^6 users, 20 campaigns, users in
up to 5 campaigns, 30 days. ``--quick`` runs 2·10^5 rows over 10^5 users, one repetition.

Usage: python benchmarks/bench_grouped.py [--rows 2000000] [--users 1000000] [--reps 2]
       python benchmarks/bench_grouped.py --quick
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
import time
from typing import Any

import numpy as np
import pandas as pd

from dpfreq import release_profile
from dpfreq.windows import release_window_counts

CAMPAIGNS = [f"campaign_{k}" for k in range(20)]
M, N_MAX = 5, 20


def make_log(rows: int, users: int, seed: int = 1) -> pd.DataFrame:
    """Each user has up to 5 campaigns (a uniformly random set of 1..5 of the 20); rows pick a
    user, one of the user's campaigns and a day."""
    gen = np.random.default_rng(seed)
    # the first M of a uniformly random permutation of the 20 campaigns, for every user at once
    user_campaigns = np.argsort(gen.random((users, 20), dtype=np.float32), axis=1)[:, :M]
    k_of_user = gen.integers(1, M + 1, users)
    u = gen.integers(0, users, rows)
    slot = (gen.random(rows) * k_of_user[u]).astype(np.int64)
    camp = user_campaigns[u, slot]
    day = gen.integers(0, 30, rows)
    return pd.DataFrame({"user_id": u, "campaign": np.asarray(CAMPAIGNS)[camp],
                         "day": day, "period": day + 1})


def truth(log: pd.DataFrame, users: int) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    counts = log.groupby(["campaign", "user_id"]).size()
    reach, prof = {}, {}
    for c in CAMPAIGNS:
        per = counts.loc[c].to_numpy() if c in counts.index.get_level_values(0) else np.zeros(0)
        reach[c] = float(per.size)
        p = np.bincount(np.minimum(per, N_MAX), minlength=N_MAX + 1).astype(float)
        p[0] = users - per.size
        prof[c] = p / users
    return reach, prof


def run_dpfreq(path: str, users: int, eps: float, seed: int) -> tuple[float, Any]:
    t0 = time.perf_counter()
    rel = release_profile(path, item="user_id", group="campaign", groups=CAMPAIGNS,
                          max_groups_per_item=M, domain_size=users, max_count=N_MAX,
                          epsilon=eps, unit="item", rng=seed)
    return time.perf_counter() - t0, rel


def cumulative_truth(log: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per campaign: users first seen on or before day t, t = 1..30."""
    first = log.groupby(["campaign", "user_id"])["period"].min().reset_index()
    out = {}
    for c in CAMPAIGNS:
        days = first.loc[first["campaign"] == c, "period"].to_numpy()
        out[c] = np.cumsum(np.bincount(days, minlength=31)[1:]).astype(float)
    return out


def run_grouped_reach(path: str, eps: float, seed: int, windows: list[str]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    rel = release_window_counts(path, item="user_id", time="period", horizon=30,
                                group="campaign", groups=CAMPAIGNS, max_groups_per_item=M,
                                epsilon=eps, unit="item", k_values=[1], windows=windows,
                                rng=seed)
    return time.perf_counter() - t0, rel


def dlap_over_laplace(eps: float) -> float:
    """Exact RMSE ratio: discrete Laplace (γ = ε/m per group, sensitivity 1) against the
    continuous Laplace of scale m/ε."""
    e = eps / M
    var_d = 2 * math.exp(-e) / (1 - math.exp(-e)) ** 2
    return math.sqrt(var_d) / (math.sqrt(2) * M / eps)


def run_pipelinedp(log: pd.DataFrame, eps: float) -> tuple[float, dict[str, float]] | None:
    try:
        import pipeline_dp
    except ImportError:
        return None
    t0 = time.perf_counter()
    rows = list(zip(log["user_id"].tolist(), log["campaign"].tolist(), strict=True))
    budget = pipeline_dp.NaiveBudgetAccountant(total_epsilon=eps, total_delta=0)
    engine = pipeline_dp.DPEngine(budget, pipeline_dp.LocalBackend())
    params = pipeline_dp.AggregateParams(noise_kind=pipeline_dp.NoiseKind.LAPLACE,
                                         metrics=[pipeline_dp.Metrics.PRIVACY_ID_COUNT],
                                         max_partitions_contributed=M,
                                         max_contributions_per_partition=1)
    extract = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r[0],
                                         partition_extractor=lambda r: r[1],
                                         value_extractor=lambda r: 0)
    res = engine.aggregate(rows, params, extract, public_partitions=CAMPAIGNS)
    budget.compute_budgets()
    out = {k: float(v.privacy_id_count) for k, v in res}
    return time.perf_counter() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--users", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--quick", action="store_true",
                    help="2·10^5 rows over 10^5 users, one repetition")
    args = ap.parse_args()
    if args.quick:
        args.rows, args.users, args.reps = 200_000, 100_000, 1
    log = make_log(args.rows, args.users)
    reach, prof = truth(log, args.users)
    cum = cumulative_truth(log)
    rows_reach = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "log.parquet")
        log.to_parquet(path)
        print(f"rows={args.rows:,} users={args.users:,} campaigns=20 m={M} reps={args.reps}; "
              f"uptime: {os.popen('uptime').read().strip()}")
        print("eps  reach_RMSE_dpfreq  reach_RMSE_pipelinedp  profile_l1_dpfreq  "
              "time_pipelinedp/time_dpfreq")
        for eps in (0.5, 1.0, 4.0):
            se_d, se_p, se_w, se_c, l1, t_d, t_p, t_w = [], [], [], [], [], 0.0, 0.0, 0.0
            for rep in range(args.reps):
                dt, rel = run_dpfreq(path, args.users, eps, 100 + rep)
                t_d += dt
                for c in CAMPAIGNS:
                    est = args.users * (1.0 - float(rel[c].value[0]))
                    se_d.append((est - reach[c]) ** 2)
                    l1.append(float(np.abs(rel[c].value - prof[c]).sum()))
                dt, wrel = run_grouped_reach(path, eps, 200 + rep, ["total"])
                t_w += dt
                se_w += [(float(wrel[c].value["total"][1][0]) - reach[c]) ** 2
                         for c in CAMPAIGNS]
                _, crel = run_grouped_reach(path, eps, 300 + rep, ["cumulative"])
                se_c += [float(np.mean((crel[c].value["cumulative"][1] - cum[c]) ** 2))
                         for c in CAMPAIGNS]
                peer = run_pipelinedp(log, eps)
                if peer is not None:
                    t_p += peer[0]
                    se_p += [(peer[1][c] - reach[c]) ** 2 for c in CAMPAIGNS]
            rp = f"{np.sqrt(np.mean(se_p)):.1f}" if se_p else "n/a"
            ratio = f"{t_p / t_d:.1f}" if se_p else "n/a"
            print(f"{eps:<4} {np.sqrt(np.mean(se_d)):17.1f}  {rp:>21}  {np.mean(l1):17.5f}  "
                  f"{ratio:>26}")
            rows_reach.append((eps, np.sqrt(np.mean(se_w)), np.sqrt(np.mean(se_p)) if se_p
                               else math.nan, dlap_over_laplace(eps),
                               t_p / t_w if se_p else math.nan, np.sqrt(np.mean(se_c))))
    print("\ngrouped reach (release_window_counts, group=campaign, m=5, unit=item)")
    print("eps  total_RMSE_dpfreq  total_RMSE_pipelinedp  ratio  exact_law_ratio  "
          "time_pipelinedp/time_dpfreq  cumulative_RMSE_dpfreq  cumulative_RMSE_pipelinedp_per_day")
    for eps, rw, rp, exact, tr, rc in rows_reach:
        per_day = math.sqrt(2) * 30 * M / eps  # 30 releases at ε/30: Laplace scale 30·m/ε
        print(f"{eps:<4} {rw:17.1f}  {rp:21.1f}  {rw / rp:5.3f}  {exact:15.4f}  {tr:27.1f}  "
              f"{rc:22.1f}  {per_day:34.1f} (analytic)")
    print(f"uptime at the end: {os.popen('uptime').read().strip()}")


if __name__ == "__main__":
    main()
