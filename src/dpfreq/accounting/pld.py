"""Privacy loss distributions on a grid, composed exactly and read off as a certified (ε, δ).

For a pair of output laws ``(P, Q)`` of one mechanism on neighbouring inputs, the *privacy loss*
of an output ``o`` is ``L(o) = ln(P(o)/Q(o))`` and its law under ``P`` is the PLD. The tightest
δ at a given ε is the hockey-stick divergence ``δ(ε) = E_P[(1 − e^{ε−L})_+]`` (outputs with
``Q(o) = 0`` count fully, as mass at ``L = +∞``). Losses of independent mechanisms add, so the PLD
of a composition fixed in advance is the convolution of the PLDs (Dwork & Rothblum 2016;
Koskela, Jälkö & Honkela 2020; Sommer, Meiser & Mohammadi 2019; the method of Google's
``dp_accounting``). Every pair dpfreq composes here is symmetric (the pair and its swap have one
PLD), so one direction suffices.

**Pessimistic, certified.** Each loss is rounded *up* to the grid ``step·ℤ`` (``δ(ε)`` grows
with every loss value, so a composition of rounded-up PLDs has a larger ``δ(ε)`` than the true
one: couple the two sums). Masses are floats: every mass is a sum of products of non-negative
numbers, whose computed value is within a relative ``(terms + 2)·2^-53`` of the exact one (no
cancellation), and each distribution carries the accumulated relative bound ``error`` so that
``true mass <= mass·(1 + error)``. Mass dropped from the top of a distribution moves to ``+∞``,
mass dropped from the bottom moves up onto the lowest kept point; a distribution too wide to
convolve directly is coarsened by rounding its losses up to a coarser grid. All of these only
raise δ. :meth:`delta_at` then bounds the hockey stick with outward rounding, and
:meth:`epsilon_at` returns a grid ε whose certified δ is within the target.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from dpfreq.accounting.numbers import float_at_least
from dpfreq.accounting.zcdp import gaussian_sigma2_at_least, zcdp_rho_at_most

__all__ = [
    "STEP",
    "PrivacyLossDistribution",
    "approximate_pld",
    "discrete_gaussian_pld",
    "discrete_laplace_pld",
    "unit_shifts_delta",
    "unit_shifts_sigma2",
]

#: the default grid of loss values (dp_accounting's default discretisation interval)
STEP = Fraction(1, 10**4)
_U = 2.0**-53 * 1.01  # unit roundoff with room for the bound's own rounding
_TAIL = 1e-24  # mass each side may leave the grid at each composition (moved, never dropped)
_MAX_PRODUCT = 1 << 25  # largest number of pairwise products one convolution forms
_MAX_POINTS = 1 << 17  # points kept before coarsening


@dataclass(frozen=True)
class PrivacyLossDistribution:
    """A PLD on the grid ``step·ℤ``: ``mass[j]`` at loss ``index[j]·step``, ``infinity`` at +∞.

    Attributes
    ----------
    step : Fraction
        The grid of loss values.
    index : ndarray of int64
        Grid points, ascending.
    mass : ndarray of float64
        Computed masses; the true ones are at most ``mass·(1 + error)``.
    infinity : float
        An upper bound on the mass at ``+∞``.
    error : float
        The relative error bound of every mass.

    Examples
    --------
    >>> pld = approximate_pld(Fraction(1, 10), Fraction(0)).self_compose(100)
    >>> round(float(pld.epsilon_at(1e-6)), 4), pld.delta_at(Fraction(10)) < 1e-20
    (4.7746, True)
    """

    step: Fraction
    index: NDArray[np.int64]
    mass: NDArray[np.float64]
    infinity: float
    error: float

    @classmethod
    def from_points(cls, losses: list[Fraction], masses: list[float], *, infinity: float,
                    error: float, step: Fraction = STEP) -> PrivacyLossDistribution:
        """A PLD of exact losses (rounded up onto the grid) with masses of relative ``error``."""
        index = np.array([math.ceil(loss / step) for loss in losses], dtype=np.int64)
        return _aggregate(step, index, np.asarray(masses, dtype=np.float64), infinity,
                          error + 2 * len(losses) * _U)

    @classmethod
    def identity(cls, step: Fraction = STEP) -> PrivacyLossDistribution:
        """The PLD of a mechanism that reveals nothing (loss 0 with probability 1)."""
        return cls(step, np.zeros(1, dtype=np.int64), np.ones(1), 0.0, 0.0)

    def compose(self, other: PrivacyLossDistribution) -> PrivacyLossDistribution:
        """The PLD of running both mechanisms (losses add; masses convolve)."""
        if other.step != self.step:
            raise ValueError("PLDs on different grids")
        a, b = self, other
        factor = 1
        while a.index.size * b.index.size > _MAX_PRODUCT:
            factor *= 2
            a, b = a.coarsened(factor), b.coarsened(factor)
        grid = int(np.gcd.reduce(np.concatenate([a.index - a.index[0], b.index - b.index[0]])))
        grid = max(grid, factor)
        dense_cost = ((int(a.index[-1] - a.index[0]) // grid + 1)
                      * (int(b.index[-1] - b.index[0]) // grid + 1))
        if dense_cost <= 8 * a.index.size * b.index.size:
            index, mass = _dense_convolve(a, b, grid)
        else:
            index, mass = _sparse_convolve(a, b)
        terms = min(a.index.size, b.index.size)
        error = (1 + a.error) * (1 + b.error) * (1 + (terms + 2) * _U) - 1 + 4 * _U
        return _trimmed(self.step, index, mass, a.infinity + b.infinity, error)

    def self_compose(self, count: int) -> PrivacyLossDistribution:
        """The PLD of ``count`` independent runs (by repeated squaring)."""
        out, power = PrivacyLossDistribution.identity(self.step), self
        while count:
            if count & 1:
                out = out.compose(power)
            count >>= 1
            if count:
                power = power.compose(power)
        return out

    def coarsened(self, factor: int) -> PrivacyLossDistribution:
        """Every loss rounded up to a multiple of ``factor`` grid steps (only raises δ)."""
        index = -((-self.index) // factor) * factor
        return _aggregate(self.step, index, self.mass, self.infinity,
                          self.error + 2 * _U * min(self.index.size, factor))

    def delta_at(self, epsilon: Fraction) -> float:
        """A certified upper bound on ``δ(ε) = E_P[(1 − e^{ε−L})_+]`` (plus the mass at +∞).

        Which points have ``L > ε`` is decided exactly (on the grid's integers); their
        ``L − ε`` is computed in floats and raised by more than its rounding error.
        """
        threshold = math.floor(Fraction(epsilon) / self.step)
        keep = self.index > threshold
        loss = self.index[keep].astype(np.float64) * float(self.step)
        eps = float(epsilon)
        excess = loss - eps + 1e-15 * (np.abs(loss) + abs(eps) + 1e-300)
        weight = -np.expm1(-excess) * (1 + 8 * _U)
        total = float(np.sum(self.mass[keep] * weight))
        bound = total * (1 + self.error) * (1 + (int(keep.sum()) + 8) * _U)
        return min(1.0, bound + self.infinity * (1 + 4 * _U))

    def epsilon_at(self, delta: float | Fraction) -> Fraction | None:
        """The smallest ε (to a relative 10^-10, rounded up) whose certified δ is at most
        ``delta``; ``None`` when even an infinite ε leaves more than ``delta`` (mass at +∞)."""
        target = float(delta)
        if self.infinity * (1 + 4 * _U) > target:
            return None
        hi = max(float(self.index[-1] * self.step), 0.0) + 1e-9
        if self.delta_at(Fraction(0)) <= target:
            return Fraction(0)
        lo = 0.0
        while hi - lo > 1e-10 * max(hi, 1e-3):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if self.delta_at(Fraction(mid)) <= target else (mid, hi)
        return Fraction(hi)


def _aggregate(step: Fraction, index: NDArray[np.int64], mass: NDArray[np.float64],
               infinity: float, error: float) -> PrivacyLossDistribution:
    """Sum the masses of equal grid points (sorted)."""
    points, inverse = np.unique(index, return_inverse=True)
    summed = np.bincount(inverse, weights=mass, minlength=points.size).astype(np.float64)
    return _trimmed(step, points.astype(np.int64), summed, infinity, error)


def _dense_convolve(a: PrivacyLossDistribution, b: PrivacyLossDistribution,
                    grid: int) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Direct convolution on the grid of ``grid`` steps (every index of ``a`` and of ``b`` is
    its first index plus a multiple of ``grid``)."""
    def dense(p: PrivacyLossDistribution) -> NDArray[np.float64]:
        out = np.zeros(int(p.index[-1] - p.index[0]) // grid + 1)
        np.add.at(out, (p.index - p.index[0]) // grid, p.mass)
        return out

    mass = np.convolve(dense(a), dense(b))
    index = np.arange(mass.size, dtype=np.int64) * grid + int(a.index[0] + b.index[0])
    nonzero = mass > 0
    return index[nonzero], mass[nonzero]


def _sparse_convolve(a: PrivacyLossDistribution, b: PrivacyLossDistribution
                     ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """All pairwise sums and products, then equal points summed."""
    index = np.add.outer(a.index, b.index).ravel()
    mass = np.multiply.outer(a.mass, b.mass).ravel()
    points, inverse = np.unique(index, return_inverse=True)
    summed = np.bincount(inverse, weights=mass, minlength=points.size).astype(np.float64)
    return points.astype(np.int64), summed


def _trimmed(step: Fraction, index: NDArray[np.int64], mass: NDArray[np.float64],
             infinity: float, error: float) -> PrivacyLossDistribution:
    """Move the tails beyond ``_TAIL`` (top to +∞, bottom up onto the lowest kept point) and
    coarsen a distribution with more than ``_MAX_POINTS`` points."""
    if index.size > 1:
        top = np.cumsum(mass[::-1])[::-1]  # mass at or above each point
        cut_hi = int(np.searchsorted(-top, -_TAIL, side="left"))
        cut_hi = max(cut_hi, 1)
        if cut_hi < index.size:
            infinity += float(top[cut_hi]) * (1 + error) * (1 + (index.size + 4) * _U)
            index, mass = index[:cut_hi], mass[:cut_hi]
        low = np.cumsum(mass)
        cut_lo = min(int(np.searchsorted(low, _TAIL, side="right")), index.size - 1)
        if cut_lo > 0:
            mass = mass[cut_lo:].copy()
            mass[0] += float(low[cut_lo - 1])
            index = index[cut_lo:]
            error += (cut_lo + 2) * _U
    pld = PrivacyLossDistribution(step, index, mass, float_at_least(Fraction(infinity)), error)
    factor = 2
    while pld.index.size > _MAX_POINTS:
        pld = pld.coarsened(factor)
        factor *= 2
    return pld


def approximate_pld(epsilon: Fraction, delta: Fraction,
                    step: Fraction = STEP) -> PrivacyLossDistribution:
    """The PLD dominating every ``(ε, δ)``-DP pair: mass δ at +∞ and randomized response ε
    scaled by ``1 − δ`` (Kairouz, Oh & Viswanath 2015; Murtagh & Vadhan 2016). With δ = 0 it
    is exact for randomized response and for the discrete Laplace mechanism of sensitivity 1.

    Examples
    --------
    >>> pld = approximate_pld(Fraction(1, 20), Fraction(0)).self_compose(365)
    >>> 4.61 < float(pld.epsilon_at(1e-6)) < 4.62
    True
    """
    e = float(epsilon)
    keep = 1.0 - float(delta)
    high = keep / (1.0 + math.exp(-e))
    low = keep / (1.0 + math.exp(e))
    return PrivacyLossDistribution.from_points(
        [epsilon, -epsilon], [high, low], infinity=float_at_least(delta), error=16 * _U,
        step=step)


def discrete_laplace_pld(gamma: Fraction, sensitivity: int,
                         step: Fraction = STEP) -> PrivacyLossDistribution:
    """The exact PLD of ``DLap(e^{-γ})`` against its shift by an integer ``Δ``.

    ``L(z) = γ(|z − Δ| − |z|)``: ``γΔ`` for ``z <= 0`` (mass ``1/(1+α)``), ``γ(Δ − 2z)`` for
    ``0 < z < Δ`` (mass ``(1−α)α^z/(1+α)``) and ``−γΔ`` for ``z >= Δ`` (mass ``α^Δ/(1+α)``),
    ``α = e^{-γ}``.
    """
    alpha = math.exp(-float(gamma))
    losses = [gamma * sensitivity, -gamma * sensitivity]
    masses = [1 / (1 + alpha), alpha**sensitivity / (1 + alpha)]
    for z in range(1, sensitivity):
        losses.append(gamma * (sensitivity - 2 * z))
        masses.append((1 - alpha) * alpha**z / (1 + alpha))
    return PrivacyLossDistribution.from_points(
        losses, masses, infinity=0.0, error=(4 * sensitivity + 16) * _U, step=step)


def discrete_gaussian_pld(sigma2: Fraction, sensitivity: int,
                          step: Fraction = STEP) -> PrivacyLossDistribution:
    """The PLD of the discrete Gaussian ``Pr[z] ∝ e^{−z²/(2σ²)}`` against its shift by an
    integer ``Δ`` (one coordinate): ``L(z) = (Δ² − 2zΔ)/(2σ²)``.

    Points with ``|z| <= 12σ + Δ`` are kept; a bound on the mass of both tails beyond (below
    10^-30) is put at ``+∞`` and again onto the lowest loss kept.
    """
    s2 = float(sigma2)
    reach = int(12 * math.sqrt(s2)) + sensitivity + 1
    z = np.arange(-reach, reach + 1, dtype=np.int64)
    terms = np.exp(-(z.astype(np.float64) ** 2) / (2 * s2))
    tail = 2 * math.exp(-((reach + 1) ** 2) / (2 * s2)) / -math.expm1(-(reach + 1) / s2)
    norm = float(np.sum(terms)) * (1 - (z.size + 4) * _U)
    masses = terms / norm
    losses = [(sensitivity * sensitivity - 2 * int(v) * sensitivity) / (2 * sigma2) for v in z]
    masses[-1] += tail / norm  # the negative tail, moved up onto the lowest loss kept
    return PrivacyLossDistribution.from_points(
        losses, list(masses), infinity=tail / norm, error=(reach + 64) * _U, step=step)


#: the largest number of unit shifts :func:`unit_shifts_sigma2` calibrates
MAX_SHIFTS = 1 << 16
#: the largest σ² :func:`unit_shifts_sigma2` calibrates: the PLD of one coordinate keeps
#: ``24σ`` points (about 140,000 here), a larger one costs too much to build and compose
MAX_SIGMA2 = 1 << 25


def unit_shifts_delta(sigma2: int, shifts: int, epsilon: Fraction) -> float:
    """A certified upper bound on ``δ(ε)`` of ``shifts`` independent discrete Gaussians of
    parameter ``σ²``, each against its shift by one.

    The one-coordinate loss ``(1 − 2z)/(2σ²)`` lies on the grid ``ℤ/(2σ²)`` exactly, so the
    PLD is built on that grid (no loss is rounded) and composed ``shifts`` times; only the
    float masses and the tails (moved to ``+∞``) add to the bound.

    Examples
    --------
    >>> unit_shifts_delta(536, 30, Fraction(1)) <= 1e-6 < unit_shifts_delta(535, 30, Fraction(1))
    True
    """
    one = discrete_gaussian_pld(Fraction(sigma2), 1, step=Fraction(1, 2 * sigma2))
    return one.self_compose(shifts).delta_at(Fraction(epsilon))


@functools.lru_cache(maxsize=256)
def unit_shifts_sigma2(epsilon: Fraction, delta: float, shifts: int) -> int:
    """The smallest integer ``σ²`` whose ``shifts`` unit shifts of independent discrete
    Gaussians are certified ``(ε, δ)``-DP by :func:`unit_shifts_delta`; 0 when none up to
    :data:`MAX_SIGMA2` is (or the arguments are out of range: ``ε > 0``, ``0 < δ < 1``,
    ``1 <= shifts <=`` :data:`MAX_SHIFTS`).

    A mechanism whose neighbours move at most ``n`` independent integer coordinates by at most
    one each is ``(ε, δ)``-DP with this ``σ²`` at ``shifts = n``: fewer or smaller moves are a
    sub-vector of the worst case (post-processing), and a shift by −1 has the loss law of +1.

    Examples
    --------
    >>> unit_shifts_sigma2(Fraction(1), 1e-6, 30)
    536
    """
    if not (epsilon > 0 and 0 < delta < 1 and 1 <= shifts <= MAX_SHIFTS):
        return 0
    # the zCDP conversion's σ² is valid (certified δ checked all the same); bisect below it
    hi = min(MAX_SIGMA2, max(1, gaussian_sigma2_at_least(
        math.sqrt(shifts) * (1 + 1e-12), zcdp_rho_at_most(Fraction(epsilon), delta))))
    while unit_shifts_delta(hi, shifts, epsilon) > delta:
        if hi >= MAX_SIGMA2:
            return 0
        hi = min(2 * hi, MAX_SIGMA2)
    lo = 1
    while lo < hi:
        mid = (lo + hi) // 2
        if unit_shifts_delta(mid, shifts, epsilon) <= delta:
            hi = mid
        else:
            lo = mid + 1
    return lo
