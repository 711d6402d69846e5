"""Rényi divergences of the losses dpfreq composes, and the conversion of a Rényi bound to (ε, δ).

A mechanism is ``(α, τ)``-RDP when the Rényi divergence of order ``α > 1`` between its output
laws on any two neighbouring inputs is at most ``τ`` (Mironov 2017). Rényi divergences add up
under composition, also when each mechanism is chosen after seeing the previous outputs, and a
running sum checked against a fixed budget at one fixed order is a valid *privacy filter*
(Feldman & Zrnic 2021): see :mod:`dpfreq.accounting.rules`.

**Randomized response** with parameter ε (output the true bit with probability
``e^ε/(1+e^ε)``) has order-α divergence

    ``D_α = ln((e^{αε} + e^{(1−α)ε}) / (1 + e^ε)) / (α − 1)``,

and every pure ε-DP mechanism's pair of output laws is a post-processing of it (Kairouz, Oh &
Viswanath 2015, Theorem 2.5), so this is a bound on the divergence of *any* ε-DP mechanism
(data processing inequality), and exact for the discrete Laplace mechanism of sensitivity 1.

**Conversion** (Canonne, Kamath & Steinke 2020, Proposition 12; Asoodeh et al. 2021): an
``(α, τ)``-RDP mechanism is ``(ε, δ)``-DP with

    ``ε = τ + (ln(1/δ) + (α−1) ln(1 − 1/α) − ln α) / (α − 1)``.

It rests on the pointwise inequality ``(1 − e^{ε−x})_+ <= e^{(α−1)(x−ε)} (1−1/α)^{α−1}/α``, so
it also holds for a stopped (filtered) composition and for the part of a law off a bad event.
"""

from __future__ import annotations

import decimal
import functools
import math
from collections.abc import Callable
from fractions import Fraction

from dpfreq.accounting.numbers import PRECISION, decimal_of, ln_bound, outward

__all__ = [
    "ORDERS",
    "best_order",
    "conversion_term",
    "randomized_response_renyi",
    "renyi_budget",
    "renyi_epsilon",
    "smallest_epsilon_over_orders",
]

#: the orders a declared plan's Rényi bound is minimised over (refined between neighbours)
ORDERS = tuple(Fraction(a) for a in (
    "1.05", "1.1", "1.25", "1.5", "1.75", "2", "2.25", "2.5", "3", "3.5", "4", "4.5", "5", "6",
    "7", "8", "9", "10", "12", "14", "16", "20", "24", "28", "32", "40", "48", "64", "96", "128",
    "256", "512", "1024"))


@functools.lru_cache(maxsize=4096)
def randomized_response_renyi(epsilon: Fraction, alpha: Fraction) -> Fraction:
    """A fraction ``>= D_α`` of randomized response with parameter ``ε`` (module docstring).

    Evaluated as ``(αε + ln(1 + e^{(1−2α)ε}) − ln(1 + e^ε)) / (α − 1)`` (no overflow), then
    capped at ``ε`` (every Rényi divergence of an ε-DP pair is at most ε).

    Examples
    --------
    >>> d = randomized_response_renyi(Fraction(1, 20), Fraction(6))
    >>> 6 * (1 / 20) ** 2 / 2 * 0.99 < float(d) < 6 * (1 / 20) ** 2 / 2
    True
    """
    if alpha <= 1 or epsilon < 0:
        raise ValueError("randomized_response_renyi needs alpha > 1 and epsilon >= 0")
    if epsilon == 0:
        return Fraction(0)
    with decimal.localcontext() as ctx:
        ctx.prec = PRECISION
        e, a = decimal_of(epsilon), decimal_of(alpha)
        value = (a * e + (1 + ((1 - 2 * a) * e).exp()).ln() - (1 + e.exp()).ln()) / (a - 1)
    return min(outward(value, True), epsilon)


def conversion_term(alpha: Fraction, delta: Fraction, *, up: bool) -> Fraction:
    """``(ln(1/δ) + (α−1) ln(1 − 1/α) − ln α) / (α − 1)``, rounded up (or down)."""
    if alpha <= 1 or not 0 < delta < 1:
        raise ValueError("conversion_term needs alpha > 1 and 0 < delta < 1")
    numerator = (ln_bound(1 / delta, up=up) + (alpha - 1) * ln_bound(1 - 1 / alpha, up=up)
                 - ln_bound(alpha, up=not up))
    return numerator / (alpha - 1)


def renyi_epsilon(alpha: Fraction, tau: Fraction, delta: Fraction) -> Fraction:
    """A certified ε (rounded up, at least 0) of an ``(α, τ)``-RDP mechanism at ``δ``.

    Examples
    --------
    >>> e = renyi_epsilon(Fraction(6), Fraction(6 * 365, 800), Fraction(1, 10**6))
    >>> 4.9 < float(e) < 5.0
    True
    """
    return max(tau + conversion_term(alpha, delta, up=True), Fraction(0))


def renyi_budget(alpha: Fraction, epsilon: Fraction, delta: Fraction) -> Fraction:
    """The largest Rényi budget ``τ`` (rounded down) whose conversion at ``α`` is within
    ``(ε, δ)``: ``ε − conversion_term`` (may be negative: then nothing fits)."""
    return epsilon - conversion_term(alpha, delta, up=True)


def _term(alpha: float, log_inverse: float) -> float:
    return (log_inverse + (alpha - 1) * math.log1p(-1 / alpha) - math.log(alpha)) / (alpha - 1)


def best_order(epsilon: Fraction, delta: Fraction) -> Fraction:
    """The order at which a budget of ``(ε, δ)`` admits the most small releases.

    A release of small ε (or a Gaussian one) has a Rényi curve close to ``ρα``; a budget
    ``B(α) = ε − conversion_term(α, δ)`` then admits a total ``ρ`` up to ``B(α)/α``, which this
    maximises (golden-section search on ``ln α``). Rounded to three significant digits: any
    order is valid, this one only makes the filter admit the most.

    Examples
    --------
    >>> best_order(Fraction(5), Fraction(1, 10**6))
    Fraction(613, 100)
    """
    log_inverse = -math.log(float(delta))
    eps = float(epsilon)

    def score(log_alpha: float) -> float:
        alpha = math.exp(log_alpha)
        return -(eps - _term(alpha, log_inverse)) / alpha

    lo, hi = math.log(1.001), math.log(1e4)
    ratio = (math.sqrt(5) - 1) / 2
    for _ in range(200):
        a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
        lo, hi = (lo, b) if score(a) <= score(b) else (a, hi)
    alpha = math.exp((lo + hi) / 2)
    digits = 2 - math.floor(math.log10(alpha))
    rounded = Fraction(round(alpha * 10**digits), 10**digits) if digits >= 0 else \
        Fraction(round(alpha, digits))
    return max(rounded, Fraction(1001, 1000))


def smallest_epsilon_over_orders(curve: Callable[[Fraction], Fraction],
                                 delta: Fraction) -> tuple[Fraction, Fraction]:
    """``(ε, α)``: the smallest certified ε at ``δ`` over :data:`ORDERS` (refined between the
    best order's neighbours) of a mechanism whose order-α Rényi bound is ``curve(α)``.

    Valid for a mechanism (or a batch fixed in advance) that satisfies every order at once;
    not for a filter, which fixes one order before the releases are chosen.
    """
    scores = [renyi_epsilon(a, curve(a), delta) for a in ORDERS]
    i = min(range(len(ORDERS)), key=lambda j: scores[j])
    best, alpha = scores[i], ORDERS[i]
    lo = ORDERS[max(i - 1, 0)]
    hi = ORDERS[min(i + 1, len(ORDERS) - 1)]
    for k in range(1, 8):
        a = lo + (hi - lo) * k / 8
        if a <= 1 or a in ORDERS:
            continue
        e = renyi_epsilon(a, curve(a), delta)
        if e < best:
            best, alpha = e, a
    return best, alpha
