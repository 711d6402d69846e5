"""The integer square-root factorization of prefix sums: exact identities and sensitivities."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import toeplitz
from scipy.stats import binom

from dpfreq.windows.factorization import (
    MAX_HORIZON,
    prefix_coefficients,
    prefix_noise,
    prefix_variance_factors,
    sensitivity,
    sqrt_coefficients,
    sub_gaussian_halfwidth,
)
from dpfreq.windows.lazy_noise import KeyedDiscreteGaussian


def _matrices(t: int) -> tuple[np.ndarray, np.ndarray]:
    r = np.tril(toeplitz(sqrt_coefficients(t))).astype(np.int64)
    return r, np.tril(toeplitz(prefix_coefficients(t)))


@pytest.mark.parametrize("t", [1, 2, 3, 7, 16, 45])
def test_l_times_r_is_the_prefix_sum_matrix(t: int) -> None:
    r, l_mat = _matrices(t)
    np.testing.assert_allclose(l_mat @ r, np.tril(np.ones((t, t))), atol=1e-9)


@pytest.mark.parametrize("t", [1, 2, 3, 7, 16, 45])
def test_sensitivity_equals_enumeration_over_neighbours(t: int) -> None:
    """Item: x moves by ±e_t; event and item_replace: also by e_t − e_u (a point moves)."""
    r, _ = _matrices(t)
    adds = [r[:, i] for i in range(t)]
    moves = [r[:, i] - r[:, j] for i in range(t) for j in range(t) if i != j]
    for unit, vecs in (("item", adds), ("event", adds + moves), ("item_replace", adds + moves)):
        l1 = max(int(np.abs(v).sum()) for v in vecs)
        l2sq = max(int((v * v).sum()) for v in vecs)
        assert sensitivity(t, unit) == (l1, l2sq)


def test_coefficients_are_positive_and_non_increasing_up_to_the_cap() -> None:
    c = sqrt_coefficients(MAX_HORIZON)
    assert c[-1] > 0
    assert np.all(np.diff(c) <= 0)
    with pytest.raises(ValueError, match="horizon"):
        sqrt_coefficients(MAX_HORIZON + 1)


def test_prefix_noise_and_its_variance_factors_are_l_z_and_the_row_norms() -> None:
    t = 40
    _, l_mat = _matrices(t)
    z = np.arange(t, dtype=np.int64) * 7 % 13 - 6
    np.testing.assert_allclose(prefix_noise(z), l_mat @ z, atol=1e-9)
    np.testing.assert_allclose(prefix_variance_factors(t), (l_mat ** 2).sum(axis=1))


def test_sub_gaussian_halfwidth_covers_exact_discrete_gaussian_noise() -> None:
    """Misses of the β = 0.05 half-width over 4000 keyed draws stay below the binomial
    quantile at false-alarm rate 1e-6 (the bound is conservative: misses are rarer than β)."""
    t, sigma2, beta, draws = 30, 50, 0.05, 4000
    src = KeyedDiscreteGaussian(bytes(32), ("factorization-test", 0), sigma2)
    z = src.noise(np.arange(t * draws)).reshape(draws, t)
    noise = np.stack([prefix_noise(row) for row in z])
    x = sub_gaussian_halfwidth(prefix_variance_factors(t), src.sigma2, beta)
    misses = int((np.abs(noise[:, -1]) > x[-1]).sum())
    assert misses <= binom.isf(1e-6, draws, beta)
