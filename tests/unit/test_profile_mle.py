"""EM / maximum-likelihood reconstruction: simplex, monotone likelihood, exact."""

from __future__ import annotations

import numpy as np
import pytest

from dpfreq.noise import discrete_laplace_gamma
from dpfreq.profile.kernel import get_kernel
from dpfreq.profile.mle import em_profile, log_likelihood, smooth_profile
from dpfreq.profile.reconstruct import (
    noisy_profile_counts,
    reconstruct_profile_from_counts,
    solve_profile,
)


def _noisy(rng: np.random.Generator, n: int, B: int, alpha: float, d: int) -> np.ndarray:
    h = np.minimum(rng.zipf(1.6, d) - 1, n)
    z = rng.geometric(1 - alpha, d) - rng.geometric(1 - alpha, d)  # DLap(α) as G1 − G2
    return noisy_profile_counts(h + z, max_count=n, B=B) / d


@pytest.mark.parametrize("accelerate", [False, True])
def test_em_stays_on_simplex_and_likelihood_never_decreases(accelerate: bool,
                                                            rng: np.random.Generator) -> None:
    n, B, alpha = 25, 10, 0.6
    k = get_kernel(n, B, alpha)
    f = _noisy(rng, n, B, alpha, 3000)
    r = np.full(n + 1, 1.0 / (n + 1))
    lls = [log_likelihood(r, f / f.sum(), k)]
    for _ in range(60):  # one step at a time: every iterate is on the simplex
        res = em_profile(f, k, start=r, max_iter=1, tol=0.0, accelerate=accelerate)
        r = res.profile
        assert r.min() >= 0
        assert r.sum() == pytest.approx(1.0, abs=1e-12)
        lls.append(res.log_likelihood)
    record: list[float] = []
    res = em_profile(f, k, start=r, max_iter=400, tol=0.0, record=record,
                     accelerate=accelerate)
    lls += record
    diffs = np.diff(lls)
    assert diffs.min() >= -1e-12 * abs(lls[-1])
    assert lls[-1] > lls[0]


@pytest.mark.parametrize("accelerate", [False, True])
def test_em_exact_on_noise_free_input(accelerate: bool, rng: np.random.Generator) -> None:
    # f~ = A f exactly, f strictly positive: EM converges to f (the unique maximiser)
    n, B, alpha = 12, 6, 0.5
    k = get_kernel(n, B, alpha)
    f = rng.dirichlet(np.ones(n + 1) * 3)
    fpad = np.zeros(k.size)
    fpad[B : B + n + 1] = f
    res = em_profile(k.apply(fpad), k, start=np.full(n + 1, 1 / (n + 1)), max_iter=20000,
                     tol=1e-14, accelerate=accelerate)
    np.testing.assert_allclose(res.profile, f, atol=1e-8)
    assert res.log_likelihood >= res.start_log_likelihood


def test_em_convergence_rule_and_cap(rng: np.random.Generator) -> None:
    k = get_kernel(8, 5, 0.5)
    f = _noisy(rng, 8, 5, 0.5, 2000)
    res = em_profile(f, k, start=np.full(9, 1 / 9), max_iter=3, tol=0.0)
    assert res.iterations == 3
    assert not res.converged
    res = em_profile(f, k, start=np.full(9, 1 / 9), max_iter=100000, tol=1e-9)
    assert res.converged
    assert res.iterations < 100000


def test_mle_release_is_at_least_as_likely_as_fft(rng: np.random.Generator) -> None:
    n, d = 20, 20000
    h = np.minimum(rng.zipf(1.6, d) - 1, n)
    z = rng.geometric(1 - np.exp(-0.5), d) - rng.geometric(1 - np.exp(-0.5), d)
    counts = noisy_profile_counts(h + z, max_count=n, B=40)
    alpha = float(np.exp(-float(discrete_laplace_gamma(0.5))))
    k = get_kernel(n, 40, alpha)
    f = counts / counts.sum()
    fft, _ = solve_profile(counts / d, k, norm="1", method="fft")
    mle, diag = solve_profile(counts / d, k, norm="1", method="mle")
    assert log_likelihood(mle, f, k) >= log_likelihood(fft, f, k)
    assert diag["em_log_likelihood"] >= diag["fft_log_likelihood"] - 1e-12
    # the release (small n: its simulated intervals run EM once per draw) records the same
    small = noisy_profile_counts(np.minimum(h, 3) + z, max_count=3, B=40)
    a = reconstruct_profile_from_counts(small, domain_size=d, max_count=3, epsilon=0.5, B=40)
    b = reconstruct_profile_from_counts(small, domain_size=d, max_count=3, epsilon=0.5, B=40,
                                        method="mle")
    assert b.mechanism_params["em_log_likelihood"] >= b.mechanism_params[
        "fft_log_likelihood"] - 1e-12
    assert a.l1_bound == b.l1_bound  # the Theorem 1.1 number depends on the kernel only
    assert b.method == "mle"


def test_accelerated_em_reaches_the_same_maximum(rng: np.random.Generator) -> None:
    n, B, alpha = 20, 8, 0.5
    k = get_kernel(n, B, alpha)
    f = _noisy(rng, n, B, alpha, 100000)
    start = np.full(n + 1, 1 / (n + 1))
    plain = em_profile(f, k, start=start, max_iter=20000, tol=1e-11, accelerate=False)
    fast = em_profile(f, k, start=start, max_iter=20000, tol=1e-11, accelerate=True)
    assert fast.converged
    assert fast.iterations < plain.iterations
    assert fast.log_likelihood >= plain.log_likelihood - 1e-9


def test_smooth_profile_is_positive_and_within_half_n_of_the_maximum(
        rng: np.random.Generator) -> None:
    n, B, alpha, d = 10, 12, float(np.exp(-0.125)), 20_000  # ε = 0.25: a sparse EM estimate
    k = get_kernel(n, B, alpha)
    f = _noisy(rng, n, B, alpha, d)
    mle = em_profile(f, k, start=np.full(n + 1, 1.0 / (n + 1)), max_iter=3000).profile
    items = float(f.sum()) * d
    smooth = smooth_profile(f, k, reference=mle, items=items)
    assert smooth is not None
    assert smooth.min() > 0
    assert smooth.sum() == pytest.approx(1.0, abs=1e-12)
    fn = f / f.sum()
    gap = items * (log_likelihood(mle, fn, k) - log_likelihood(smooth, fn, k))
    assert 0 <= gap <= n / 2
    # the uniform start is too far from the data: without EM updates there is no answer
    assert smooth_profile(f, k, reference=mle, items=items, max_iter=0) is None


def test_mle_release_simulates_around_the_smooth_profile(seed: int) -> None:
    from dpfreq.profile import ProfileSketch

    counts = np.minimum(np.random.default_rng(seed).zipf(1.7, 5_000) - 1, 6)
    sketch = ProfileSketch.from_counts(counts, domain_size=5_000, max_count=6, epsilon=0.5,
                                       rng=seed)
    mle = sketch.reconstruct(method="mle", confidence=0.9)
    assert mle.mechanism_params["interval_centre"].startswith("early-stopped EM")
    fft = sketch.reconstruct(method="fft", confidence=0.9)
    assert fft.mechanism_params["interval_centre"] == "estimate"
