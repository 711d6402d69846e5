"""Coverage of the window releases' per-answer intervals and simultaneous bands.

One heavy-tailed log (20,000 events of 3,000 items over T periods, Zipf 1.6) is released
``--trials`` times per (unit, family) with seeds 0, 1, …, each family alone (``windows=[f]``),
ε = 1, k = 1, nominal 0.90, and every window of the family is asked (cumulative: ``[1, t]``;
rolling: ``[t − W + 1, t]``; all: every ``[t1, t2]``). The table prints the per-answer coverage
(fraction of (trial, window) pairs whose interval holds the true reach), the band's coverage
(fraction of trials whose band holds every window at once), the mean per-answer half-width and
the structure that answered. ``band ±`` is twice the binomial standard error at nominal
(``2·sqrt(0.9·0.1/trials)``, 1.9 points at 1,000 trials).

Run: ``python benchmarks/bench_windows_coverage.py --trials 1000`` (the windows table in the
accuracy page of the docs).
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

import numpy as np

from dpfreq import release_window_counts


def log(horizon: int) -> tuple[np.ndarray, np.ndarray]:
    gen = np.random.default_rng(2026)
    items = gen.zipf(1.6, 20_000) % 3_000
    return items, gen.integers(1, horizon + 1, items.size)


def family_windows(family: str | int, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    ends = np.arange(1, horizon + 1)
    if family == "cumulative":
        return np.ones_like(ends), ends
    if family == "all":
        a, b = np.triu_indices(horizon)
        return a + 1, b + 1
    return np.maximum(1, ends - int(family) + 1), ends


def truth(items: np.ndarray, times: np.ndarray, horizon: int, t1: np.ndarray,
          t2: np.ndarray) -> np.ndarray:
    seen = np.zeros((int(items.max()) + 1, horizon + 2), dtype=np.int64)
    np.add.at(seen, (items, times), 1)
    first = np.cumsum(seen > 0, axis=1)  # items seen in [1, t] per item, as a running count
    return np.array([int(((first[:, b] - first[:, a - 1]) > 0).sum())
                     for a, b in zip(t1.tolist(), t2.tolist(), strict=True)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--horizon", type=int, default=30)
    ap.add_argument("--units", default="event,item")
    ap.add_argument("--families", default="cumulative,7,all")
    ap.add_argument("--method", default="auto",
                    help="force one method for every family (e.g. blocks, tree2d)")
    args = ap.parse_args()
    horizon = args.horizon
    items, times = log(horizon)
    conf = 0.9
    print(f"nominal {conf}, T = {horizon}, {args.trials} trials per row, "
          f"band ± {2 * math.sqrt(conf * (1 - conf) / args.trials):.3f}")
    print(f"{'unit':>6} {'family':>10} {'windows':>8} {'per-answer':>10} {'band':>6} "
          f"{'half-width':>10} {'method':>10} {'s/trial':>8}")
    for unit in args.units.split(","):
        for fam_arg in args.families.split(","):
            family: str | int = fam_arg if fam_arg in ("cumulative", "all") else int(fam_arg)
            method: Any = "auto" if args.method == "auto" else {family: args.method}
            t1, t2 = family_windows(family, horizon)
            exact = truth(items, times, horizon, t1, t2)
            inside = band = 0
            half: list[float] = []
            answered_by = ""
            t0 = time.perf_counter()
            for seed in range(args.trials):
                rel = release_window_counts((items, times), horizon=horizon, epsilon=1.0,
                                            unit=unit, k_values=[1], windows=[family], rng=seed,
                                            method=method)
                ans = rel.window(t1, t2, k=1, confidence=conf)
                inside += int(((ans.lower <= exact) & (exact <= ans.upper)).sum())
                band += bool(np.all((ans.band_lower <= exact) & (exact <= ans.band_upper)))
                half.append(float(np.mean(np.asarray(ans.upper) - np.asarray(ans.estimate))))
                answered_by = str(np.asarray(ans.answered_by).ravel()[0]).split("/")[-1]
            secs = (time.perf_counter() - t0) / args.trials
            cover = inside / (t1.size * args.trials)
            print(f"{unit:>6} {fam_arg:>10} {t1.size:>8d} {cover:>10.3f} "
                  f"{band / args.trials:>6.3f} {np.mean(half):>10.0f} {answered_by:>10} "
                  f"{secs:>8.3f}", flush=True)


if __name__ == "__main__":
    main()
