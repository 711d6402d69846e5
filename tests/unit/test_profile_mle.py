"""EM / maximum-likelihood reconstruction: simplex, monotone likelihood, exact."""

from __future__ import annotations

import numpy as np
import pytest

from dpfreq.noise import discrete_laplace_gamma
from dpfreq.profile.kernel import get_kernel
from dpfreq.profile.mle import em_profile, em_profiles, log_likelihood, smooth_profile
from dpfreq.profile.reconstruct import noisy_profile_counts, reconstruct_profile_from_counts
from dpfreq.profile.solve import solve_profile, solve_profiles


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
    # the flat start is too far from the data: without EM updates there is no answer
    assert smooth_profile(f, k, reference=mle, items=items, max_iter=0) is None


def test_smooth_profile_starts_flat_below_the_cap_with_the_reference_cap_mass(
        rng: np.random.Generator) -> None:
    """The start is the reference's mass at the cap n and the rest uniform on 0..n-1: with a
    reference of that shape the start is already within n/2 (gap 0) and is returned before any
    EM update."""
    n, B, alpha, d = 10, 12, float(np.exp(-0.125)), 20_000
    k = get_kernel(n, B, alpha)
    f = _noisy(rng, n, B, alpha, d)
    reference = np.full(n + 1, 0.83 / n)
    reference[n] = 0.17
    out = smooth_profile(f, k, reference=reference, items=float(f.sum()) * d, max_iter=1)
    assert out is not None
    np.testing.assert_allclose(out, reference, rtol=0, atol=1e-15)


def test_mle_release_simulates_around_the_smooth_profile(seed: int,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The mle release's simulation starts from smooth_profile of its own noisy counts (with
    the estimate as reference); fft's from the estimate. The centre changes the intervals."""
    import dpfreq.profile.estimate as rec
    from dpfreq.profile import ProfileSketch
    from dpfreq.profile.intervals import simulated_intervals

    seen: list[dict[str, object]] = []

    def spy(estimate, noisy_counts, **kw):  # type: ignore[no-untyped-def]
        seen.append({"estimate": estimate, "noisy_counts": noisy_counts, **kw})
        return simulated_intervals(estimate, noisy_counts, **kw)

    monkeypatch.setattr(rec, "simulated_intervals", spy)
    d, n = 5_000, 6
    counts = np.minimum(np.random.default_rng(seed).zipf(1.7, d) - 1, n)
    sketch = ProfileSketch.from_counts(counts, domain_size=d, max_count=n, epsilon=0.5,
                                       rng=seed)
    mle = sketch.reconstruct(method="mle", confidence=0.9)
    assert mle.mechanism_params["interval_centre"].startswith("early-stopped EM")
    fft = sketch.reconstruct(method="fft", confidence=0.9)
    assert fft.mechanism_params["interval_centre"] == "estimate"
    call_mle, call_fft = seen
    assert call_fft["centre"] is None
    np.testing.assert_array_equal(call_mle["estimate"], mle.value)
    raw = np.asarray(call_mle["noisy_counts"])
    B = (raw.size - n - 1) // 2
    kernel = get_kernel(n, B, float(np.exp(-float(sketch.gamma))))
    expected = smooth_profile(raw / d, kernel, reference=mle.value, items=float(raw.sum()))
    assert expected is not None
    np.testing.assert_allclose(call_mle["centre"], expected, rtol=0, atol=1e-12)
    around_estimate = simulated_intervals(**{**call_mle, "centre": None})
    assert not np.array_equal(around_estimate.band_upper, mle.error.band_upper)


@pytest.mark.parametrize(("n", "B", "alpha"), [(10, 30, 0.9), (25, 10, 0.6), (50, 136, 0.8)])
def test_batched_em_equals_row_by_row(n: int, B: int, alpha: float,
                                      rng: np.random.Generator) -> None:
    """em_profiles is em_profile on each row: equal after a few iterations up to rounding
    (amplified by the extrapolation steps), and as likely after many. The third kernel
    (P = 323) is applied by FFT, the others as dense matrices."""
    k = get_kernel(n, B, alpha)
    f = np.stack([_noisy(rng, n, B, alpha, 4000) for _ in range(4)])
    starts = rng.dirichlet(np.ones(n + 1), size=f.shape[0]) * 0.9 + 0.1 / (n + 1)
    for iters in (4, 1000):
        many = em_profiles(f, k, starts=starts, max_iter=iters, tol=1e-12)
        one = np.stack([em_profile(f[i], k, start=starts[i], max_iter=iters, tol=1e-12).profile
                        for i in range(f.shape[0])])
        if iters == 4:
            np.testing.assert_allclose(many, one, atol=1e-9, rtol=0)
        # near the maximum the likelihood is flat in some directions and EM creeps, so the
        # stopping points differ by more than rounding; the total log-likelihoods of the 4,000
        # items agree within 0.01 (a difference the data cannot resolve is ~0.5)
        for i, row in enumerate(f):
            assert log_likelihood(many[i], row / row.sum(), k) == pytest.approx(
                log_likelihood(one[i], row / row.sum(), k), abs=0.01 / 4000)
        np.testing.assert_allclose(many.sum(axis=1), 1.0, atol=1e-12)
        assert many.min() >= 0


def test_batched_em_on_empty_data_is_on_the_simplex() -> None:
    """An all-zero row is read as the uniform data, as in em_profile."""
    k = get_kernel(10, 30, 0.9)
    out = em_profiles(np.zeros((2, k.size)), k, starts=np.full((2, 11), 1 / 11), max_iter=50)
    np.testing.assert_allclose(out.sum(axis=1), 1.0, atol=1e-12)
    assert out.min() >= 0
    uniform = np.full(k.size, 1.0 / k.size)
    ref = em_profile(np.zeros(k.size), k, start=np.full(11, 1 / 11), max_iter=50).profile
    assert log_likelihood(out[0], uniform, k) == pytest.approx(log_likelihood(ref, uniform, k),
                                                               rel=1e-8)


def test_batched_solve_equals_solve_profile(rng: np.random.Generator) -> None:
    """The intervals' batched reconstruction makes the same choice as solve_profile (EM or the
    Algorithms 2+3 solution) and the same profile, row by row (converged EM)."""
    n, B, alpha = 10, 12, 0.7
    k = get_kernel(n, B, alpha)
    f = np.stack([_noisy(rng, n, B, alpha, 2000) for _ in range(5)])
    noise_free = np.zeros(k.size)  # EM cannot beat the exact solution: fft is kept
    noise_free[B : B + n + 1] = rng.dirichlet(np.ones(n + 1) * 3)
    f = np.vstack([f, k.apply(noise_free)])
    for method in ("fft", "mle"):
        many = solve_profiles(f, k, norm="1", method=method, em_iterations=20000)
        one = np.stack([solve_profile(row, k, norm="1", method=method, em_iterations=20000)[0]
                        for row in f])
        np.testing.assert_allclose(many, one, atol=1e-5, rtol=0)


def test_em_wins_over_a_profile_that_cannot_explain_the_data() -> None:
    """An Algorithms 2+3 profile under which observed noisy values have probability 0
    (log-likelihood −inf) loses to an EM profile that explains them."""
    from dpfreq.profile.solve import _em_wins

    k = get_kernel(3, 1, 0.5)
    f = np.zeros((1, k.size))
    f[0, -1] = 1.0  # all noisy values at t = n + B, out of reach of class 0
    point = np.array([[1.0, 0.0, 0.0, 0.0]])
    uniform = np.full((1, 4), 0.25)
    wins, ll_fft = _em_wins(point, uniform, f, k)
    assert ll_fft[0] == -np.inf
    assert wins[0]
    assert not _em_wins(uniform, uniform, f, k)[0][0]  # a tie keeps Algorithms 2+3
