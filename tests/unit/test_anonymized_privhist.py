"""PRIVHIST (Suresh 2019): worked examples, invariants and the public entry point.

Golden values come from worked examples computed independently of this code, or are derived
by hand in the comments; random parts are driven by injected noise (``FixedNoise``) so that every
expected value here is deterministic.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from dpfreq.anonymized import (
    AnonymizedHistogramRelease,
    auto,
    release_anonymized_histogram,
)
from dpfreq.anonymized import privhist as P
from dpfreq.anonymized import steps as S
from dpfreq.anonymized.api import METHODS
from dpfreq.anonymized.histogram_input import as_prevalences, total_of
from dpfreq.engines.base import Prevalences
from dpfreq.errors import DataError, ParameterError
from dpfreq.noise import discrete_laplace_mean_abs
from histogram_cases import histograms_up_to, move_up

H_E2 = {1: 2, 2: 1, 5: 1, 9: 1}  # worked example: counts 1,1,2,5,9; n = 18


class FixedNoise:
    """Injected noise: each call pops the next array and checks its size and ε."""

    def __init__(self, draws: list[tuple[float | None, list[int]]]) -> None:
        self.draws = list(draws)

    def geometric(self, epsilon: float, size: int) -> np.ndarray:
        eps, values = self.draws.pop(0)
        assert len(values) == size
        if eps is not None:
            assert epsilon == pytest.approx(eps)
        return np.asarray(values, dtype=np.int64)


class ZeroNoise:
    def geometric(self, epsilon: float, size: int) -> np.ndarray:
        return np.zeros(size, dtype=np.int64)


def arrays(h: dict[int, int]) -> tuple[np.ndarray, np.ndarray]:
    return as_prevalences(h)


def mapping(counts: np.ndarray, prev: np.ndarray) -> dict[int, int]:
    return {int(c): int(p) for c, p in zip(counts, prev, strict=True)}


def sorted_l1(h1: dict[int, int], h2: dict[int, int]) -> int:
    """Direct sort-and-sum sorted-ℓ1 (test helper; the library's is in distance.py)."""
    a = sorted((c for c, p in h1.items() for _ in range(p)), reverse=True)
    b = sorted((c for c, p in h2.items() for _ in range(p)), reverse=True)
    m = max(len(a), len(b))
    a += [0] * (m - len(a))
    b += [0] * (m - len(b))
    return sum(abs(x - y) for x, y in zip(a, b, strict=True))


def zipf_histogram(n: int, seed: int) -> dict[int, int]:
    gen = np.random.Generator(np.random.PCG64(seed))
    p = 1.0 / np.arange(1, n // 2 + 1)
    c = gen.multinomial(n, p / p.sum())
    u, k = np.unique(c[c > 0], return_counts=True)
    return dict(zip(u.tolist(), k.tolist(), strict=True))


# -- worked examples -------------------------------------------------------------------------


def test_e1_sorted_l1_helper() -> None:
    assert sorted_l1({3: 1, 8: 2}, {1: 1, 2: 1, 8: 1, 9: 1}) == 3


def test_e2_parameters_and_split() -> None:
    assert P.threshold_t(18, 3.0) == 5
    assert P.fake_count_m(18, 1.0) == 8
    c, p = arrays(H_E2)
    small, lc, lp = P.split_histogram(c, p, 5, 8, 2)
    # H^bs = {1:2, 2:1, 5:7}: cumulative r = 1..5
    assert small.tolist() == [10, 8, 7, 7, 7]
    assert mapping(lc, lp) == {6: 10, 9: 1}


def test_e3_split_negative_phi_t() -> None:
    c, p = arrays(H_E2)
    small, lc, lp = P.split_histogram(c, p, 5, 1, 4)
    assert small.tolist() == [1, 0, 0, 0, 0]  # H^bs = {1:1}
    assert mapping(lc, lp) == {6: 5, 9: 1}


def test_e4_split_negative_phi_t_plus_1() -> None:
    c, p = arrays(H_E2)
    small, lc, lp = P.split_histogram(c, p, 5, 1, -3)
    assert small.tolist() == [8, 6, 5, 5, 5]  # H^bs = {1:2, 2:1, 5:5}
    assert lc.size == 0
    assert lp.size == 0


def test_e5_full_low_privacy_run() -> None:
    c, p = arrays(H_E2)
    noise = FixedNoise([
        (1.0, [0]),  # Z^a
        (1.0, [2]),  # Z^b
        (1.0, [0, 1, -1, 0, 0, 2, 0, -1, 0, 0, -2]),  # Z^cℓ on [9, 6×10]
        (1.0, [1, -2, 0, 1, 0]),  # Z^cs
    ])
    out = P.privhist(c, p, epsilon=3.0, split=(1.0, 1.0, 1.0), noise=noise)
    assert noise.draws == []
    assert out.n_estimate == 18
    assert out.regime == "low-privacy"
    assert (out.params["T"], out.params["M"], out.params["K"]) == (5, 8, 11)
    assert mapping(out.counts, out.prevalences) == {1: 4, 8: 1, 9: 1}
    assert sorted_l1(H_E2, {1: 4, 8: 1, 9: 1}) == 5


def test_e5_low_privacy_steps() -> None:
    hcs = np.array([11, 6, 7, 8, 7])
    assert S.rounded_isotonic(hcs).tolist() == [11, 7, 7, 7, 7]
    large = (np.array([4, 5, 6, 7, 8, 9]), np.array([1, 2, 5, 1, 1, 1]))
    c, p = P.low_privacy(hcs, large, 5, 8)
    assert mapping(c, p) == {1: 4, 8: 1, 9: 1}


def test_e5_l4_removal_order() -> None:
    c, p = arrays({1: 4, 5: 10, 6: 5, 7: 1, 8: 1, 9: 1})
    c, p = P.remove_nearest(c, p, 6, 8, prefer_larger=True)
    assert mapping(c, p) == {1: 4, 5: 8, 8: 1, 9: 1}
    c, p = P.remove_nearest(c, p, 5, 8, prefer_larger=False)
    assert mapping(c, p) == {1: 4, 8: 1, 9: 1}


def test_l4_tie_rule_prefers_smaller_around_t() -> None:
    c, p = arrays({4: 1, 6: 1})
    assert mapping(*P.remove_nearest(c, p, 5, 1, prefer_larger=False)) == {6: 1}
    assert mapping(*P.remove_nearest(c, p, 5, 1, prefer_larger=True)) == {4: 1}
    assert mapping(*P.remove_nearest(c, p, 5, 5, prefer_larger=True)) == {}


@pytest.mark.parametrize("epsilon", [1.5, 3.0, 10.0])
@pytest.mark.parametrize("seed", [1, 2])
def test_e6_zero_noise_identity(epsilon: float, seed: int) -> None:
    h = zipf_histogram(10_000, seed)
    c, p = arrays(h)
    out = P.privhist(c, p, epsilon=epsilon, split=(epsilon / 3,) * 3, noise=ZeroNoise())
    assert mapping(out.counts, out.prevalences) == h
    assert out.n_estimate == 10_000


def test_zero_noise_identity_tuned_low_branch_at_small_epsilon() -> None:
    h = zipf_histogram(5_000, 3)
    c, p = arrays(h)
    for iso in (False, True):
        out = P.privhist(c, p, epsilon=0.5, split=auto.tuned_split(0.5), noise=ZeroNoise(),
                         low_privacy_branch=True, isotonic_large=iso)
        assert mapping(out.counts, out.prevalences) == h


def test_isotonic_large_fits_in_sorted_order() -> None:
    lc, lp = np.array([6, 9]), np.array([3, 1])  # sorted descending: [9, 6, 6, 6]
    noise = FixedNoise([(None, [-3, 1, 0, 0])])  # [6, 7, 6, 6]: (6, 7) pooled to 6.5 -> 7
    assert mapping(*P.noisy_large_counts(lc, lp, 1.0, noise, isotonic=True)) == {6: 2, 7: 2}
    noise = FixedNoise([(None, [-3, 1, 0, 0])])
    assert mapping(*P.noisy_large_counts(lc, lp, 1.0, noise)) == {6: 3, 7: 1}


def test_tuned_below_threshold_uses_high_privacy_branch() -> None:
    rel = release_anonymized_histogram({1: 50, 3: 10}, epsilon=0.005, method="privhist-tuned",
                                       rng=2, unit="event")
    assert rel.regime in ("high-privacy", "empty")
    assert rel.split == pytest.approx(auto.tuned_split(0.005))


def test_e7_pava() -> None:
    np.testing.assert_allclose(S.fit_non_increasing(np.array([5, 7, 6, 2, 3, 1])),
                               [6, 6, 6, 2.5, 2.5, 1])
    np.testing.assert_allclose(
        S.fit_non_increasing(np.array([3.0, 5, 1, 2]), np.array([1.0, 1, 9, 36])),
        [4, 4, 1.8, 1.8])
    # exact integer rounding of the same fits: ⌊x + 1/2⌋
    assert S.rounded_isotonic(np.array([5, 7, 6, 2, 3, 1])).tolist() == [6, 6, 6, 3, 3, 1]
    # weighted: data y_i = V_i / g_i with weights g_i²: V = [3, 5, 3, 12], g = [1, 1, 3, 6]
    assert S.rounded_isotonic(np.array([3, 5, 3, 12]), np.array([1, 1, 3, 6])).tolist() == \
        [4, 4, 2, 2]


def test_rounding_never_negative_and_half_up() -> None:
    assert S.rounded_isotonic(np.array([-5, -7, -1])).tolist() == [0, 0, 0]
    assert S.round_half_up(5, 2) == 3
    assert S.round_half_up(-1, 2) == 0


H_E8 = {1: 2, 2: 1, 4: 2, 7: 1, 10: 1}
S_E8 = np.array([1, 2, 3, 6, 12])


def test_e8_smoothing() -> None:
    c, p = arrays(H_E8)
    phi_v = P.smoothed_prevalences(c, p, S_E8)
    np.testing.assert_allclose(phi_v, [2, 1, 4 / 3, 11 / 6, 5 / 6])
    assert phi_v.sum() == pytest.approx(7)
    assert float(np.dot(phi_v, S_E8)) == pytest.approx(29)
    y, g = P.smoothed_scaled_cumulative(c, p, S_E8)
    assert g.tolist() == [1, 1, 1, 3, 6]
    np.testing.assert_allclose(y / g, [7, 5, 4, 8 / 3, 5 / 6])


def test_e8_noise_fit_and_rounding() -> None:
    c, p = arrays(H_E8)
    y, g = P.smoothed_scaled_cumulative(c, p, S_E8)
    w = y / g + np.array([0.4, -0.7, 0.9, 0.2, -0.3])
    x = S.fit_non_increasing(w, (g * g).astype(float))
    np.testing.assert_allclose(x, [7.4, 4.6, 4.6, 2.8 + 1 / 15, 0.5 + 1 / 30], atol=1e-9)
    rounded = np.floor(np.maximum(x, 0) + 0.5).astype(np.int64)
    assert rounded.tolist() == [7, 5, 5, 3, 1]
    assert mapping(*S.cumulative_to_prevalences(S_E8, rounded)) == {1: 2, 3: 2, 6: 2, 12: 1}


def test_e8_one_step_changes_one_coordinate_by_gap_inverse() -> None:
    c, p = arrays(H_E8)
    c2, p2 = arrays({1: 2, 2: 1, 4: 1, 5: 1, 7: 1, 10: 1})  # one element 4 -> 5
    y1, _g = P.smoothed_scaled_cumulative(c, p, S_E8)
    y2, _ = P.smoothed_scaled_cumulative(c2, p2, S_E8)
    assert (y2 - y1).tolist() == [0, 0, 0, 1, 0]  # φ^v_{6+} moves by exactly 1/3


def test_high_privacy_post_processing_on_integers() -> None:
    # noisy scaled cumulative V = g·w with integer noise: same H5/H6 path as the release
    v = np.array([7, 5, 6, 9, 5])  # w = [7, 5, 6, 3, 5/6]: (5, 6) pooled to 5.5, rounds to 6
    c, p = P.high_privacy(v, S_E8)
    assert mapping(c, p) == {1: 1, 3: 3, 6: 2, 12: 1}  # cumulative [7, 6, 6, 3, 1]


def test_e9_h2_parameters() -> None:
    n_est, eps, eps3 = 10_000, 0.3, 0.1
    t = P.threshold_t(n_est, eps)
    assert t == 55
    assert P.fake_count_m(n_est, 0.1) == 187
    assert P.grid_q(n_est, eps3) == pytest.approx(0.047985, abs=5e-7)
    assert P.t_prime(n_est, eps3, "A") == 3163
    assert P.t_prime(n_est, eps3, "B") == 31623
    s = P.boundaries(n_est, t, eps3, np.zeros(0, np.int64), "A")
    assert s[:t].tolist() == list(range(1, t + 1))
    assert s[-1] == 2 * n_est
    grid = s[(s >= t) & (s < 2 * n_est)]
    assert grid.size == 87
    assert grid[:8].tolist() == [55, 57, 60, 63, 66, 69, 72, 76]
    assert grid[-3:].tolist() == [2819, 2954, 3096]
    assert P.geometric_grid(n_est, t, eps3, "A").tolist() == grid.tolist()
    grid_b = P.geometric_grid(n_est, t, eps3, "B")
    assert grid_b.size == 136
    assert grid_b[-1] <= 31623
    s_b = P.boundaries(n_est, t, eps3, np.zeros(0, np.int64), "B")
    assert s_b[-1] == 2 * n_est
    assert s_b[-2] < 2 * n_est


def test_boundaries_include_large_noisy_counts_and_drop_above_2n() -> None:
    s = P.boundaries(100, 5, 0.5, np.array([3, 500, 150, 250]), "A")
    assert 150 in s
    assert 200 in s
    assert 250 not in s
    assert 500 not in s
    assert s[-1] == 200
    assert np.all(np.diff(s) > 0)


def test_e10_plug_in_on_e5_output() -> None:
    from dpfreq.anonymized.properties import estimate_entropy

    rel = _release_from_outcome({1: 4, 8: 1, 9: 1}, 18)
    # the exact value is 1.3492918... (a 6-digit rounding would print 1.349292)
    assert estimate_entropy(rel).value == pytest.approx(1.349293, abs=1.5e-6)
    assert estimate_entropy(H_E2).value == pytest.approx(1.267677, abs=1e-6)


def _release_from_outcome(h: dict[int, int], n_est: int) -> AnonymizedHistogramRelease:
    from dpfreq.release import ErrorStatement

    c, p = arrays(h)
    return AnonymizedHistogramRelease(
        value={"counts": c, "prevalences": p, "n_estimate": n_est}, epsilon=3.0,
        unit="event", mechanism="privhist", seeded=True,
        error=ErrorStatement(kind="bound", confidence=0.95, value=0.0, description=""),
        total_interval=(n_est, n_est), items_at_least_band=0.0,
        items_at_least_confidence=0.95, split=(1.0, 1.0, 1.0),
        regime="low-privacy",
        method="privhist")


# -- split sensitivity by brute force ---------------------------------------------------------


def split_of(h: dict[int, int], t: int, m: int, zb: int) -> tuple[list[int], list[int]]:
    c, p = arrays(h) if h else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    small, lc, lp = P.split_histogram(c, p, t, m, zb)
    return small.tolist(), sorted(np.repeat(lc, lp).tolist(), reverse=True)


def test_split_sensitivity_brute_force() -> None:
    checked = {"small": 0, "large": 0, "boundary": 0}
    for h in histograms_up_to(7):
        for r in [0, *h]:
            h2 = move_up(h, r)
            for t, m in itertools.product((1, 2, 3, 4), (0, 1, 2, 3)):
                for zb in range(-m - 4, m + 5):
                    s1, l1 = split_of(h, t, m, zb)
                    s2, l2 = split_of(h2, t, m, zb)
                    if r + 1 <= t:
                        assert l1 == l2
                        assert sum(abs(a - b) for a, b in zip(s1, s2, strict=True)) <= 1
                        checked["small"] += 1
                    elif r >= t + 1:
                        assert s1 == s2
                        assert len(l1) == len(l2)
                        assert sum(abs(a - b) for a, b in zip(l1, l2, strict=True)) <= 1
                        checked["large"] += 1
                    else:  # r == T: exact coupling with Z^b + 1
                        assert (s2, l2) == split_of(h, t, m, zb + 1)
                        checked["boundary"] += 1
    assert min(checked.values()) > 500


# -- smoothing invariants ------------------------------------------------------------------------


def test_smoothing_invariants_random() -> None:
    gen = np.random.Generator(np.random.PCG64(7))
    for _ in range(300):
        top = int(gen.integers(2, 60))
        s = np.unique(np.concatenate((gen.integers(1, top, size=int(gen.integers(1, 8))),
                                      [1, top])))
        c = np.unique(gen.integers(1, top + 1, size=int(gen.integers(1, 10))))
        p = gen.integers(1, 5, size=c.size)
        phi_v = P.smoothed_prevalences(c, p, s)
        assert phi_v.sum() == pytest.approx(float(p.sum()))  # elements preserved
        assert float(np.dot(phi_v, s)) == pytest.approx(float(np.dot(c, p)))  # mass preserved
        assert np.all(phi_v >= -1e-12)
        # one-step moves: exactly one scaled coordinate changes, by exactly 1
        y, _ = P.smoothed_scaled_cumulative(c, p, s)
        h = mapping(c, p)
        for r in [0, *h]:
            if r + 1 > top:
                continue
            y2, _ = P.smoothed_scaled_cumulative(*arrays(move_up(h, r)), s)
            diff = y2 - y
            assert np.count_nonzero(diff) == 1
            assert int(diff.sum()) == 1


def test_cap_counts_at_2n() -> None:
    c, p = arrays({1: 3, 5: 1, 40: 2, 90: 1})
    assert mapping(*P.cap_counts(c, p, 40)) == {1: 3, 5: 1, 40: 3}


def test_smoothing_refuses_counts_beyond_last_boundary() -> None:
    with pytest.raises(DataError, match="last boundary") as info:
        P.smoothed_scaled_cumulative(np.array([1234]), np.array([1]), S_E8)
    assert "1234" not in str(info.value)  # the private count is not quoted


# -- N and E|N - n| ----------------------------------------------------------------------------


def test_expected_abs_n_error_exact() -> None:
    # E|Z| = 2α/(1-α²) = 2.945 for ε1 = 1/3; direct sum of the pmf agrees
    assert discrete_laplace_mean_abs(1 / 3) == pytest.approx(2.945, abs=5e-4)
    alpha = math.exp(-1 / 3)
    z = np.arange(-400, 401)
    pmf = (1 - alpha) / (1 + alpha) * alpha ** np.abs(z)
    n = 1000  # far from 0: the clamp max(n + Z, 0) has no effect within the summed range
    direct = float(np.sum(pmf * np.abs(np.maximum(n + z, 0) - n)))
    assert direct == pytest.approx(discrete_laplace_mean_abs(1 / 3), rel=1e-12)


def test_n_step_clamps_at_zero_and_returns_empty() -> None:
    c, p = arrays({1: 2})
    out = P.privhist(c, p, epsilon=2.0, split=(1.0, 1.0, 0.0),
                     noise=FixedNoise([(1.0, [-5])]))
    assert out.n_estimate == 0
    assert out.regime == "empty"
    assert out.counts.size == 0


def test_t_and_m_small_n() -> None:
    assert P.threshold_t(1, 0.5) == 1
    assert P.threshold_t(1, 3.0) == 1
    assert P.fake_count_m(1, 1.0) == 2
    assert P.threshold_t(10**12, 4.0) == 10**6
    assert P.threshold_t(10**12 + 1, 4.0) == 10**6 + 1


def test_noisy_large_counts_chunks_keep_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(P, "CHUNK", 3)
    drawn: list[int] = []

    class Counting:
        def geometric(self, epsilon: float, size: int) -> np.ndarray:
            drawn.append(size)
            return np.arange(size, dtype=np.int64) * 0

    c, p = P.noisy_large_counts(np.array([6, 9]), np.array([5, 2]), 1.0, Counting())
    assert drawn == [3, 3, 1]
    assert mapping(c, p) == {6: 5, 9: 2}


# -- the public entry point ---------------------------------------------------------------------


def test_release_fields_and_reproducibility() -> None:
    h = zipf_histogram(2_000, 5)
    a = release_anonymized_histogram(h, epsilon=2.0, method="privhist", rng=11, unit="event")
    b = release_anonymized_histogram(h, epsilon=2.0, method="privhist", rng=11, unit="event")
    c = release_anonymized_histogram(h, epsilon=2.0, method="privhist", rng=12, unit="event")
    assert isinstance(a, AnonymizedHistogramRelease)
    assert a.to_dict() == b.to_dict()
    assert a.to_dict() != c.to_dict()
    assert a.seeded
    assert a.delta == 0.0
    assert a.epsilon == 2.0
    assert a.method == "privhist"
    assert a.mechanism == "privhist"
    assert a.regime == "low-privacy"
    assert a.split == pytest.approx((2 / 3, 2 / 3, 2 / 3))
    assert a.counts.dtype == np.int64
    assert a.prevalences.dtype == np.int64
    assert np.all(np.diff(a.counts) > 0)
    assert np.all(a.counts >= 1)
    assert np.all(a.prevalences >= 1)
    assert a.value["n_estimate"] == a.n_estimate
    fractions = a.mechanism_params["epsilon_fractions"]
    assert all(Fraction(2 / 3) - Fraction(1, 2**32) <= f <= Fraction(2 / 3) for f in fractions)
    assert a.error.kind == "bound"
    assert a.error.confidence == 0.95
    assert a.error.value > 0
    assert a.unit == "event"
    lo, hi = a.total_interval
    assert lo <= a.n_estimate <= hi
    table = a.table()
    assert list(table["count"]) == list(a.counts[::-1])
    assert int(table["rank_last"][-1]) == a.n_items
    expanded = a.to_counts()
    assert expanded.size == a.n_items
    assert np.all(np.diff(expanded) <= 0)
    assert a.total == int(expanded.sum())
    assert a.to_mapping() == mapping(a.counts, a.prevalences)
    assert '"type": "AnonymizedHistogramRelease"' in a.to_json()


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("epsilon", [0.1, 0.5, 1.0, 4.0])
def test_every_method_and_regime(method: str, epsilon: float) -> None:
    h = zipf_histogram(3_000, 9)
    rel = release_anonymized_histogram(h, epsilon=epsilon, method=method, rng=3, unit="event")
    assert sum(rel.split) <= epsilon * (1 + 1e-12)
    expected_method = "privhist-tuned" if method == "auto" else method
    assert rel.method == expected_method
    assert rel.mechanism_params["requested_method"] == method
    if method == "hay":
        assert rel.regime == "sorted-counts"
    elif method == "privhist":
        assert rel.regime == ("low-privacy" if epsilon > 1 else "high-privacy")
    else:
        assert rel.regime == "low-privacy"
        assert rel.mechanism_params["isotonic_large"] is True
    assert np.all(rel.counts >= 1)
    assert np.all(rel.prevalences >= 1)


def test_auto_depends_on_epsilon_only() -> None:
    for eps in (0.001, 0.005, 0.01, 0.05, 0.1, 0.15, 0.3, 1.0, 2.0, 8.0):
        plan = auto.choose(eps)
        assert plan.method == "privhist-tuned"
        assert sum(plan.split) == pytest.approx(eps)
        assert plan.low_privacy_branch == (eps >= auto.HIGH_PRIVACY_BELOW)
        if not plan.low_privacy_branch:
            assert plan.split[2] > 0
    a = release_anonymized_histogram({1: 5}, epsilon=0.5, rng=1, unit="event")
    b = release_anonymized_histogram(zipf_histogram(4_000, 1), epsilon=0.5, rng=1, unit="event")
    assert a.split == b.split
    assert a.method == b.method


def test_custom_split_recorded() -> None:
    rel = release_anonymized_histogram(H_E2, epsilon=2.0, method="privhist",
                                       split=(0.1, 1.9, 0.0), rng=0, unit="event")
    assert rel.split == (0.1, 1.9, 0.0)
    rel = release_anonymized_histogram(H_E2, epsilon=0.5, method="privhist",
                                       split=[0.1, 0.1, 0.3], rng=0, unit="event")
    assert rel.regime == "high-privacy"


def test_empty_histogram_is_a_valid_release() -> None:
    for empty, method in itertools.product(({}, [], np.zeros(0, np.int64)), METHODS):
        for seed in range(5):
            rel = release_anonymized_histogram(empty, epsilon=1.0, method=method, rng=seed,
                                               unit="event")
            assert rel.counts.size == rel.prevalences.size
            assert np.all(rel.prevalences >= 1)
            assert np.all(rel.counts >= 1)
            assert rel.n_estimate >= 0
            if rel.n_estimate == 0:
                assert rel.regime == "empty"
                assert rel.n_items == 0


def test_input_forms_agree() -> None:
    h = {1: 3, 2: 2, 7: 1}
    per_label = [1, 7, 2, 1, 2, 1]
    prev = Prevalences(counts=np.array([1, 2, 7]), prevalences=np.array([3, 2, 1]))
    got = [release_anonymized_histogram(x, epsilon=3.0, method="privhist", rng=4,
                                        unit="event").to_dict()
           for x in (h, per_label, prev, np.array(per_label, dtype=np.float64))]
    assert all(g == got[0] for g in got)


def test_data_source_through_engines(tmp_path) -> None:
    labels = ["a"] * 5 + ["b"] * 5 + ["c"] * 2 + ["d"]
    ref = release_anonymized_histogram({5: 2, 2: 1, 1: 1}, epsilon=3.0, method="privhist",
                                       rng=8, unit="event")
    mem = release_anonymized_histogram({"pw": np.array(labels)}, item="pw", epsilon=3.0,
                                       method="privhist", engine="memory", rng=8, unit="event")
    csv = tmp_path / "pw.csv"
    csv.write_text("pw\n" + "\n".join(labels) + "\n", encoding="utf-8")
    duck = release_anonymized_histogram(str(csv), item="pw", epsilon=3.0, method="privhist",
                                        rng=8, unit="event")
    assert mem.mechanism_params["engine"] == "memory"
    assert duck.mechanism_params["engine"] == "duckdb"
    for rel in (mem, duck):
        assert rel.to_mapping() == ref.to_mapping()
        assert rel.n_estimate == ref.n_estimate


def test_plot_draws(tmp_path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rel = release_anonymized_histogram(zipf_histogram(2_000, 2), epsilon=2.0, rng=1, unit="event")
    ax = rel.plot()
    assert ax.get_xscale() == "log"
    assert ax.get_yscale() == "log"
    plt.close(ax.figure)
    ax = release_anonymized_histogram({}, epsilon=2.0, rng=1, unit="event").plot()
    plt.close(ax.figure)


def test_prevalence_input_runs_without_expansion() -> None:
    h = {1: 10**9, 2: 10**9, 1000: 10**6, 10**5: 10**4, 3 * 10**5: 3000}
    for eps in (4.0, 0.5):
        rel = release_anonymized_histogram(h, epsilon=eps, method="privhist", rng=0, unit="event")
        assert abs(rel.n_estimate - total_of(*arrays(h))) < 1000
        assert rel.counts.size < 10**6


# -- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [
    {0: 1}, {-2: 1}, {1: 0}, {1: -1}, {1.5: 2}, {2: 0.5}, [0, 1], [-1], [1, 2.5],
    [float("nan")], [[1, 2]], None, {1: float("nan")},
])
def test_bad_histograms(bad) -> None:
    with pytest.raises(DataError, match="release_anonymized_histogram"):
        release_anonymized_histogram(bad, epsilon=1.0, rng=0, unit="event")


def test_repeated_counts_refused() -> None:
    bad = Prevalences(counts=np.array([1, 1]), prevalences=np.array([1, 2]))
    with pytest.raises(DataError, match="listed twice"):
        release_anonymized_histogram(bad, epsilon=1.0, rng=0, unit="event")


@pytest.mark.parametrize("eps", [0, -1, float("nan"), float("inf"), "1", None, True])
def test_bad_epsilon(eps) -> None:
    with pytest.raises(ParameterError, match="epsilon of release_anonymized_histogram"):
        release_anonymized_histogram({1: 1}, epsilon=eps, rng=0, unit="event")


def test_epsilon_has_no_default() -> None:
    with pytest.raises(TypeError):
        release_anonymized_histogram({1: 1}, unit="event")  # type: ignore[call-arg]


@pytest.mark.parametrize("method", ["PrivHist", "laplace", "", None])
def test_unknown_method(method) -> None:
    with pytest.raises(ParameterError, match="method of release_anonymized_histogram"):
        release_anonymized_histogram({1: 1}, epsilon=1.0, method=method, rng=0, unit="event")


@pytest.mark.parametrize(("method", "eps", "split"), [
    ("privhist", 1.0, (0.5, 0.5, 0.5)),  # sum > ε
    ("privhist", 1.0, (0.5, 0.5, 0.0)),  # high-privacy branch needs ε3 > 0
    ("privhist", 2.0, (0.0, 1.0, 1.0)),  # ε1 = 0
    ("privhist", 2.0, (1.0, 1.0)),  # wrong length
    ("privhist", 2.0, "abc"),
    ("privhist", 2.0, (1.0, float("nan"), 0.0)),
    ("hay", 2.0, (1.0, 0.5, 0.5)),  # Hay has no ε3
    ("auto", 2.0, (1.0, 1.0, 0.0)),  # auto picks its own split
])
def test_bad_split(method, eps, split) -> None:
    with pytest.raises(ParameterError, match="split of release_anonymized_histogram"):
        release_anonymized_histogram({1: 1}, epsilon=eps, method=method, split=split, rng=0,
                                     unit="event")


def test_item_rules() -> None:
    with pytest.raises(ParameterError, match="item of release_anonymized_histogram"):
        release_anonymized_histogram("data.csv", epsilon=1.0, rng=0, unit="event")
    with pytest.raises(ParameterError, match="item of release_anonymized_histogram"):
        release_anonymized_histogram({1: 1}, epsilon=1.0, engine="memory", rng=0, unit="event")
    with pytest.raises(ParameterError, match="item of release_anonymized_histogram"):
        release_anonymized_histogram({"x": [1]}, item="", epsilon=1.0, rng=0, unit="event")
    with pytest.raises(ParameterError, match="rng of release_anonymized_histogram"):
        release_anonymized_histogram({1: 1}, epsilon=1.0, rng=-1, unit="event")


def test_package_all_names_exist_and_star_import_works() -> None:
    import dpfreq.anonymized as package

    assert all(hasattr(package, name) for name in package.__all__)
    namespace: dict[str, object] = {}
    exec("from dpfreq.anonymized import *", namespace)
    assert set(package.__all__) <= set(namespace)


def test_huge_epsilon_returns_the_histogram_exactly() -> None:
    # with ε = 200 every geometric draw is 0 except with probability < 1e-25
    h = zipf_histogram(3_000, 4)
    for method in ("privhist", "privhist-tuned", "hay"):
        rel = release_anonymized_histogram(h, epsilon=200.0, method=method, rng=0, unit="event")
        assert rel.to_mapping() == h
        assert rel.n_estimate == 3_000


def test_high_privacy_run_uses_each_budget_part_once() -> None:
    # h = {1:3, 2:1}, n = 5, ε = 0.9 split (0.2, 0.3, 0.4): T = ⌈sqrt(4.5)⌉ = 3,
    # M = ⌈2(ln 5 + 0.3)/0.3⌉ = 13 fake counts at T+1 = 4 (K = 13); q = sqrt(ln 2.5 / 2) =
    # 0.6769, T' = ⌈10·sqrt(5/0.4)⌉ = 36, grid ⌊3·1.6769^i⌋ = 3, 5, 8, 14, 23, cut at 2N = 10:
    # S = [1, 2, 3, 5, 8, 10].
    c, p = arrays({1: 3, 2: 1})
    noise = FixedNoise([(0.2, [0]), (0.3, [0]), (0.3, [0] * 13), (0.4, [0] * 6)])
    out = P.privhist(c, p, epsilon=0.9, split=(0.2, 0.3, 0.4), noise=noise)
    assert noise.draws == []
    assert out.regime == "high-privacy"
    assert (out.params["T"], out.params["M"], out.params["K"]) == (3, 13, 13)
    assert out.params["boundaries"] == 6
    assert P.boundaries(5, 3, 0.4, np.zeros(0, np.int64)).tolist() == [1, 2, 3, 5, 8, 10]
    # counts 1 and 2 are boundaries, so zero noise returns h exactly
    assert mapping(out.counts, out.prevalences) == {1: 3, 2: 1}
