"""The sketch intervals' construction from simulated errors: order statistics, bias-aware hull,
vacuous bands, and the EM cap of the simulated draws."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

from dpfreq.order_stats import order_quantile
from dpfreq.profile import ProfileSketch
from dpfreq.profile.intervals import band_constant, bootstrap_intervals
from dpfreq.profile.solve import DRAW_EM_ITERATIONS, EM_ITERATIONS


@pytest.mark.parametrize(("level", "index"), [(0.9, 181), (0.95, 191), (0.5, 101),
                                              (0.999, 200)])
def test_order_quantile_is_the_finite_sample_order_statistic(level: float, index: int) -> None:
    values = np.arange(1.0, 201.0)[::-1].copy()  # 200 draws, unsorted
    assert order_quantile(values, level) == index  # the ⌈201·level⌉-th smallest, capped at 200
    cols = np.stack([values, 2 * values], axis=1)
    np.testing.assert_array_equal(order_quantile(cols, level, axis=0), [index, 2 * index])


def test_intervals_contain_the_estimate_and_the_bias_corrected_estimate(seed: int) -> None:
    gen = np.random.default_rng(seed)
    r_hat = np.array([0.5, 0.3, 0.2])
    bias = np.array([0.02, -0.01, -0.01])
    errors = bias + gen.normal(0.0, 0.001, size=(200, 3))
    iv = bootstrap_intervals(r_hat, errors, domain_size=10_000, confidence=0.9)
    corrected = r_hat - errors.mean(axis=0)
    for point in (r_hat, corrected):
        assert np.all(iv.lower <= point)
        assert np.all(point <= iv.upper)
        assert np.all(iv.band_lower <= point)
        assert np.all(point <= iv.band_upper)
    assert np.all(iv.band_lower <= iv.lower)
    assert np.all(iv.upper <= iv.band_upper)
    assert iv.band_l1 < 0.2


def test_corrected_band_is_centred_on_the_bias_corrected_estimate(seed: int) -> None:
    # a simulation started away from r̂ (EM's smooth profile): the band is r̂ − b ± c·s, not
    # the hull widened; the per-class intervals keep the hull
    gen = np.random.default_rng(seed)
    r_hat = np.array([0.5, 0.3, 0.2])
    errors = np.array([0.02, -0.01, -0.01]) + gen.normal(0.0, 0.001, size=(200, 3))
    hull = bootstrap_intervals(r_hat, errors, domain_size=10_000, confidence=0.9)
    centred = bootstrap_intervals(r_hat, errors, domain_size=10_000, confidence=0.9,
                                  corrected_band=True)
    corrected = r_hat - errors.mean(axis=0)
    np.testing.assert_allclose((centred.band_lower + centred.band_upper) / 2, corrected,
                               rtol=0, atol=1e-15)
    np.testing.assert_allclose(centred.band_upper - centred.band_lower,
                               (hull.band_upper - hull.band_lower) - np.abs(r_hat - corrected),
                               rtol=0, atol=1e-15)
    np.testing.assert_array_equal(centred.lower, hull.lower)
    np.testing.assert_array_equal(centred.upper, hull.upper)


def test_unseen_class_gets_the_pooled_width(seed: int) -> None:
    gen = np.random.default_rng(seed)
    r_hat = np.array([0.6, 0.4, 0.0])
    errors = gen.normal(0.0, 0.01, size=(200, 3))
    errors[:, 2] = 0.0  # a class estimated at 0 has no items in any simulated data set
    iv = bootstrap_intervals(r_hat, errors, domain_size=10_000, confidence=0.9)
    assert iv.upper[2] >= 0.5 * min(iv.upper[0] - r_hat[0], iv.upper[1] - r_hat[1])
    # a simulation that had items in that class (a centre other than r̂) keeps its own spread
    own = bootstrap_intervals(r_hat, errors, domain_size=10_000, confidence=0.9,
                              seen=np.ones(3, dtype=bool))
    assert own.upper[2] == 0.0
    np.testing.assert_array_equal(own.upper[:2], iv.upper[:2])


def test_vacuous_band_makes_every_interval_trivial(seed: int) -> None:
    gen = np.random.default_rng(seed)
    r_hat = np.full(4, 0.25)
    errors = gen.normal(0.0, 0.3, size=(200, 4))
    iv = bootstrap_intervals(r_hat, errors, domain_size=100, confidence=0.9)
    assert iv.band_l1 == 2.0
    assert iv.vacuous
    for ends, value in ((iv.lower, 0.0), (iv.band_lower, 0.0), (iv.upper, 1.0),
                        (iv.band_upper, 1.0)):
        np.testing.assert_array_equal(ends, np.full(4, value))


def test_mle_release_states_the_em_caps(seed: int) -> None:
    counts = np.minimum(np.random.default_rng(seed).zipf(1.7, 2_000) - 1, 5)
    sketch = ProfileSketch.from_counts(counts, domain_size=2_000, max_count=5, epsilon=1.0,
                                       rng=seed)
    rel = sketch.reconstruct(method="mle", confidence=0.9)
    assert f"at most {EM_ITERATIONS} iterations" in rel.error.description
    assert f"most {DRAW_EM_ITERATIONS}, from its own" in rel.error.description
    assert rel.mechanism_params["em_iterations"] <= EM_ITERATIONS


def test_band_constant_standardises_each_draw_by_the_others() -> None:
    # one class, four draws 0, 2, 1, 3: leaving out 0 (or 3) leaves mean 2 (or 1) and sd √(2/3),
    # a maximum of 2/√(2/3) = √6; leaving out 2 (or 1) leaves mean 4/3 (or 5/3) and sd √14/3,
    # a maximum of (2/3)/(√14/3) = 2/√14. The ⌈5·0.5⌉ = 3rd smallest of the four is √6 (the
    # in-sample maxima, standardised by mean 1.5 and sd √1.25, would give 1.5/√1.25)
    errors = np.array([[0.0], [2.0], [1.0], [3.0]])
    seen = np.array([True])
    c = band_constant(errors, seen, domain_size=10**9, confidence=0.5)
    assert c == pytest.approx(np.sqrt(6.0), rel=1e-12)
    assert band_constant(errors, seen, domain_size=10**9, confidence=0.25) == pytest.approx(
        2.0 / np.sqrt(14.0), rel=1e-12)
    # fewer than three draws: in-sample maxima
    two = np.array([[0.0], [2.0]])
    assert band_constant(two, seen, domain_size=10**9, confidence=0.5) == 1.0


def test_band_constant_matches_direct_leave_one_out() -> None:
    gen = np.random.default_rng(20261127)
    errors = gen.normal(0.01, 0.002, size=(50, 5))
    errors[:, 4] = 0.0  # a class estimated at 0 gets the largest spread of the classes seen
    seen = np.array([True, True, True, True, False])
    maxima = []
    for i in range(50):
        rest = np.delete(errors, i, axis=0)
        b, s = rest.mean(axis=0), np.maximum(rest.std(axis=0), 1e-6)
        s[4] = max(s[4], s[:4].max())
        maxima.append(float((np.abs(errors[i] - b) / s).max()))
    expected = np.sort(maxima)[int(np.ceil(51 * 0.9)) - 1]
    assert band_constant(errors, seen, domain_size=10**6, confidence=0.9) == pytest.approx(
        expected, rel=1e-9)


def test_band_covers_a_fresh_gaussian_error_at_least_at_its_level() -> None:
    """Gaussian errors (correlated neighbours, unequal spreads): a band built from 200 draws
    holds an independent draw (the real error) in at least 90% of 2,000 trials. Fails when the
    count is below the 1e-6 lower quantile of Binomial(2000, 0.9)."""
    k, trials = 11, 2000
    corr = np.eye(k) - 0.45 * (np.eye(k, k=1) + np.eye(k, k=-1))
    root = np.linalg.cholesky(corr) * np.linspace(1e-3, 3e-3, k)
    gen = np.random.default_rng(20261127)
    r_hat = np.full(k, 1.0 / k)
    held = 0
    for _ in range(trials):
        z = gen.standard_normal((201, k)) @ root.T
        iv = bootstrap_intervals(r_hat, z[:200], domain_size=10**7, confidence=0.9)
        truth = r_hat - z[200]
        held += bool(np.all((iv.band_lower <= truth) & (truth <= iv.band_upper)))
    assert held >= scipy.stats.binom.ppf(1e-6, trials, 0.9)


@pytest.mark.parametrize("cells", [10_000, 7 * 20 * 3])
def test_simulated_sketches_drawn_in_chunks_equal_one_draw_per_sketch(
        cells: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulated sketches come from one multinomial law per class, computed once and drawn
    several sketches per call (3 per call in the second case, so that a call boundary falls
    inside the 10 sketches): the same counts as one call per sketch, so the intervals, keyed by
    the release, do not depend on the chunking. The counts are those of the window."""
    from fractions import Fraction

    import dpfreq.profile.intervals as iv

    monkeypatch.setattr(iv, "_MULTINOMIAL_CELLS", cells)
    m = np.array([50, 20, 9, 3, 1, 0, 7])
    B, gamma = 6, Fraction(1, 2)
    got = iv._simulated_counts(m, B, gamma, 10, np.random.default_rng(9))
    probs = iv._window_probabilities(6, B, gamma)
    pvals = probs / probs.sum(axis=1, keepdims=True)
    gen = np.random.default_rng(9)
    one_by_one = np.stack([gen.multinomial(m, pvals)[:, :-1].sum(axis=0) for _ in range(10)])
    np.testing.assert_array_equal(got, one_by_one)
    assert got.shape == (10, 6 + 2 * B + 1)
    assert (got.sum(axis=1) <= m.sum()).all()
