"""Statistical checks of the profile reconstruction: unfolding law, Theorem 1.1, 1/√d rate.

Every assertion has α ≤ 1e-6 under the null hypothesis that the code is right; sample sizes
come from the power calculations written next to each test. Seeded, never retried.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from dpfreq.noise import (
    discrete_laplace_cdf,
    discrete_laplace_gamma,
    discrete_laplace_pmf,
    sample_discrete_laplace,
)
from dpfreq.profile.baselines import naive_profile
from dpfreq.profile.bounds import default_bound_parameter, profile_error_bounds
from dpfreq.profile.kernel import get_kernel
from dpfreq.profile.reconstruct import noisy_profile_counts, unfold_clipped
from dpfreq.profile.solve import solve_profile

pytestmark = pytest.mark.statistical
ALPHA = 1e-6


@pytest.mark.parametrize("h", [0, 1, 2, 3])
def test_unfolding_law_lemma_4_1(h: int, rng: np.random.Generator) -> None:
    # Unfolded clip(h + Z, 0, n) has exactly the law of h + DLap(α) (Wu & Pagh 2024, Lemma 4.1).
    # Power: the classic bug (DExp starting at 1) gives Pr[X = n] = 0 although
    # Pr[h + Z = n] >= (1−α)/(1+α)·α^n ≈ 0.023 (h = 0, n = 3, ε = 1); the chi-square
    # noncentrality is then >= N·0.023 = 460 at N = 20000, far beyond the ≈ 60 needed for
    # power 0.99 at α = 1e-6 with ≈ 20 degrees of freedom. Pushing the wrong way is worse still.
    n, eps, N = 3, 1.0, 20000
    gamma = discrete_laplace_gamma(eps)
    z = sample_discrete_laplace(gamma, N, rng=rng)
    clipped = np.clip(h + z, 0, n)
    x = unfold_clipped(clipped, max_count=n, epsilon=eps, rng=rng)
    # bins lo..hi with expected count >= 5, tails merged into the end bins
    values = np.arange(h - 60, h + 61)
    expected = N * discrete_laplace_pmf(values - h, gamma)
    keep = values[expected >= 5]
    lo, hi = int(keep.min()), int(keep.max())
    inner = np.arange(lo + 1, hi)
    probs = np.concatenate([
        [float(discrete_laplace_cdf(lo - h, gamma))],
        discrete_laplace_pmf(inner - h, gamma),
        [1.0 - float(discrete_laplace_cdf(hi - 1 - h, gamma))],
    ])
    observed = np.concatenate([[np.sum(x <= lo)], [np.sum(x == v) for v in inner],
                               [np.sum(x >= hi)]])
    assert observed.sum() == N
    stat, p = scipy.stats.chisquare(observed, N * probs / probs.sum())
    assert p >= ALPHA, (stat, p)


def _zipf_histogram(rng: np.random.Generator, d: int, n: int) -> np.ndarray:
    return np.minimum(rng.zipf(1.6, d) - 1, n)


_TRIVIAL = {"1": 2.0, "2": math.sqrt(2.0), "inf": 1.0}


def _reconstruct(noisy: np.ndarray, n: int, eps: float, eta: float,
                 norm: str) -> tuple[np.ndarray, float]:
    """Algorithms 2+3 and the Theorem 1.1 bound in ``norm`` at failure probability η (the
    release's path without its simulated intervals, which these tests do not examine)."""
    d = noisy.size
    B = default_bound_parameter(d, n, eps, eta)
    kernel = get_kernel(n, B, math.exp(-float(discrete_laplace_gamma(eps))))
    counts = noisy_profile_counts(noisy, max_count=n, B=B)
    r, _ = solve_profile(counts / d, kernel, norm=norm)
    bound = profile_error_bounds(kernel, domain_size=d, eta=eta)[norm]
    return r, min(bound, _TRIVIAL[norm])


def test_theorem_1_1_bound_holds(rng: np.random.Generator) -> None:
    # Theorem 1.1 with explicit constants (confidence 1 − 2η) holds in at least 1 − 2η of runs.
    # Test: failures X ~ Bin(R, p) with p <= 2η under the claim; reject when X exceeds the
    # (1 − 1e-6)-quantile of Bin(R, 2η). Power: with R = 150 a true failure rate of 0.5 is
    # detected with probability > 1 − 1e-6 (checked below).
    R, d, n, eps, eta = 150, 10_000, 20, 1.0, 0.05
    gamma = discrete_laplace_gamma(eps)
    limit = int(scipy.stats.binom.ppf(1 - ALPHA, R, 2 * eta))
    assert scipy.stats.binom.cdf(limit, R, 0.5) < 1e-6
    failures = {"1": 0, "2": 0, "inf": 0}
    order = {"1": 1, "2": 2, "inf": np.inf}
    for _ in range(R):
        h = _zipf_histogram(rng, d, n)
        f = np.bincount(h, minlength=n + 1) / d
        noisy = h + sample_discrete_laplace(gamma, d, rng=rng)
        for norm in failures:
            r, bound = _reconstruct(noisy, n, eps, eta, norm)
            if np.linalg.norm(r - f, order[norm]) > bound:
                failures[norm] += 1
    for norm, x in failures.items():
        assert x <= limit, (norm, x, limit)


def test_error_rate_is_one_over_sqrt_d(rng: np.random.Generator) -> None:
    # 10× more items ⇒ mean ℓ2 error / √10 (accept a ratio in [2.2, 4.0]);
    # the naive estimator's error stays flat. Power calculation: the per-run ℓ2 error has a
    # coefficient of variation ≤ 0.35 (pilot runs: 0.29–0.33), so the log of the ratio of two
    # means over R = 100 runs has sd ≈ 0.35·√2/√100 ≈ 0.05. The expected ratio at
    # d = 10^4 → 10^5 is ≈ 2.9 (pilot), 5.5 sd from 2.2 and 6.4 sd from 4.0: α < 1e-6.
    R, n, eps, eta = 100, 50, 1.0, 0.1
    gamma = discrete_laplace_gamma(eps)
    means, naive = [], []
    for d in (10_000, 100_000):
        errs, nerrs = [], []
        for _ in range(R):
            h = _zipf_histogram(rng, d, n)
            f = np.bincount(h, minlength=n + 1) / d
            noisy = h + sample_discrete_laplace(gamma, d, rng=rng)
            r, _ = _reconstruct(noisy, n, eps, eta, "2")
            errs.append(np.linalg.norm(r - f))
            nerrs.append(np.abs(naive_profile(noisy, max_count=n) - f).sum())
        means.append(float(np.mean(errs)))
        naive.append(float(np.mean(nerrs)))
    ratio = means[0] / means[1]
    assert 2.2 <= ratio <= 4.0, (means, ratio)
    assert 0.9 <= naive[0] / naive[1] <= 1.15, naive
    assert naive[1] > 10 * means[1]
    assert math.isfinite(ratio)
