"""Privacy losses as values: what one release costs, stated once and read by every rule.

A :class:`PrivacyLoss` describes the pair of output laws a mechanism has on neighbouring
inputs, through the views the composition rules need (:mod:`dpfreq.accounting.rules`):

* a **bad event** of probability at most :meth:`~PrivacyLoss.bad_delta` outside of which
  ("the good part") the loss is well behaved — every ``(ε, δ)``-DP pair splits so, with a good
  part that is ε-indistinguishable (Kairouz, Oh & Viswanath 2015, Theorem 2.5);
* :meth:`~PrivacyLoss.epsilon_bound`: a bound on the loss of every good output (``None`` when
  the loss is unbounded, as a Gaussian's);
* :meth:`~PrivacyLoss.renyi`: a bound on the order-α Rényi divergence of the good part;
* :meth:`~PrivacyLoss.pld`: a dominating privacy loss distribution, for batches declared in
  advance (``None`` when none is known, as for a zCDP statement alone).

Mechanisms with a known law (discrete Laplace, discrete Gaussian, partition selection) are in
:mod:`dpfreq.accounting.mechanisms`. Every figure is a certified bound (fractions, outward
rounding); every loss converts to a group of two units (:meth:`~PrivacyLoss.doubled`, the
``item`` → ``item_replace`` conversion) and to a JSON-ready mapping (a ledger stores it).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

from dpfreq.accounting.composition import group_delta
from dpfreq.accounting.pld import STEP, PrivacyLossDistribution, approximate_pld
from dpfreq.accounting.renyi import randomized_response_renyi, smallest_epsilon_over_orders
from dpfreq.accounting.zcdp import zcdp_epsilon

__all__ = ["ApproximateDP", "Composed", "PrivacyLoss", "PureDP", "ZeroConcentratedDP",
           "fraction_text", "runs", "zcdp_loss"]


def fraction_text(value: Fraction) -> str:
    """``"p/q"``: how a fraction is stored (exact, and hashed as text)."""
    return f"{value.numerator}/{value.denominator}"


class PrivacyLoss(ABC):
    """The privacy loss of one mechanism (or of a batch fixed in advance); see the module.

    Examples
    --------
    >>> loss = ApproximateDP(Fraction(1, 2), Fraction(1, 10**7))
    >>> loss.epsilon_bound(), loss.bad_delta(), loss.implies(Fraction(1), Fraction(1, 10**6))
    (Fraction(1, 2), Fraction(1, 10000000), True)
    """

    #: the name stored with the loss (``to_dict()["kind"]``)
    kind: ClassVar[str]

    @abstractmethod
    def epsilon_bound(self) -> Fraction | None:
        """A bound on the privacy loss of every output off the bad event (None: unbounded)."""

    def bad_delta(self) -> Fraction:
        """The probability of the bad event (0 for a pure or a Rényi-bounded loss)."""
        return Fraction(0)

    @abstractmethod
    def renyi(self, alpha: Fraction) -> Fraction:
        """A certified bound on the order-``α`` Rényi divergence of the good part."""

    def pld(self, step: Fraction = STEP) -> PrivacyLossDistribution | None:
        """A dominating privacy loss distribution (None when none is known)."""
        return None

    @abstractmethod
    def doubled(self) -> PrivacyLoss:
        """The loss for a group of two units (a replacement is a removal and an addition)."""

    @abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with ``kind`` and every parameter (fractions as ``"p/q"`` text)."""

    @abstractmethod
    def describe(self) -> str:
        """The loss in words."""

    def implies(self, epsilon: Fraction, delta: Fraction) -> bool:
        """True when the loss certifiably implies ``(ε, δ)``-DP: through its bound off the bad
        event, or through its Rényi bound converted at ``δ`` less the bad event's share."""
        bad = self.bad_delta()
        if bad > delta:
            return False
        bound = self.epsilon_bound()
        if bound is not None and bound <= epsilon:
            return True
        if delta - bad <= 0:
            return False
        eps, _ = smallest_epsilon_over_orders(self.renyi, delta - bad)
        return eps <= epsilon


@dataclass(frozen=True)
class PureDP(PrivacyLoss):
    """Any ε-DP mechanism: dominated by randomized response with parameter ε.

    Examples
    --------
    >>> loss = PureDP(Fraction(1, 2))
    >>> loss.epsilon_bound(), loss.doubled().epsilon_bound()
    (Fraction(1, 2), Fraction(1, 1))
    """

    epsilon: Fraction
    kind: ClassVar[str] = "pure"

    def epsilon_bound(self) -> Fraction:
        return self.epsilon

    def renyi(self, alpha: Fraction) -> Fraction:
        return randomized_response_renyi(self.epsilon, alpha)

    def pld(self, step: Fraction = STEP) -> PrivacyLossDistribution:
        return approximate_pld(self.epsilon, Fraction(0), step)

    def doubled(self) -> PureDP:
        return PureDP(2 * self.epsilon)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "epsilon": fraction_text(self.epsilon)}

    def describe(self) -> str:
        return f"pure {float(self.epsilon):.6g}-DP"


@dataclass(frozen=True)
class ApproximateDP(PrivacyLoss):
    """Any (ε, δ)-DP mechanism: a bad event of probability δ, ε-indistinguishable off it.

    Examples
    --------
    >>> ApproximateDP(Fraction(1), Fraction(1, 10**6)).bad_delta()
    Fraction(1, 1000000)
    """

    epsilon: Fraction
    delta: Fraction
    kind: ClassVar[str] = "approximate"

    def epsilon_bound(self) -> Fraction:
        return self.epsilon

    def bad_delta(self) -> Fraction:
        return self.delta

    def renyi(self, alpha: Fraction) -> Fraction:
        return randomized_response_renyi(self.epsilon, alpha)

    def pld(self, step: Fraction = STEP) -> PrivacyLossDistribution:
        return approximate_pld(self.epsilon, self.delta, step)

    def doubled(self) -> ApproximateDP:
        return ApproximateDP(2 * self.epsilon, group_delta(self.epsilon, self.delta, 2))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "epsilon": fraction_text(self.epsilon),
                "delta": fraction_text(self.delta)}

    def describe(self) -> str:
        return f"({float(self.epsilon):.6g}, {float(self.delta):.3g})-DP"


@dataclass(frozen=True)
class ZeroConcentratedDP(PrivacyLoss):
    """A ρ-zCDP mechanism (Bun & Steinke 2016): order-α Rényi divergence at most ``ρα``.

    Examples
    --------
    >>> loss = ZeroConcentratedDP(Fraction(1, 50))
    >>> loss.renyi(Fraction(5)), loss.doubled().rho
    (Fraction(1, 10), Fraction(2, 25))
    """

    rho: Fraction
    kind: ClassVar[str] = "zcdp"

    def epsilon_bound(self) -> None:
        return None

    def renyi(self, alpha: Fraction) -> Fraction:
        return self.rho * alpha

    def doubled(self) -> ZeroConcentratedDP:
        return ZeroConcentratedDP(4 * self.rho)  # group privacy: k²ρ (their Proposition 1.9)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "rho": fraction_text(self.rho)}

    def describe(self) -> str:
        return f"{float(self.rho):.6g}-zCDP"

    def implies(self, epsilon: Fraction, delta: Fraction) -> bool:
        return (delta > 0 and zcdp_epsilon(self.rho, delta) <= epsilon) or \
            super().implies(epsilon, delta)


@dataclass(frozen=True)
class Composed(PrivacyLoss):
    """Several losses run together, each fixed in advance (one release's parts, or a plan).

    The bad events unite (their probabilities add), the bounds and Rényi divergences add, and
    the PLDs convolve.

    Examples
    --------
    >>> both = Composed((PureDP(Fraction(1, 4)), ApproximateDP(Fraction(1, 4), Fraction(1, 10**7))))
    >>> both.epsilon_bound(), both.bad_delta()
    (Fraction(1, 2), Fraction(1, 10000000))
    """

    parts: tuple[PrivacyLoss, ...]
    kind: ClassVar[str] = "composed"

    def epsilon_bound(self) -> Fraction | None:
        total = Fraction(0)
        for part in self.parts:
            bound = part.epsilon_bound()
            if bound is None:
                return None
            total += bound
        return total

    def bad_delta(self) -> Fraction:
        return sum((p.bad_delta() for p in self.parts), Fraction(0))

    def renyi(self, alpha: Fraction) -> Fraction:
        return sum((count * p.renyi(alpha) for p, count in runs(self.parts)), Fraction(0))

    def pld(self, step: Fraction = STEP) -> PrivacyLossDistribution | None:
        out = PrivacyLossDistribution.identity(step)
        for part, count in runs(self.parts):
            one = part.pld(step)
            if one is None:
                return None
            out = out.compose(one.self_compose(count))
        return out

    def doubled(self) -> Composed:
        return Composed(tuple(p.doubled() for p in self.parts))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "parts": [p.to_dict() for p in self.parts]}

    def describe(self) -> str:
        said = [f"{count} × {part.describe()}" if count > 1 else part.describe()
                for part, count in runs(self.parts)]
        return "composition of " + ", ".join(said)


def runs(parts: tuple[PrivacyLoss, ...]) -> list[tuple[PrivacyLoss, int]]:
    """Equal losses counted together (the PLD of k equal ones is built by squaring)."""
    counts: dict[PrivacyLoss, int] = {}
    for part in parts:
        counts[part] = counts.get(part, 0) + 1
    return list(counts.items())


def zcdp_loss(rhos: Sequence[float | Fraction | None]) -> ZeroConcentratedDP | None:
    """The loss of parts that are each ρ_i-zCDP: ``Σρ_i``-zCDP (None when a part has no ρ,
    i.e. is accounted otherwise, or there are no parts).

    Examples
    --------
    >>> zcdp_loss([0.01, 0.02]).rho == Fraction(0.01) + Fraction(0.02)
    True
    >>> zcdp_loss([0.01, None]) is None
    True
    """
    if not rhos or any(r is None for r in rhos):
        return None
    return ZeroConcentratedDP(sum((Fraction(r) for r in rhos if r is not None), Fraction(0)))
