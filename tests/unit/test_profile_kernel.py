"""Kernel of the Wu–Pagh reconstruction (Wu & Pagh 2024, Lemma 4.2): hand-computed small cases,
eigenvalue checks.

``dense`` below is the reference for the kernel's products, by FFT (``P > 320``) and by its own
dense matrix (small kernels).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg

from dpfreq.profile.kernel import (
    eigenvalues_closed_form,
    eigenvalues_fft,
    get_kernel,
    inverse_norm_bounds,
    kernel_vector,
    p_norm,
)
from dpfreq.profile.reconstruct import minimum_bound_parameter


def dense(n: int, B: int, alpha: float) -> np.ndarray:
    c = kernel_vector(n, B, alpha)
    P = c.size
    idx = (np.arange(P)[None, :] - np.arange(P)[:, None]) % P  # circ(c)[i][j] = c[(j-i) mod P]
    return c[idx] / p_norm(B, alpha)


def test_hand_computed_three_by_three() -> None:
    # hand-computed: n = 0, B = 1, α = 0.25
    c = kernel_vector(0, 1, 0.25)
    np.testing.assert_allclose(c, [1, 0.25, 0.25], rtol=0, atol=1e-15)
    assert p_norm(1, 0.25) == pytest.approx(1.5, abs=1e-15)
    A = dense(0, 1, 0.25)
    expect = np.array([[2, 0.5, 0.5], [0.5, 2, 0.5], [0.5, 0.5, 2]]) / 3
    np.testing.assert_allclose(A, expect, atol=1e-15)
    np.testing.assert_allclose(eigenvalues_closed_form(0, 1, 0.25), [1, 0.5, 0.5], atol=1e-15)
    inv = np.array([[5, -1, -1], [-1, 5, -1], [-1, -1, 5]]) / 3
    np.testing.assert_allclose(np.linalg.inv(A), inv, atol=1e-14)
    k = get_kernel(0, 1, 0.25)
    np.testing.assert_allclose(k.inverse_row(), inv[0], atol=1e-14)
    alpha, B = 0.25, 1
    lower = (1 - alpha - 2 * alpha ** (B + 1)) / ((1 + alpha) * p_norm(B, alpha))
    assert lower == pytest.approx(1 / 3, abs=1e-15)
    assert lower <= k.min_eigenvalue + 1e-15


def test_hand_computed_seven_by_seven() -> None:
    c = kernel_vector(2, 2, 0.25)
    np.testing.assert_allclose(c, [1, 0.25, 0.0625, 0, 0, 0.0625, 0.25], atol=1e-15)
    assert p_norm(2, 0.25) == pytest.approx(1.625, abs=1e-15)
    A = dense(2, 2, 0.25)
    np.testing.assert_allclose(A[0, :3], [0.615385, 0.153846, 0.038462], atol=5e-7)
    phi = [1, 0.790111, 0.477611, 0.386124, 0.386124, 0.477611, 0.790111]
    np.testing.assert_allclose(eigenvalues_closed_form(2, 2, 0.25), phi, atol=5e-7)
    k = get_kernel(2, 2, 0.25)
    row = [1.842640, -0.431472, -0.015228, 0.025381, 0.025381, -0.015228, -0.431472]
    np.testing.assert_allclose(k.inverse_row(), row, atol=5e-7)
    assert k.inverse_norm_1() == pytest.approx(2.786802, abs=5e-7)
    assert inverse_norm_bounds(2, 0.25)[0] == pytest.approx(2.901786, abs=5e-7)


def test_p_norm_closed_form() -> None:
    for B in range(0, 30, 3):
        for alpha in (0.0, 1e-3, 0.3, 0.9, 0.999):
            direct = 1 + 2 * sum(alpha**k for k in range(1, B + 1))
            formula = (1 + alpha - 2 * alpha ** (B + 1)) / (1 - alpha)
            assert p_norm(B, alpha) == pytest.approx(direct, rel=1e-12)
            assert p_norm(B, alpha) == pytest.approx(formula, rel=1e-9)


@pytest.mark.parametrize(("n", "B", "alpha"), [(0, 1, 0.25), (3, 2, 0.5), (10, 7, 0.8),
                                                (17, 4, 0.1), (1, 12, 0.95), (40, 0, 0.3)])
def test_eigenvalues_three_ways(n: int, B: int, alpha: float) -> None:
    closed = eigenvalues_closed_form(n, B, alpha)
    fft = eigenvalues_fft(n, B, alpha)
    P = n + 2 * B + 1
    np.testing.assert_allclose(closed[: P // 2 + 1], fft, atol=1e-12)
    np.testing.assert_allclose(closed[1:], closed[1:][::-1], atol=1e-12)  # φ_{P−m} = φ_m
    A = dense(n, B, alpha)
    np.testing.assert_allclose(np.sort(closed), np.linalg.eigvalsh(A), atol=1e-12)
    # the DFT columns are eigenvectors with exactly these eigenvalues
    m = np.arange(P)
    V = np.exp(2j * np.pi * np.outer(m, m) / P) / math.sqrt(P)
    np.testing.assert_allclose(A @ V, V * closed[None, :], atol=1e-12)


@pytest.mark.parametrize(("n", "B", "alpha"), [(0, 1, 0.25), (5, 3, 0.6), (12, 9, 0.85),
                                                (50, 134, 0.97), (50, 135, 0.97)])
def test_apply_solve_match_dense(n: int, B: int, alpha: float, rng: np.random.Generator) -> None:
    """Both ways of applying ``A`` (P = 319 dense, P = 321 by FFT), on vectors and row stacks."""
    k = get_kernel(n, B, alpha)
    A = dense(n, B, alpha)
    x = rng.standard_normal(k.size)
    np.testing.assert_allclose(k.apply(x), A @ x, atol=1e-12)
    rows = rng.standard_normal((3, k.size))
    np.testing.assert_allclose(k.apply(rows), rows @ A.T, atol=1e-12)
    np.testing.assert_allclose(k.solve(x), np.linalg.solve(A, x), atol=1e-10)
    ones = np.ones(k.size)
    np.testing.assert_allclose(k.apply(ones), ones, atol=1e-12)  # A·1 = 1
    np.testing.assert_allclose(k.solve(ones), ones, atol=1e-12)  # A^{-1}·1 = 1
    np.testing.assert_allclose(A, A.T, atol=0)
    inv = np.linalg.inv(A)
    assert k.inverse_norm_1() == pytest.approx(np.abs(inv).sum(axis=1).max(), rel=1e-10)
    assert k.inverse_norm_2() == pytest.approx(np.linalg.norm(inv, 2), rel=1e-10)


def test_lemma_4_10_norm_bounds(rng: np.random.Generator) -> None:
    # random (n, ε), B in [B_min, B_min + 2]; tolerance 1e-9 (the ℓ2 bound is
    # attained when θ = π is an eigen-angle).
    for _ in range(120):
        n = int(rng.integers(0, 40))
        eps = float(rng.uniform(0.05, 5.0))
        B = minimum_bound_parameter(eps) + int(rng.integers(0, 3))
        alpha = math.exp(-eps)
        inv = np.linalg.inv(dense(n, B, alpha))
        b1, b2 = inverse_norm_bounds(B, alpha)
        assert np.abs(inv).sum(axis=1).max() <= b1 * (1 + 1e-9)
        assert np.linalg.norm(inv, 2) <= b2 * (1 + 1e-9)
        phi = eigenvalues_closed_form(n, B, alpha)
        assert phi.min() >= (1 - alpha - 2 * alpha ** (B + 1)) / ((1 + alpha) * p_norm(B, alpha)) \
            - 1e-12
        K = (math.exp(eps) + 1) / (math.exp(eps) - 1)
        assert b2 <= 2 * K * p_norm(B, alpha) * (1 + 1e-9)
        assert b1 <= 2 * K * p_norm(B, alpha) * (1 + 1e-9)


def test_alpha_zero_is_identity() -> None:
    k = get_kernel(4, 0, 0.0)
    x = np.arange(5, dtype=float)
    np.testing.assert_allclose(k.apply(x), x, atol=1e-15)
    np.testing.assert_allclose(k.solve(x), x, atol=1e-14)
    np.testing.assert_allclose(eigenvalues_closed_form(4, 3, 0.0), np.ones(11), atol=0)
    assert inverse_norm_bounds(3, 0.0) == (1.0, 1.0)


def test_get_kernel_is_cached() -> None:
    assert get_kernel(7, 3, 0.5) is get_kernel(7, 3, 0.5)
    with pytest.raises(ValueError, match="read-only"):
        get_kernel(7, 3, 0.5).eigenvalues[0] = 2.0


def test_scipy_circulant_agrees() -> None:
    # independent construction (scipy's circulant has c as first column; c is symmetric)
    c = kernel_vector(6, 4, 0.7)
    np.testing.assert_allclose(scipy.linalg.circulant(c) / p_norm(4, 0.7), dense(6, 4, 0.7),
                               atol=1e-15)
