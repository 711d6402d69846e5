"""The local noise of one party's sketch: its calibration (pure) and its draw (exact samplers).

Two noisy vectors over the ``R`` registers, each ε-DP for one user with all their impressions
at the party (adding or removing them changes one register: its bit by at most 1 and its capped
frequency by at most ``K``):

* **reach bits** ``y[r] = [f[r] > 0]`` kept with probability ``q = 1/(1+α)``, ``α = e^{−γ}``,
  flipped otherwise (randomized response, :func:`dpfreq.noise.randomized_response`), with
  ``γ = epsilon_to_fraction(ε_reach) <= ε_reach``: the ratio of any output's probabilities
  under neighbours is at most ``q/(1−q) = e^γ``;
* **frequency registers** ``z[r] = f[r] + Z[r]``, ``Z ~ DLap(e^{−γ_f})`` exact and i.i.d.,
  ``γ_f = discrete_laplace_gamma(ε_frequency, sensitivity=K) <= ε_frequency / K``.

The two compose to ``ε_reach + ε_frequency`` (:attr:`CrossPartyParams.epsilon`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from dpfreq.accounting import Composed, DiscreteLaplace, PrivacyLoss, PureDP
from dpfreq.crossparty.params import CrossPartyParams
from dpfreq.noise import (
    discrete_laplace_gamma,
    epsilon_to_fraction,
    randomized_response,
    sample_discrete_laplace,
)

__all__ = ["LocalNoise", "calibrate", "draw_noise"]


@dataclass(frozen=True)
class LocalNoise:
    """The exact noise laws of a sketch under one set of parameters.

    Attributes
    ----------
    reach_gamma : Fraction
        γ of the randomized response of the reach bits (keep probability ``1/(1+e^{−γ})``).
    frequency_gamma : Fraction or None
        γ of the discrete Laplace noise of the frequency registers (None: reach-only).
    max_frequency : int
        ``K``, the ℓ1 sensitivity of the frequency registers per user.

    Examples
    --------
    >>> import math
    >>> from dpfreq.crossparty.params import CrossPartyParams
    >>> noise = calibrate(CrossPartyParams(
    ...     measurement="m", registers=8, sampling_start=0, sampling_width=1, max_frequency=4,
    ...     epsilon_reach=math.log(3), epsilon_frequency=2.0, hash="sha256-prefix/v1",
    ...     key_id="0" * 32))
    >>> round(noise.keep_probability, 6), noise.frequency_gamma
    (0.75, Fraction(1, 2))
    """

    reach_gamma: Fraction
    frequency_gamma: Fraction | None
    max_frequency: int

    @property
    def keep_probability(self) -> float:
        """``q = 1/(1 + e^{−γ})``: the probability that a reach bit is reported as it is."""
        return 1.0 / (1.0 + math.exp(-float(self.reach_gamma)))

    @property
    def frequency_alpha(self) -> float | None:
        """``α = e^{−γ_f}`` of the frequency noise (None: reach-only)."""
        return None if self.frequency_gamma is None else math.exp(-float(self.frequency_gamma))

    def privacy_loss(self) -> PrivacyLoss:
        """The sketch's privacy loss as a value (:mod:`dpfreq.accounting`): randomized response
        at ``γ_r`` (pure ``γ_r``-DP, exactly) composed with discrete Laplace noise of parameter
        ``γ_f`` on counts of ℓ1 sensitivity ``K``."""
        bits = PureDP(self.reach_gamma)
        if self.frequency_gamma is None:
            return bits
        return Composed((bits, DiscreteLaplace(self.frequency_gamma, self.max_frequency)))

    def describe(self) -> dict[str, str | int | None]:
        """The laws as JSON-ready text (fractions ``"s/t"``)."""
        g = self.frequency_gamma
        return {"reach_bits": "randomized response, keep probability 1/(1+exp(-gamma))",
                "reach_gamma": f"{self.reach_gamma.numerator}/{self.reach_gamma.denominator}",
                "frequency_registers": None if g is None else
                "discrete Laplace, Pr[Z=z] proportional to exp(-gamma*|z|)",
                "frequency_gamma": None if g is None else f"{g.numerator}/{g.denominator}",
                "frequency_sensitivity": self.max_frequency}


def calibrate(params: CrossPartyParams) -> LocalNoise:
    """The noise laws of ``params`` (pure: no randomness).

    Examples
    --------
    >>> from dpfreq.crossparty.params import CrossPartyParams
    >>> calibrate(CrossPartyParams(
    ...     measurement="m", registers=8, sampling_start=0, sampling_width=1, max_frequency=4,
    ...     epsilon_reach=0.5, epsilon_frequency=None, hash="sha256-prefix/v1",
    ...     key_id="0" * 32)).reach_gamma
    Fraction(1, 2)
    """
    eps_f = params.epsilon_frequency
    return LocalNoise(
        reach_gamma=epsilon_to_fraction(params.epsilon_reach),
        frequency_gamma=None if eps_f is None else discrete_laplace_gamma(
            eps_f, sensitivity=params.max_frequency),
        max_frequency=params.max_frequency)


def draw_noise(values: NDArray[np.int64], noise: LocalNoise, generator: np.random.Generator
               ) -> tuple[NDArray[np.uint8], NDArray[np.int64] | None]:
    """``(reach bits, frequency registers)`` of exact register frequencies ``values``.

    Draws the randomized response of every bit, then (when the sketch has them) one discrete
    Laplace draw per frequency register, from ``generator`` in that order.

    Examples
    --------
    >>> from dpfreq.crossparty.params import CrossPartyParams
    >>> noise = calibrate(CrossPartyParams(
    ...     measurement="m", registers=4, sampling_start=0, sampling_width=1, max_frequency=2,
    ...     epsilon_reach=1.0, epsilon_frequency=1.0, hash="sha256-prefix/v1",
    ...     key_id="0" * 32))
    >>> bits, freq = draw_noise(np.array([0, 1, 2, 0]), noise, np.random.default_rng(0))
    >>> bits.dtype, freq.dtype, bits.shape
    (dtype('uint8'), dtype('int64'), (4,))
    """
    present = (values > 0).astype(np.int8)
    bits = randomized_response(present, noise.reach_gamma, rng=generator).astype(np.uint8)
    if noise.frequency_gamma is None:
        return bits, None
    z = sample_discrete_laplace(noise.frequency_gamma, values.size, rng=generator)
    return bits, values.astype(np.int64) + z
