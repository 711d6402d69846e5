"""The law of one node's noise, as a value: the discrete Laplace or the discrete Gaussian.

A structure's node noise is i.i.d. from one of two exact laws; the law owns what depends on it —
its variance, its keyed source (a deterministic function of a secret key, a structure name and
a node id), its stream sampler for simulations, the quantiles of sums of its draws and their
tail bounds — so callers ask the law instead of branching on which one it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from dpfreq.noise import (
    discrete_gaussian_variance,
    discrete_laplace_variance,
    sample_discrete_laplace,
)
from dpfreq.rng import derive_key, keyed_generator
from dpfreq.windows.laws.sums import sum_quantile, tail_radius
from dpfreq.windows.noise.keyed import KeyedDiscreteGaussian, KeyedDiscreteLaplace

__all__ = ["DiscreteGaussian", "DiscreteLaplace", "NodeLaw"]

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class DiscreteLaplace:
    """``DLap(γ)``: ``Pr[Z = z] ∝ e^{−γ|z|}`` on the integers (exact samplers, pure ε-DP).

    Examples
    --------
    >>> law = DiscreteLaplace(Fraction(1, 2))
    >>> round(law.variance, 6), law.kind
    (7.935105, 'laplace')
    """

    gamma: Fraction
    kind: ClassVar[str] = "laplace"

    @property
    def sigma2(self) -> int:
        """0: not a Gaussian law (recorded so in the plans' keys)."""
        return 0

    @property
    def scale(self) -> Fraction:
        """The law's parameter (γ), as the band memo and records key it."""
        return self.gamma

    @property
    def usable(self) -> bool:
        return self.gamma > 0

    @property
    def variance(self) -> float:
        return discrete_laplace_variance(self.gamma)

    def keyed(self, key: bytes, name: Any) -> KeyedDiscreteLaplace:
        """The keyed node noise of the tree ``name`` under ``key``."""
        return KeyedDiscreteLaplace(key, name, self.gamma)

    #: eager trees draw this law from a seeded stream (:func:`~dpfreq.windows.structures.
    #: base.eager_noise`), not from the keyed source
    streamed: ClassVar[bool] = True

    def simulation(self, key: bytes, name: tuple[Any, ...], scheme: str) -> Any:
        """``sample(start, count)``: i.i.d. draws of a simulation keyed by ``(key, scheme,
        name)``, called with consecutive ranges (independent of every release's noise)."""
        gen = keyed_generator(key, "windows", scheme, *name)
        return lambda start, count: sample_discrete_laplace(self.gamma, count, rng=gen)

    def sum_quantile(self, nodes: Any, beta: float) -> FloatArray:
        """Certified ``β``-quantiles of ``|Σ_{i<m} Z_i|`` for each ``m`` in ``nodes``."""
        return sum_quantile(nodes, beta, gamma=self.gamma)

    def tail_radius(self, m: int, beta: float) -> float:
        """A tail bound on ``|Σ_{i<m} Z_i|`` at ``β`` (never below the quantile)."""
        return tail_radius(m, beta, gamma=self.gamma)

    def terms(self) -> dict[str, Any]:
        """The law as the keyword arguments of :mod:`dpfreq.windows.laws.sums`."""
        return {"gamma": self.gamma, "sigma2": None}


@dataclass(frozen=True)
class DiscreteGaussian:
    """The discrete Gaussian with parameter ``σ²`` (an integer, drawn as given by the keyed
    sampler; Canonne, Kamath and Steinke 2020), calibrated under zCDP accounting or to (ε, δ)
    by its privacy loss distribution.

    Examples
    --------
    >>> law = DiscreteGaussian(50)
    >>> law.kind, law.usable
    ('gaussian', True)
    """

    sigma2: int
    kind: ClassVar[str] = "gaussian"

    @property
    def gamma(self) -> Fraction:
        """0: not a Laplace law (recorded so in the plans' keys)."""
        return Fraction(0)

    @property
    def scale(self) -> int:
        return self.sigma2

    @property
    def usable(self) -> bool:
        return 0 < self.sigma2 < 1 << 60

    @property
    def variance(self) -> float:
        return discrete_gaussian_variance(self.sigma2)

    def keyed(self, key: bytes, name: Any) -> KeyedDiscreteGaussian:
        return KeyedDiscreteGaussian(key, name, self.sigma2)

    streamed: ClassVar[bool] = False

    def simulation(self, key: bytes, name: tuple[Any, ...], scheme: str) -> Any:
        src = KeyedDiscreteGaussian(derive_key(key, "windows", scheme), name, self.sigma2)
        return lambda start, count: src.noise(np.arange(start, start + count, dtype=np.int64))

    def sum_quantile(self, nodes: Any, beta: float) -> FloatArray:
        return sum_quantile(nodes, beta, sigma2=self.sigma2)

    def tail_radius(self, m: int, beta: float) -> float:
        return tail_radius(m, beta, sigma2=self.sigma2)

    def terms(self) -> dict[str, Any]:
        return {"gamma": None, "sigma2": self.sigma2}


#: the node law of a structure
NodeLaw = DiscreteLaplace | DiscreteGaussian
