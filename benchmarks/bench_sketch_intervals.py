"""Coverage of the sketch route's simulated intervals (ProfileSketch.reconstruct, fft and mle).

For each ε, ``--trials`` seeded sketches of one fixed data set (d items, Zipf-like counts
capped at n) are reconstructed; the table prints the mean per-class coverage of the intervals
(fraction of (trial, class) pairs whose interval holds the true profile entry) and that of the
worst class, the coverage of the simultaneous band (all classes at once), how many releases
were flagged vacuous (their intervals are the trivial [0, 1]), the mean interval width in items,
the mean ℓ1 error and the Theorem 1.1 ℓ1 bound, against the nominal confidence. The worst class
of a pooled row is the worst class's coverage over the pooled releases. After each ε, the share
of (pooled) releases whose band misses each class. ``band ±`` is twice the
binomial standard error of the band's coverage at the nominal level (``2·sqrt(c(1 − c)/trials)``,
2.1 points for 200 trials at 0.9, 1.9 points for 1,000): a measured coverage within it of
nominal is what an exactly calibrated band gives.

Run: ``python benchmarks/bench_sketch_intervals.py --trials 200 --method mle
--trial-seeds 7,11,13,17,19`` (the table in the accuracy page of the docs).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field

import numpy as np

from dpfreq.profile import ProfileSketch


@dataclass
class Tally:
    """Counts over the releases of one (ε, trial set) cell, or of several pooled."""

    covered: np.ndarray
    band_missed: np.ndarray
    trials: int = 0
    band: int = 0
    vacuous: int = 0
    seconds: float = 0.0
    widths: list[float] = field(default_factory=list)
    errors: list[float] = field(default_factory=list)
    bound: float = 0.0

    def add(self, other: Tally) -> None:
        self.covered = self.covered + other.covered
        self.band_missed = self.band_missed + other.band_missed
        self.trials += other.trials
        self.band += other.band
        self.vacuous += other.vacuous
        self.seconds += other.seconds
        self.widths += other.widths
        self.errors += other.errors
        self.bound = other.bound

    def row(self, label: str, eps: float, conf: float) -> str:
        t = self.trials
        return (f"{eps:>8g} {label:>6} {self.covered.sum() / (t * self.covered.size):>10.3f} "
                f"{self.covered.min() / t:>6.3f} {self.band / t:>9.3f} {self.vacuous:>8d} "
                f"{np.mean(self.widths):>13.1f} {np.mean(self.errors):>9.4f} "
                f"{self.bound:>9.4f} {self.seconds / t:>8.3f} "
                f"{2 * (conf * (1 - conf) / t) ** 0.5:>7.3f}")


def measure(counts: np.ndarray, truth: np.ndarray, *, eps: float, seed: int, trials: int,
            method: str, conf: float) -> Tally:
    """Coverage of ``trials`` releases whose sketches are seeded ``1000·t + seed``."""
    d, n = counts.size, truth.size - 1
    tally = Tally(covered=np.zeros(n + 1, dtype=np.int64),
                  band_missed=np.zeros(n + 1, dtype=np.int64), trials=trials)
    start = time.perf_counter()
    for trial in range(trials):
        s = ProfileSketch.from_counts(counts, domain_size=d, max_count=n, epsilon=eps,
                                      rng=1000 * trial + seed)
        rel = s.reconstruct(confidence=conf, method=method)
        lo, hi = rel.error.lower, rel.error.upper
        tally.covered += (lo <= truth + 1e-12) & (truth <= hi + 1e-12)
        tally.vacuous += int(rel.error.vacuous)
        in_band = ((rel.error.band_lower <= truth + 1e-12)
                   & (truth <= rel.error.band_upper + 1e-12))
        tally.band += int(np.all(in_band))
        tally.band_missed += ~in_band
        tally.widths.append(float(np.mean(hi - lo)) * d)
        tally.errors.append(float(np.abs(rel.value - truth).sum()))
        tally.bound = float(rel.l1_bound or 0.0)
    tally.seconds = time.perf_counter() - start
    return tally


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200, help="releases per trial set")
    parser.add_argument("--domain-size", type=int, default=20_000)
    parser.add_argument("--max-count", type=int, default=10)
    parser.add_argument("--confidence", type=float, default=0.9)
    parser.add_argument("--method", default="fft", choices=("fft", "mle"))
    parser.add_argument("--epsilons", default="0.25,1,4")
    parser.add_argument("--trial-seeds", default="7",
                        help="comma-separated trial sets: trial t of set S is seeded 1000·t + S; "
                             "with several sets each gets a row and the pooled row follows")
    args = parser.parse_args()
    d, n, conf = args.domain_size, args.max_count, args.confidence
    seeds = [int(x) for x in args.trial_seeds.split(",")]
    base = np.random.Generator(np.random.PCG64(20261124))
    counts = np.minimum(base.zipf(1.7, d) - 1, n)
    truth = np.bincount(counts, minlength=n + 1) / d
    print(f"d={d} n={n} confidence={conf} method={args.method} trials={args.trials} per set, "
          f"trial sets {args.trial_seeds}")
    print(f"{'epsilon':>8} {'set':>6} {'class cov':>10} {'worst':>6} {'band cov':>9} "
          f"{'vacuous':>8} {'width(items)':>13} {'l1 error':>9} {'l1 bound':>9} "
          f"{'s/trial':>8} {'band ±':>7}")
    for eps in (float(e) for e in args.epsilons.split(",")):
        pooled = Tally(covered=np.zeros(n + 1, dtype=np.int64),
                       band_missed=np.zeros(n + 1, dtype=np.int64))
        for seed in seeds:
            tally = measure(counts, truth, eps=eps, seed=seed, trials=args.trials,
                            method=args.method, conf=conf)
            print(tally.row(str(seed), eps, conf), flush=True)
            pooled.add(tally)
        if len(seeds) > 1:
            print(pooled.row("pooled", eps, conf), flush=True)
        # where the band misses: an exactly simulated law spreads its misses over the classes
        # as the simulation does; crowded into a few classes they overlap, and the band holds
        # in more releases than its level (the accuracy page of the docs)
        rates = " ".join(f"{x:.3f}" for x in pooled.band_missed / pooled.trials)
        print(f"{'':>8} band missed, by class 0..{n}: {rates}", flush=True)


if __name__ == "__main__":
    main()
