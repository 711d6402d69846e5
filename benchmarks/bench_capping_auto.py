"""``max_groups_per_item="auto"`` against every fixed bound m, in hindsight, one run.

Three seeded skewed logs of users in groups (40 public groups, 7 days):

* ``log-uniform``: each user holds ⌊e^U⌋ groups, U uniform on [0, ln 17) (1..16 groups,
  median 4), the groups uniform among the 40;
* ``zipf``: each user holds a Zipf(2) number of groups (capped at 40), the groups drawn with
  Zipf(1) popularity (a few large groups, a long tail);
* ``heavy-tail``: 80 % of the users hold one or two groups, 20 % hold 8 to 40 (a Pareto tail).

For every log, per-group reach over the whole period (``windows=["total"]``, ``k_values=[1]``,
``unit="item"``) is released with each fixed m in {1, 2, 3, 4, 6, 8, 12, 16} at ε and with
``max_groups_per_item="auto"`` at the same total ε (``capping_epsilon`` of it measuring the
histogram m is chosen from, the rest releasing), over ``--seeds`` seeds. The total RMSE is
``√(mean over groups and seeds of (released − true reach)²)`` against the true, uncapped reach
(so it counts the cap's bias and the noise). Prints every m's RMSE, the best fixed m in
hindsight, auto's RMSE and its chosen m, and the ratio auto / best fixed m (target <= 1.1),
with ``uptime``. No timed asserts.

Usage: python benchmarks/bench_capping_auto.py [--users 5000] [--epsilon 0.2]
       [--capping-share 0.05] [--seeds 20]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import warnings
from collections import Counter

import numpy as np

from dpfreq.errors import DPFreqWarning
from dpfreq.windows import release_window_counts

N_GROUPS = 40
GROUPS = [f"g{k:02d}" for k in range(N_GROUPS)]
FIXED = (1, 2, 3, 4, 6, 8, 12, 16)
HORIZON = 7


def _assign(gen: np.random.Generator, sizes: np.ndarray, weights: np.ndarray
            ) -> dict[str, np.ndarray]:
    """Each user's groups (``sizes[u]`` distinct groups drawn with ``weights``) and a day per
    (user, group) pair, as an event log."""
    users, groups = [], []
    p = weights / weights.sum()
    for u, k in enumerate(sizes):
        chosen = gen.choice(N_GROUPS, size=int(k), replace=False, p=p)
        users.append(np.full(chosen.size, u))
        groups.append(chosen)
    user = np.concatenate(users)
    group = np.concatenate(groups)
    day = gen.integers(1, HORIZON + 1, user.size)
    return {"user": user, "site": np.asarray(GROUPS)[group], "day": day}


def make_log(kind: str, users: int, seed: int) -> dict[str, np.ndarray]:
    """One of the three skewed logs (module docstring)."""
    gen = np.random.default_rng(seed)
    flat = np.ones(N_GROUPS)
    if kind == "log-uniform":
        sizes = np.floor(np.exp(gen.uniform(0.0, np.log(17.0), users))).astype(np.int64)
        return _assign(gen, np.clip(sizes, 1, 16), flat)
    if kind == "zipf":
        sizes = np.minimum(gen.zipf(2.0, users), N_GROUPS)
        return _assign(gen, sizes, 1.0 / np.arange(1, N_GROUPS + 1))
    if kind == "heavy-tail":
        light = gen.integers(1, 3, users)
        heavy = np.minimum(np.floor(8 * (1 - gen.random(users)) ** (-1 / 1.5)), N_GROUPS)
        sizes = np.where(gen.random(users) < 0.8, light, heavy).astype(np.int64)
        return _assign(gen, sizes, flat)
    raise ValueError(kind)


def true_reach(log: dict[str, np.ndarray]) -> np.ndarray:
    """Distinct users per group, uncapped."""
    pairs = {(int(u), str(g)) for u, g in zip(log["user"], log["site"], strict=True)}
    count = Counter(g for _, g in pairs)
    return np.array([count.get(g, 0) for g in GROUPS], dtype=np.float64)


def reach(log: dict[str, np.ndarray], seed: int, epsilon: float, m: int | str,
          capping: float | None) -> tuple[np.ndarray, int]:
    """Every group's released reach and the bound used."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DPFreqWarning)  # seeded; large dropped fractions
        rel = release_window_counts(log, item="user", time="day", horizon=HORIZON,
                                    epsilon=epsilon, unit="item", k_values=[1],
                                    windows=["total"], group="site", groups=GROUPS,
                                    max_groups_per_item=m, capping_epsilon=capping, rng=seed)
    est = np.array([float(np.asarray(rel[g].value["total"][1]).reshape(-1)[0])
                    for g in GROUPS])
    return est, int(rel.mechanism_params["max_groups_per_item"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=int, default=5000)
    ap.add_argument("--epsilon", type=float, default=0.2)
    ap.add_argument("--capping-share", type=float, default=0.05,
                    help="capping_epsilon of auto as a share of --epsilon")
    ap.add_argument("--seeds", type=int, default=20)
    args = ap.parse_args()
    eps, share = args.epsilon, args.capping_share
    print(f"# {args.users} users, {N_GROUPS} public groups, ε = {eps:g} (auto: capping_epsilon "
          f"= {share:g}·ε), {args.seeds} seeds, windows total, k 1, unit item")
    head = " ".join(f"{f'm={m}':>8}" for m in FIXED)
    print(f"{'log':<11} {'pairs/user':>10} {head} {'best':>8} {'auto':>8} {'auto m':>12} "
          f"{'ratio':>6}")
    ratios = []
    for i, kind in enumerate(("log-uniform", "zipf", "heavy-tail")):
        log = make_log(kind, args.users, seed=100 + i)
        truth = true_reach(log)
        rmse = {}
        for m in (*FIXED, "auto"):
            sq, chosen = 0.0, Counter[int]()
            for s in range(args.seeds):
                est, used = reach(log, s, eps, m, eps * share if m == "auto" else None)
                sq += float(np.sum((est - truth) ** 2))
                chosen[used] += 1
            rmse[m] = float(np.sqrt(sq / (args.seeds * N_GROUPS)))
            if m == "auto":
                auto_m = ",".join(f"{k}×{v}" for k, v in sorted(chosen.items()))
        best = min(FIXED, key=lambda m: rmse[m])
        ratio = rmse["auto"] / rmse[best]
        ratios.append(ratio)
        cells = " ".join(f"{rmse[m]:8.1f}" for m in FIXED)
        print(f"{kind:<11} {truth.sum() / args.users:10.2f} {cells} {f'm={best}':>8} "
              f"{rmse['auto']:8.1f} {auto_m:>12} {ratio:6.3f}")
    print(f"# auto / best fixed m in hindsight: worst {max(ratios):.3f} (target <= 1.1)")
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"# uptime: {uptime} (cpus {os.cpu_count()})")


if __name__ == "__main__":
    main()
