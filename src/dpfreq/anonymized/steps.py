"""Shared steps of the anonymized-histogram mechanisms: noise sources and exact post-processing.

PrivHist (:mod:`dpfreq.anonymized.privhist`) and the Hay et al. baseline
(:mod:`dpfreq.anonymized.hay`) both add two-sided geometric noise to integer vectors and then
fit, clamp and round them; the helpers here are pure functions on the prevalence form
``{count r: number of items with count r}`` (taken as two int64 arrays). Noise comes from a
:class:`NoiseSource`: :class:`ExactNoise` (the exact sampler, used by every release) or
:class:`SimulationNoise` (numpy's geometric sampler, used only to simulate the known noise law
for error statements, which is post-processing of a release).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import isotonic_regression

from dpfreq.noise import epsilon_to_fraction, sample_discrete_laplace

__all__ = [
    "I64",
    "ExactNoise",
    "NoiseSource",
    "Outcome",
    "SimulationNoise",
    "cumulative_to_prevalences",
    "epsilon_fractions",
    "fit_blocks",
    "fit_non_increasing",
    "merge_prevalences",
    "round_half_up",
    "rounded_isotonic",
    "sorted_unique",
]

I64 = NDArray[np.int64]

# ----------------------------------------------------------------------------------------------
# noise and shared helpers


class NoiseSource(Protocol):
    """Where the mechanism's noise comes from (exact sampler in production, fixed in tests)."""

    def geometric(self, epsilon: float, size: int) -> I64:
        """``size`` i.i.d. two-sided geometric ``G(e^{-ε})`` draws."""
        ...


class ExactNoise:
    """Two-sided geometric noise from :func:`dpfreq.noise.sample_discrete_laplace` (exact).

    ``G(e^{-ε})``  is the discrete Laplace with ``γ = ε`` (rounded down to a fraction,
    so the noise is never smaller than asked for).
    """

    def __init__(self, generator: np.random.Generator) -> None:
        self.generator = generator

    def geometric(self, epsilon: float, size: int) -> I64:
        if size == 0:
            return np.zeros(0, dtype=np.int64)
        gamma = epsilon_to_fraction(epsilon)
        return sample_discrete_laplace(gamma, size, rng=self.generator)


def merge_prevalences(counts: I64, prevalences: I64) -> tuple[I64, I64]:
    """Sum the prevalences of equal counts; drop zero prevalences; ascending counts."""
    if counts.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    keys, inverse = np.unique(counts, return_inverse=True)
    sums = np.zeros(keys.size, dtype=np.int64)
    np.add.at(sums, inverse, prevalences)
    keep = sums > 0
    return keys[keep].astype(np.int64), sums[keep]


def round_half_up(num: Any, den: Any) -> Any:
    """``round(max(num/den, 0))`` with ``round(x) = ⌊x + 1/2⌋``, exactly in integers."""
    out = (2 * num + den) // (2 * den)
    return np.maximum(out, 0) if isinstance(out, np.ndarray) else max(out, 0)


def fit_non_increasing(values: NDArray[Any], weights: NDArray[Any] | None = None
                       ) -> NDArray[np.float64]:
    """Weighted least-squares non-increasing fit (PAVA), via scipy."""
    if values.size == 0:
        return np.zeros(0, dtype=np.float64)
    w = None if weights is None else np.asarray(weights, dtype=np.float64)
    res = isotonic_regression(np.asarray(values, dtype=np.float64), weights=w, increasing=False)
    return np.asarray(res.x, dtype=np.float64)


def fit_blocks(values: NDArray[Any], weights: NDArray[Any] | None = None) -> I64:
    """Block start indices (plus the end) of the non-increasing PAVA fit."""
    w = None if weights is None else np.asarray(weights, dtype=np.float64)
    res = isotonic_regression(np.asarray(values, dtype=np.float64), weights=w, increasing=False)
    return np.asarray(res.blocks, dtype=np.int64)


def rounded_isotonic(numerators: I64, gaps: I64 | None = None) -> I64:
    """Steps L1 / H5–H6: non-increasing fit, clamp at 0, round — exactly on integers.

    With ``gaps=None`` the data are the integers ``numerators`` with unit weights (L1). With gaps
    ``g_i`` the data are ``numerators_i / g_i`` with weights ``g_i²`` (H5), so a block's weighted
    mean is ``Σ g_i·numerators_i / Σ g_i²``, computed in Python integers (no overflow) and
    rounded with :func:`round_half_up`. scipy supplies the block structure.
    """
    m = numerators.size
    if m == 0:
        return np.zeros(0, dtype=np.int64)
    if gaps is None:
        starts = fit_blocks(numerators)
        sums = np.add.reduceat(numerators, starts[:-1])
        lens = np.diff(starts)
        block_values = round_half_up(sums, lens).astype(np.int64)
    else:
        g = gaps.astype(np.float64)
        starts = fit_blocks(numerators / g, g * g)
        gi = gaps.astype(object)
        num = np.add.reduceat(gi * numerators.astype(object), starts[:-1])
        den = np.add.reduceat(gi * gi, starts[:-1])
        block_values = np.array([round_half_up(int(a), int(b)) for a, b in zip(num, den,
                                                                                strict=True)],
                                dtype=np.int64)
    return np.repeat(block_values, np.diff(starts))


def sorted_unique(values: I64) -> I64:
    """Sorted distinct values (sort-based; numpy's hash-based ``unique`` is slower here)."""
    a = np.sort(values)
    if a.size == 0:
        return a
    return a[np.concatenate(([True], a[1:] != a[:-1]))]


def cumulative_to_prevalences(positions: I64, cumulative: I64) -> tuple[I64, I64]:
    """Prevalences ``y_i − y_{i+1}`` (``y_{m+1} = 0``) of a non-increasing cumulative vector."""
    prev = cumulative - np.append(cumulative[1:], 0)
    keep = prev > 0
    return positions[keep].astype(np.int64), prev[keep].astype(np.int64)



class SimulationNoise:
    """Two-sided geometric noise from numpy's geometric sampler, for simulations only.

    ``Z = G1 − G2`` with ``G1, G2`` i.i.d. geometric on ``{0, 1, ...}`` with ratio
    ``α = e^{−γ}`` has the discrete Laplace law of :class:`ExactNoise` (same fraction ``γ``),
    up to floating-point rounding of ``α``. It is used to push the known noise law through the
    mechanism's post-processing around a released estimate (error statements, planning); it is
    never used to protect data.
    """

    def __init__(self, generator: np.random.Generator) -> None:
        self.generator = generator

    def geometric(self, epsilon: float, size: int) -> I64:
        gamma = epsilon_to_fraction(epsilon)
        success = -math.expm1(-float(gamma))  # 1 − α
        if size == 0 or success >= 1.0:
            return np.zeros(size, dtype=np.int64)
        g = self.generator.geometric(success, size=(2, size)).astype(np.int64, copy=False)
        return np.subtract(g[0], g[1])  # numpy's geometric is int64 already: no copy


@dataclass
class Outcome:
    """What a mechanism run produced (turned into a release by the entry point).

    ``params`` holds the mechanism's public working parameters (``T``, ``M``, ...);
    ``fractions`` the exact ε fractions the noise was calibrated with.
    """

    counts: I64
    prevalences: I64
    n_estimate: int
    regime: str
    params: dict[str, Any] = field(default_factory=dict)


def epsilon_fractions(split: tuple[float, float, float]) -> list[Fraction]:
    """The exact fractions ``γ_i`` (rounded down) the noise of each budget part uses."""
    return [epsilon_to_fraction(e) if e > 0 else Fraction(0) for e in split]
