"""Coverage of the windows per-answer intervals against the exact noise law.

Answers without consistency post-processing carry a sum of ``m`` i.i.d. node noises; their
half-width is the certified quantile of the exact law of that sum, so the coverage of an answer
is exactly ``p = Pr[|S_m| <= b]``, computed here independently by direct convolution
(linear FFT convolution) of the exact node pmf. Consistent (least-squares) tree answers are a
combination with non-integer weights; their interval is a certified upper bound on the quantile
(grid rounding plus a Hoeffding term), so their coverage is at least nominal and, by
construction, only slightly above it. α = 1e-6 per assertion (binomial tests on seeded keyed
noise: independent keys are independent releases).

Run as a script (``python tests/statistical/test_windows_coverage.py``) to print the coverage
table of seeded releases (cumulative, rolling and arbitrary windows; three ε; nominal 0.9 and
0.95) that ``docs/accuracy.md`` quotes.
"""

from __future__ import annotations

import sys
from fractions import Fraction

import numpy as np
import pytest
from scipy import signal, stats

from dpfreq.noise import discrete_laplace_pmf
from dpfreq.windows.laws.sums import sum_quantile
from dpfreq.windows.structures.base import build_structure

pytestmark = pytest.mark.statistical

ALPHA = 1e-6


def _exact_abs_cdf(gamma: Fraction, m: int, b: int) -> float:
    """``Pr[|S_m| <= b]`` for ``S_m`` a sum of ``m`` i.i.d. ``DLap(γ)`` (linear convolution,
    ``scipy.signal.fftconvolve``, not the circular code under test)."""
    half = int(60 / float(gamma)) + 50  # Pr[|Z| > half] < e^-60
    z = np.arange(-half, half + 1)
    p = discrete_laplace_pmf(z, gamma)
    law = p
    for _ in range(m - 1):
        law = np.clip(signal.fftconvolve(law, p), 0.0, None)
    zz = np.arange(-(law.size // 2), law.size // 2 + 1)
    return float(law[np.abs(zz) <= b].sum())


def _keyed_noise(method: str, family: str, horizon: int, eps: Fraction, trials: int,
                 t1: np.ndarray, t2: np.ndarray, seed: int, width: int | None = None):
    """(structure, noise per (trial, query)) under ``trials`` independent keys."""
    s = build_structure(family, method, 1, horizon, "event", eps, 0.0, width)
    out = np.empty((trials, t1.size), dtype=np.float64)
    for i in range(trials):
        s.attach(seed.to_bytes(8, "little") + i.to_bytes(24, "little"), (family, 1))
        out[i] = s.noise(t1, t2)
    return s, out


@pytest.mark.parametrize("eps", [Fraction(1, 5), Fraction(2)])
def test_tree_sum_intervals_cover_exactly_their_exact_law(seed, eps):
    """Unpost-processed tree (T = 2048 > the consistency limit): each answer's coverage equals
    the exact ``Pr[|S_m| <= b]`` (two-sided binomial test), which is >= nominal while
    ``Pr[|S_m| <= b − 1]`` is not (the half-width is the smallest valid integer).

    Answers of one key share tree nodes, so each query is tested on its own: 600 independent
    keys, binomial sd ≈ 0.012 at 0.9, so a coverage off by 6 points is rejected at α = 1e-6.
    """
    horizon, trials = 2048, 600
    ts = np.array([1024, 1365, 2047])  # 1, 6 and 11 cover nodes
    s, noise = _keyed_noise("tree", "cumulative", horizon, eps, trials, np.ones_like(ts), ts,
                            seed)
    assert not s.consistent
    for conf in (0.9, 0.95):
        half = s.halfwidth(np.ones_like(ts), ts, 1 - conf)
        hits = (np.abs(noise) <= half).sum(axis=0)
        for j, m in enumerate(s.nodes(np.ones_like(ts), ts).tolist()):
            b = int(half[j])
            p = _exact_abs_cdf(s.gamma, m, b)
            assert p >= conf > _exact_abs_cdf(s.gamma, m, b - 1)
            assert stats.binomtest(int(hits[j]), trials, p).pvalue > ALPHA


@pytest.mark.parametrize("eps", [Fraction(1, 5), Fraction(2)])
def test_consistent_tree_intervals_hold_and_are_tight(seed, eps):
    """Consistent cumulative tree (T = 64): coverage >= nominal (one-sided binomial test) and
    at most nominal + 5 points (one-sided, the other way): the certified bound is near-exact.

    Answers within one key are correlated, so each of the 8 queries is its own binomial test
    over 400 independent keys at α = 1e-6 (sd ≈ 0.015 at 0.9: a shortfall of 7 points fails).
    """
    horizon, trials = 64, 400
    ts = np.arange(8, horizon + 1, 8)
    s, noise = _keyed_noise("tree", "cumulative", horizon, eps, trials, np.ones_like(ts), ts,
                            seed)
    assert s.consistent
    for conf in (0.9, 0.95):
        half = s.halfwidth(np.ones_like(ts), ts, 1 - conf)
        hits = (np.abs(noise) <= half).sum(axis=0)
        for h in hits.tolist():
            assert stats.binomtest(h, trials, conf, alternative="less").pvalue > ALPHA
            assert stats.binomtest(h, trials, min(1.0, conf + 0.05),
                                   alternative="greater").pvalue > ALPHA


def test_per_query_and_block_intervals_cover_their_exact_law(seed):
    """Rolling windows (blocks: 2·popcount nodes) and per-query noise: exact-law coverage."""
    horizon, trials, eps = 200, 600, Fraction(1)
    ts = np.array([7, 50, 199])
    for method in ("blocks", "per_query"):
        t1 = np.maximum(1, ts - 6)
        s, noise = _keyed_noise(method, "rolling", horizon, eps, trials, t1, ts, seed, width=7)
        half = s.halfwidth(t1, ts, 0.1)
        hits = (np.abs(noise) <= half).sum(axis=0)
        for j, (m, b) in enumerate(zip(s.nodes(t1, ts).tolist(), half.tolist(), strict=True)):
            p = _exact_abs_cdf(s.gamma, m, int(b))
            assert p >= 0.9 > _exact_abs_cdf(s.gamma, m, int(b) - 1)
            assert stats.binomtest(int(hits[j]), trials, p).pvalue > ALPHA


@pytest.mark.parametrize("sigma2", [3, 400])
def test_discrete_gaussian_sum_quantile_is_the_exact_one(sigma2):
    """Sums of m i.i.d. discrete Gaussians: the half-width b satisfies
    ``Pr[|S_m| <= b] >= 0.9 > Pr[|S_m| <= b − 1]`` under the directly convolved exact law."""
    half = int(40 * np.sqrt(sigma2)) + 10
    z = np.arange(-half, half + 1, dtype=np.float64)
    p = np.exp(-(z**2) / (2.0 * sigma2))
    p /= p.sum()
    law = p
    for m in range(1, 7):
        if m > 1:
            law = np.clip(signal.fftconvolve(law, p), 0.0, None)
        zz = np.arange(-(law.size // 2), law.size // 2 + 1)
        b = int(sum_quantile([m], 0.1, sigma2=sigma2)[0])
        assert law[np.abs(zz) <= b].sum() >= 0.9 > law[np.abs(zz) <= b - 1].sum()


def test_consistent_gaussian_tree_intervals_hold(seed):
    """Consistent cumulative tree with discrete Gaussian noise (zCDP): coverage >= nominal per
    query (one-sided binomial over 400 independent keys, α = 1e-6)."""
    horizon, trials = 64, 400
    ts = np.arange(8, horizon + 1, 8)
    s = build_structure("cumulative", "tree", 1, horizon, "event", Fraction(1), 0.0, rho=0.5,
                        noise_kind="gaussian")
    assert s.consistent
    noise = np.empty((trials, ts.size))
    for i in range(trials):
        s.attach(seed.to_bytes(8, "little") + i.to_bytes(24, "little"), ("cumulative", 1))
        noise[i] = s.noise(np.ones_like(ts), ts)
    half = s.halfwidth(np.ones_like(ts), ts, 0.1)
    assert np.all(half < np.sqrt(2.0 * s.variance(np.ones_like(ts), ts) * np.log(20.0)))
    for h in (np.abs(noise) <= half).sum(axis=0).tolist():
        assert stats.binomtest(h, trials, 0.9, alternative="less").pvalue > ALPHA
        assert stats.binomtest(h, trials, 0.95, alternative="greater").pvalue > ALPHA


def coverage_table(trials: int = 200) -> list[tuple[str, float, float, float]]:
    """(family, ε, nominal, measured) over ``trials`` seeded releases of one fixed log."""
    from dpfreq.windows import release_window_counts

    rng = np.random.default_rng(7)
    horizon = 64
    item = rng.integers(0, 300, size=3000)
    times = rng.integers(1, horizon + 1, size=3000)
    ts = np.arange(1, horizon + 1)
    a = rng.integers(1, horizon + 1, size=(2, 64))
    w1, w2 = a.min(axis=0), a.max(axis=0)

    def reach(lo, hi):
        return np.array([np.unique(item[(times >= x) & (times <= y)]).size
                         for x, y in zip(lo.tolist(), hi.tolist(), strict=True)])

    truth = {"cumulative": reach(np.ones_like(ts), ts),
             "rolling W=7": reach(np.maximum(1, ts - 6), ts), "arbitrary": reach(w1, w2)}
    rows = []
    for eps in (0.3, 3.0, 30.0):
        hits = {(f, c): 0 for f in truth for c in (0.9, 0.95)}
        for r in range(trials):
            rel = release_window_counts((item, times), horizon=horizon, epsilon=eps,
                                        k_values=[1], windows=["cumulative", 7, "all"],
                                        unit="event", rng=r)
            for c in (0.9, 0.95):
                for f, ans in (("cumulative", rel.cumulative(ts, 1, confidence=c)),
                               ("rolling W=7", rel.rolling(ts, 1, confidence=c)),
                               ("arbitrary", rel.window(w1, w2, 1, confidence=c))):
                    ok = (np.asarray(ans.lower) <= truth[f]) & (truth[f] <= np.asarray(ans.upper))
                    hits[(f, c)] += int(ok.sum())
        for (f, c), h in hits.items():
            rows.append((f, eps, c, h / (trials * truth[f].size)))
    return rows


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    print(f"coverage over {n} seeded releases (T = 64, event level, k = 1)")
    print("family        epsilon  nominal  measured")
    for fam, e, c, v in coverage_table(n):
        print(f"{fam:<13} {e:>7g}  {c:>7.2f}  {v:>8.3f}")
