"""The direct profile mechanism: exact projection, exact privacy by enumeration, exact intervals."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from dpfreq.noise import discrete_laplace_gamma, discrete_laplace_pmf, discrete_laplace_tail
from dpfreq.profile import release_profile
from dpfreq.profile.direct import (
    DIRECT_SENSITIVITY,
    SENSITIVITIES,
    direct_gamma,
    direct_layout,
    noisy_classes,
    project_to_simplex,
)
from dpfreq.profile.intervals import (
    band_level,
    direct_half_widths,
    direct_intervals,
    sum_half_width,
)

# ---------------------------------------------------------------------------------- projection


def _compositions(total: int, parts: int) -> list[tuple[int, ...]]:
    """Every vector of ``parts`` non-negative integers summing to ``total``."""
    out = []
    for cuts in itertools.combinations(range(total + parts - 1), parts - 1):
        prev, vec = -1, []
        for c in (*cuts, total + parts - 1):
            vec.append(c - prev - 1)
            prev = c
        out.append(tuple(vec))
    return out


def _exchange_optimal(x: list[int], y: list[int]) -> bool:
    """Optimality certificate for ``min Σ (x−y)²`` over non-negative integers with a fixed sum.

    For a separable convex objective, no improving move of one unit from ``i`` (``x_i > 0``) to
    ``j`` exists iff ``x`` is a global minimum: the move changes the cost by
    ``2((x_j − y_j) − (x_i − y_i)) + 2``.
    """
    return all(x[i] == 0 or (x[j] - y[j]) - (x[i] - y[i]) >= -1
               for i in range(len(x)) for j in range(len(x)) if i != j)


def test_projection_matches_brute_force() -> None:
    """Every y in [−4, 7]^3 and d in 1..9: ours attains the minimal ℓ2 and ℓ1 distances."""
    for d in range(1, 10):
        feasible = np.array(_compositions(d, 3))
        for y in itertools.product(range(-4, 8), repeat=3):
            yy = np.array(y, dtype=np.int64)
            x = project_to_simplex(yy, d)
            assert x.sum() == d
            assert x.min() >= 0
            l2 = ((feasible - yy) ** 2).sum(axis=1)
            l1 = np.abs(feasible - yy).sum(axis=1)
            assert int(((x - yy) ** 2).sum()) == int(l2.min())
            assert int(np.abs(x - yy).sum()) == int(l1.min())


def test_projection_ties_go_to_the_smallest_index() -> None:
    np.testing.assert_array_equal(project_to_simplex(np.array([1, 1, 1]), 4), [2, 1, 1])
    np.testing.assert_array_equal(project_to_simplex(np.array([0, 0]), 1), [1, 0])


def test_projection_is_identity_on_valid_vectors(rng: np.random.Generator) -> None:
    for _ in range(50):
        x = rng.integers(0, 1000, size=rng.integers(1, 40))
        np.testing.assert_array_equal(project_to_simplex(x, int(x.sum())), x)


@pytest.mark.parametrize("scale", [2**40, 2**58, 2**61])
def test_projection_exact_at_large_magnitudes(rng: np.random.Generator, scale: int) -> None:
    """Values near the int64 limit take the exact Python-integer path; the certificate holds."""
    d = 2**62 - 1
    for size in (2, 5, 17):
        y = rng.integers(-scale // 4, scale, size=size, dtype=np.int64)
        x = project_to_simplex(y, d)
        xs, ys = [int(v) for v in x], [int(v) for v in y]
        assert sum(xs) == d
        assert min(xs) >= 0
        assert _exchange_optimal(xs, ys)


def test_projection_random_certificate(rng: np.random.Generator) -> None:
    for _ in range(300):
        size = int(rng.integers(1, 30))
        d = int(rng.integers(1, 10**6))
        y = rng.integers(-50, d // size + 50, size=size)
        x = project_to_simplex(y, d)
        assert int(x.sum()) == d
        assert _exchange_optimal([int(v) for v in x], [int(v) for v in y])


# ---------------------------------------------------------------------------------- privacy


def _class_vector(counts: tuple[int, ...], n: int) -> np.ndarray:
    return np.bincount(np.minimum(np.array(counts), n), minlength=n + 1)


def _neighbours(counts: tuple[int, ...], unit: str, top: int) -> list[tuple[int, ...]]:
    """Every neighbour under the unit's relation, over a public domain (an absent item has
    count 0): ``item`` — one item's rows all removed (c -> 0) or added (0 -> c2 >= 1);
    ``item_replace`` — one item's count replaced by any other; ``event`` — changed by ±1."""
    out = []
    for i, c in enumerate(counts):
        if unit == "item":
            others: Any = (0,) if c else range(1, top + 1)
        elif unit == "item_replace":
            others = range(top + 1)
        else:
            others = (c - 1, c + 1)
        for c2 in others:
            if 0 <= c2 <= top and c2 != c:
                out.append((*counts[:i], c2, *counts[i + 1 :]))
    return out


@pytest.mark.parametrize("unit", ["item", "item_replace", "event"])
@pytest.mark.parametrize("epsilon", [0.3, 1.0, 2.5])
def test_exact_privacy_by_enumeration(unit: str, epsilon: float) -> None:
    """Domain of 3 items with counts 0..3, cap n = 2 (so clamping is exercised).

    For every data set and every neighbour under the unit's relation, the noised classes (all
    ``n + 1``, or ``t >= 1`` when class 0 is derived from ``d``) differ by exactly the layout's
    sensitivity at most (reached: the sensitivity is exact), and the exact pmf ratio of the
    noised vector over a window of outcomes is at most e^ε, with equality reached (tight).
    """
    d, n, top, width = 3, 2, 3, 6
    layout = direct_layout(unit, epsilon, n)
    gamma = layout.gamma
    assert layout.sensitivity == SENSITIVITIES[unit][1 if layout.derive_zero else 0]
    assert layout.derive_zero == (unit == "item")
    assert gamma <= Fraction(epsilon) / layout.sensitivity
    lo = 1 if layout.derive_zero else 0
    worst, largest = 0.0, 0
    grid = np.array(list(itertools.product(range(-width, d + width + 1), repeat=n + 1 - lo)))
    for counts in itertools.product(range(top + 1), repeat=d):
        c = _class_vector(counts, n)[lo:]
        for other in _neighbours(counts, unit, top):
            c2 = _class_vector(other, n)[lo:]
            largest = max(largest, int(np.abs(c - c2).sum()))
            p = np.prod(discrete_laplace_pmf(grid - c, gamma), axis=1)
            q = np.prod(discrete_laplace_pmf(grid - c2, gamma), axis=1)
            worst = max(worst, float(np.max(np.log(p) - np.log(q))))
    assert largest == layout.sensitivity  # the exact sensitivity of the noised classes
    assert worst <= epsilon + 1e-9
    assert worst >= layout.sensitivity * float(gamma) - 1e-9  # tight
    assert layout.sensitivity * float(gamma) > epsilon - 1e-8


def test_all_classes_sensitivity_is_two_at_every_unit() -> None:
    """Noising all n + 1 classes needs sensitivity 2 at every relation (enumerated)."""
    for unit in ("item", "item_replace", "event"):
        largest = max(int(np.abs(_class_vector(a, 2) - _class_vector(b, 2)).sum())
                      for a in itertools.product(range(4), repeat=3)
                      for b in _neighbours(a, unit, 3))
        assert largest == DIRECT_SENSITIVITY == SENSITIVITIES[unit][0], unit


def test_noise_is_added_to_every_class(rng: np.random.Generator) -> None:
    classes = np.array([10**6, 0, 5, 0], dtype=np.int64)
    gamma = discrete_laplace_gamma(1.0, sensitivity=2)
    draws = np.array([noisy_classes(classes, gamma, rng) for _ in range(200)])
    assert np.all(draws.std(axis=0) > 0)  # every class, zero or not, is noised


def test_release_depends_only_on_the_noisy_vector(seed: int) -> None:
    """Same data, same seed -> same noisy vector -> same estimate and intervals."""
    counts = np.array([0, 1, 2, 2, 5])
    a = release_profile(counts, domain_size=50, max_count=3, epsilon=1.0, unit="item", rng=seed)
    b = release_profile(counts[::-1].copy(), domain_size=50, max_count=3, epsilon=1.0,
                        unit="item", rng=seed)
    np.testing.assert_array_equal(a.noisy_profile, b.noisy_profile)
    np.testing.assert_array_equal(a.value, b.value)
    np.testing.assert_array_equal(a.error.band_upper, b.error.band_upper)


# ---------------------------------------------------------------------------------- intervals


@pytest.mark.parametrize("epsilon", [0.05, 0.5, 1.0, 4.0])
@pytest.mark.parametrize("confidence", [0.5, 0.9, 0.95, 0.999])
def test_half_widths_are_the_exact_quantiles(epsilon: float, confidence: float) -> None:
    gamma = direct_gamma(epsilon)
    classes = 51
    q, q_band = direct_half_widths(gamma, classes, confidence)
    miss = 1.0 - confidence
    assert float(discrete_laplace_tail(q, gamma)) <= miss
    if q > 0:
        assert float(discrete_laplace_tail(q - 1, gamma)) > miss  # the smallest such q
    cover = (1.0 - float(discrete_laplace_tail(q_band, gamma))) ** classes
    assert cover >= confidence - 1e-12
    if q_band > 0:
        assert (1.0 - float(discrete_laplace_tail(q_band - 1, gamma))) ** classes < confidence
    assert math.isclose((1 - band_level(confidence, classes)) ** classes, confidence)


def test_intervals_contain_the_estimate_and_the_noisy_interval() -> None:
    gamma = direct_gamma(1.0)
    y = np.array([95, -3, 4, 1], dtype=np.int64)
    d = 100
    x = project_to_simplex(y, d)
    iv = direct_intervals(y, x, gamma=gamma, domain_size=d, confidence=0.9)
    q, q_band = direct_half_widths(gamma, y.size, 0.9)
    r = x / d
    assert np.all(iv.lower <= r)
    assert np.all(r <= iv.upper)
    assert np.all(iv.band_lower <= iv.lower)
    assert np.all(iv.upper <= iv.band_upper)
    np.testing.assert_allclose(iv.lower, np.clip(np.minimum(x, y - q), 0, d) / d)
    np.testing.assert_allclose(iv.band_upper, np.clip(np.maximum(x, y + q_band), 0, d) / d)


def test_vacuous_statement_names_a_useful_epsilon(seed: int) -> None:
    rel = release_profile([1, 2, 3], domain_size=20, max_count=10, epsilon=0.1, unit="item",
                          rng=seed)
    assert rel.error.vacuous
    assert "vacuous" in rel.error.description
    assert "ε ≈" in rel.error.description
    good = release_profile([1, 2, 3], domain_size=10**6, max_count=10, epsilon=1.0,
                           unit="item", rng=seed)
    assert not good.error.vacuous
    assert "vacuous" not in good.error.description


@pytest.mark.parametrize("epsilon", [0.3, 1.0, 4.0])
def test_sum_half_width_is_the_exact_quantile_of_the_sum(epsilon: float) -> None:
    """Against the exact law of Z1 + Z2 + Z3 by direct convolution of the pmf."""
    gamma = direct_gamma(epsilon)
    assert sum_half_width(gamma, 1, 0.9) == direct_half_widths(gamma, 1, 0.9)[0]
    support = np.arange(-400, 401)
    one = discrete_laplace_pmf(support, gamma)
    law = np.convolve(np.convolve(one, one), one)  # support -1200..1200
    centre = law.size // 2
    for conf in (0.5, 0.9, 0.99):
        q = sum_half_width(gamma, 3, conf)
        assert q is not None
        assert law[centre - q : centre + q + 1].sum() >= conf - 1e-12
        if q > 0:
            assert law[centre - q + 1 : centre + q].sum() < conf


def test_group_sum_interval_is_narrower_than_the_band(seed: int) -> None:
    counts = np.random.Generator(np.random.PCG64(seed)).integers(0, 40, size=5000)
    rel = release_profile(counts, domain_size=10**5, max_count=30, epsilon=1.0, unit="item",
                          rng=seed)
    low, high = rel.sum_interval(5, 25)
    total = float(rel.value[5:26].sum())
    assert low <= total <= high
    band = float(rel.error.band_upper[5:26].sum() - rel.error.band_lower[5:26].sum())
    assert high - low < band
