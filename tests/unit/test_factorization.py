"""The integer square-root factorization of prefix sums: exact identities and sensitivities."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import toeplitz
from scipy.stats import binom

from dpfreq.windows.layouts.factorization import (
    MAX_HORIZON,
    SCALE,
    coefficients,
    prefix_answers,
    prefix_coefficients,
    prefix_variance_factors,
    sensitivity,
    sub_gaussian_halfwidth,
)
from dpfreq.windows.noise.keyed import KeyedDiscreteGaussian


def _matrices(t: int, moves: bool) -> tuple[np.ndarray, np.ndarray]:
    r = np.tril(toeplitz(coefficients(t, moves))).astype(np.int64)
    return r, np.tril(toeplitz(prefix_coefficients(t, moves)))


@pytest.mark.parametrize("moves", [False, True])
@pytest.mark.parametrize("t", [1, 2, 3, 7, 16, 45])
def test_l_times_r_is_the_prefix_sum_matrix(t: int, moves: bool) -> None:
    r, l_mat = _matrices(t, moves)
    np.testing.assert_allclose(l_mat @ r, np.tril(np.ones((t, t))), atol=1e-9)


@pytest.mark.parametrize("moves", [False, True])
@pytest.mark.parametrize("t", [1, 2, 3, 7, 16, 45])
def test_sensitivity_equals_enumeration_over_neighbours(t: int, moves: bool) -> None:
    """Item: x moves by ±e_t; event and item_replace: also by e_t − e_u (a point moves); for
    the coefficients of either shape."""
    r, _ = _matrices(t, moves)
    adds = [r[:, i] for i in range(t)]
    moved = [r[:, i] - r[:, j] for i in range(t) for j in range(t) if i != j]
    for unit, vecs in (("item", adds), ("event", adds + moved), ("item_replace", adds + moved)):
        l1 = max(int(np.abs(v).sum()) for v in vecs)
        l2sq = max(int((v * v).sum()) for v in vecs)
        assert sensitivity(t, unit, moves) == (l1, l2sq)


@pytest.mark.parametrize("moves", [False, True])
def test_coefficients_are_positive_and_non_increasing_up_to_the_cap(moves: bool) -> None:
    c = coefficients(MAX_HORIZON, moves)
    assert c[-1] > 0
    assert np.all(np.diff(c) <= 0)
    with pytest.raises(ValueError, match="horizon"):
        coefficients(MAX_HORIZON + 1, moves)


def test_the_shape_beats_the_square_root_at_item_level_and_never_loses() -> None:
    """The chosen (a, λ) has the least mean variance of the grid, the square root among it:
    at item level about 5 % below it at T = 30 and 3 % at T = 365 (exact integer coefficients,
    exact sensitivities)."""
    from dpfreq.windows.layouts.factorization import factor_shape

    def mean_variance(t: int, moves: bool) -> float:
        unit = "event" if moves else "item"
        return sensitivity(t, unit, moves)[1] * float(prefix_variance_factors(t, moves).mean())

    def sqrt_variance(t: int, moves: bool) -> float:
        j = np.arange(1, t)
        c = np.rint(SCALE * np.cumprod(np.concatenate(([1.0], (2 * j - 1) / (2 * j)))))
        r = np.tril(toeplitz(c))
        l_mat = np.tril(np.ones((t, t))) @ np.linalg.inv(r)
        vecs = [r[:, i] for i in range(t)] + ([r[:, 0] - r[:, i] for i in range(1, t)]
                                               if moves else [])
        return max(float(v @ v) for v in vecs) * float((l_mat ** 2).sum(axis=1).mean())

    assert factor_shape(30, False) != (0.5, 0.0)
    assert mean_variance(30, False) < 0.96 * sqrt_variance(30, False)
    assert mean_variance(365, False) < 0.975 * sqrt_variance(365, False)
    for t in (2, 30, 200):
        assert mean_variance(t, True) <= sqrt_variance(t, True) * (1 + 1e-6)


@pytest.mark.parametrize("moves", [False, True])
def test_prefix_answers_and_its_variance_factors_are_l_z_and_the_row_norms(moves: bool) -> None:
    t = 40
    _, l_mat = _matrices(t, moves)
    z = np.arange(t, dtype=np.int64) * 7 % 13 - 6
    np.testing.assert_allclose(prefix_answers(z, moves), l_mat @ z, atol=1e-9)
    np.testing.assert_allclose(prefix_variance_factors(t, moves), (l_mat ** 2).sum(axis=1))


def test_sub_gaussian_halfwidth_covers_exact_discrete_gaussian_noise() -> None:
    """Misses of the β = 0.05 half-width over 4000 keyed draws stay below the binomial
    quantile at false-alarm rate 1e-6 (the bound is conservative: misses are rarer than β)."""
    t, sigma2, beta, draws = 30, 50, 0.05, 4000
    src = KeyedDiscreteGaussian(bytes(32), ("factorization-test", 0), sigma2)
    z = src.noise(np.arange(t * draws)).reshape(draws, t)
    noise = np.stack([prefix_answers(row, False) for row in z])
    x = sub_gaussian_halfwidth(prefix_variance_factors(t, False), src.sigma2, beta)
    misses = int((np.abs(noise[:, -1]) > x[-1]).sum())
    assert misses <= binom.isf(1e-6, draws, beta)


def _structure(unit: str = "event", horizon: int = 50):
    from fractions import Fraction

    from dpfreq.windows.structures.base import build_structure

    return build_structure("cumulative", "factorization", 1, horizon, unit, Fraction(1), 1e-5,
                           rho=0.05, noise_kind="gaussian")


@pytest.mark.parametrize("unit", ["item", "item_replace", "event"])
def test_structure_calibrates_sigma2_from_the_exact_integer_sensitivity(unit: str) -> None:
    s = _structure(unit)
    _, l2sq = sensitivity(50, unit, unit != "item")
    assert s.usable
    assert s.sigma2 >= l2sq / (2 * 0.05)
    assert s.detail["l2_squared"] == l2sq


def test_structure_answers_are_l_times_the_keyed_node_noise_without_data() -> None:
    s = _structure()
    key = bytes(range(32))
    s.attach(key, ("cumulative", 1))
    z = KeyedDiscreteGaussian(key, ("cumulative", 1, 0), s.sigma2).noise(np.arange(50))
    t = np.arange(1, 51)
    s.measure(lambda t1, t2: np.zeros(np.shape(t2), dtype=np.int64))  # no data: u = z
    assert s.estimates(np.ones_like(t), t).tobytes() == prefix_answers(z, True).tobytes()
    np.testing.assert_allclose(s.variance(np.ones_like(t), t),
                               prefix_variance_factors(50, True) * s.node_variance)
    assert np.all(s.halfwidth(np.ones_like(t), t, 0.05)
                  >= sub_gaussian_halfwidth(prefix_variance_factors(50, True), s.sigma2, 0.05))


def test_asking_for_the_factorization_at_pure_epsilon_says_what_it_needs() -> None:
    from dpfreq import release_window_counts
    from dpfreq.errors import ParameterError

    events = (np.arange(20) % 5, np.arange(20) % 10 + 1)
    with pytest.raises(ParameterError, match=r"factorization needs delta > 0"):
        release_window_counts(events, horizon=10, epsilon=1.0, unit="item", k_values=[1],
                              windows=["cumulative"], method={"cumulative": "factorization"},
                              rng=1)


def test_auto_picks_the_factorization_where_it_predicts_less_error() -> None:
    """Event level, ε = 1, δ = 1e-3, T = 365: zCDP with the factorization predicts less error
    than every pure-ε and Gaussian tree (the record lists them all)."""
    from dpfreq import plan_window_counts

    plan = plan_window_counts(horizon=365, epsilon=1.0, delta=1e-3, unit="event", k_values=[1],
                              windows=["cumulative"])
    assert plan.methods["cumulative, k=1"] == "factorization"
