"""Plug-in symmetric-property estimators: a worked example; Lipschitz bounds in the sorted-ℓ1
distance."""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from scipy.stats import multinomial

from dpfreq.anonymized.distance import sorted_l1_distance
from dpfreq.anonymized.properties import (
    PROPERTY_NAMES,
    PropertyEstimate,
    estimate_distance_to_uniformity,
    estimate_entropy,
    estimate_power_sum,
    estimate_properties,
    estimate_renyi_entropy,
    estimate_support_coverage,
    estimate_support_size,
    estimate_unseen_species,
    lipschitz_constant,
    sgt_poisson_parameter,
)
from dpfreq.errors import DataError, ParameterError
from dpfreq.release import ErrorStatement, Release


@dataclass(frozen=True, kw_only=True)
class FakeRelease(Release):
    """Stands in for AnonymizedHistogramRelease: (H, N) with an ℓ1 error statement."""

    counts: Any
    prevalences: Any
    n_estimate: int


def release(hist: dict[int, int], n: int, *, l1: float = 10.0, eps: float = 3.0) -> FakeRelease:
    keys = sorted(hist)
    return FakeRelease(
        value=None, epsilon=eps, unit="event", mechanism="privhist", seeded=True,
        error=ErrorStatement(kind="bound", confidence=0.9, value=l1, description="ℓ1 bound"),
        counts=np.array(keys, dtype=np.int64),
        prevalences=np.array([hist[k] for k in keys], dtype=np.int64), n_estimate=n)


# ----------------------------------------------------------------------------------------------
# a worked example: plug-ins on (H^e, N) = ({1:4, 8:1, 9:1}, 18)

E10 = release({1: 4, 8: 1, 9: 1}, 18)


def test_e10_worked_example():
    # the exact value is 1.3492919 (= Miller–Madow 1.488181 − 5/36)
    assert estimate_entropy(E10).value == pytest.approx(1.3492919, abs=5e-8)
    assert estimate_entropy(E10, miller_madow=True).value - estimate_entropy(E10).value == (
        pytest.approx(5 / 36))
    assert estimate_entropy(E10, miller_madow=True).value == pytest.approx(1.488181, abs=5e-7)
    assert estimate_power_sum(E10, order=2).value == pytest.approx(0.418301, abs=5e-7)
    assert estimate_distance_to_uniformity(E10, domain_size=10).value == pytest.approx(
        1.322222, abs=5e-7)
    assert sgt_poisson_parameter(18, 2.0) == pytest.approx(1.271899, abs=5e-7)
    assert estimate_unseen_species(E10, extrapolation_ratio=2).value == pytest.approx(
        5.747391, abs=5e-7)
    assert estimate_support_coverage(E10, extrapolation_ratio=2).value == pytest.approx(
        11.747391, abs=5e-7)
    # the true data of E2 with n = 18
    assert estimate_entropy({1: 2, 2: 1, 5: 1, 9: 1}).value == pytest.approx(1.267677, abs=5e-7)


def test_hand_examples():
    assert estimate_entropy({5: 4}).value == pytest.approx(math.log(4))
    assert estimate_entropy([7]).value == 0.0
    assert estimate_entropy({5: 4}, miller_madow=True).value == pytest.approx(
        math.log(4) + 3 / 40)
    assert estimate_support_size([3, 3, 1, 9]).value == 4.0
    assert estimate_support_size([3, 3, 1, 9], domain_size=8).value == 0.5
    # Chao1: S + φ1²/(2φ2); bias-corrected S + φ1(φ1−1)/2 when φ2 = 0
    assert estimate_support_size({1: 4, 2: 2, 5: 1}, method="chao1").value == 7 + 16 / 4
    assert estimate_support_size({1: 3, 5: 1}, method="chao1").value == 4 + 3
    assert estimate_power_sum({2: 1}, order=2).value == 1.0
    assert estimate_power_sum({1: 10}, order=2).value == 0.0
    assert estimate_power_sum({3: 1, 1: 1}, order=3).value == pytest.approx(6 / 24)
    assert estimate_renyi_entropy({4: 3}, order=2).value == pytest.approx(
        -math.log(3 * 12 / (12 * 11)))
    assert estimate_distance_to_uniformity({5: 6}, domain_size=6).value == pytest.approx(0.0)
    assert estimate_distance_to_uniformity([12], domain_size=4).value == pytest.approx(1.5)
    # plain Good–Toulmin for t <= 1: U = −Σ (−t)^r φ_r
    assert estimate_unseen_species({1: 3, 2: 1}, extrapolation_ratio=0.5).value == pytest.approx(
        3 * 0.5 - 0.25)
    assert estimate_support_coverage(
        {1: 3, 2: 1}, extrapolation_ratio=0.5, normalized=True).value == pytest.approx(
        (4 + 1.25) / (5 * 1.5))


def test_power_sum_is_unbiased_in_exact_expectation():
    # exact enumeration of the multinomial: E[P̂_a] = Σ p^a
    p = np.array([0.5, 0.3, 0.15, 0.05])
    n = 6
    for order in (2, 3):
        expectation = 0.0
        for x in itertools.product(range(n + 1), repeat=len(p) - 1):
            if sum(x) > n:
                continue
            counts = [*x, n - sum(x)]
            pmf = multinomial.pmf(counts, n, p)
            expectation += pmf * estimate_power_sum([c for c in counts if c], order=order).value
        assert expectation == pytest.approx(float((p**order).sum()), rel=1e-12)


# ----------------------------------------------------------------------------------------------
# Lipschitz constants: the inequality on random pairs, and tightness


def _all(hist: Any, **kw: Any) -> dict[str, PropertyEstimate]:
    return {
        "entropy": estimate_entropy(hist),
        "miller-madow-entropy": estimate_entropy(hist, miller_madow=True),
        "support-size": estimate_support_size(hist, domain_size=kw["k"]),
        "unseen-species": estimate_unseen_species(hist, extrapolation_ratio=kw["t"]),
        "support-coverage": estimate_support_coverage(hist, extrapolation_ratio=kw["t"],
                                                      normalized=kw["normalized"]),
        "distance-to-uniformity": estimate_distance_to_uniformity(hist, domain_size=kw["k"]),
        "power-sum": estimate_power_sum(hist, order=kw["a"]),
    }


def _random_hist(rng: np.random.Generator, top: int) -> dict[int, int]:
    size = int(rng.integers(0, 30))
    counts = rng.integers(1, top + 1, size=size)
    values, prev = np.unique(counts, return_counts=True)
    return dict(zip(values.tolist(), prev.tolist(), strict=True))


def test_lipschitz_inequality_on_random_pairs(rng):
    # at a fixed n (the release's N), |f̂(h1) − f̂(h2)| <= L · ℓ1(h1, h2)
    checked = 0
    for _ in range(150):
        n = int(rng.choice([5, 40, 300, 5000]))
        top = int(rng.choice([max(n // 4, 1), n, 3 * n]))
        h1, h2 = _random_hist(rng, top), _random_hist(rng, top)
        if rng.random() < 0.5 and h1:  # a neighbour of h1
            r = int(rng.choice(list(h1)))
            h2 = dict(h1)
            h2[r] -= 1
            h2[r + 1] = h2.get(r + 1, 0) + 1
            h2 = {c: p for c, p in h2.items() if p > 0}
        kw = {"k": int(rng.integers(1, 60)) + 30, "t": float(rng.choice([0.5, 1.0, 2.0, 4.5])),
              "a": int(rng.integers(2, 5)), "normalized": bool(rng.random() < 0.5)}
        dist = sorted_l1_distance(h1, h2)
        e1, e2 = _all(release(h1, n), **kw), _all(release(h2, n), **kw)
        for name in e1:
            big_r = max(e1[name].max_count, e2[name].max_count)
            lip = lipschitz_constant(name, n, max_count=big_r, domain_size=kw["k"],
                                     extrapolation_ratio=kw["t"], order=kw["a"],
                                     normalized=kw["normalized"])
            gap = abs(e1[name].value - e2[name].value)
            assert gap <= lip * dist * (1 + 1e-9) + 1e-12, (name, h1, h2, n, kw)
            checked += 1
    assert checked == 150 * 7


@pytest.mark.parametrize("name", PROPERTY_NAMES)
@pytest.mark.parametrize("n", [1, 7, 50, 2000])
def test_lipschitz_constant_is_attained_by_a_neighbour_pair(name, n):
    # L = max_r |f(r) − f(r−1)| is the change between {r−1: 1} and {r: 1} (ℓ1 = 1) for some r
    kw = {"domain_size": 13, "extrapolation_ratio": 2.5, "order": 2}
    big_r = max(n, 3)
    lip = lipschitz_constant(name, n, max_count=big_r, **kw)
    if not math.isfinite(lip):
        assert name == "power-sum"
        assert n < 2
        return
    funcs = {
        "entropy": lambda h: estimate_entropy(h).raw_value,
        "miller-madow-entropy": lambda h: estimate_entropy(h, miller_madow=True).raw_value,
        "support-size": lambda h: estimate_support_size(h, domain_size=13).raw_value,
        "unseen-species": lambda h: estimate_unseen_species(
            h, extrapolation_ratio=2.5).raw_value,
        "support-coverage": lambda h: estimate_support_coverage(
            h, extrapolation_ratio=2.5).raw_value,
        "distance-to-uniformity": lambda h: estimate_distance_to_uniformity(
            h, domain_size=13).raw_value,
        "power-sum": lambda h: estimate_power_sum(h, order=2).raw_value,
    }
    f = funcs[name]
    steps = [abs(f(release({r: 1}, n)) - f(release({r - 1: 1} if r > 1 else {}, n)))
             for r in range(1, big_r + 1)]
    if name == "miller-madow-entropy":
        # the empty histogram's value is 0, not the linear formula's −1/(2n): L is then an upper
        # bound that the step {} → {1: 1} misses by exactly 1/(2n)
        assert max(steps) <= lip
        assert lip - max(steps) <= 0.5 / n + 1e-15
    elif name == "distance-to-uniformity" and n == 1:
        assert max(steps) <= lip  # the clip to [0, 2] is active: L is not attained
    else:
        assert max(steps) == pytest.approx(lip, rel=1e-9, abs=1e-15)


def test_closed_forms():
    assert lipschitz_constant("entropy", 1000) == pytest.approx(math.log(1000) / 1000)
    assert lipschitz_constant("miller-madow-entropy", 1000) == pytest.approx(
        (math.log(1000) + 0.5) / 1000)
    assert lipschitz_constant("support-size", 10) == 1.0
    assert lipschitz_constant("support-size", 10, domain_size=4) == 0.25
    assert lipschitz_constant("distance-to-uniformity", 80, domain_size=7) == pytest.approx(1 / 80)
    assert lipschitz_constant("power-sum", 80, order=3) == pytest.approx(3 / 80)
    assert lipschitz_constant("unseen-species", 80, extrapolation_ratio=0.5) == pytest.approx(0.75)
    assert lipschitz_constant("power-sum", 1, order=2) == math.inf
    # huge n and counts: closed forms, no scan over 10^9 values
    assert lipschitz_constant("entropy", 6 * 10**9) == pytest.approx(math.log(6e9) / 6e9)
    assert lipschitz_constant("power-sum", 6 * 10**9, order=2) == pytest.approx(2 / 6e9,
                                                                                rel=1e-12)
    assert math.isfinite(lipschitz_constant("support-coverage", 6 * 10**9,
                                            extrapolation_ratio=3.0))


# ----------------------------------------------------------------------------------------------
# release vs exact input, error statements, empty input


def test_release_result_carries_privacy_and_scaled_error():
    est = estimate_entropy(E10)
    assert est.private
    assert est.epsilon == 3.0
    assert est.seeded
    assert est.sample_size == 18
    assert est.lipschitz_constant == pytest.approx(lipschitz_constant("entropy", 18))
    assert est.error.value == pytest.approx(10.0 * est.lipschitz_constant)
    assert est.error.confidence == 0.9
    assert "plug-in on privhist" in est.mechanism
    data = json.loads(est.to_json())
    assert data["type"] == "PropertyEstimate"
    assert data["private"] is True
    tight = release({1: 4, 8: 1, 9: 1}, 18, l1=1.0)
    renyi = estimate_renyi_entropy(tight, order=2)
    power = estimate_power_sum(tight, order=2)
    assert renyi.value == pytest.approx(-math.log(power.value))
    d = power.error.value
    assert renyi.error.value == pytest.approx(math.log(power.value / (power.value - d)))


def test_with_real_releases(rng):
    # every method: plug-ins on (H, N) obey the Lipschitz inequality against the exact
    # plug-in evaluated at the same N, and carry the release's privacy parameters
    from dpfreq.anonymized import release_anonymized_histogram

    p = 1.0 / np.arange(1, 2501)
    counts = rng.multinomial(5000, p / p.sum())
    values, prev = np.unique(counts[counts > 0], return_counts=True)
    hist = dict(zip(values.tolist(), prev.tolist(), strict=True))
    for method in ("privhist", "privhist-tuned", "hay", "auto"):
        for eps in (0.5, 2.0):
            rel = release_anonymized_histogram(hist, epsilon=eps, method=method, rng=rng,
                                               unit="event")
            dist = sorted_l1_distance(hist, rel)
            exact_at_n = release(hist, rel.n_estimate)
            for name, est in estimate_properties(rel, domain_size=10_000).items():
                assert est.epsilon == eps
                assert est.seeded
                assert est.private
                assert est.sample_size == rel.n_estimate
                if not math.isfinite(est.lipschitz_constant):
                    continue
                ref = estimate_properties(exact_at_n, domain_size=10_000)[name]
                big_r = max(est.max_count, ref.max_count)
                lip = (est.lipschitz_constant if big_r == est.max_count else
                       ref.lipschitz_constant)
                assert abs(est.raw_value - ref.raw_value) <= lip * dist * (1 + 1e-9) + 1e-12, name
                assert est.error.kind == rel.error.kind


def test_plot_draws_the_estimate_and_its_bound():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for est in (estimate_entropy(E10), estimate_entropy({1: 2, 2: 1, 5: 1, 9: 1}),
                estimate_entropy(release({1: 4, 8: 1}, 12, l1=math.inf))):
        ax = est.plot()
        assert ax.get_title().startswith(est.property_name)
        assert [t.get_text() for t in ax.get_xticklabels()] == [est.property_name]
        plt.close(ax.figure)


def test_release_without_a_finite_l1_bound():
    est = estimate_entropy(release({1: 4, 8: 1}, 12, l1=math.inf))
    assert est.error.kind == "sd"
    assert est.error.confidence is None
    assert math.isnan(est.error.value)
    assert "no finite" in est.error.description
    renyi = estimate_renyi_entropy(release({1: 4, 8: 1}, 12, l1=1e6), order=2)
    assert renyi.error.value == math.inf
    assert renyi.error.vacuous


def test_exact_input_is_marked_non_private():
    est = estimate_entropy({1: 2, 2: 1, 5: 1, 9: 1})
    assert not est.private
    assert est.epsilon == math.inf
    assert est.error.value == 0.0
    assert "NOT differentially private" in est.error.description
    assert est.sample_size == 18
    assert json.loads(est.to_json())["epsilon"] == "inf"


def test_empty_histograms_and_zero_n():
    for hist in ({}, [], release({}, 0), release({}, 5), release({3: 2}, 0)):
        out = estimate_properties(hist, domain_size=4)
        assert out["entropy"].value == 0.0
        assert out["support-coverage"].value == 0.0
        n = hist.n_estimate if isinstance(hist, Release) else 0
        if n == 0:
            assert out["distance-to-uniformity"].value == 1.0
            assert math.isnan(out["power-sum-2"].value)
        else:
            assert out["power-sum-2"].value == 0.0
        assert math.isnan(out["renyi-entropy-2"].value)
    # a non-empty H with N > 0 but the power sum not positive
    assert math.isnan(estimate_renyi_entropy(release({1: 3}, 9), order=2).value)


def test_estimate_properties_keys():
    out = estimate_properties({1: 4, 8: 1, 9: 1}, extrapolation_ratio=1.5)
    assert set(out) == {"entropy", "miller-madow-entropy", "support-size", "unseen-species",
                        "support-coverage", "power-sum-2", "renyi-entropy-2"}
    assert out["unseen-species"].parameters["extrapolation_ratio"] == 1.5


def test_release_counts_above_n_are_covered():
    # noisy large counts may exceed N: max_count (the R of the constant) covers them
    est = estimate_power_sum(release({1: 2, 40: 1}, 20), order=2)
    assert est.max_count == 40
    assert est.lipschitz_constant == pytest.approx(2 * 39 / (20 * 19))


@pytest.mark.parametrize(
    ("call", "exc", "match"),
    [
        (lambda: estimate_distance_to_uniformity([1, 2, 3], domain_size=2), DataError,
         "domain_size of estimate_distance_to_uniformity"),
        (lambda: estimate_distance_to_uniformity([1, 2], domain_size=0), ParameterError,
         "domain_size"),
        (lambda: estimate_power_sum([1, 2], order=1), ParameterError, "order"),
        (lambda: estimate_power_sum([1, 2], order=2.5), ParameterError, "order"),
        (lambda: estimate_unseen_species([1], extrapolation_ratio=0), ParameterError,
         "extrapolation_ratio"),
        (lambda: estimate_support_size([1], method="ace"), ParameterError, "method"),
        (lambda: estimate_entropy([0, 1]), DataError, "histogram .* of estimate_entropy"),
        (lambda: estimate_entropy({2: -1}), DataError, "prevalences"),
        (lambda: estimate_entropy(ErrorStatement(kind="sd", confidence=None, value=1,
                                                 description="")), DataError, "histogram"),
        (lambda: lipschitz_constant("kurtosis", 10), ParameterError, "property_name"),
        (lambda: lipschitz_constant("power-sum", 10), ParameterError, "order"),
        (lambda: lipschitz_constant("entropy", 0), ParameterError, "sample_size"),
    ],
)
def test_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_other_release_types_are_refused():
    other = Release(value=1, epsilon=1.0, unit="event", mechanism="x", seeded=False,
                    error=ErrorStatement(kind="sd", confidence=None, value=1.0, description=""))
    with pytest.raises(ParameterError, match="anonymized-histogram release"):
        estimate_entropy(other)


@pytest.mark.parametrize("t", [1.5, 3.0, 40.0])
def test_sgt_coefficients_use_the_poisson_tail(t: float) -> None:
    """The smoothed Good–Toulmin coefficient −(−t)^r · Pr[Poisson(λ) >= r], with the tail from
    scipy.special, equals the same formula with scipy.stats' Poisson law (r up to 10^6)."""
    from scipy.stats import poisson

    from dpfreq.anonymized.coefficients import sgt_poisson_parameter, sgt_unseen_coef

    n = 5_000.0
    r = np.concatenate([np.arange(1.0, 400.0), [1e3, 1e4, 1e6]])
    lam = sgt_poisson_parameter(n, t)
    assert lam is not None
    assert lam > 0
    with np.errstate(under="ignore", over="ignore"):
        expected = -((-1.0) ** r) * np.exp(r * math.log(t) + poisson.logsf(r - 1, lam))
    np.testing.assert_array_equal(sgt_unseen_coef(r, n, t), expected)


def test_a_release_with_total_zero_carries_an_error_statement():
    """N = 0 (the empty histogram released): each property with a value states a bound at the
    release's confidence, from the true total's exact interval [0, B]: on every histogram of
    total <= B the property lies within it of the value returned."""
    from dpfreq.anonymized import release_anonymized_histogram

    rel = release_anonymized_histogram({}, epsilon=1.0, unit="event", rng=0)
    assert rel.n_estimate == 0
    assert rel.regime == "empty"
    big_b = rel.total_interval[1]
    out = estimate_properties(rel, domain_size=4, extrapolation_ratio=2.0)
    out["normalized-coverage"] = estimate_support_coverage(rel, extrapolation_ratio=2.0,
                                                           normalized=True)
    want = {"entropy": math.log(big_b), "support-size": big_b, "unseen-species": 2 * big_b,
            "support-coverage": 3 * big_b, "distance-to-uniformity": 1.0,
            "miller-madow-entropy": math.log(big_b) + (big_b - 1) / (2 * big_b),
            "normalized-coverage": 1.0}
    for name, bound in want.items():
        est = out[name]
        assert est.error.kind == "bound", name
        assert est.error.confidence == rel.error.confidence, name
        assert est.error.value == pytest.approx(bound), name
        assert "N = 0" in est.error.description, name
        row = est.table()
        assert row["upper"][0] == pytest.approx(est.value + bound), name
        # the bound covers the extreme histograms of total B
        for hist in ({1: big_b}, {big_b: 1}, {1: big_b - 2, 2: 1}):
            exact = (estimate_support_coverage(hist, extrapolation_ratio=2.0, normalized=True)
                     if name == "normalized-coverage" else
                     estimate_properties(hist, domain_size=big_b)[name])
            assert abs(est.value - exact.value) <= bound * (1 + 1e-12), (name, hist)
    for name in ("power-sum-2", "renyi-entropy-2"):  # no value (N below the order): no bound
        assert math.isnan(out[name].value)
        assert out[name].error.kind == "sd"


def test_statements_at_a_small_total_lie_within_the_property_range():
    """N = 1 and the empty histogram released (seed 82; total's interval [0, 61], sorted-ℓ1
    bound 5): each published interval is the property's own statement cut to the range its
    target lies in. Exact check over every true histogram the two statements allow (sorted-ℓ1
    distance <= 5 to the empty histogram: every total <= 5): each target lies in the interval
    table() publishes, and no ± exceeds the range (the entropy's was ± 250.8 with ln 61 ≈ 4.1)."""
    from dpfreq.anonymized import release_anonymized_histogram
    from histogram_cases import histograms_up_to

    rel = release_anonymized_histogram({1: 1}, epsilon=1.0, unit="event", rng=82)
    assert (rel.n_estimate, rel.n_items, rel.total_interval) == (1, 0, (0, 61))
    l1 = float(rel.error.value)
    assert l1 == 5.0
    out = estimate_properties(rel, domain_size=60, extrapolation_ratio=2.0)
    out["normalized-coverage"] = estimate_support_coverage(rel, extrapolation_ratio=2.0,
                                                           normalized=True)
    assert out["entropy"].error.value == pytest.approx(math.log(61))
    assert out["entropy"].error.vacuous
    assert out["entropy"].error.confidence == pytest.approx(0.9)
    assert out["miller-madow-entropy"].error.value == pytest.approx(math.log(61) + 60 / 122)
    for name, est in out.items():
        if est.error.kind != "bound":
            assert math.isnan(est.value), name  # power sum and Rényi: no value below order 2
            continue
        lo, hi = est.value_range
        assert lo <= est.value <= hi, name
        assert est.error.value <= max(est.value - lo, hi - est.value), name
        assert "range" in est.error.description, name
    targets = {
        "entropy": lambda h: estimate_entropy(h).value,
        "miller-madow-entropy": lambda h: estimate_entropy(h, miller_madow=True).value,
        "support-size": lambda h: estimate_support_size(h).value,
        # the estimators at the release's sample size N = 1 on the true histogram
        "unseen-species": lambda h: estimate_unseen_species(
            release(h, 1), extrapolation_ratio=2.0).value,
        "support-coverage": lambda h: estimate_support_coverage(
            release(h, 1), extrapolation_ratio=2.0).value,
        "normalized-coverage": lambda h: estimate_support_coverage(
            release(h, 1), extrapolation_ratio=2.0, normalized=True).value,
        "distance-to-uniformity": lambda h: estimate_distance_to_uniformity(
            release(h, 1), domain_size=60).value,
    }
    checked = 0
    for h in histograms_up_to(int(l1)):
        for name, target in targets.items():
            row = out[name].table()
            assert row["lower"][0] - 1e-12 <= target(h) <= row["upper"][0] + 1e-12, (name, h)
            checked += 1
    assert checked == 19 * len(targets)  # the 1+1+2+3+5+7 histograms of total 0..5


def test_a_statement_vacuous_by_the_cut_names_the_epsilon_as_the_others_do():
    """P_2 of ({1:4, 8:1, 9:1}, N = 18) at ε = 0.5: L = 1/9, value 0.418 in [0, 1]. With B = 8,
    L × B = 0.89 is under the range's width (not vacuous on its own) but cut to [0, 1] it is
    the whole range; with B = 12 it is vacuous on its own. Both end with one sentence: the
    release's ε and the ε that would bring L × B under half the range."""
    by_cut, own = (estimate_power_sum(release({1: 4, 8: 1, 9: 1}, 18, l1=l1, eps=0.5), order=2)
                   for l1 in (8.0, 12.0))
    assert by_cut.error.vacuous
    assert own.error.vacuous
    assert by_cut.error.value == own.error.value == pytest.approx(1 - by_cut.value)
    assert "L × B = 0.888889" in by_cut.error.description
    tails = [e.error.description.split(" It is no better than ")[1] for e in (by_cut, own)]
    assert tails[0].startswith("the range the property lies in: the estimate carries little "
                               "information at the release's ε = 0.5; an epsilon of about ")
    assert tails[1].startswith("the range of the quantity itself: the estimate carries little "
                               "information at the release's ε = 0.5; an epsilon of about ")
    useful = [t.split("an epsilon of about ")[1].split(" ")[0] for t in tails]
    assert useful[0] == useful[1]  # the same range: the same ε named
    assert float(useful[0]) > 0.5


def test_the_checked_domain_size_bounds_entropy_and_support():
    """A release made with domain_size = 3 (checked against the data before spending) caps
    the entropy at ln 3 and the support at 3 (seed 3: N = 52, H = {1: 2, 2: 1}, sorted-ℓ1 bound
    8). Exact check: for every histogram of support <= 3 within the ℓ1 bound of H, each
    property's target lies in its published interval. Rényi: no statement without a value,
    never -0, the whole range for an infinite bound."""
    from dpfreq.anonymized import release_anonymized_histogram
    from histogram_cases import histograms_up_to

    rel = release_anonymized_histogram({2: 1, 1: 1}, epsilon=1.0, unit="event", rng=3,
                                       domain_size=3)
    assert (rel.n_estimate, rel.to_mapping(), float(rel.error.value)) == (52, {1: 2, 2: 1}, 8.0)
    out = estimate_properties(rel)
    assert out["entropy"].value_range == (0.0, pytest.approx(math.log(3)))
    assert out["support-size"].value_range == (0.0, 3.0)
    for name in ("entropy", "miller-madow-entropy", "support-size"):
        lo, hi = out[name].value_range
        assert out[name].error.value <= max(out[name].value - lo, hi - out[name].value), name
    out["normalized-coverage"] = estimate_support_coverage(rel, extrapolation_ratio=2.0,
                                                           normalized=True)
    targets = {  # at the true total for the entropy, else at the release's N = 52
        "entropy": lambda h: estimate_entropy(h).value,
        "miller-madow-entropy": lambda h: estimate_entropy(h, miller_madow=True).value,
        "support-size": lambda h: estimate_support_size(h).value,
        "unseen-species": lambda h: estimate_unseen_species(
            release(h, 52), extrapolation_ratio=2.0).value,
        "support-coverage": lambda h: estimate_support_coverage(
            release(h, 52), extrapolation_ratio=2.0).value,
        "normalized-coverage": lambda h: estimate_support_coverage(
            release(h, 52), extrapolation_ratio=2.0, normalized=True).value,
        "power-sum-2": lambda h: estimate_power_sum(release(h, 52), order=2).value,
    }
    checked = 0
    for h in histograms_up_to(4 + 8):
        if sum(h.values()) > 3 or sorted_l1_distance(h, rel.to_mapping()) > 8:
            continue
        for name, target in targets.items():
            row = out[name].table()
            assert row["lower"][0] - 1e-12 <= target(h) <= row["upper"][0] + 1e-12, (name, h)
            checked += 1
    assert checked > 40 * len(targets)
    empty = release_anonymized_histogram({}, epsilon=1.0, unit="event", rng=0, domain_size=3)
    assert estimate_entropy(empty).error.value == pytest.approx(math.log(3))  # N = 0: min(B, d)
    assert estimate_support_size(empty).error.value == 3.0
    renyi = estimate_renyi_entropy(release({1: 5}, 9), order=2)  # P̂ = 0: no value
    assert math.isnan(renyi.value)
    assert renyi.error.kind == "sd"
    one = estimate_renyi_entropy(release({2: 1}, 2, l1=0.0), order=2)  # P̂ = 1: ln 1 = 0
    assert math.copysign(1.0, one.value) == 1.0
    wide = estimate_renyi_entropy(release({1: 5, 2: 1}, 7, l1=10.0), order=2)
    assert wide.error.value == math.inf  # P̂ <= D: the interval is the whole range [0, inf)
    assert (wide.table()["lower"][0], wide.table()["upper"][0]) == (0.0, math.inf)
