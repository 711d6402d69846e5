"""Private partition selection on a long-tail site log: groups released, dpfreq against
PipelineDP, one run.

    python benchmarks/bench_selection.py [--users 60000] [--seeds 20] [--quick]

A seeded log of users visiting sites: 18,550 sites with Zipf(1) popularity (a long tail),
each user visits a heavy-tailed number of distinct sites (1 + a geometric law, mean ≈ 6), one
row per visit on one of 30 days. Both libraries release per-site reach with private partition
selection at unit = user, m = 8 sites per user, δ = 1e-6, at ε = 0.5, 1, 4:

* dpfreq: ``release_window_counts(..., group="site", delta=1e-6, max_groups_per_item=8,
  windows=["total"])``, three ways: the truncated geometric mechanism at half of ε
  (``selection="truncated_geometric"``, ``selection_epsilon=ε/2``: PipelineDP's share), the
  weighted set union at half of ε (``selection="set_union"``), and everything ``"auto"`` (the
  mechanism and the share chosen from public parameters);
* PipelineDP: ``DPEngine.aggregate`` with ``PRIVACY_ID_COUNT``, no public partitions, Laplace
  noise, ``max_partitions_contributed=8`` (its budget accountant gives the selection half of ε;
  its default selection is the truncated geometric mechanism too).

Prints, per ε, the mean number of sites released over the seeds, the number of spurious sites
(released but absent from the data: impossible by construction for all, counted anyway), the
ratios to PipelineDP, and wall times. ``uptime`` is printed at the start and the end; nothing is
asserted.
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


def run_dpfreq(log: pd.DataFrame, eps: float, seed: int, share: Any,
               selection: str) -> tuple[set[str], Any]:
    from dpfreq.windows import release_window_counts

    rel = release_window_counts(log, item="user", time="day", horizon=30, epsilon=eps,
                                delta=DELTA, unit="item", k_values=[1], windows=["total"],
                                group="site", max_groups_per_item=M, rng=seed,
                                selection_epsilon=share, selection=selection)
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
    print(f"{'eps':>4} {'tg_half':>8} {'su_half':>8} {'auto':>7} {'auto_is':>16} "
          f"{'pipelinedp':>10} {'tg/pdp':>7} {'su/pdp':>7} {'auto/pdp':>8} {'spurious':>8} "
          f"{'t_dpfreq_s':>10} {'t_pdp_s':>8}")
    runs = (("tg", "truncated_geometric", True), ("su", "set_union", True),
            ("auto", "auto", False))
    for eps in (0.5, 1.0, 4.0):
        got: dict[str, list[int]] = {"tg": [], "su": [], "auto": [], "pdp": []}
        spurious, t_d, t_p, auto_is = 0, 0.0, 0.0, ""
        for seed in range(seeds):
            for label, selection, half in runs:
                t0 = time.perf_counter()
                chosen, rel = run_dpfreq(log, eps, 1000 + seed, eps / 2 if half else "auto",
                                         selection)
                t_d += time.perf_counter() - t0
                spurious += len(chosen - sites)
                got[label].append(len(chosen))
                if label == "auto":
                    sel = rel.mechanism_params["selection"]
                    kind = "SU" if "set union" in sel["mechanism"] else "TG"
                    auto_is = f"{kind} share {sel['epsilon'] / eps:.2f}"
            t0 = time.perf_counter()
            peer = run_pipelinedp(log, eps) if seed < max(3, seeds // 4) else None
            if peer is not None:
                t_p += time.perf_counter() - t0
                spurious += len(peer - sites)
                got["pdp"].append(len(peer))
        mean = {k: float(np.mean(v)) if v else float("nan") for k, v in got.items()}
        pdp = mean["pdp"]
        print(f"{eps:4g} {mean['tg']:8.1f} {mean['su']:8.1f} {mean['auto']:7.1f} {auto_is:>16} "
              f"{pdp:10.1f} {mean['tg'] / pdp:7.3f} {mean['su'] / pdp:7.3f} "
              f"{mean['auto'] / pdp:8.3f} {spurious:8d} {t_d / (len(runs) * seeds):10.2f} "
              f"{t_p / max(1, len(got['pdp'])):8.2f}", flush=True)
    print(f"uptime at the end: {os.popen('uptime').read().strip()}")


if __name__ == "__main__":
    main()
