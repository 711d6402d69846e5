"""The node law of an online counter: how a budget becomes exact node noise, as a typed value.

Every online counter measures integer rows (node sums, or the rows ``R x`` of a factorization)
and adds to each row one independent draw of its **node law**: discrete Laplace
``Pr[z] ∝ e^{−γ|z|}`` or discrete Gaussian ``Pr[z] ∝ e^{−z²/(2σ²)}``. The law is calibrated
from the counter's exact sensitivity (``ℓ1`` or ``ℓ2²`` of the rows one neighbour changes,
integers) and the structure's budget:

* pure ``ε_s``-DP: ``γ = ε_s/ℓ1`` (rounded down on fractions);
* ``ρ_s``-zCDP with discrete Laplace: a pure ``ε_0`` piece with ``ε_0²/2 <= ρ_s`` exactly
  (:func:`dpfreq.accounting.zcdp.pure_epsilon_for_rho`);
* ``ρ_s``-zCDP with the discrete Gaussian: ``σ² >= ℓ2²/(2ρ_s)`` on fractions (the sensitivity is
  an integer ``ℓ2²``), rounded up to the form ``t·u`` the exact sampler needs.

The same rounding as the offline counters (:mod:`dpfreq.windows.structures.counters`), so a
stream and an offline release of the same structure draw the same node law — the law itself is
the windows' law value (:mod:`dpfreq.windows.laws`: its variance, its keyed source, the exact
quantiles of sums of its draws). The noise is a deterministic function of (secret key, structure
name, node id), so a stream never stores or redraws noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.accounting.zcdp import pure_epsilon_for_rho
from dpfreq.noise import discrete_laplace_gamma, gaussian_sigma2
from dpfreq.windows.laws import DiscreteGaussian, DiscreteLaplace

__all__ = ["Budget", "NodeLaw", "calibrate"]

#: largest σ² the exact Gaussian sampler takes (larger: the budget is too small to calibrate)
_MAX_SIGMA2 = 1 << 60


@dataclass(frozen=True)
class Budget:
    """The budget of one structure: pure ``epsilon`` (a fraction), or ``rho`` for zCDP."""

    epsilon: Fraction
    rho: float | None = None

    @property
    def accounting(self) -> str:
        """``"pure epsilon-DP"`` or ``"zCDP"``."""
        return "pure epsilon-DP" if self.rho is None else "zCDP"

    def kinds(self) -> tuple[str, ...]:
        """The node laws this budget can calibrate: Laplace, and under zCDP also Gaussian."""
        return ("laplace",) if self.rho is None else ("laplace", "gaussian")


@dataclass(frozen=True)
class NodeLaw:
    """The exact law of every node noise of one structure, and how it was calibrated.

    Attributes
    ----------
    kind : {"laplace", "gaussian"}
        Discrete Laplace or discrete Gaussian.
    gamma : Fraction or None
        ``γ`` of the discrete Laplace.
    sigma2 : int or None
        ``σ²`` of the discrete Gaussian.
    l1, l2_squared : int
        The exact sensitivity the law was calibrated to.
    budget : Budget
        The structure's budget.
    epsilon_piece : Fraction or None
        The pure ε the Laplace noise is calibrated to.
    """

    kind: str
    gamma: Fraction | None
    sigma2: int | None
    l1: int
    l2_squared: int
    budget: Budget
    epsilon_piece: Fraction | None

    @property
    def node(self) -> Any:
        """The windows' law value (:mod:`dpfreq.windows.laws`) of one node noise."""
        if self.kind == "gaussian":
            return DiscreteGaussian(int(self.sigma2 or 0))
        return DiscreteLaplace(self.gamma or Fraction(0))

    @property
    def variance(self) -> float:
        """Variance of one node noise (exact for Laplace, numerically exact for Gaussian)."""
        return float(self.node.variance)

    def source(self, key: bytes, name: tuple[str | int, ...]) -> Any:
        """The keyed node noise of the structure named ``name`` under ``key``."""
        return self.node.keyed(key, name)

    def cover_halfwidth(self, nodes: Any, beta: float) -> NDArray[np.float64]:
        """``x`` with ``Pr[|Σ of m node noises| > x] <= β`` per entry ``m`` of ``nodes``: the
        certified quantile of the exact law of the sum (the law value's ``sum_quantile``)."""
        out: NDArray[np.float64] = self.node.sum_quantile(nodes, beta)
        return out

    def record(self) -> dict[str, Any]:
        """JSON-ready: the law and its calibration (public)."""
        out: dict[str, Any] = {"noise": self.kind, "accounting": self.budget.accounting,
                               "l1_sensitivity": self.l1, "l2_squared_sensitivity":
                               self.l2_squared}
        if self.kind == "gaussian":
            out.update(sigma2=self.sigma2, rho_piece=self.budget.rho)
        else:
            out.update(gamma=str(self.gamma), epsilon_piece=str(self.epsilon_piece))
            if self.budget.rho is not None:
                out["rho_piece"] = self.budget.rho
        return out


def calibrate(budget: Budget, kind: str, l1: int, l2_squared: int) -> NodeLaw | None:
    """The node law of a structure with exact sensitivity ``(l1, l2²)`` at ``budget``, or
    None when the budget is too small to calibrate exactly (such a structure is never
    chosen). ``l1 = 0`` (no row can change) calibrates at sensitivity 1."""
    l1, l2_squared = max(1, int(l1)), max(1, int(l2_squared))
    if kind == "gaussian":
        if budget.rho is None:
            return None
        # σ² >= ℓ2²/(2ρ) exactly (ℓ2² an integer; as the offline factorization calibrates)
        target = math.ceil(Fraction(l2_squared) / (2 * Fraction(budget.rho)))
        if not 0 < target < _MAX_SIGMA2:
            return None
        sigma2 = gaussian_sigma2(float(target))[0]
        return NodeLaw("gaussian", None, sigma2, l1, l2_squared, budget, None)
    try:
        piece = budget.epsilon if budget.rho is None else pure_epsilon_for_rho(
            Fraction(budget.rho))
        gamma = discrete_laplace_gamma(piece, l1)
    except ValueError:  # ParameterError: rounds to 0
        return None
    return NodeLaw("laplace", gamma, None, l1, l2_squared, budget, piece)
