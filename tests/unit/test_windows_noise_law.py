"""Certified quantiles of sums of node noise (dpfreq.windows.laws.sums): the few-term Fourier sum
of the folded law agrees with the full transform, the discrete Laplace characteristic function
has no cancellation, and the batch of cover sizes gives what each size gives alone."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dpfreq.windows.laws import sums as nl

GAMMAS = [Fraction(1, 1156), Fraction(1, 50), Fraction(1, 4)]
MS = [1, 2, 3, 5, 12, 40, 100, 390]
BETAS = [0.05, 0.003, 1e-7]


def transform_quantile(m: int, gamma: Fraction, beta: float) -> float | None:
    """The quantile from the full transform of the folded law (:func:`nl.sum_abs_cdf`)."""
    cdf = nl.sum_abs_cdf(m, gamma)
    assert cdf is not None
    b = int(np.searchsorted(cdf, 1.0 - beta, side="left"))
    return float(b) if b < cdf.size else None


@pytest.mark.parametrize("gamma", GAMMAS)
@pytest.mark.parametrize("beta", BETAS)
def test_few_term_sum_gives_the_transform_quantile(gamma: Fraction, beta: float) -> None:
    rs = [int(nl.tail_radius(m, nl.TAIL, gamma=gamma)) for m in MS]
    got = nl._dirichlet_quantiles(MS, rs, beta, float(gamma))
    assert got  # the large cover sizes take the few-term path
    for m, b in got.items():
        assert b == transform_quantile(m, gamma, beta)


@pytest.mark.parametrize("gamma", GAMMAS)
def test_few_term_mass_equals_the_transform_mass(gamma: Fraction) -> None:
    m = 40
    r = int(nl.tail_radius(m, nl.TAIL, gamma=gamma))
    n, _ = nl._circular_power(m, r, gamma, None)
    k_max = nl._dirichlet_terms(m, n, float(gamma))
    assert k_max is not None
    w = nl._dirichlet_weights(m, n, np.arange(1, k_max + 1, dtype=np.float64), float(gamma))
    cdf = nl.sum_abs_cdf(m, gamma)
    assert cdf is not None
    bs = np.linspace(0, r, 50).astype(np.int64)
    k = np.arange(1, w.size + 1)
    odd = 2 * bs + 1
    mass = odd / n + np.sin(np.pi * ((odd[:, None] * k) % (2 * n)) / n) @ w
    np.testing.assert_allclose(mass - nl._slack(m, n), cdf[bs], rtol=0, atol=1e-12)


@pytest.mark.parametrize("gamma", [*GAMMAS, Fraction(1, 10**6), Fraction(40)])
def test_characteristic_function_has_no_cancellation(gamma: Fraction) -> None:
    n = 1 << 12
    k = np.arange(n // 2 + 1, dtype=np.float64)
    log_phi = nl._log_phi(k, n, float(gamma))
    assert log_phi[0] == 0.0
    alpha = math.exp(-float(gamma))
    theta = 2 * math.pi * k[1:] / n
    direct = (1 - alpha) ** 2 / (1 - 2 * alpha * np.cos(theta) + alpha**2)
    np.testing.assert_allclose(np.exp(log_phi[1:]), direct, rtol=1e-6 + 1e-9 / float(gamma))
    m = 390
    r = int(nl.tail_radius(m, nl.TAIL, gamma=Fraction(1, 1156)))
    _, law = nl._circular_power(m, r, Fraction(1, 1156), None)
    assert abs(law.sum() - 1.0) < 1e-12


@pytest.mark.parametrize("beta", [0.05, 1e-7, 2.3e-11])
@pytest.mark.parametrize("law", [{"gamma": Fraction(1, 300)}, {"sigma2": 50}])
def test_batch_of_cover_sizes_equals_each_size_alone(beta: float, law: dict) -> None:
    nodes = np.array([[0, 3, 17], [17, 120, 3]])
    nl._QUANTILES.clear()
    batch = nl.sum_quantile(nodes, beta, **law)
    assert batch.shape == nodes.shape
    assert batch[0, 0] == 0.0
    for m in [3, 17, 120]:
        nl._QUANTILES.clear()
        alone = nl.sum_quantile([m], beta, **law)[0]
        assert np.all(batch[nodes == m] == alone)
        assert alone <= nl.tail_radius(m, beta, **law)


def test_batched_chernoff_radii_equal_the_scalar_ones() -> None:
    """The batch bisects for each minimum; the scalar takes the whole grid: the same floats
    (small and huge cover sizes, tiny to large γ, β from 1/2 to 1e-300)."""
    ms = np.concatenate((np.arange(1, 400, 7), [10**4, 123_457, 10**7]))
    for gamma in [1e-6, 1 / 20000, 1 / 1156, 0.3, 5.0, 40.0]:
        for beta in [0.5, 0.05, 2.3e-11, 1e-13, 1e-300]:
            batch = nl._chernoff_radius(ms, gamma, beta)
            alone = [nl._chernoff_radius(int(m), gamma, beta) for m in ms]
            assert batch.tolist() == alone


@pytest.mark.parametrize("m", [22, 128, 390])
def test_deep_quantile_is_not_certified_below_the_tail_bound(m: int) -> None:
    """At β below the exact law's slack only the Chernoff bound certifies; the folded law's mass
    outside it is at most β (a law with mass above 1 once certified far less here)."""
    gamma, beta = Fraction(1, 1156), 2.328e-11
    nl._QUANTILES.clear()
    b = int(nl.sum_quantile([m], beta, gamma=gamma)[0])
    assert b == nl.tail_radius(m, beta, gamma=gamma)
    r = int(nl.tail_radius(m, nl.TAIL, gamma=gamma))
    n, law = nl._circular_power(m, r, gamma, None)
    inside = law[0] + law[1:b + 1].sum() + law[n - b:].sum()
    assert 1.0 - inside <= beta
