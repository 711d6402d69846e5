"""The privacy losses of dpfreq's mechanisms, from their noise parameters.

* :class:`DiscreteLaplace` — ``DLap(e^{-γ})`` noise on an integer query of ℓ1 sensitivity Δ.
  With Δ = 1 one neighbour moves one coordinate by one, and the loss is exactly ``±γ``: the
  pair is randomized response with parameter γ (exact PLD and Rényi curve). With Δ > 1 the
  mechanism is ``γΔ``-DP and is accounted as randomized response with parameter ``γΔ`` (sound
  for every way the Δ may spread over coordinates; loose when it spreads).
* :class:`DiscreteGaussian` — discrete Gaussian noise of variance parameter σ² on a query of
  ℓ2 sensitivity Δ: ``Δ²/(2σ²)``-zCDP (Canonne, Kamath & Steinke 2020). When the whole
  sensitivity is one integer shift of one coordinate (``one_coordinate``) its exact PLD is known
  too (:func:`~dpfreq.accounting.pld.discrete_gaussian_pld`).
* :class:`PartitionSelection` — thresholded discrete Laplace on the item count of each group
  (:mod:`dpfreq.grouped.selection`): each of the at most ``m`` groups a unit touches is one
  ``(γ, p₁)``-DP bit (shifted count: γ-DP; a group only the unit holds: released with
  probability ``p₁``), so the selection is the composition of ``m`` such bits.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

from dpfreq.accounting.losses import PrivacyLoss, fraction_text
from dpfreq.accounting.pld import (
    STEP,
    PrivacyLossDistribution,
    approximate_pld,
    discrete_gaussian_pld,
    discrete_laplace_pld,
)
from dpfreq.accounting.renyi import randomized_response_renyi

__all__ = ["DiscreteGaussian", "DiscreteLaplace", "PartitionSelection"]


@dataclass(frozen=True)
class DiscreteLaplace(PrivacyLoss):
    """``DLap(e^{-γ})`` noise on an integer query of ℓ1 sensitivity ``Δ`` (module docstring).

    Examples
    --------
    >>> loss = DiscreteLaplace(Fraction(1, 20), 1)
    >>> loss.epsilon_bound(), round(float(loss.pld().self_compose(365).epsilon_at(1e-6)), 3)
    (Fraction(1, 20), 4.613)
    """

    gamma: Fraction
    sensitivity: int
    kind: ClassVar[str] = "discrete_laplace"

    def epsilon_bound(self) -> Fraction:
        return self.gamma * self.sensitivity

    def renyi(self, alpha: Fraction) -> Fraction:
        return randomized_response_renyi(self.gamma * self.sensitivity, alpha)

    def pld(self, step: Fraction = STEP) -> PrivacyLossDistribution:
        if self.sensitivity == 1:
            return discrete_laplace_pld(self.gamma, 1, step)
        return approximate_pld(self.gamma * self.sensitivity, Fraction(0), step)

    def doubled(self) -> DiscreteLaplace:
        return DiscreteLaplace(self.gamma, 2 * self.sensitivity)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "gamma": fraction_text(self.gamma),
                "sensitivity": self.sensitivity}

    def describe(self) -> str:
        return (f"discrete Laplace (γ = {float(self.gamma):.6g}, ℓ1 sensitivity "
                f"{self.sensitivity})")


@dataclass(frozen=True)
class DiscreteGaussian(PrivacyLoss):
    """Discrete Gaussian noise of variance parameter ``σ²`` on a query of ℓ2 sensitivity
    ``Δ`` (module docstring); ``one_coordinate``: Δ is an integer shift of one coordinate.

    Examples
    --------
    >>> loss = DiscreteGaussian(Fraction(100), Fraction(1), one_coordinate=True)
    >>> loss.renyi(Fraction(2)), loss.pld() is not None
    (Fraction(1, 100), True)
    """

    sigma2: Fraction
    sensitivity: Fraction
    one_coordinate: bool
    kind: ClassVar[str] = "discrete_gaussian"

    def epsilon_bound(self) -> None:
        return None

    @property
    def rho(self) -> Fraction:
        """``Δ²/(2σ²)``: the zCDP parameter."""
        return self.sensitivity * self.sensitivity / (2 * self.sigma2)

    def renyi(self, alpha: Fraction) -> Fraction:
        return self.rho * alpha

    def pld(self, step: Fraction = STEP) -> PrivacyLossDistribution | None:
        if not (self.one_coordinate and self.sensitivity.denominator == 1):
            return None
        return discrete_gaussian_pld(self.sigma2, int(self.sensitivity), step)

    def doubled(self) -> DiscreteGaussian:
        # the removal and the addition may move two coordinates: no longer one coordinate
        return DiscreteGaussian(self.sigma2, 2 * self.sensitivity, False)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "sigma2": fraction_text(self.sigma2),
                "sensitivity": fraction_text(self.sensitivity),
                "one_coordinate": self.one_coordinate}

    def describe(self) -> str:
        return (f"discrete Gaussian (σ² = {float(self.sigma2):.6g}, ℓ2 sensitivity "
                f"{float(self.sensitivity):.6g}; {float(self.rho):.6g}-zCDP)")


@dataclass(frozen=True)
class PartitionSelection(PrivacyLoss):
    """Thresholded discrete Laplace selection of groups (module docstring): ``m`` bits, each
    ``(γ, p₁)``-DP, with ``single_probability`` an upper bound on ``p₁``.

    Examples
    --------
    >>> sel = PartitionSelection(Fraction(1, 4), Fraction(1, 2 * 10**6), 2)
    >>> sel.epsilon_bound(), sel.bad_delta()
    (Fraction(1, 2), Fraction(1, 1000000))
    """

    gamma: Fraction
    single_probability: Fraction
    max_groups: int
    kind: ClassVar[str] = "partition_selection"

    def epsilon_bound(self) -> Fraction:
        return self.max_groups * self.gamma

    def bad_delta(self) -> Fraction:
        return self.max_groups * self.single_probability

    def renyi(self, alpha: Fraction) -> Fraction:
        return self.max_groups * randomized_response_renyi(self.gamma, alpha)

    def pld(self, step: Fraction = STEP) -> PrivacyLossDistribution:
        one = approximate_pld(self.gamma, self.single_probability, step)
        return one.self_compose(self.max_groups)

    def doubled(self) -> PartitionSelection:
        # a replacement moves the item counts of the at most 2m groups in the symmetric
        # difference of the removed and the added unit's groups, each by one
        return PartitionSelection(self.gamma, self.single_probability, 2 * self.max_groups)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "gamma": fraction_text(self.gamma),
                "single_probability": fraction_text(self.single_probability),
                "max_groups": self.max_groups}

    def describe(self) -> str:
        return (f"partition selection ({self.max_groups} group(s) per unit, γ = "
                f"{float(self.gamma):.6g}, p₁ <= {float(self.single_probability):.3g})")
