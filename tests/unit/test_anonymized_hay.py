"""Hay et al. sorted-count baseline (Hay et al. 2009): exact paths, sensitivity, limit."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import dpfreq.anonymized.hay as hay_module
from dpfreq.anonymized import release_anonymized_histogram
from dpfreq.anonymized.hay import HAY_MAX_LENGTH, hay, sorted_padded
from dpfreq.anonymized.histogram_input import as_prevalences, total_of
from dpfreq.anonymized.steps import merge_prevalences, rounded_isotonic
from dpfreq.errors import ParameterError
from histogram_cases import partitions


class ZeroNoise:
    def geometric(self, epsilon: float, size: int) -> np.ndarray:
        return np.zeros(size, dtype=np.int64)


class FixedNoise:
    def __init__(self, draws: list[list[int]]) -> None:
        self.draws = list(draws)

    def geometric(self, epsilon: float, size: int) -> np.ndarray:
        values = self.draws.pop(0)
        assert len(values) == size
        return np.asarray(values, dtype=np.int64)


def arrays(h: dict[int, int]) -> tuple[np.ndarray, np.ndarray]:
    return as_prevalences(h)


def mapping(counts: np.ndarray, prev: np.ndarray) -> dict[int, int]:
    return {int(c): int(p) for c, p in zip(counts, prev, strict=True)}


def test_sorted_padded_truncates_and_pads() -> None:
    c, p = arrays({1: 2, 3: 1, 8: 2})
    assert sorted_padded(c, p, 7).tolist() == [8, 8, 3, 1, 1, 0, 0]
    assert sorted_padded(c, p, 5).tolist() == [8, 8, 3, 1, 1]
    assert sorted_padded(c, p, 3).tolist() == [8, 8, 3]
    assert sorted_padded(c, p, 2).tolist() == [8, 8]
    assert sorted_padded(c, p, 1).tolist() == [8]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_zero_noise_identity(seed: int) -> None:
    gen = np.random.Generator(np.random.PCG64(seed))
    counts = np.minimum(gen.zipf(1.5, size=2_000), 1_000)
    c, p = arrays(counts)
    out = hay(c, p, split=(1.0, 2.0, 0.0), noise=ZeroNoise())
    assert mapping(out.counts, out.prevalences) == mapping(c, p)
    assert out.n_estimate == int(counts.sum())
    assert out.params["L"] == out.n_estimate


def test_worked_example_with_injected_noise() -> None:
    # h = {8, 8, 3}, n = 19 -> N = 19 - 13 = 6: padded [8, 8, 3, 0, 0, 0]
    c, p = arrays({3: 1, 8: 2})
    noise = FixedNoise([[-13], [1, -2, 1, 2, 0, -1]])
    out = hay(c, p, split=(1.0, 1.0, 0.0), noise=noise)
    # noisy [9, 6, 4, 2, 0, -1] is already non-increasing; clamp and drop zeros
    assert mapping(out.counts, out.prevalences) == {2: 1, 4: 1, 6: 1, 9: 1}
    noise = FixedNoise([[-13], [0, 0, 4, 0, 0, 2]])
    out = hay(c, p, split=(1.0, 1.0, 0.0), noise=noise)
    # noisy [8, 8, 7, 0, 0, 2]: PAVA pools (0, 0, 2) to 2/3, which rounds to 1
    assert mapping(out.counts, out.prevalences) == {1: 3, 7: 1, 8: 2}


def test_sorted_padded_sensitivity_one_brute_force() -> None:
    checked = 0
    for n in range(8):
        for part in partitions(n, n):
            for i, length in itertools.product(range(len(part) + 1), range(1, 10)):
                other = [*part, 1] if i == len(part) else \
                    [x + (j == i) for j, x in enumerate(part)]
                a = sorted_padded(*arrays(part), length) if part else \
                    np.zeros(length, np.int64)
                b = sorted_padded(*arrays(np.array(other)), length)
                assert int(np.abs(a - b).sum()) <= 1
                checked += 1
    assert checked > 1000


def test_release_hay_fields() -> None:
    h = {1: 30, 2: 10, 5: 3, 40: 1}
    rel = release_anonymized_histogram(h, epsilon=1.5, method="hay", rng=3, unit="event")
    assert rel.method == "hay"
    assert rel.mechanism == "hay-sorted-counts"
    assert rel.regime == "sorted-counts"
    assert rel.split == pytest.approx((0.5, 1.0, 0.0))
    assert rel.mechanism_params["L"] == rel.n_estimate
    assert np.all(rel.counts >= 1)
    assert np.all(rel.prevalences >= 1)
    custom = release_anonymized_histogram(h, epsilon=1.5, method="hay", split=(0.1, 1.4), rng=3,
                                          unit="event")
    assert custom.split == (0.1, 1.4, 0.0)
    again = release_anonymized_histogram(h, epsilon=1.5, method="hay", rng=3, unit="event")
    assert again.to_dict() == rel.to_dict()


def test_refuses_above_limit_with_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    assert HAY_MAX_LENGTH == 50_000_000
    monkeypatch.setattr(hay_module, "HAY_MAX_LENGTH", 1_000)
    with pytest.raises(ParameterError, match=r"not 'hay'.*may exceed 1000.*privhist"):
        release_anonymized_histogram({1: 5_000}, epsilon=4.0, method="hay", rng=0, unit="event")
    rel = release_anonymized_histogram({1: 5_000}, epsilon=4.0, method="privhist", rng=0,
                                       unit="event")
    assert rel.n_estimate > 1_000


def test_prevalence_input_refused_not_expanded() -> None:
    h = {1: 10**9, 2: 10**9, 1000: 10**6, 10**5: 10**4, 3 * 10**5: 3000}
    with pytest.raises(ParameterError, match="method of release_anonymized_histogram"):
        release_anonymized_histogram(h, epsilon=1.0, method="hay", rng=0, unit="event")


def test_empty_and_n_zero() -> None:
    out = hay(np.zeros(0, np.int64), np.zeros(0, np.int64), split=(1.0, 1.0, 0.0),
              noise=FixedNoise([[-1]]))
    assert out.regime == "empty"
    assert out.counts.size == 0
    assert out.n_estimate == 0


def reference_hay(counts: np.ndarray, prevalences: np.ndarray, split: tuple[float, float, float],
                  noise: FixedNoise) -> tuple[dict[int, int], int]:
    """The baseline as first written: expand the rounded fit to ``L`` values, then sort-merge."""
    n_est = max(total_of(counts, prevalences) + int(noise.geometric(split[0], 1)[0]), 0)
    if n_est == 0:
        return {}, 0
    vec = sorted_padded(counts, prevalences, n_est) + noise.geometric(split[1], n_est)
    fitted = rounded_isotonic(vec)
    c, p = merge_prevalences(fitted, np.ones(fitted.size, dtype=np.int64))
    return mapping(c[c > 0], p[c > 0]), n_est


def test_same_function_of_the_noise_as_the_expanded_baseline() -> None:
    # The output is a deterministic function of (histogram, noise draws): equal functions on
    # every input and every draw give the same output law. Checked on every histogram of n <= 7
    # with 40 draws each of wide noise (ties, negative blocks, pooled zeros, N = 0).
    gen = np.random.Generator(np.random.PCG64(31))
    checked = 0
    for n in range(8):
        for part in partitions(n, n):
            c, p = arrays(part) if part else (np.zeros(0, np.int64), np.zeros(0, np.int64))
            for _ in range(40):
                z1 = int(gen.integers(-n - 2, 6))
                size = max(n + z1, 0)
                z2 = gen.integers(-4, 5, size=size).tolist()
                ref, ref_n = reference_hay(c, p, (1.0, 1.0, 0.0), FixedNoise([[z1], z2]))
                out = hay(c, p, split=(1.0, 1.0, 0.0), noise=FixedNoise([[z1], z2]))
                assert (mapping(out.counts, out.prevalences), out.n_estimate) == (ref, ref_n)
                assert np.all(np.diff(out.counts) > 0)
                checked += 1
    assert checked > 500


def test_rounded_fit_runs_equals_expanded_rounding() -> None:
    gen = np.random.Generator(np.random.PCG64(7))
    for size in (1, 2, 3, 10, 200):
        for _ in range(50):
            vec = gen.integers(-30, 30, size=size).astype(np.int64)
            fitted = rounded_isotonic(vec)
            c, p = merge_prevalences(fitted, np.ones(size, dtype=np.int64))
            got = hay_module.rounded_fit_runs(vec)
            assert mapping(*got) == mapping(c[c > 0], p[c > 0])


@pytest.mark.slow  # about 2 s: twenty runs on L ~ 10**6
def test_one_large_count_runs_without_sorting_the_padded_vector(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # {10**6: 1} pads to L ~ 10**6 entries in each of the ~20 runs (release and error
    # simulations); the post-processing works on the fit's blocks, never a sort of L values.
    largest: list[int] = [0]
    unique = np.unique

    def recording_unique(values: np.ndarray, *args: object, **kwargs: object) -> object:
        largest[0] = max(largest[0], np.asarray(values).size)
        return unique(values, *args, **kwargs)

    monkeypatch.setattr(np, "unique", recording_unique)
    rel = release_anonymized_histogram({10**6: 1}, epsilon=1.0, method="hay", rng=5,
                                       unit="event")
    assert rel.mechanism_params["L"] == rel.n_estimate > 900_000
    assert largest[0] < 1_000
