"""Per-window discrete Gaussian noise calibrated to (ε, δ) by its exact privacy loss distribution.

Daily reach (rolling windows of width 1) and the other per-period families change in many
windows at once when an item is active in many periods: one item moves each of up to ``n``
window counts by one (``n = T`` at item level, ``W`` at event level). Independent
noise per window then has ℓ1 sensitivity ``n`` but ℓ2 sensitivity only ``√n``, which the
discrete Gaussian exploits; the zCDP route of the plan (``ρ + 2√(ρ ln(1/δ)) <= ε``) pays for
that conversion's slack (its σ² is about 1.6× what the exact (ε, δ) needs at ε = 1,
δ = 10^-6, ``n = 30``).

**The mechanism.** Each window of the family gets independent discrete Gaussian noise
``Pr[z] ∝ e^{−z²/(2σ²)}`` (the node law :class:`~dpfreq.windows.laws.node.DiscreteGaussian`,
the same keyed source as the zCDP route), with σ² the smallest integer whose certified
``δ(ε_s)`` is at most ``δ_s`` (the structure's share of the call's (ε, δ) under basic
composition), drawn as given by the exact keyed sampler
(:class:`~dpfreq.windows.noise.keyed.KeyedDiscreteGaussian` takes any integer σ²).

**Why it is (ε_s, δ_s)-DP.** Neighbours move at most ``n`` window counts, each by one (adding or
removing one item changes an item count of a window by at most one; at ``item_replace`` a
removal and an addition together still move each window by at most one, in at most
``min(2n, windows)`` windows). The noisy windows are independent, so the privacy loss of the
release is the sum of the losses of the moved windows, each that of a discrete Gaussian against
its unit shift, ``L(z) = (1 − 2z)/(2σ²)``; fewer moved windows compose fewer such losses and
have a smaller ``δ(ε)``, and a shift by −1 has the same loss law as +1 (the law is symmetric),
so the worst case in both directions is ``n`` unit shifts. Its privacy loss distribution is the
``n``-fold composition of the one-window PLD, computed on the grid ``ℤ/(2σ²)`` — on which every
loss lies exactly, so nothing is rounded — by :func:`dpfreq.accounting.pld.unit_shifts_delta`
and read off as a certified ``δ(ε)`` (float masses with their error carried, tails moved to
+∞, outward rounding); :func:`dpfreq.accounting.pld.unit_shifts_sigma2` bisects for the
smallest integer σ² it certifies. The answers are ``exact + noise`` in integers, which is the
noisy measurement of each window itself (the measurement boundary of every per-query
structure: nothing is published but these integers and public half-widths).

The chooser considers it for rolling windows under the plan's basic-composition route when
δ > 0 (under zCDP accounting the per-query Gaussian of
:mod:`dpfreq.windows.structures.windows` already applies), lists it only where it predicts less
error than the per-window Laplace (:attr:`~dpfreq.windows.structures.base.Structure.refines`),
and keeps it where its predicted RMSE is the smallest; its reason then also names the best
structure of the zCDP plan. ``docs/theory/windows.md`` has the argument in full.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, ClassVar

from dpfreq.accounting.pld import unit_shifts_sigma2
from dpfreq.errors import ParameterError
from dpfreq.windows.laws.node import DiscreteGaussian
from dpfreq.windows.structures.base import Structure, register
from dpfreq.windows.structures.protocol import Calibration
from dpfreq.windows.structures.windows import PerQuery

__all__ = ["PerQueryGaussian"]


@register
class PerQueryGaussian(PerQuery):
    """One independent discrete Gaussian noise per window, its σ² calibrated to the
    structure's (ε, δ) by the exact privacy loss distribution (module docstring)."""

    name = "per_query_gaussian"
    #: rolling windows (daily reach is width 1): a cumulative curve is better served by the
    #: counters (their RMSE grows like log T, a per-window Gaussian's like √T), one window
    #: by the Laplace (ℓ2 = ℓ1 = 1)
    families: ClassVar[tuple[str, ...]] = ("rolling",)
    requires = "delta > 0 under basic composition (it is calibrated to (epsilon, delta))"
    #: ``auto`` lists it only where it predicts less error than the per-window Laplace (one
    #: moved window, or few at event level, favour the Laplace: the choice is then the same
    #: without it, and so is the release)
    refines = "per_query"

    def __init__(self, family: str, k: int, horizon: int, level: str, eps: Fraction,
                 delta: float, width: int | None = None, group_size: int = 1, *,
                 rho: float | None = None, noise_kind: str = "gaussian",
                 **layout: Any) -> None:
        # calibrated on (ε, δ), never on ρ: the base class's Laplace slot is replaced
        super().__init__(family, k, horizon, level, eps, delta, width, group_size, rho=None,
                         noise_kind="laplace", **layout)
        self.noise_kind = "gaussian"
        self.law = DiscreteGaussian(self.sigma2)

    @classmethod
    def best_for(cls, family: str, k: int, horizon: int, unit: str, eps: Fraction,
                 delta: float, width: int | None, *, rho: float | None, noise_kind: str,
                 layouts: dict[str, float] | None = None) -> Structure | None:
        if rho is not None or delta <= 0:  # the zCDP route has its own per-query Gaussian
            return None
        s = cls(family, k, horizon, unit, eps, delta, width)
        return s if s.usable else None

    def _moved(self) -> int:
        """Windows one neighbour moves (each by at most one)."""
        n = self.shape.l1
        if self.unit == "item_replace":
            return min(2 * n, self.n_family)
        return n

    def _calibrate_exact(self) -> tuple[Fraction, int, Calibration]:
        moved = self._moved()
        if self.delta <= 0:
            raise ParameterError(f"{self.name}: needs delta > 0")
        least = unit_shifts_sigma2(Fraction(self.eps), float(self.delta), moved)
        if least <= 0:
            raise ParameterError(f"{self.name}: no representable σ² for this budget")
        sigma2 = least  # the exact keyed sampler draws an integer σ² as given
        return Fraction(0), sigma2, Calibration(
            moved, "(epsilon, delta) by the exact privacy loss distribution",
            epsilon_piece=Fraction(self.eps), l2_sensitivity=math.sqrt(moved), sigma2=sigma2)
