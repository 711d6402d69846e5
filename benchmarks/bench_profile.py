"""Benchmark of the profile release methods: direct, fft, mle and naive, in one run.

Three tables, all through the public ``release_profile`` (count vectors; engines are measured by
``bench_engines.py``):

1. **Grid** — d ∈ {10^4, 10^6, 10^8} (``--quick``: 10^4, 10^6), ε ∈ {0.1, 0.5, 1, 4}, n = 50,
   half the domain active with Zipf(1.8) counts: mean ℓ1 error (in items), mean per-class
   interval width (items), per-class coverage, band coverage and seconds per release, for
   ``direct``, ``fft``, ``mle`` and ``naive`` (the clipped noisy profile of the fft route's own
   sketch; no intervals).
2. **Target** — d = 2·10^6, n = 50, ε = 1, 10^6 active items with Zipf(1.8) counts: ℓ1 of
   ``direct`` beside a plain noisy count-of-counts (the same noisy vector, not projected:
   the named baseline) and the sketch route (``fft``, ``mle``); ratios.
3. **Coverage** — ≥ 200 seeded trials (``--quick``: 100 for the sketch) at ε ∈ {0.1, 1, 4}:
   per-class and band coverage of every interval family against the nominal 95 %, and the
   width of the direct intervals against the exact discrete-Laplace quantile width ``2q``.
4. **Peers** — OpenDP (``bench`` extra) in the same run, on a 2·10^6-row log over a public
   domain of 10^6 users (row ids ``⌊10^6 U³⌋``, skewed), counts capped at 50, ``--seeds``
   releases (default 20) per cell at ε ∈ {0.5, 1, 4}: dpfreq ``unit="item"`` against
   OpenDP's count-of-counts at ``d_in=1`` (symmetric distance: add/remove one user's row of
   the per-user table), and ``unit="item_replace"`` against ``d_in=2``. OpenDP has no class 0
   (it sees only the users present): its class 0 is read as ``d − Σ`` of its noisy classes, the
   same derivation dpfreq makes; the ℓ1 over the classes ``t ≥ 1`` is printed too.

Run ``python benchmarks/bench_profile.py [--quick] [--only grid,target,coverage,peers]
[--seeds 20]``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from dpfreq.profile import release_profile
from dpfreq.profile.direct import direct_gamma
from dpfreq.profile.intervals import direct_half_widths

N = 50
CONF = 0.95
CHUNK = 1 << 22


def zipf_counts(d_active: int, seed: int) -> np.ndarray:
    """int64 counts ``min(Zipf(1.8), n + 10)`` of the active items (clamping happens later)."""
    rng = np.random.default_rng(seed)
    out = np.empty(d_active, dtype=np.int64)
    for s in range(0, d_active, CHUNK):
        e = min(d_active, s + CHUNK)
        out[s:e] = np.minimum(rng.zipf(1.8, e - s), N + 10)
    return out


def truth_of(counts: np.ndarray, d: int) -> np.ndarray:
    c = np.bincount(np.minimum(counts, N), minlength=N + 1).astype(np.float64)
    c[0] += d - counts.size
    return c / d


def naive_from(rel: Any) -> np.ndarray:
    """Clipped noisy profile on 0..n from the sketch's window counts (the naive estimator)."""
    f = np.asarray(rel.noisy_profile, dtype=np.float64)
    b = int(rel.B)
    out = f[b : b + N + 1].copy()
    out[0] += f[:b].sum()  # noisy values below 0 read as 0, above n as n (clamped release)
    out[-1] += f[b + N + 1 :].sum()
    return np.clip(out, 0.0, 1.0)


def measure(counts: np.ndarray, d: int, eps: float, method: str, trials: int,
            seed0: int) -> dict[str, float]:
    """Mean ℓ1 (items), mean interval width (items), coverages and seconds per release.

    For ``fft`` also ``naive_l1``: the naive estimator on the same sketches.
    """
    truth = truth_of(counts, d)
    l1, naive, width, cover, band, secs = [], [], [], [], [], []
    for k in range(trials):
        t0 = time.perf_counter()
        rel = release_profile(counts, domain_size=d, max_count=N, epsilon=eps, unit="event",
                              method=method, confidence=CONF, rng=seed0 + k)
        secs.append(time.perf_counter() - t0)
        if method == "fft":
            naive.append(float(np.abs(naive_from(rel) - truth).sum()) * d)
        err = rel.error
        l1.append(float(np.abs(rel.value - truth).sum()) * d)
        width.append(float(np.mean(err.upper - err.lower)) * d)
        tol = 1e-12
        cover.append((err.lower <= truth + tol) & (truth <= err.upper + tol))
        band.append(float(np.all((err.band_lower <= truth + tol)
                                 & (truth <= err.band_upper + tol))))
    nan = float("nan")
    return {"l1": float(np.mean(l1)), "width": float(np.mean(width)),
            "cover": float(np.mean(cover)), "worst": float(np.min(np.mean(cover, axis=0))),
            "band": float(np.mean(band)), "sec": float(np.mean(secs)),
            "naive_l1": float(np.mean(naive)) if naive else nan}


def _row(d: int, eps: float, method: str, trials: int, m: dict[str, float]) -> None:
    print(f"{d:>6.0e} {eps:>4g} {method:>7} {trials:>6} {m['l1']:>10,.1f} "
          f"{m['width']:>9,.1f} {m['cover']:>6.3f} {m['band']:>5.2f} {m['sec']:>7.3f}",
          flush=True)


def grid(quick: bool) -> None:
    sizes = {10**4: 5, 10**6: 2} if quick else {10**4: 20, 10**6: 5, 10**8: 1}
    print("\n## Grid: n = 50, half the domain active, Zipf(1.8) counts; unit = event "
          "(direct is equally private at unit = item)")
    print(f"{'d':>6} {'ε':>4} {'method':>7} {'trials':>6} {'ℓ1 items':>10} {'width':>9} "
          f"{'cover':>6} {'band':>5} {'s/rel':>7}")
    for d, trials in sizes.items():
        counts = zipf_counts(d // 2, seed=d)
        for eps in (0.1, 0.5, 1.0, 4.0):
            for method in ("direct", "fft", "mle"):
                t = trials
                if method == "mle":
                    t = 1 if d >= 10**8 else max(1, trials // 5)
                    if d >= 10**8 and eps <= 0.5:  # EM's simulated intervals: minutes here
                        print(f"{d:>6.0e} {eps:>4g} {method:>7}   (skipped: EM with its "
                              "simulated intervals takes minutes per release here)")
                        continue
                m = measure(counts, d, eps, method, t, seed0=1000)
                _row(d, eps, method, t, m)
                if method == "fft":
                    print(f"{d:>6.0e} {eps:>4g} {'naive':>7} {t:>6} {m['naive_l1']:>10,.1f} "
                          f"{'-':>9} {'-':>6} {'-':>5} {'(same sketches)':>7}", flush=True)


def target(quick: bool) -> None:
    d, eps, trials = 2 * 10**6, 1.0, 20
    counts = zipf_counts(10**6, seed=7)
    truth = truth_of(counts, d)
    direct, plain = [], []
    for k in range(trials):
        rel = release_profile(counts, domain_size=d, max_count=N, epsilon=eps, unit="item",
                              method="direct", rng=k)
        direct.append(float(np.abs(rel.value - truth).sum()) * d)
        plain.append(float(np.abs(np.asarray(rel.noisy_profile) - truth).sum()) * d)
    fft = measure(counts, d, eps, "fft", 5 if quick else trials, seed0=0)
    mle = measure(counts, d, eps, "mle", 2 if quick else 5, seed0=0)
    print("\n## Target: d = 2e6, n = 50, ε = 1, 10^6 active items, Zipf(1.8)")
    print(f"direct (item: add/remove)      ℓ1 = {np.mean(direct):9.1f} items")
    print(f"plain noisy count-of-counts    ℓ1 = {np.mean(plain):9.1f} items  "
          f"(baseline; direct/plain = {np.mean(direct) / np.mean(plain):.3f}, target <= 1.2)")
    print(f"fft (sketch, event level)      ℓ1 = {fft['l1']:9.1f} items  "
          f"(fft/direct = {fft['l1'] / np.mean(direct):.0f}x, target >= 50x)")
    print(f"mle (sketch, event level)      ℓ1 = {mle['l1']:9.1f} items  "
          f"(mle/direct = {mle['l1'] / np.mean(direct):.0f}x)")


def coverage(quick: bool) -> None:
    print(f"\n## Coverage at nominal {CONF:g} (per-class: mean over classes and trials; worst t: "
          "the least-covered class; band: fraction of trials with every class inside)")
    print(f"{'method':>7} {'d':>6} {'ε':>4} {'trials':>6} {'per-class':>9} {'worst t':>7} "
          f"{'band':>6} {'width/2q':>8}")
    plans = [("direct", 10**6, {0.1: 200, 1.0: 200, 4.0: 200}),
             ("fft", 10**4, {0.1: 100, 1.0: 100, 4.0: 100} if quick
              else {0.1: 200, 0.5: 200, 1.0: 200, 4.0: 200})]
    if not quick:  # EM with 200 simulated reconstructions: ~7 s per release at ε = 1
        plans.append(("mle", 10**4, {1.0: 100, 4.0: 200}))
    for method, d, per_eps in plans:
        counts = zipf_counts(d // 2, seed=11)
        for eps, trials in per_eps.items():
            m = measure(counts, d, eps, method, trials, seed0=5000)
            ratio = ""
            if method == "direct":
                q, _ = direct_half_widths(direct_gamma(eps), N + 1, CONF)
                ratio = f"{m['width'] / (2 * q):8.3f}"
            print(f"{method:>7} {d:>6.0e} {eps:>4g} {trials:>6} {m['cover']:>9.3f} "
                  f"{m['worst']:>7.3f} {m['band']:>6.3f} {ratio:>8}", flush=True)


PEER_D, PEER_ROWS = 10**6, 2 * 10**6


def peer_counts(seed: int) -> np.ndarray:
    """Per-user counts (length ``PEER_D``) of a ``PEER_ROWS``-row log with ids ``⌊d U³⌋``."""
    rng = np.random.default_rng(seed)
    ids = np.floor(PEER_D * rng.random(PEER_ROWS) ** 3).astype(np.int64)
    return np.bincount(ids, minlength=PEER_D).astype(np.int64)


def _opendp_measurement(d_in: int, eps: float) -> Any:
    """OpenDP count-of-counts: count by categories 1..n of the per-user (clamped) counts, with
    integer Laplace noise at the largest scale that is ε-DP at ``d_in``."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    space = dp.vector_domain(dp.atom_domain(T=int)), dp.symmetric_distance()
    counts = space >> dp.t.then_count_by_categories(categories=list(range(1, N + 1)),
                                                    null_category=False)
    return dp.binary_search_chain(lambda s: counts >> dp.m.then_laplace(scale=s),
                                  d_in=d_in, d_out=eps)


def _l1(est: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    """(ℓ1 over all classes, ℓ1 over t >= 1), in items."""
    diff = np.abs(est - truth)
    return float(diff.sum()), float(diff[1:].sum())


def peers(quick: bool, seeds: int) -> None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        opendp_version = version("opendp")
    except PackageNotFoundError:
        print("\n## Peers: OpenDP is not installed (pip install 'dpfreq[bench]'); skipped")
        return
    counts = peer_counts(2026)
    clamped = np.minimum(counts, N)
    truth = np.bincount(clamped, minlength=N + 1).astype(np.float64)
    users = [int(v) for v in clamped[clamped > 0]]  # the per-user table OpenDP sees
    print(f"\n## Peers: OpenDP {opendp_version}, {PEER_ROWS:.0e}-row log, d = {PEER_D:.0e} "
          f"users ({len(users):,} present), n = {N}, {seeds} releases per cell; ℓ1 in items "
          "(mean ± standard error)")
    print(f"{'ε':>4} {'relation':>28} {'dpfreq ℓ1':>14} {'OpenDP ℓ1':>14} {'ratio':>6} "
          f"{'dpfreq t>=1':>12} {'OpenDP t>=1':>12}")
    for eps in (0.5, 1.0, 4.0):
        for unit, d_in in (("item", 1), ("item_replace", 2)):
            ours, theirs = [], []
            meas = _opendp_measurement(d_in, eps)
            assert meas.map(d_in) <= eps
            for k in range(seeds):
                rel = release_profile(counts, domain_size=PEER_D, max_count=N, epsilon=eps,
                                      unit=unit, method="direct", rng=10_000 + k)
                ours.append(_l1(np.asarray(rel.value) * PEER_D, truth))
                noisy = np.asarray(meas(users), dtype=np.float64)
                theirs.append(_l1(np.concatenate([[PEER_D - noisy.sum()], noisy]), truth))
            a, b = np.array(ours), np.array(theirs)
            se = np.sqrt(seeds)
            print(f"{eps:>4g} {f'{unit} / d_in={d_in}':>28} "
                  f"{a[:, 0].mean():>8.1f} ± {a[:, 0].std(ddof=1) / se:<4.1f}"
                  f"{b[:, 0].mean():>8.1f} ± {b[:, 0].std(ddof=1) / se:<4.1f}"
                  f"{a[:, 0].mean() / b[:, 0].mean():>6.2f} {a[:, 1].mean():>12.1f} "
                  f"{b[:, 1].mean():>12.1f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (< 2 minutes)")
    parser.add_argument("--only", default="grid,target,coverage,peers")
    parser.add_argument("--seeds", type=int, default=20, help="releases per peer cell")
    args = parser.parse_args()
    start = time.perf_counter()
    parts = args.only.split(",")
    if "peers" in parts:
        peers(args.quick, args.seeds)
    if "target" in parts:
        target(args.quick)
    if "coverage" in parts:
        coverage(args.quick)
    if "grid" in parts:
        grid(args.quick)
    print(f"\ntotal {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
