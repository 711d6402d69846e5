"""Exact checks of the cross-party mechanism and estimators (no sampling, no tolerance games).

* the sensitivity of a party's registers per unit of privacy (one user with all their
  impressions), enumerated through the real register computation;
* the privacy ratio of one register's output, computed from the exact laws, at the calibration
  boundary;
* unbiasedness in exact expectation: the emptiness estimator by enumerating every flip pattern,
  the inverse noise filter and its covariance estimator against the exact law of a sum of
  discrete Laplace variables;
* the compound Poisson inversion and its derivative.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dpfreq.crossparty import CrossPartyParams, key_fingerprint
from dpfreq.crossparty.frequency import class_estimates, compound_inverse, inverse_filter
from dpfreq.crossparty.local_noise import calibrate
from dpfreq.crossparty.reach import empty_estimate, flip_moments, users_from_empty
from dpfreq.crossparty.registers import LogSpec, register_frequencies
from dpfreq.crossparty.vid import vid_hash
from dpfreq.noise import discrete_laplace_pmf

KEY = bytes(range(32))
K = 3


def make_params(**changes: object) -> CrossPartyParams:
    fields = {"measurement": "m", "registers": 16, "sampling_start": 0, "sampling_width": 1,
              "max_frequency": K, "epsilon_reach": math.log(3), "epsilon_frequency": 0.9,
              "hash": "sha256-prefix/v1", "key_id": key_fingerprint(KEY)}
    return CrossPartyParams(**{**fields, **changes})  # type: ignore[arg-type]


def registers(users: list[int]) -> np.ndarray:
    return register_frequencies({"user": np.array(users, dtype=np.int64)},
                                spec=LogSpec(user="user"), params=make_params(),
                                key=KEY).values


def test_sensitivity_per_user_is_one_register_by_at_most_k() -> None:
    """Add one user with c = 1..2K impressions to logs where their register is empty, holds
    one impression, or is full: the registers differ in one place, the bit by at most 1 and
    the capped frequency by at most K — and both bounds are reached (they are exact)."""
    vh = vid_hash(KEY, make_params())
    _, regs = vh.locate(range(200))
    newcomer = 199
    mates = [u for u in range(199) if regs[u] == regs[newcomer]]
    assert len(mates) >= 2  # 200 users in 16 registers: the newcomer's register is shared
    bases = {"empty": [u for u in range(60) if regs[u] != regs[newcomer]],
             "one": [mates[0]], "full": [mates[0]] * K + [mates[1]]}
    worst_bit, worst_freq = 0, 0
    for base in bases.values():
        before = registers(base)
        for c in range(1, 2 * K + 1):
            after = registers(base + [newcomer] * c)
            diff = np.flatnonzero(after != before)
            assert diff.size <= 1
            assert set(diff) <= {int(regs[newcomer])}
            worst_bit = max(worst_bit, int(np.abs((after > 0).astype(int)
                                                  - (before > 0).astype(int)).sum()))
            worst_freq = max(worst_freq, int(np.abs(after - before).sum()))
    assert (worst_bit, worst_freq) == (1, K)


def _register_law(f: int, noise: object, window: np.ndarray) -> np.ndarray:
    """Exact law of one register's output (bit, value) given its capped frequency ``f``."""
    q = noise.keep_probability  # type: ignore[attr-defined]
    bit = np.array([1 - q, q]) if f > 0 else np.array([q, 1 - q])
    z = discrete_laplace_pmf(window - f, noise.frequency_gamma)  # type: ignore[attr-defined]
    return bit[:, None] * z[None, :]


def test_privacy_ratio_of_one_register_is_exactly_the_calibration() -> None:
    """Worst ratio over neighbouring register values (|f − f'| <= K, computed from the exact
    pmfs) is e^{γ_r + K γ_f} <= e^ε, and more than e^{ε − 1e-6}: tight at the boundary."""
    params = make_params()
    noise = calibrate(params)
    window = np.arange(-40, 40 + K)
    worst = 0.0
    for f, g in itertools.product(range(K + 1), repeat=2):
        ratio = _register_law(f, noise, window) / _register_law(g, noise, window)
        worst = max(worst, float(ratio.max()))
    exact = math.exp(float(noise.reach_gamma) + K * float(noise.frequency_gamma))
    assert worst == pytest.approx(exact, rel=1e-9)
    assert worst <= math.exp(params.epsilon) * (1 + 1e-12)
    assert worst > math.exp(params.epsilon - 1e-6)


def _outcomes(bits: tuple[int, ...], q: float) -> list[tuple[float, int]]:
    """(probability, number of observed ones) of every flip pattern of ``bits``."""
    out = []
    for observed in itertools.product((0, 1), repeat=len(bits)):
        prob = math.prod(q if o == b else 1 - q for o, b in zip(observed, bits, strict=True))
        out.append((prob, sum(observed)))
    return out


@pytest.mark.parametrize("q", [0.75, 0.6, 0.95])
@pytest.mark.parametrize("parties", [1, 2, 3])
def test_emptiness_estimator_is_unbiased_with_the_stated_variance(q: float,
                                                                  parties: int) -> None:
    m = flip_moments(q)
    for bits in itertools.product((0, 1), repeat=parties):
        mean = second = 0.0
        for prob, ones in _outcomes(bits, q):
            value = m.a0 ** (parties - ones) * m.a1**ones
            mean += prob * value
            second += prob * value**2
        truth = float(not any(bits))
        assert mean == pytest.approx(truth, abs=1e-12)
        var = second - mean**2
        if truth:
            assert var == pytest.approx(m.second**parties - 1, rel=1e-12)
        else:
            assert var <= m.second ** (parties - 1) * (m.second - 1) * (1 + 1e-12)
    # the estimator on a histogram is the sum of the registers' values
    hist = np.array([3, 2, 1, 4][: parties + 1])
    est, _ = empty_estimate(hist, parties, q)
    j = np.arange(hist.size)
    assert est == pytest.approx(float((hist * m.a0 ** (parties - j) * m.a1**j).sum()))


def _noise_law(alpha: float, parties: int, half: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact pmf of a sum of ``parties`` DLap(α) on ``-half..half`` (tails below 1e-17)."""
    gamma = -math.log(alpha)
    z = np.arange(-half, half + 1)
    one = discrete_laplace_pmf(z, gamma)
    pmf = np.array([1.0])
    for _ in range(parties):
        pmf = np.convolve(pmf, one)
    support = np.arange(-parties * half, parties * half + 1)
    return support, pmf


@pytest.mark.parametrize(("alpha", "parties"), [(0.3, 1), (0.5, 2), (0.4, 3)])
def test_inverse_filter_and_its_covariance_are_unbiased(alpha: float, parties: int) -> None:
    h = inverse_filter(alpha, parties)
    support, pmf = _noise_law(alpha, parties, 60)
    P = parties

    def phi(t: int, w: np.ndarray) -> np.ndarray:
        j = w - t
        inside = np.abs(j) <= P
        return np.where(inside, h[np.clip(j + P, 0, 2 * P)], 0.0)

    for s in range(K + 3):
        w = s + support
        for t in range(K):
            assert float((pmf * phi(t, w)).sum()) == pytest.approx(float(s == t), abs=1e-10)
            for u in range(K):
                exact_cov = float((pmf * phi(t, w) * phi(u, w)).sum()) - (s == t) * (s == u)
                # the estimator of the covariance, in exact expectation
                hv = np.array([h[v - t + P] * h[v - u + P] if abs(v - t) <= P and abs(v - u) <= P
                               else 0.0 for v in w])
                estimated = float((pmf * hv).sum()) - (s == t) * (t == u)
                assert estimated == pytest.approx(exact_cov, abs=1e-8)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int64])
def test_class_estimates_without_noise_are_the_histogram(dtype: type) -> None:
    """Also for the narrow integer types sketch files hold, whatever the cap."""
    sums = np.array([0, 0, 0, 1, 2, 2, 7, -1], dtype=dtype)
    C, cov = class_estimates(sums, parties=1, max_frequency=K, alpha=1e-15)
    assert C.tolist() == pytest.approx([3.0, 1.0, 2.0])
    assert np.abs(cov).max() < 1e-9
    wide, _ = class_estimates(sums, parties=2, max_frequency=300, alpha=1e-15)
    assert wide[:3].tolist() == pytest.approx([3.0, 1.0, 2.0])


def _panjer(g: np.ndarray, lam: float, size: int) -> np.ndarray:
    """Compound Poisson pmf p_0..p_{size-1} for a frequency law g (g[0] for frequency 1)."""
    p = np.zeros(size)
    p[0] = math.exp(-lam)
    for t in range(1, size):
        j = np.arange(1, t + 1)
        gj = np.where(j <= g.size, g[np.minimum(j, g.size) - 1], 0.0)
        p[t] = lam / t * float((j * gj * p[t - j]).sum())
    return p


@pytest.mark.parametrize("lam", [0.05, 0.7, 2.5])
def test_compound_inverse_round_trips_and_its_derivative(lam: float) -> None:
    g = np.array([0.5, 0.2, 0.15, 0.1, 0.05])
    p = _panjer(g, lam, 5)  # classes 0..4: frequencies 1..4 recovered
    est, grad = compound_inverse(p)
    assert est == pytest.approx(g[:4], rel=1e-10)
    step = 1e-7
    for i in range(p.size):
        moved = p.copy()
        moved[i] += step
        numeric = (compound_inverse(moved)[0] - est) / step
        assert numeric == pytest.approx(grad[:, i], rel=1e-4, abs=1e-4)
    assert np.isnan(compound_inverse(np.array([0.0, 0.1]))[0]).all()


def test_linear_counting_round_trip() -> None:
    for R, n in [(10, 3), (1000, 250), (2**20, 3_000_000)]:
        assert users_from_empty(R * (1 - 1 / R) ** n, R) == pytest.approx(n, rel=1e-9)
    assert users_from_empty(0.0, 100) == math.inf
    assert users_from_empty(100.0, 100) == 0.0
