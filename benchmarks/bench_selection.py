"""Private partition selection on a long-tail site log: groups released, dpfreq against
PipelineDP, one run.

    python benchmarks/bench_selection.py [--users 60000] [--seeds 20] [--quick]

A seeded log of users visiting sites: 18,550 sites with Zipf(1) popularity (a long tail),
each user visits a heavy-tailed number of distinct sites (1 + a geometric law, mean ≈ 6), one
row per visit on one of 30 days. Both libraries release per-site reach with private partition
selection at unit = user, m = 8 sites per user, δ = 1e-6, at ε = 0.5, 1, 4:

* dpfreq: ``release_window_counts(..., group="site", delta=1e-6, max_groups_per_item=8,
  windows=["total"])`` — the selection is the truncated geometric mechanism at the share of ε
  the release states (``selection_epsilon``: ``"auto"`` and a fixed half are both run);
* PipelineDP: ``DPEngine.aggregate`` with ``PRIVACY_ID_COUNT``, no public partitions, Laplace
  noise, ``max_partitions_contributed=8`` (its budget accountant gives the selection half of ε;
  its default selection is the truncated geometric mechanism too).

Prints, per ε, the mean number of sites released over the seeds, the number of spurious sites
(released but absent from the bounded data: impossible by construction for both, counted
anyway), the ratio to PipelineDP, the sites with at least the half-release threshold's users,
and wall times. ``uptime`` is printed at the start and the end; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np
import pandas as pd

SITES, M, DELTA = 18_550, 8, 1e-6


def make_log(users: int, seed: int = 11) -> pd.DataFrame:
    gen = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, SITES + 1)
    weights /= weights.sum()
    n_sites = 1 + gen.geometric(0.2, users)
    rows_u, rows_s = [], []
    for u, k in enumerate(n_sites.tolist()):  # a data generator, not a hot path
        chosen = np.unique(gen.choice(SITES, size=k, p=weights))
        rows_u.append(np.full(chosen.size, u))
        rows_s.append(chosen)
    u = np.concatenate(rows_u)
    s = np.concatenate(rows_s)
    return pd.DataFrame({"user": u, "site": np.char.add("s", s.astype(str)),
                         "day": gen.integers(1, 31, u.size)})


def run_dpfreq(log: pd.DataFrame, eps: float, seed: int, share: Any) -> tuple[set[str], Any]:
    from dpfreq.windows import release_window_counts

    rel = release_window_counts(log, item="user", time="day", horizon=30, epsilon=eps,
                                delta=DELTA, unit="item", k_values=[1], windows=["total"],
                                group="site", max_groups_per_item=M, rng=seed,
                                selection_epsilon=share)
    return set(rel.groups), rel


def run_pipelinedp(log: pd.DataFrame, eps: float) -> set[str] | None:
    try:
        import pipeline_dp
    except ImportError:
        return None
    rows = list(zip(log["user"].tolist(), log["site"].tolist(), strict=True))
    budget = pipeline_dp.NaiveBudgetAccountant(total_epsilon=eps, total_delta=DELTA)
    engine = pipeline_dp.DPEngine(budget, pipeline_dp.LocalBackend())
    params = pipeline_dp.AggregateParams(noise_kind=pipeline_dp.NoiseKind.LAPLACE,
                                         metrics=[pipeline_dp.Metrics.PRIVACY_ID_COUNT],
                                         max_partitions_contributed=M,
                                         max_contributions_per_partition=1)
    extract = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r[0],
                                         partition_extractor=lambda r: r[1],
                                         value_extractor=lambda r: 0)
    res = engine.aggregate(rows, params, extract)
    budget.compute_budgets()
    return {k for k, _ in res}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--users", type=int, default=60_000)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="3 seeds")
    args = ap.parse_args()
    seeds = 3 if args.quick else args.seeds
    log = make_log(args.users)
    sites = set(log["site"])
    print(f"users={args.users:,} rows={len(log):,} sites in data={len(sites):,} of {SITES:,} "
          f"m={M} delta={DELTA:g} seeds={seeds}; uptime: {os.popen('uptime').read().strip()}")
    print(f"{'eps':>4} {'dpfreq_auto':>11} {'share':>6} {'dpfreq_half':>11} {'pipelinedp':>10} "
          f"{'auto/pdp':>8} {'half/pdp':>8} {'spurious':>8} {'t_dpfreq_s':>10} {'t_pdp_s':>8}")
    for eps in (0.5, 1.0, 4.0):
        got: dict[str, list[int]] = {"auto": [], "half": [], "pdp": []}
        spurious, t_d, t_p, share_used = 0, 0.0, 0.0, ""
        for seed in range(seeds):
            for label, share in (("auto", "auto"), ("half", eps / 2)):
                t0 = time.perf_counter()
                chosen, rel = run_dpfreq(log, eps, 1000 + seed, share)
                t_d += time.perf_counter() - t0
                spurious += len(chosen - sites)
                got[label].append(len(chosen))
                if label == "auto":
                    share_used = f"{rel.mechanism_params['selection']['epsilon'] / eps:.2f}"
            t0 = time.perf_counter()
            peer = run_pipelinedp(log, eps) if seed < max(3, seeds // 4) else None
            if peer is not None:
                t_p += time.perf_counter() - t0
                spurious += len(peer - sites)
                got["pdp"].append(len(peer))
        mean = {k: float(np.mean(v)) if v else float("nan") for k, v in got.items()}
        print(f"{eps:4g} {mean['auto']:11.1f} {share_used:>6} {mean['half']:11.1f} "
              f"{mean['pdp']:10.1f} {mean['auto'] / mean['pdp']:8.3f} "
              f"{mean['half'] / mean['pdp']:8.3f} {spurious:8d} {t_d / (2 * seeds):10.2f} "
              f"{t_p / max(1, len(got['pdp'])):8.2f}", flush=True)
    print(f"uptime at the end: {os.popen('uptime').read().strip()}")


if __name__ == "__main__":
    main()
