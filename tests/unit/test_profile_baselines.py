"""Baselines (Wu & Pagh 2024, Section 4): naive estimator and the exact P2 optimum (HiGHS LP,
QP via KKT)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpfreq.errors import DataError, ParameterError
from dpfreq.profile.baselines import banded_kernel, lp_profile, naive_profile
from dpfreq.profile.kernel import get_kernel
from dpfreq.profile.solve import fast_inversion, round_profile

LN4 = math.log(4.0)
COUNTS = np.array([1, 1, 2, 1, 5, 0, 0])  # a hand-checked small case
F = COUNTS / 10


def test_banded_is_columns_of_circulant() -> None:
    k = get_kernel(5, 3, 0.4)
    eye = np.zeros((k.size, 6))
    eye[3:9] = np.eye(6)
    cols = np.stack([k.apply(eye[:, j]) for j in range(6)], axis=1)
    np.testing.assert_allclose(banded_kernel(5, 3, 0.4).toarray(), cols, atol=1e-14)


def test_hand_checked_case_lp_optima() -> None:
    A = banded_kernel(2, 2, math.exp(-LN4))
    r1 = lp_profile(COUNTS, domain_size=10, max_count=2, epsilon=LN4, norm=1, B=2)
    np.testing.assert_allclose(r1, [0.28, 0, 0.72], atol=1e-6)
    assert np.abs(A @ r1 - F).sum() == pytest.approx(0.384615, abs=1e-6)
    ri = lp_profile(COUNTS, domain_size=10, max_count=2, epsilon=LN4, norm="inf", B=2)
    np.testing.assert_allclose(ri, [0.368421, 0, 0.631579], atol=1e-6)
    assert np.abs(A @ ri - F).max() == pytest.approx(0.097166, abs=1e-6)
    # Algorithms 2+3 are feasible for P2, so their objective is >= the optimum (0.458268,
    # 0.123624, computed by hand)
    k = get_kernel(2, 2, 0.25)
    for norm, ordn, opt, alg in (("1", 1, 0.384615, 0.458268), ("inf", np.inf, 0.097166,
                                                                  0.123624)):
        r = round_profile(fast_inversion(F, k, norm), B=2, max_count=2)
        obj = np.linalg.norm(A @ r - F, ordn)
        assert obj == pytest.approx(alg, abs=1e-6)
        assert obj >= opt


def test_qp_kkt_and_optimality(rng: np.random.Generator) -> None:
    for _ in range(5):
        n, B = int(rng.integers(1, 15)), int(rng.integers(2, 8))
        d = 1000
        counts = rng.multinomial(d - 10, rng.dirichlet(np.ones(n + 2 * B + 1) * 0.5))
        r = lp_profile(counts, domain_size=d, max_count=n, epsilon=1.0, norm=2, B=B)
        assert r.min() >= 0
        assert r.sum() == pytest.approx(1, abs=1e-9)
        A = banded_kernel(n, B, math.exp(-1.0)).toarray()
        f = counts / d
        obj = np.linalg.norm(A @ r - f)
        for _ in range(50):  # no random feasible point does better
            assert obj <= np.linalg.norm(A @ rng.dirichlet(np.ones(n + 1) * 0.3) - f) + 1e-12
        k = get_kernel(n, B, math.exp(-1.0))
        alg = round_profile(fast_inversion(f, k, "2"), B=B, max_count=n)
        assert obj <= np.linalg.norm(A @ alg - f) + 1e-9


def test_naive_profile() -> None:
    h = np.array([0, 2, 0, 2, 2, -1, 1, 2, 2, -2])
    np.testing.assert_allclose(naive_profile(h, max_count=2), [0.2, 0.1, 0.5], atol=1e-15)
    np.testing.assert_allclose(naive_profile(h, max_count=2, renormalize=True),
                               [0.25, 0.125, 0.625], atol=1e-15)
    # all counts 1, α = 0.25: E f~[1] = Pr[Z = 0] = (1−α)/(1+α), not 1
    assert pytest.approx(0.6) == (1 - 0.25) / (1 + 0.25)


def test_baseline_bad_input() -> None:
    with pytest.raises(DataError, match="naive_profile"):
        naive_profile(np.array([0.5]), max_count=2)
    with pytest.raises(DataError, match="non-empty"):
        naive_profile(np.array([], dtype=int), max_count=2)
    with pytest.raises(DataError, match="length n"):
        lp_profile(COUNTS, domain_size=10, max_count=3, epsilon=1.0, B=2)
    with pytest.raises(ParameterError, match="norm of lp_profile"):
        lp_profile(COUNTS, domain_size=10, max_count=2, epsilon=1.0, B=2, norm=3)
    with pytest.raises(ParameterError, match="epsilon of lp_profile"):
        lp_profile(COUNTS, domain_size=10, max_count=2, epsilon=0, B=2)
