"""The noise of the shuffle: dummy registers per value, with an exact, truncated law.

What the aggregator learns is a histogram ``h[v]``: how many registers of the (shuffled)
union hold the value ``v = 0..V`` (``V = P·K`` for ``P`` parties). Each worker adds, for every
``v``, ``D[v]`` dummy registers holding ``v``, with ``D[v]`` i.i.d. of the **shifted,
truncated discrete Laplace** law

    Pr[D = d] = α^{|d − s|} / N,   d = 0, 1, ..., 2s,   N = Σ_{|z| <= s} α^{|z|}
              = (1 + α − 2α^{s+1}) / (1 − α),   α = e^{−γ}.

It is symmetric about the **shift** ``s``, so ``E[D] = s`` exactly; the aggregator subtracts
``s`` per worker and per value (the public offset). Drawn exactly: a discrete Laplace draw
(:func:`dpfreq.noise.sample_discrete_laplace`) is kept when ``|Z| <= s`` and drawn again
otherwise, which gives exactly the conditional law above; ``D = s + Z``.

**Guarantee (one worker's dummies alone).** Adding or removing one user (all their
impressions at every party) changes the value of the one register they fall in, from ``a`` to
``b``: ``h`` loses one at ``a`` and gains one at ``b``. For one value, a count ``c`` against
``c + 1``: every output ``c + d`` with ``1 <= d <= 2s`` has probabilities in ratio at most
``α^{−1} = e^γ``; the only outputs one side can give and the other cannot are ``d = 0`` and
``d = 2s``, each of probability ``p0 = α^s / N``. Two values move, independently, so for every
set ``S`` of outputs ``Pr[S] <= e^{2γ} Pr'[S] + δ`` with

    δ = 1 − (1 − p0)^2 = p0 (2 − p0),

and this is tight: it is the hockey-stick divergence at ``e^{2γ}`` (tests compute it by
enumeration). Calibration for a histogram budget ``(ε_h, δ_h)``: ``γ = ε_h / 2`` rounded down
to a fraction (:func:`dpfreq.noise.discrete_laplace_gamma` with sensitivity 2) and the smallest
shift ``s >= 1`` with ``δ(γ, s) <= δ_h``, decided on rigorous rational bounds of ``e^{−γ}``
(never on a float). The other worker's dummies are independent of the data and of these
draws, so adding them is post-processing: the guarantee holds if it adds none, and the two
together are at least as private.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._exact_inverse import exp_neg_bounds
from dpfreq._validate import check_int, message
from dpfreq.accounting import ApproximateDP
from dpfreq.errors import ParameterError, public_errors
from dpfreq.noise import discrete_laplace_gamma, sample_discrete_laplace
from dpfreq.rng import RNGLike, resolve_rng

__all__ = ["MAX_SHIFT", "DummyLaw", "calibrate_dummies", "dummy_delta_bound", "sample_dummies"]

#: Largest shift considered (a δ needing more is refused: the noise would be absurd).
MAX_SHIFT = 1 << 20
_PREC = 96  # bits of the rigorous bounds on e^{-γ}


def _alpha_bounds(gamma: Fraction, n: int) -> tuple[Fraction, Fraction]:
    """Rational ``lo <= e^{−nγ} <= hi``."""
    lo, hi = exp_neg_bounds(gamma * n, _PREC)
    return Fraction(lo, 1 << _PREC), Fraction(hi, 1 << _PREC)


def dummy_delta_bound(gamma: Fraction, shift: int) -> Fraction:
    """A rigorous upper bound on ``δ(γ, s) = p0 (2 − p0)``, ``p0 = α^s / N`` (see the module
    docstring), from rational bounds on the powers of ``α = e^{−γ}``.

    Examples
    --------
    >>> [float(dummy_delta_bound(Fraction(1, 2), s)) < 1e-9 for s in (40, 41)]
    [False, True]
    """
    a_lo, _ = _alpha_bounds(gamma, 1)
    _, as_hi = _alpha_bounds(gamma, shift)
    _, as1_hi = _alpha_bounds(gamma, shift + 1)
    p0_hi = as_hi * (1 - a_lo) / (1 + a_lo - 2 * as1_hi)  # numerator up, denominator down
    p0_hi = min(p0_hi, Fraction(1))
    return p0_hi * (2 - p0_hi)


@dataclass(frozen=True)
class DummyLaw:
    """The exact law of one worker's dummy count per value (see the module docstring).

    Attributes
    ----------
    gamma : Fraction
        γ, with ``α = e^{−γ}``.
    shift : int
        ``s``: counts range over ``0..2s`` and their mean is ``s``.
    epsilon, delta : float
        The guarantee of one histogram noised by one worker's dummies: ``ε = 2γ`` and the
        tight ``δ = p0 (2 − p0)`` (a float of the rigorous bound).

    Examples
    --------
    >>> law = calibrate_dummies(Fraction(1), Fraction(1, 10**9))
    >>> law.gamma, law.shift, law.mean
    (Fraction(1, 2), 41, 41)
    >>> float(law.pmf(np.array([0, 41, 82])).sum()) < 1
    True
    >>> law.privacy_loss().epsilon_bound()
    Fraction(1, 1)
    """

    gamma: Fraction
    shift: int
    epsilon: float
    delta: float

    @property
    def alpha(self) -> float:
        """``α = e^{−γ}``."""
        return math.exp(-float(self.gamma))

    @property
    def mean(self) -> int:
        """``E[D] = s`` (exactly: the law is symmetric about ``s``)."""
        return self.shift

    def pmf(self, d: Any) -> NDArray[np.float64]:
        """``Pr[D = d]`` (floats, for tests and error statements; 0 outside ``0..2s``)."""
        d = np.asarray(d, dtype=np.int64)
        s, a = self.shift, self.alpha
        norm = (1.0 + a - 2.0 * a ** (s + 1)) / (1.0 - a)
        out = np.power(a, np.abs(d - s).astype(np.float64)) / norm
        return np.where((d >= 0) & (d <= 2 * s), out, 0.0)

    @property
    def variance(self) -> float:
        """``Var[D] = Σ z² α^{|z|} / N`` over ``|z| <= s``."""
        z = np.arange(-self.shift, self.shift + 1)
        return float(np.dot(z.astype(np.float64) ** 2, self.pmf(z + self.shift)))

    def privacy_loss(self) -> ApproximateDP:
        """The loss of one histogram noised by one worker's dummies, as a value
        (:mod:`dpfreq.accounting`): ``(2γ, δ)`` with the rigorous bound on the tight δ."""
        return ApproximateDP(2 * self.gamma, dummy_delta_bound(self.gamma, self.shift))

    def describe(self) -> dict[str, Any]:
        """The law as JSON-ready values (γ as ``"s/t"``)."""
        return {"law": "shifted truncated discrete Laplace: Pr[D=d] proportional to "
                       "exp(-gamma*|d-shift|) on 0..2*shift",
                "gamma": f"{self.gamma.numerator}/{self.gamma.denominator}",
                "shift": self.shift, "epsilon_per_worker": self.epsilon,
                "delta_per_worker": self.delta, "variance": self.variance}


@public_errors("calibrate_dummies")
def calibrate_dummies(epsilon: Fraction | float, delta: Fraction | float) -> DummyLaw:
    """The dummy law that makes one histogram ``(epsilon, delta)``-DP with one worker's
    dummies alone (pure: no randomness).

    Parameters
    ----------
    epsilon, delta : Fraction or float
        The histogram's budget (``delta`` > 0).

    Returns
    -------
    DummyLaw

    Raises
    ------
    ParameterError
        If ``delta`` is not > 0, or is so small that the shift would exceed
        :data:`MAX_SHIFT`.

    Examples
    --------
    >>> law = calibrate_dummies(math.log(3), 1e-10)
    >>> law.shift, law.epsilon <= math.log(3), law.delta <= 1e-10
    (41, True, True)
    """
    gamma = discrete_laplace_gamma(epsilon, sensitivity=2)
    target = Fraction(delta)
    if not target > 0:
        raise ParameterError(message("delta", "> 0 (the dummies are truncated)", delta))
    lo, hi = 1, 1
    while dummy_delta_bound(gamma, hi) > target:  # doubling, then bisection
        lo, hi = hi + 1, 2 * hi
        if hi > MAX_SHIFT:
            raise ParameterError(message("delta", "large enough for a shift of at most "
                                         f"{MAX_SHIFT} dummies per value", float(delta)))
    while lo < hi:
        mid = (lo + hi) // 2
        if dummy_delta_bound(gamma, mid) <= target:
            hi = mid
        else:
            lo = mid + 1
    return DummyLaw(gamma=gamma, shift=hi, epsilon=float(2 * gamma),
                    delta=float(dummy_delta_bound(gamma, hi)))


@public_errors("sample_dummies")
def sample_dummies(law: DummyLaw, size: int, *, rng: RNGLike = None) -> NDArray[np.int64]:
    """``size`` independent dummy counts of ``law``, drawn exactly.

    Discrete Laplace draws (:func:`dpfreq.noise.sample_discrete_laplace`, exact) outside
    ``[−s, s]`` are drawn again, in rounds over the rejected entries: the kept draws have
    exactly the truncated law; the counts are ``s + Z``.

    Examples
    --------
    >>> law = calibrate_dummies(1.0, 1e-6)
    >>> d = sample_dummies(law, 1000, rng=0)
    >>> bool(d.min() >= 0), bool(d.max() <= 2 * law.shift)
    (True, True)
    """
    n = check_int(size, "size", minimum=0)
    gen = resolve_rng(rng).generator
    out = np.empty(n, dtype=np.int64)
    pending = np.arange(n)
    while pending.size:
        z = sample_discrete_laplace(law.gamma, pending.size, rng=gen)
        keep = np.abs(z) <= law.shift
        out[pending[keep]] = z[keep] + law.shift
        pending = pending[~keep]
    return out
