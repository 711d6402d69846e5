"""Reconstruction (Wu & Pagh 2024, Algorithms 1–3; hand-checked small cases; Lemmas 4.3, 4.4,
4.9) and its bad-input errors."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import scipy.fft
import scipy.optimize

from dpfreq.errors import DataError, ParameterError
from dpfreq.noise import discrete_laplace_gamma
from dpfreq.profile.kernel import get_kernel, kernel_vector, p_norm
from dpfreq.profile.reconstruct import (
    bound_parameter,
    default_bound_parameter,
    minimum_bound_parameter,
    noisy_profile_counts,
    profile_error_bounds,
    reconstruct_profile,
    reconstruct_profile_from_counts,
    unfold_clipped,
)
from dpfreq.profile.result import ProfileRelease
from dpfreq.profile.solve import fast_inversion, round_profile, rounding_threshold, solve_profile

LN4 = math.log(4.0)
# a hand-checked small case
H_NOISY = np.array([0, 2, 0, 2, 2, -1, 1, 2, 2, -2])
F_TILDE = np.array([0.1, 0.1, 0.2, 0.1, 0.5, 0, 0])


def dense(n: int, B: int, alpha: float) -> np.ndarray:
    c = kernel_vector(n, B, alpha)
    P = c.size
    return c[(np.arange(P)[None, :] - np.arange(P)[:, None]) % P] / p_norm(B, alpha)


# ------------------------------------------------------------------ the kernel and its window


@pytest.mark.parametrize(("d", "eta", "eps", "expected"), [
    (10, 0.5, LN4, 2), (1, 0.9, LN4, 1), (10**6, 0.1, 1.0, 16), (10**6, 0.1, 0.5, 32),
    (10**4, 0.05, 0.1, 122), (100, 0.5, 8.0, 0)])
def test_bound_parameter_vectors(d: int, eta: float, eps: float, expected: int) -> None:
    assert bound_parameter(d, eps, eta) == expected


def test_bound_parameter_properties() -> None:
    for d, eta, eps in [(10, 0.5, LN4), (10**6, 0.1, 1.0), (10**4, 0.05, 0.1), (50, 0.2, 3.0)]:
        B = bound_parameter(d, eps, eta)
        alpha = math.exp(-eps)
        assert d * 2 * alpha ** (B + 1) / (1 + alpha) <= eta * (1 + 1e-12)  # union bound
        assert alpha ** (B + 1) <= (1 - alpha**2) / 8 * (1 + 1e-12)
        assert 1 - alpha - 2 * alpha ** (B + 1) >= (1 - alpha) / 2 * (1 - 1e-12)
    assert bound_parameter(10**9, 800.0, 0.01) == 0  # huge ε: log space, no overflow
    assert minimum_bound_parameter(800.0) == 0
    # B = 1, α = 0.9 is singular-prone: B_min(ε = -ln 0.9) is larger
    assert minimum_bound_parameter(-math.log(0.9)) > 1


def test_default_bound_parameter_fast_length() -> None:
    for d, n, eps, eta in [(10, 2, LN4, 0.5), (10**6, 1000, 1.0, 0.1), (10**5, 37, 0.3, 0.05),
                           (10**6, 10**5, 1.0, 0.1)]:
        g = float(discrete_laplace_gamma(eps))
        B = default_bound_parameter(d, n, eps, eta)
        assert bound_parameter(d, g, eta) <= B
        P = n + 2 * B + 1
        assert scipy.fft.next_fast_len(P, real=False) == P
        for smaller in range(bound_parameter(d, g, eta), B):
            P2 = n + 2 * smaller + 1
            assert scipy.fft.next_fast_len(P2, real=False) != P2
    assert default_bound_parameter(10, 2, LN4, 0.5) == 2  # P = 7 is a fast length
    assert default_bound_parameter(10, 8, LN4, 0.5) == 3  # P = 13 is prime; P = 15 is fast


# ------------------------------------------------------------ unfolding and the noisy profile


def test_unfold_keeps_interior_and_pushes_ends(rng: np.random.Generator) -> None:
    clipped = np.array([0, 1, 2, 3, 0, 3, 2, 0])
    out = unfold_clipped(clipped, max_count=3, epsilon=1.0, rng=rng)
    inner = (clipped > 0) & (clipped < 3)
    np.testing.assert_array_equal(out[inner], clipped[inner])
    assert (out[clipped == 0] <= 0).all()
    assert (out[clipped == 3] >= 3).all()
    assert out.dtype == np.int64
    again = unfold_clipped(clipped, max_count=3, epsilon=1.0, rng=12345)
    np.testing.assert_array_equal(again, unfold_clipped(clipped, max_count=3, epsilon=1.0,
                                                        rng=12345))


def test_unfold_n_zero_is_fresh_laplace(rng: np.random.Generator) -> None:
    out = unfold_clipped(np.zeros(2000, dtype=int), max_count=0, epsilon=0.5, rng=rng)
    assert (out < 0).any()
    assert (out > 0).any()


def test_noisy_profile_counts_example() -> None:
    counts = noisy_profile_counts(H_NOISY, max_count=2, B=2)
    np.testing.assert_array_equal(counts, [1, 1, 2, 1, 5, 0, 0])
    assert counts.dtype == np.int64
    # out-of-window values are dropped, not clamped
    counts = noisy_profile_counts(np.array([-5, -3, -2, 0, 4, 5, 99]), max_count=2, B=2)
    np.testing.assert_array_equal(counts, [1, 0, 1, 0, 0, 0, 1])


def test_lemma_4_2_exact_expectation(rng: np.random.Generator) -> None:
    # E[f~ | E_B] by convolving each count with the truncated kernel = A f
    for n, B, alpha in [(5, 3, 0.4), (12, 7, 0.8), (0, 2, 0.3), (3, 9, 0.9)]:
        d = 200
        h = rng.integers(0, n + 1, size=d)
        P = n + 2 * B + 1
        expect = np.zeros(P)
        k = np.arange(-B, B + 1)
        w = alpha ** np.abs(k) / p_norm(B, alpha)
        for x in h:
            expect[x + k + B] += w / d
        f = np.bincount(h, minlength=n + 1) / d
        fpad = np.zeros(P)
        fpad[B : B + n + 1] = f
        np.testing.assert_allclose(get_kernel(n, B, alpha).apply(fpad), expect, atol=1e-12)


# ----------------------------------------------------- Algorithms 2+3 on a hand-checked case

TABLE = {
    "1": ([0.153698, 0.077287, 0.224853, -0.105455, 0.880602, -0.211832, -0.045335],
          0.0261818, [0.172126, 0, 0.827874], 0.105455, 0.052727),
    "2": ([0.151355, 0.075695, 0.256978, -0.121063, 0.864085, -0.201462, -0.046614],
          0.0160049, [0.196447, 0, 0.803553], 0.121063, 0.060532),
    "inf": ([0.138530, 0.087333, 0.258960, -0.125027, 0.866067, -0.189825, -0.059440],
            0.0078007, [0.196447, 0, 0.803553], 0.125027, 0.062514),
}
ORD = {"1": 1, "2": 2, "inf": np.inf}


def test_hand_checked_case_intermediates() -> None:
    k = get_kernel(2, 2, 0.25)
    fpad = np.array([0, 0, 0.4, 0.4, 0.2, 0, 0])
    np.testing.assert_allclose(k.apply(fpad), [0.015385, 0.076923, 0.315385, 0.338462, 0.2,
                                               0.046154, 0.007692], atol=5e-7)
    np.testing.assert_allclose(k.solve(F_TILDE), [0.153299, 0.065990, 0.273096, -0.116751,
                                                  0.880203, -0.211168, -0.044670], atol=5e-7)
    ind = np.array([0, 0, 1, 1, 1, 0, 0.0])
    np.testing.assert_allclose(k.solve(ind), [0.035533, -0.421320, 1.395939, 0.979695,
                                              1.395939, -0.421320, 0.035533], atol=5e-7)


@pytest.mark.parametrize("norm", ["1", "2", "inf"])
def test_hand_checked_case_full_run(norm: str) -> None:
    r_alg2, objective, rounded, s, tau = TABLE[norm]
    k = get_kernel(2, 2, 0.25)
    r = fast_inversion(F_TILDE, k, norm)
    np.testing.assert_allclose(r, r_alg2, atol=5e-7)
    assert r[2:5].sum() == pytest.approx(1.0, abs=1e-14)
    assert np.linalg.norm(k.apply(r) - F_TILDE, ORD[norm]) == pytest.approx(objective, abs=5e-8)
    x = np.clip(r[2:5], 0, 1)
    assert x.sum() - 1 == pytest.approx(s, abs=5e-7)
    assert rounding_threshold(x, x.sum() - 1) == pytest.approx(tau, abs=5e-7)
    np.testing.assert_allclose(round_profile(r, B=2, max_count=2), rounded, atol=5e-7)
    # through the public path: B = 2 given explicitly, α from the ε fraction (≈ 0.25)
    rel = reconstruct_profile_from_counts(np.array([1, 1, 2, 1, 5, 0, 0]), domain_size=10,
                                          max_count=2, epsilon=LN4, norm=norm, B=2)
    np.testing.assert_allclose(rel.value, rounded, atol=5e-7)
    np.testing.assert_allclose(rel.noisy_profile, F_TILDE, atol=0)


def _p3_optimum(A: np.ndarray, f: np.ndarray, inner: np.ndarray, norm: str) -> float:
    P = A.shape[0]
    if norm == "2":  # KKT of min ‖Ar − f‖² s.t. <1_{0:n}, r> = 1
        kkt = np.zeros((P + 1, P + 1))
        kkt[:P, :P] = 2 * A.T @ A
        kkt[:P, P] = inner
        kkt[P, :P] = inner
        sol = np.linalg.solve(kkt, np.concatenate([2 * A.T @ f, [1.0]]))
        return float(np.linalg.norm(A @ sol[:P] - f))
    free = [(None, None)] * P
    if norm == "1":
        eye = np.eye(P)
        A_ub = np.block([[A, -eye], [-A, -eye]])
        cost = np.concatenate([np.zeros(P), np.ones(P)])
        bounds = free + [(0, None)] * P
        A_eq = np.concatenate([inner, np.zeros(P)])[None, :]
    else:
        col = -np.ones((P, 1))
        A_ub = np.block([[A, col], [-A, col]])
        cost = np.concatenate([np.zeros(P), [1.0]])
        bounds = [*free, (0, None)]
        A_eq = np.concatenate([inner, [0.0]])[None, :]
    res = scipy.optimize.linprog(cost, A_ub=A_ub, b_ub=np.concatenate([f, -f]), A_eq=A_eq,
                                 b_eq=[1.0], bounds=bounds, method="highs")
    assert res.status == 0
    return float(res.fun)


@pytest.mark.parametrize("norm", ["1", "2", "inf"])
def test_algorithm_2_solves_p3(norm: str, rng: np.random.Generator) -> None:
    # Lemma 4.3: objective of Algorithm 2 = LP (HiGHS) / KKT optimum of P3
    for _ in range(8):
        n = int(rng.integers(0, 12))
        eps = float(rng.uniform(0.3, 3.0))
        B = minimum_bound_parameter(eps) + int(rng.integers(0, 4))
        alpha = math.exp(-eps)
        P = n + 2 * B + 1
        f = rng.dirichlet(np.ones(P)) * rng.uniform(0.8, 1.0)
        k = get_kernel(n, B, alpha)
        A = dense(n, B, alpha)
        inner = np.zeros(P)
        inner[B : B + n + 1] = 1
        r = fast_inversion(f, k, norm)
        assert inner @ r == pytest.approx(1.0, abs=1e-12)
        obj = float(np.linalg.norm(A @ r - f, ORD[norm]))
        assert obj == pytest.approx(_p3_optimum(A, f, inner, norm), rel=1e-7, abs=1e-11)


# -------------------------------------------------------------------------- error bounds


def algorithm_5(x: np.ndarray, s: float) -> np.ndarray:
    order = np.argsort(x, kind="stable")
    xs = x[order].copy()
    n1 = xs.size
    t = 0
    while t < n1 and s > 1e-15:
        step = min(xs[t], s / (n1 - t))
        xs[t:] -= step
        s -= step * (n1 - t)
        t += 1
    out = np.empty_like(xs)
    out[order] = xs
    return out


def simplex_projection(v: np.ndarray) -> np.ndarray:
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - 1
    rho = np.flatnonzero(u - css / (np.arange(u.size) + 1) > 0)[-1]
    return np.maximum(v - css[rho] / (rho + 1), 0)


def test_rounding_by_hand() -> None:
    # a hand-checked small case
    r = np.array([0.6, 1.2, -0.3, -0.5])
    assert rounding_threshold(np.array([0.6, 1, 0, 0]), 0.6) == pytest.approx(0.3, abs=1e-15)
    np.testing.assert_allclose(round_profile(r, B=0, max_count=3), [0.3, 0.7, 0, 0], atol=1e-15)
    np.testing.assert_allclose(algorithm_5(np.array([0.6, 1, 0, 0]), 0.6), [0.3, 0.7, 0, 0],
                               atol=1e-15)


def test_rounding_properties(rng: np.random.Generator) -> None:
    # Lemmas 4.4 / 4.9
    for _ in range(300):
        n = int(rng.integers(0, 30))
        B = int(rng.integers(0, 5))
        P = n + 2 * B + 1
        r = rng.normal(0, 0.6, P)
        r[B : B + n + 1] += (1 - r[B : B + n + 1].sum()) / (n + 1)
        out = round_profile(r, B=B, max_count=n)
        assert out.min() >= 0
        assert out.max() <= 1
        assert out.sum() == pytest.approx(1.0, abs=1e-12)
        x = np.clip(r[B : B + n + 1], 0, 1)
        s = x.sum() - 1
        np.testing.assert_allclose(out, simplex_projection(x), atol=1e-12)
        np.testing.assert_allclose(out, algorithm_5(x, s) if s > 0 else x, atol=1e-12)
        tau = rounding_threshold(x, s) if s > 0 else 0.0
        assert 0 <= tau <= 1
        for _ in range(3):  # distance to any feasible f
            f = rng.dirichlet(np.ones(n + 1) * 0.3)
            fpad = np.zeros(P)
            fpad[B : B + n + 1] = f
            for p in (1, 2):
                assert np.linalg.norm(out - f, p) <= np.linalg.norm(r - fpad, p) + 1e-12
            assert np.abs(out - f).max() <= 2 * np.abs(r - fpad).max() + 1e-12


# ---------------------------------------------------------------------------------- releases


def test_release_fields_and_json(rng: np.random.Generator) -> None:
    h = np.minimum(rng.zipf(1.6, 5000) - 1, 30) + rng.integers(-3, 4, 5000)
    rel = reconstruct_profile(h, max_count=30, epsilon=1.0, confidence=0.8, norm=2)
    assert isinstance(rel, ProfileRelease)
    r = rel.profile()
    assert r is rel.value or np.array_equal(r, rel.value)
    assert r.shape == (31,)
    assert r.dtype == np.float64
    assert r.min() >= 0
    assert r.sum() == pytest.approx(1, abs=1e-12)
    assert rel.mechanism == "wu-pagh-fft"
    p = rel.mechanism_params
    assert p["gamma"] == str(discrete_laplace_gamma(1.0))
    assert p["alpha"] == math.exp(-float(discrete_laplace_gamma(1.0)))
    assert (p["clamp_bound"], p["max_count"], p["domain_size"], p["norm"], p["confidence"],
            p["method"]) == (
        rel.B, 30, 5000, "2", 0.8, "fft")
    assert rel.unit == "event"
    assert rel.error.kind == "interval"
    assert rel.error.confidence == pytest.approx(0.8)
    assert np.all(rel.error.lower <= r + 1e-12)
    assert np.all(r <= rel.error.upper + 1e-12)
    assert np.all(rel.error.band_lower <= rel.error.lower + 1e-12)
    assert np.all(rel.error.upper <= rel.error.band_upper + 1e-12)
    assert rel.l1_bound == pytest.approx(min(p["bounds"]["1"], 2.0))
    assert rel.l1_confidence == pytest.approx(0.8)
    assert "Theorem 1.1" in rel.error.description
    assert rel.seeded is False
    assert rel.noisy_profile.shape == (31 + 2 * rel.B,)
    back = json.loads(rel.to_json())
    assert back["type"] == "ProfileRelease"
    assert len(back["value"]) == 31
    mle = reconstruct_profile(h, max_count=30, epsilon=1.0, confidence=0.8, norm=2, method="mle",
                              mechanism_params={"source": "test"})
    assert mle.mechanism == "wu-pagh-mle"
    assert mle.mechanism_params["bound_applies_to"] == "fft"
    assert mle.mechanism_params["source"] == "test"
    assert "EM maximum likelihood" in mle.error.description
    assert mle.value.sum() == pytest.approx(1, abs=1e-12)


def test_seeded_flag() -> None:
    clipped = np.array([0, 1, 2, 3, 3, 0, 1])
    assert reconstruct_profile(clipped, max_count=3, epsilon=1.0, clipped=True, rng=5).seeded
    assert not reconstruct_profile(clipped, max_count=3, epsilon=1.0, clipped=True).seeded
    assert reconstruct_profile(clipped, max_count=3, epsilon=1.0, seeded=True).seeded
    assert reconstruct_profile(clipped, max_count=3, epsilon=1.0, clipped=True, rng=5)\
        .mechanism_params["unfolded"] is True


def test_noise_free_and_huge_epsilon() -> None:
    # ε huge: α underflows, B = 0, A = I: the output is the (exact) histogram's profile
    h = np.array([0, 0, 1, 3, 3, 3, 2, 0])
    rel = reconstruct_profile(h, max_count=3, epsilon=800.0)
    assert rel.B == 0
    np.testing.assert_allclose(rel.value, [3 / 8, 1 / 8, 1 / 8, 3 / 8], atol=1e-15)
    rel = reconstruct_profile(np.zeros(10, dtype=int), max_count=4, epsilon=800.0)
    np.testing.assert_allclose(rel.value, [1, 0, 0, 0, 0], atol=1e-15)


def test_noise_free_expected_profile_round_trips(rng: np.random.Generator) -> None:
    for n, B, alpha in [(10, 6, 0.5), (40, 12, 0.8), (0, 3, 0.2)]:
        f = rng.dirichlet(np.ones(n + 1) * 0.5)
        k = get_kernel(n, B, alpha)
        fpad = np.zeros(k.size)
        fpad[B : B + n + 1] = f
        for norm in ("1", "2", "inf"):
            for method in ("fft", "mle"):
                r, _ = solve_profile(k.apply(fpad), k, norm=norm, method=method)
                np.testing.assert_allclose(r, f, atol=1e-10)


def test_small_user_b_lowers_confidence() -> None:
    d, n, eps = 1000, 10, 1.0
    g = float(discrete_laplace_gamma(eps))
    b = minimum_bound_parameter(g)
    assert b < bound_parameter(d, g, 0.05)
    counts = np.zeros(n + 2 * b + 1, dtype=int)
    counts[b] = d
    rel = reconstruct_profile_from_counts(counts, domain_size=d, max_count=n, epsilon=eps, B=b)
    assert rel.l1_confidence is not None
    assert rel.l1_confidence < 0.9
    # B inferred from the length
    rel2 = reconstruct_profile_from_counts(counts, domain_size=d, max_count=n, epsilon=eps)
    assert b == rel2.B


def test_bounds_formulas() -> None:
    k = get_kernel(2, 2, 0.25)
    b = profile_error_bounds(k, domain_size=10, eta=0.5)
    n1, n2, P = k.inverse_norm_1(), k.inverse_norm_2(), 7
    assert b["1"] == pytest.approx(2 * n1 * (math.sqrt(P) + math.sqrt(2 * math.log(2))) /
                                   math.sqrt(10))
    assert b["2"] == pytest.approx(2 * n2 * (1 + math.sqrt(math.log(2))) / math.sqrt(10))
    L = math.log(2 * P / 0.5)
    assert b["inf"] == pytest.approx(4 * n1 * (math.sqrt(2 * L / (10 * 1.625)) + 2 * L / 30))


def test_plot(rng: np.random.Generator) -> None:
    h = rng.integers(-2, 8, 3000)
    rel = reconstruct_profile(h, max_count=5, epsilon=1.0)
    ax = rel.plot(truth=np.full(6, 1 / 6))
    assert ax.get_xlabel() == "count t; t = 5: 5 or more"
    import matplotlib.pyplot as plt

    plt.close(ax.figure)


# ---------------------------------------------------------------------------------- bad input

GOOD = {"max_count": 3, "epsilon": 1.0}


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"epsilon": 0.0}, r"epsilon of reconstruct_profile must be a number in \[1e-06, 1000\]"),
    ({"epsilon": 5e-7}, "epsilon of reconstruct_profile"),
    ({"epsilon": -1.0}, "epsilon of reconstruct_profile"),
    ({"epsilon": float("nan")}, "epsilon of reconstruct_profile"),
    ({"epsilon": float("inf")}, "epsilon of reconstruct_profile"),
    ({"confidence": 0.0}, r"confidence of reconstruct_profile must be a number in \(0, 1\)"),
    ({"confidence": 1.0}, "confidence of reconstruct_profile"),
    ({"confidence": -0.2}, "confidence of reconstruct_profile"),
    ({"norm": 3}, "norm of reconstruct_profile must be one of 1, 2, 'inf'"),
    ({"norm": "l1"}, "norm of reconstruct_profile"),
    ({"norm": True}, "norm of reconstruct_profile"),
    ({"method": "lp"}, "method of reconstruct_profile must be one of 'fft', 'mle'"),
    ({"max_count": -1}, "max_count of reconstruct_profile"),
    ({"max_count": 2.5}, "max_count of reconstruct_profile"),
    ({"domain_size": 7}, "domain_size of reconstruct_profile must be the length"),
    ({"mechanism_params": [1]}, "mechanism_params of reconstruct_profile"),
])
def test_bad_parameters(kwargs: dict, match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        reconstruct_profile(np.array([0, 1, 2, -1, 5]), **{**GOOD, **kwargs})


@pytest.mark.parametrize(("data", "match"), [
    (np.array([0.5, 1.0]), "non-integral"),
    (np.array([1.0, np.nan]), "non-integral"),
    (np.array([[1, 2]]), "1-d array"),
    (np.array(["a", "b"]), "dtype"),
    (np.array([], dtype=int), "non-empty"),
])
def test_bad_histograms(data: np.ndarray, match: str) -> None:
    with pytest.raises(DataError, match=match):
        reconstruct_profile(data, **GOOD)


def test_bad_clipped_and_counts() -> None:
    with pytest.raises(DataError,
                       match="must be a 1-d array of integers >= 0; got 'an entry below 0'"):
        reconstruct_profile(np.array([0, -1]), clipped=True, **GOOD)
    with pytest.raises(DataError, match=r"integers in \[0, 3\]"):
        reconstruct_profile(np.array([0, 4]), clipped=True, **GOOD)
    with pytest.raises(DataError, match="unfold_clipped"):
        unfold_clipped(np.array([0, 1, 9]), max_count=3, epsilon=1.0, rng=1)
    f = reconstruct_profile_from_counts
    with pytest.raises(DataError, match="profile_counts of reconstruct_profile_from_counts"):
        f(np.array([1, -1, 0]), domain_size=5, max_count=0, epsilon=1.0)
    with pytest.raises(DataError, match="a non-integral entry"):
        f(np.array([1, 0.5, 0]), domain_size=5, max_count=0, epsilon=1.0)
    with pytest.raises(DataError, match="length n"):
        f(np.zeros(9, dtype=int), domain_size=5, max_count=3, epsilon=1.0)
    with pytest.raises(DataError, match="length n"):
        f(np.zeros(9, dtype=int), domain_size=5, max_count=3, epsilon=1.0, B=4)
    with pytest.raises(DataError, match="at most domain_size"):
        f(np.full(9, 2), domain_size=5, max_count=2, epsilon=1.0)
    with pytest.raises(ParameterError, match="at least B_min"):
        f(np.zeros(3, dtype=int), domain_size=5, max_count=0, epsilon=0.1, B=1)
    with pytest.raises(ParameterError, match="seeded of reconstruct_profile_from_counts"):
        f(np.zeros(9, dtype=int), domain_size=5, max_count=2, epsilon=1.0, seeded="yes")
    with pytest.raises(ParameterError, match="eta of bound_parameter"):
        bound_parameter(10, 1.0, 1.5)
    with pytest.raises(ParameterError, match="domain_size of bound_parameter"):
        bound_parameter(0, 1.0, 0.5)
    with pytest.raises(ParameterError, match="rng of unfold_clipped"):
        unfold_clipped(np.array([0, 1]), max_count=3, epsilon=1.0, rng="seed")


@pytest.mark.parametrize("norm", [1, 2, "inf", float("inf"), "INF", 2.0, np.inf])
def test_norm_spellings(norm: object) -> None:
    rel = reconstruct_profile(np.array([0, 1, 2, -1, 5]), max_count=3, epsilon=1.0, norm=norm)
    assert rel.norm in ("1", "2", "inf")


def test_unfold_hand_checked_case_with_injected_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    # the small case above: DExp draws [0, 0, 1, 2] for the four zeros (in index order) and
    # zeros for the five entries equal to n = 2 turn the clipped release back into h~.
    import dpfreq.profile.reconstruct as mod

    draws = iter([np.array([0, 0, 1, 2]), np.array([0, 0, 0, 0, 0])])

    def fake_geometric(gamma, size, *, rng=None):
        out = next(draws)
        assert out.size == size
        return out

    monkeypatch.setattr(mod, "sample_geometric", fake_geometric)
    clipped = np.array([0, 2, 0, 2, 2, 0, 1, 2, 2, 0])
    np.testing.assert_array_equal(unfold_clipped(clipped, max_count=2, epsilon=LN4, rng=1),
                                  H_NOISY)
