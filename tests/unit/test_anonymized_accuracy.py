"""Error statements, extremes, the budget order and planning of anonymized-histogram releases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpfreq.anonymized import (
    estimate_properties,
    plan_anonymized,
    release_anonymized_histogram,
)
from dpfreq.anonymized.accuracy import simulation_count, total_interval
from dpfreq.anonymized.auto import plan_for
from dpfreq.budget import Accountant, PrivacyBudget
from dpfreq.errors import DataError, ParameterError
from dpfreq.noise import discrete_laplace_pmf, epsilon_to_fraction


@pytest.mark.parametrize("epsilon", [0.05, 1.0, 3.0])
@pytest.mark.parametrize("confidence", [0.8, 0.95])
def test_total_interval_coverage_is_exact(epsilon: float, confidence: float) -> None:
    # Pr[n in interval(max(n + Z, 0))] summed over the exact pmf of Z, for small and large n
    gamma = epsilon_to_fraction(epsilon)
    span = int(60 / epsilon) + 60
    z = np.arange(-span, span + 1)
    pmf = discrete_laplace_pmf(z, gamma)
    for n in (0, 1, 5, 200):
        covered = 0.0
        for zi, pz in zip(z.tolist(), pmf.tolist(), strict=True):
            lo, hi = total_interval(max(n + zi, 0), gamma, confidence)
            covered += pz * (lo <= n <= hi)
        assert covered >= confidence - 1e-12


def test_error_statement_is_a_function_of_the_release() -> None:
    h = {1: 40, 2: 12, 3: 5, 9: 2, 30: 1}
    a = release_anonymized_histogram(h, epsilon=1.0, rng=3, unit="event")
    b = release_anonymized_histogram(h, epsilon=1.0, rng=3, unit="event")
    assert a.error == b.error
    assert a.error.kind == "bound"
    assert a.error.confidence == 0.95
    assert a.error.value >= 0
    low = release_anonymized_histogram(h, epsilon=1.0, rng=3, confidence=0.5, unit="event")
    assert low.error.value <= a.error.value
    lo, hi = a.total_interval
    assert lo <= a.n_estimate <= hi
    table = a.table()
    band = a.items_at_least_band
    assert band >= 0
    assert np.array_equal(table["upper"], table["items_at_least"] + band)
    assert np.all(table["lower"] >= 0)
    assert np.all(table["lower"] <= table["items_at_least"])


@pytest.mark.parametrize(("sups", "band", "stated"), [
    ([1.0] * 170 + [2.0] * 29, 2.0, 199 / 200),  # the 190th run is tied with 28 more
    ([1.0] * 195 + [2.0] * 4, 1.0, 195 / 200),
    ([float(v) for v in range(199)], 189.0, 190 / 200),  # no ties: the requested level
])
def test_band_states_the_confidence_it_holds_at(monkeypatch, sups, band, stated) -> None:
    # the band is the 190th of 199 simulated sups (confidence 0.95); a whole-number band tied
    # with other runs holds in all of them, and says so: c / (B + 1) for the c runs within it
    from dpfreq.anonymized import accuracy

    draws = iter(sups)
    monkeypatch.setattr(accuracy, "cumulative_sup_between", lambda *a: next(draws))
    monkeypatch.setattr(accuracy, "l1_between", lambda *a: 0.0)
    counts, prev = np.array([1, 2], dtype=np.int64), np.array([3, 1], dtype=np.int64)
    bound = accuracy.simulated_l1_bound(counts, prev, 5, plan=plan_for("auto", 1.0),
                                        epsilon=1.0, confidence=0.95, simulations=199)
    assert (bound.band, bound.band_confidence) == (band, stated)
    assert bound.band_confidence >= 0.95


def test_release_states_its_band_confidence() -> None:
    rel = release_anonymized_histogram({1: 40, 2: 12, 3: 5, 9: 2, 30: 1}, epsilon=1.0, rng=3,
                                       unit="event")
    assert 0.95 <= rel.items_at_least_confidence <= 1.0
    assert f"{rel.items_at_least_confidence:.3g}" in rel.error.description
    frame = rel.to_pandas()
    assert len(frame) == rel.counts.size
    assert (frame["confidence"] == rel.items_at_least_confidence).all()


def test_simulation_count_bounds() -> None:
    plan = plan_for("auto", 1.0)
    assert simulation_count(10, 0.95, plan) == 199
    assert simulation_count(10**9, 0.95, plan) == 20
    assert simulation_count(10**9, 0.99, plan) == 100


def test_empty_release_bound_is_the_total_interval() -> None:
    empty = 0
    for seed in range(8):
        rel = release_anonymized_histogram({}, epsilon=0.5, rng=seed, unit="event")
        if rel.n_estimate == 0:
            empty += 1
            assert rel.error.value == rel.total_interval[1]
            assert rel.items_at_least_band == rel.total_interval[1]
            assert rel.items_at_least_confidence == rel.error.confidence
    assert empty >= 1  # some seed gives an empty release, so the check above is not vacuous


def test_huge_counts_refused_in_one_line_without_the_number() -> None:
    with pytest.raises(DataError, match="at most 2\\*\\*52") as info:
        release_anonymized_histogram({2**62: 1}, epsilon=1.0, rng=0, unit="event")
    assert str(2**62) not in str(info.value)
    assert "\n" not in str(info.value)


def test_memory_refused_before_allocating() -> None:
    with pytest.raises(ParameterError, match="GiB"):
        release_anonymized_histogram({2**52: 1}, epsilon=1.0, rng=0, unit="event")
    with pytest.raises(ParameterError, match="GiB"):
        release_anonymized_histogram({1: 1000, 5: 100}, epsilon=1e-6, rng=0, unit="event")
    with pytest.raises(ParameterError, match="not 'hay'"):
        release_anonymized_histogram({1: 1000, 5: 100}, epsilon=1e-6, method="hay", rng=0,
                                     unit="event")


@pytest.mark.parametrize("method", ["auto", "privhist", "hay"])
def test_largest_epsilon_is_exact(method: str) -> None:
    h = {1: 7, 4: 2, 50: 1}
    rel = release_anonymized_histogram(h, epsilon=1000.0, method=method, rng=1, unit="event")
    assert rel.to_mapping() == h
    assert rel.n_estimate == 65
    assert rel.total_interval == (65, 65)
    assert rel.error.value == 0.0


def test_accountant_charged_only_after_every_check() -> None:
    acct = Accountant(PrivacyBudget(2.0))
    with pytest.raises(DataError):
        release_anonymized_histogram({2**62: 1}, epsilon=1.0, rng=0, accountant=acct, unit="event")
    with pytest.raises(DataError, match="domain_size"):
        release_anonymized_histogram({1: 5}, epsilon=1.0, domain_size=3, rng=0,
                                     accountant=acct, unit="event")
    with pytest.raises(ParameterError):
        release_anonymized_histogram({1: 5}, epsilon=1.0, method="hay", split=(1, 1, 1),
                                     rng=0, accountant=acct, unit="event")
    assert (acct.spent.epsilon, acct.spent.delta) == (0.0, 0.0)
    rel = release_anonymized_histogram({1: 5}, epsilon=1.5, rng=0, accountant=acct, unit="event")
    assert (acct.spent.epsilon, acct.spent.delta) == (1.5, 0.0)
    assert acct.ledger[-1]["unit"] == rel.unit == "event"
    with pytest.raises(ParameterError, match="accountant"):
        release_anonymized_histogram({1: 5}, epsilon=1.0, rng=0, accountant=object(), unit="event")


def test_properties_are_clamped_and_say_so() -> None:
    # a release with many count-1 items and a tiny N: SGT goes out of range
    rel = release_anonymized_histogram({1: 3000, 2: 10, 40: 1}, epsilon=0.05, rng=2, unit="event")
    props = estimate_properties(rel, extrapolation_ratio=3.0)
    for est in props.values():
        lo, hi = est.value_range
        if not math.isnan(est.value):
            assert lo <= est.value <= hi
        assert est.clamped == (est.value != est.raw_value and not math.isnan(est.raw_value))
        assert est.error.kind in ("bound", "sd")
        if est.error.kind == "sd":
            assert est.error.confidence is None
        elif est.property_name.endswith("entropy") and "renyi" not in est.property_name:
            # the entropy statement also covers N ≠ n: union bound with the total's interval
            assert est.error.confidence == pytest.approx(2 * rel.error.confidence - 1)
        else:
            assert est.error.confidence == rel.error.confidence
    cov, size = props["support-coverage"], props["support-size"]
    assert cov.value >= size.value
    assert props["unseen-species"].value >= 0
    assert props["support-size"].to_pandas().shape == (1, 5)


def test_plan_is_public_and_exact_on_the_total() -> None:
    plan = plan_anonymized(n_range=(1_000, 10_000), epsilon=1.0)
    rel = release_anonymized_histogram({1: 1000}, epsilon=1.0, rng=0, unit="event")
    _, hi = rel.total_interval
    assert plan.total_halfwidth == hi - rel.n_estimate
    assert 0 < plan.predicted_l1[0] <= plan.predicted_l1[1]
    assert not plan.vacuous
    tiny = plan_anonymized(n_range=(100, 1000), epsilon=0.01)
    assert tiny.vacuous
    assert "epsilon of about" in tiny.description
    target = plan_anonymized(n_range=(1_000, 10_000), target_l1=100.0)
    assert target.predicted_l1[1] <= 100.0
    with pytest.raises(ParameterError, match="n_range"):
        plan_anonymized(n_range=(10, 1), epsilon=1.0)
    with pytest.raises(ParameterError, match="epsilon"):
        plan_anonymized(n_range=(10, 100))


def test_plan_for_a_possibly_empty_dataset() -> None:
    """n_range may start at 0: the release of an empty dataset that draws N = 0 states the
    sorted-ℓ1 bound B, the top of the total's interval [0, B]; the plan predicts exactly that."""
    rel = release_anonymized_histogram({}, epsilon=1.0, rng=0, unit="event")
    assert rel.n_estimate == 0
    plan = plan_anonymized(n_range=(0, 1000), epsilon=1.0)
    assert plan.n_range == (0, 1000)
    assert plan.predicted_l1[0] == float(rel.error.value) == rel.total_interval[1]
    assert plan.predicted_l1[0] == plan.total_halfwidth
    assert "n = 0" in plan.description
    empty = plan_anonymized(n_range=(0, 0), epsilon=1.0)
    assert empty.predicted_l1 == (60.0, 60.0)
    assert not empty.vacuous  # as the release at N = 0, which is not flagged vacuous
    assert "nan" not in empty.description
    assert "inf" not in empty.description
    # a target at n = 0 is met by the ε whose total interval is that narrow
    assert plan_anonymized(n_range=(0, 0), target_l1=60.0).predicted_l1[1] <= 60.0
    for bad in ((-1, 10), (3, 2)):
        with pytest.raises(ParameterError, match="n_range"):
            plan_anonymized(n_range=bad, epsilon=1.0)


def test_out_of_range_estimators_are_clamped() -> None:
    from dpfreq.anonymized import estimate_support_coverage, estimate_unseen_species

    h = {1: 1, 2: 50}  # the Good–Toulmin sum is negative here: -(−t)^2 term dominates
    unseen = estimate_unseen_species(h, extrapolation_ratio=3.0)
    assert unseen.raw_value < 0
    assert unseen.value == 0.0
    assert unseen.clamped
    cover = estimate_support_coverage(h, extrapolation_ratio=3.0)
    assert cover.clamped
    assert cover.value == 51.0  # the observed support: never below it


def test_vacuous_property_statements_name_a_useful_epsilon() -> None:
    rel = next(r for r in (release_anonymized_histogram({1: 300, 2: 20}, epsilon=0.02, rng=s,
                                                        unit="event")
                           for s in range(1, 20)) if r.n_estimate > 0)
    props = estimate_properties(rel)
    assert props["entropy"].error.vacuous
    assert "epsilon of about" in props["entropy"].error.description


def test_weighted_rows_through_the_memory_engine() -> None:
    source = {"pw": np.array(["a", "b", "a", "c", "d"]), "n": np.array([3, 5, 2, 1, 0])}
    rel = release_anonymized_histogram(source, item="pw", count="n", epsilon=1000.0,
                                       engine="memory", rng=0, unit="event")
    assert rel.to_mapping() == {1: 1, 5: 2}  # a: 3 + 2, b: 5, c: 1; d (count 0) is absent
    with pytest.raises(DataError, match="negative") as info:
        release_anonymized_histogram({"pw": np.array(["a"]), "n": np.array([-7])}, item="pw",
                                     count="n", epsilon=1.0, rng=0, unit="event")
    assert "7" not in str(info.value)
    with pytest.raises(ParameterError, match="count"):
        release_anonymized_histogram(source, item="pw", count="pw", epsilon=1.0, rng=0,
                                     unit="event")


def test_domain_size_error_has_no_count() -> None:
    from dpfreq.anonymized import estimate_distance_to_uniformity

    with pytest.raises(DataError) as info:
        estimate_distance_to_uniformity({1: 17}, domain_size=3)
    assert "17" not in str(info.value)


def test_entropy_total_term_bounds_every_histogram() -> None:
    from dpfreq.anonymized.property_estimate import entropy_total_term
    from histogram_cases import histograms_up_to

    def plug_in(h: dict[int, int], size: float, mm: bool) -> float:
        value = sum(p * (r / size) * math.log(size / r) for r, p in h.items())
        return value + ((sum(h.values()) - 1) / (2 * size) if mm else 0.0)

    for h in histograms_up_to(7):
        n = sum(r * p for r, p in h.items())
        if n == 0:
            continue
        for big_n in range(max(n - 3, 1), n + 4):
            for mm in (False, True):
                term = entropy_total_term(big_n, (max(n - 1, 1), n + 1), mm)
                assert abs(plug_in(h, big_n, mm) - plug_in(h, n, mm)) <= term + 1e-12


def test_entropy_total_term_is_the_exact_maximum_over_the_interval() -> None:
    """The term is the maximum over every integer total of the interval, computed by brute
    force (the former 513-point grid missed it by up to 2e-5 nats, e.g. N = 1000 on [0, 1200]:
    a bound below the truth)."""
    from dpfreq.anonymized.property_estimate import entropy_total_term

    def brute(big_n: int, lo: int, hi: int, mm: bool) -> float:
        n = np.arange(max(lo, 1), max(hi, 1) + 1, dtype=np.float64)
        size = float(big_n)
        term = np.maximum(np.abs(n / size * math.log(size) - np.log(n)),
                          np.abs(n / size * np.log(size / n)))
        return float((term + (np.abs(n - size) / (2 * size) if mm else 0.0)).max())

    for big_n in [*range(1, 30), 1000, 3000, 10_000]:
        for lo, hi in ((0, 1200), (1, 6000), (max(big_n - 300, 0), big_n + 300), (big_n, big_n),
                       (2 * big_n, 3 * big_n)):
            for mm in (False, True):
                assert entropy_total_term(big_n, (lo, hi), mm) == pytest.approx(
                    brute(big_n, lo, hi, mm), rel=1e-12, abs=1e-15), (big_n, lo, hi, mm)
