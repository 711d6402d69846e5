"""Zero-concentrated DP: ρ from (ε, δ) and back, and the noise a ρ buys, all certified.

A mechanism is ρ-zCDP when its order-α Rényi divergence is at most ``ρα`` for every ``α > 1``
(Bun & Steinke 2016). Pure ε-DP implies ``ε²/2``-zCDP (their Proposition 1.4); ρ-zCDP
mechanisms compose by adding ρ; ρ-zCDP implies ``(ρ + 2√(ρ ln(1/δ)), δ)``-DP (their
Proposition 1.3). The discrete Gaussian with variance parameter σ² on a query of ℓ2
sensitivity Δ is ``Δ²/(2σ²)``-zCDP (Canonne, Kamath & Steinke 2020, Theorem 14).

Every function here returns a bound on the stated side, proven on fractions: the ρ a budget
allows is rounded down, the ε a ρ implies is rounded up, the σ² a ρ needs is rounded up. This is
the one conversion between ρ and (ε, δ) that every release path of dpfreq calibrates with.
"""

from __future__ import annotations

import math
from fractions import Fraction

from dpfreq.accounting.numbers import float_at_most, ln_bound, sqrt_bound
from dpfreq.noise import epsilon_to_fraction

__all__ = [
    "gaussian_sigma2_at_least",
    "log_inverse_upper",
    "pure_epsilon_for_rho",
    "zcdp_epsilon",
    "zcdp_rho",
    "zcdp_rho_at_most",
]


def log_inverse_upper(delta: float | Fraction) -> Fraction:
    """A fraction ``L >= ln(1/δ)`` (δ at its exact binary value), within 10^-39 of it.

    Examples
    --------
    >>> float(log_inverse_upper(1e-6)) == math.log(1e6)
    True
    """
    return ln_bound(1 / Fraction(delta), up=True)


def _rho_estimate(epsilon: float, delta: float) -> float:
    log_term = -math.log(delta)  # not log(1/δ): 1/δ overflows for a subnormal δ
    return (math.sqrt(log_term + epsilon) - math.sqrt(log_term)) ** 2


def zcdp_rho_at_most(epsilon: Fraction, delta: float | Fraction) -> Fraction:
    """A fraction ``ρ >= 0`` with ``ρ + 2√(ρ ln(1/δ)) <= ε`` exactly (``ε > 0``, ``0 < δ < 1``;
    0 only when the float estimate underflows, for a δ near the smallest float).

    The closed form ``(√(L + ε) − √L)²`` in floating point, rounded down (by relative steps of
    2^-40; after 16 of them the steps double, on floats, for the ε ≪ L where the difference
    has lost digits to cancellation) until ``ρ <= ε`` and ``4ρL <= (ε − ρ)²`` hold on
    fractions for an upper bound ``L`` of ``ln(1/δ)`` (:func:`log_inverse_upper`): the left
    side grows with ρ and with ``L``, so the bound holds at the true logarithm too.

    Examples
    --------
    >>> rho = zcdp_rho_at_most(Fraction(1), 1e-6)
    >>> rho + 2 * (rho * log_inverse_upper(1e-6)) ** 0.5 <= 1, round(float(rho), 5)
    (True, 0.01747)
    """
    big_l = log_inverse_upper(delta)
    rho = Fraction(_rho_estimate(float(epsilon), float(delta)))
    step, n = 1 - Fraction(1, 2**40), 0
    while not (rho <= epsilon and 4 * rho * big_l <= (epsilon - rho) ** 2):
        n += 1  # doubling steps on floats keep the fractions' denominators small
        rho = rho * step if n <= 16 else Fraction(float(rho) * (1 - min(2.0 ** (n - 56), 0.5)))
    return rho


def zcdp_rho(epsilon: float, delta: float) -> float:
    """The largest float ρ with ``ρ + 2√(ρ ln(1/δ)) <= ε`` certified (ρ-zCDP ⇒ (ε, δ)-DP).

    :func:`zcdp_rho_at_most` as the largest float at most it.

    Examples
    --------
    >>> round(zcdp_rho(1.0, 1e-6), 6)
    0.017469
    """
    return float_at_most(zcdp_rho_at_most(Fraction(epsilon), delta))


def zcdp_epsilon(rho: float | Fraction, delta: float | Fraction) -> Fraction:
    """A fraction ``>= ρ + 2√(ρ ln(1/δ))``: the ε of a ρ-zCDP mechanism at δ (Bun–Steinke).

    Examples
    --------
    >>> rho = zcdp_rho_at_most(Fraction(1), 1e-6)
    >>> 0.999999 < float(zcdp_epsilon(rho, 1e-6)) <= 1.0
    True
    """
    r = Fraction(rho)
    return r + 2 * sqrt_bound(r * log_inverse_upper(delta), up=True)


def pure_epsilon_for_rho(rho: Fraction) -> Fraction:
    """The ε of a pure piece that fits a zCDP share ρ: a fraction ``ε`` (denominator at most
    2^32, as the noise samplers take it) with ``ε²/2 <= ρ`` exactly.

    Examples
    --------
    >>> e = pure_epsilon_for_rho(Fraction(1, 200))
    >>> e * e / 2 <= Fraction(1, 200), float(e)
    (True, 0.1)
    """
    return epsilon_to_fraction(sqrt_bound(2 * rho, up=False))


def gaussian_sigma2_at_least(l2_sensitivity: float | Fraction, rho: Fraction) -> int:
    """The smallest integer ``σ² >= Δ²/(2ρ)``: the discrete Gaussian variance parameter that
    makes a query of ℓ2 sensitivity Δ ρ-zCDP (exact, on fractions).

    Examples
    --------
    >>> gaussian_sigma2_at_least(2, Fraction(1, 10))
    20
    """
    l2 = Fraction(l2_sensitivity)
    return math.ceil(l2 * l2 / (2 * rho))
