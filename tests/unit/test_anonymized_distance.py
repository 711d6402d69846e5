"""Sorted-ℓ1 / sorted-ℓ2² distances on the prevalence form (worked examples)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpfreq.anonymized.distance import sorted_l1_distance, sorted_l2_squared_distance
from dpfreq.engines.base import Prevalences
from dpfreq.errors import DataError, ParameterError


def direct(a, b, power):
    """Reference: expand, sort descending, zero-pad, sum |difference|^power (Python ints)."""
    x = sorted((int(v) for v in a), reverse=True)
    y = sorted((int(v) for v in b), reverse=True)
    size = max(len(x), len(y))
    x += [0] * (size - len(x))
    y += [0] * (size - len(y))
    return sum(abs(u - v) ** power for u, v in zip(x, y, strict=True))


def test_e1_worked_example():
    h1, h2 = [3, 8, 8], {1: 1, 2: 1, 8: 1, 9: 1}
    assert sorted_l1_distance(h1, h2) == 3
    assert sorted_l1_distance(h2, h1) == 3
    assert sorted_l2_squared_distance(h1, h2) == 3.0  # [8,8,3,0] vs [9,8,2,1]


def test_e5_release_vs_data():
    # a worked example: ℓ1(h, H^e) = 5
    assert sorted_l1_distance({1: 2, 2: 1, 5: 1, 9: 1}, {1: 4, 8: 1, 9: 1}) == 5


def test_against_direct_sort_and_sum_on_random_cases(rng):
    for _ in range(300):
        size1, size2 = rng.integers(0, 40, size=2)
        top = int(rng.choice([3, 20, 1000]))
        a = rng.integers(1, top + 1, size=size1)
        b = rng.integers(1, top + 1, size=size2)
        assert sorted_l1_distance(a, b) == direct(a, b, 1)
        assert sorted_l2_squared_distance(a, b) == float(direct(a, b, 2))


def test_input_forms_agree(rng):
    a = rng.integers(1, 30, size=50)
    counts, prev = np.unique(a, return_counts=True)
    b = [1, 1, 4, 60]
    forms = [a, a.tolist(), dict(zip(counts.tolist(), prev.tolist(), strict=True)),
             Prevalences(counts=counts.astype(np.int64), prevalences=prev.astype(np.int64))]
    values = {sorted_l1_distance(f, b) for f in forms}
    assert values == {direct(a, b, 1)}
    # the order of mapping keys does not matter
    shuffled = {int(c): int(p) for c, p in zip(counts[::-1], prev[::-1], strict=True)}
    assert sorted_l1_distance(shuffled, b) == direct(a, b, 1)


def test_empty_histograms():
    assert sorted_l1_distance({}, []) == 0
    assert sorted_l2_squared_distance({}, np.zeros(0, dtype=np.int64)) == 0.0
    assert sorted_l1_distance({}, {4: 3}) == 12
    assert sorted_l2_squared_distance([], {4: 3}) == 48.0


def test_huge_histograms_are_not_expanded():
    # one label with 10^9 occurrences vs 10^9 labels seen once:
    # sorted [10^9, 0, 0, ...] vs [1, 1, ..., 1] → (10^9 − 1) + (10^9 − 1)
    big = 10**9
    assert sorted_l1_distance({big: 1}, {1: big}) == 2 * big - 2
    assert sorted_l2_squared_distance({big: 1}, {1: big}) == float((big - 1) ** 2 + (big - 1))
    h = {1: 10**9, 2: 10**9, 1000: 10**6, 10**5: 10**4, 3 * 10**5: 3000}  # heavy-tailed
    assert sorted_l1_distance(h, h) == 0
    shifted = {1: 10**9, 2: 10**9, 1001: 10**6, 10**5: 10**4, 3 * 10**5: 3000}
    assert sorted_l1_distance(h, shifted) == 10**6


small_hist = st.lists(st.integers(min_value=1, max_value=25), max_size=15)


@settings(max_examples=200, deadline=None)
@given(small_hist, small_hist, small_hist)
def test_metric_axioms(a, b, c):
    ab, bc, ac = sorted_l1_distance(a, b), sorted_l1_distance(b, c), sorted_l1_distance(a, c)
    assert ab == sorted_l1_distance(b, a)
    assert (ab == 0) == (sorted(a) == sorted(b))
    assert ac <= ab + bc
    # sorted ℓ1 is the minimum over labelings: never above the unsorted matching
    size = max(len(a), len(b))
    pa, pb = a + [0] * (size - len(a)), b + [0] * (size - len(b))
    assert ab <= sum(abs(x - y) for x, y in zip(pa, pb, strict=True))


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ([1, 0, 2], "an entry below 1"),
        ([1, -3], "an entry below 1"),
        ([1.5, 2], "a non-integral entry"),
        ([1.0, float("nan")], "nan"),
        ({0: 3}, "counts"),
        ({2: -1}, "prevalences"),
        ({2: 0}, "prevalences"),
        ({2: 1.5}, "prevalences"),
        ("3,8,8", "a mapping"),
        (None, "a mapping"),
        (Prevalences(counts=np.array([2, 2]), prevalences=np.array([1, 1])), "listed twice"),
        (Prevalences(counts=np.array([2, 3]), prevalences=np.array([1])), "same length"),
    ],
)
def test_bad_input_is_one_clear_error(bad, match):
    with pytest.raises(DataError, match=match) as info:
        sorted_l1_distance(bad, [1])
    assert "sorted_l1_distance" in str(info.value)
    assert isinstance(info.value, ParameterError)
    with pytest.raises(DataError):
        sorted_l2_squared_distance([1], bad)
