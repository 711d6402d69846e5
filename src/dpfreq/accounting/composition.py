"""Closed-form composition of (ε, δ) guarantees, certified: basic, advanced, groups, pieces.

* **Basic composition**: mechanisms that are ``(ε_i, δ_i)``-DP together are
  ``(Σε_i, Σδ_i)``-DP, whatever the order and however each is chosen from the previous outputs
  (Dwork & Roth 2014, Theorem 3.16; as a filter, Rogers et al. 2016).
* **Advanced composition** of ``k`` mechanisms that are ``(ε, δ)``-DP:
  ``(√(2k ln(1/δ')) ε + k ε (e^ε − 1), kδ + δ')``-DP (Dwork, Rothblum & Vadhan 2010).
* **Group privacy**: ``(ε, δ)``-DP for one unit gives ``(gε, (1 + e^ε + … + e^{(g−1)ε}) δ)`` for
  ``g`` units: by induction over a path of ``g`` neighbours, ``P_0(S) <= e^ε P_1(S) + δ <= …``
  (Dwork & Roth 2014, Theorem 2.2 for δ = 0; the bound ``g e^{(g−1)ε} δ`` of Vadhan 2017,
  Lemma 2.2, is looser).

Each function returns an ε rounded up (and a per-piece ε rounded down) on fractions.
"""

from __future__ import annotations

import math
from fractions import Fraction

from dpfreq.accounting.numbers import exp_bound, ln_bound, sqrt_bound
from dpfreq.noise import epsilon_to_fraction

__all__ = ["advanced_epsilon", "group_delta", "pieces_epsilon"]


def advanced_epsilon(epsilon: Fraction, k: int, delta_prime: Fraction) -> Fraction:
    """A fraction ``>= √(2k ln(1/δ')) ε + k ε (e^ε − 1)`` (advanced composition's ε).

    Examples
    --------
    >>> round(float(advanced_epsilon(Fraction(1, 100), 1000, Fraction(1, 10**6))), 3)
    1.763
    """
    root = sqrt_bound(2 * k * ln_bound(1 / delta_prime, up=True), up=True)
    return root * epsilon + k * epsilon * (exp_bound(epsilon, up=True) - 1)


def group_delta(epsilon: Fraction, delta: Fraction, group_size: int) -> Fraction:
    """A fraction ``>= (1 + e^ε + … + e^{(g−1)ε}) δ``: the δ of group privacy for ``g`` units.

    Examples
    --------
    >>> group_delta(Fraction(0), Fraction(1, 100), 3)
    Fraction(3, 100)
    """
    if delta == 0:
        return Fraction(0)
    return delta * sum((exp_bound(i * epsilon, up=True) for i in range(group_size)), Fraction(0))


def pieces_epsilon(epsilon: Fraction, pieces: int, delta: float | Fraction) -> Fraction:
    """The budget of each of ``pieces`` pure-DP runs that compose to ``(ε, δ)``: the larger of
    basic composition's ``ε/pieces`` and the advanced-composition one (δ > 0), a fraction of
    denominator at most 2^32 whose advanced composition is certified at most ε.

    Examples
    --------
    >>> pieces_epsilon(Fraction(1), 10, 0.0)
    Fraction(1, 10)
    >>> pieces_epsilon(Fraction(1), 400, 1e-6) > Fraction(1, 400)
    True
    """
    basic = epsilon / pieces
    dlt = Fraction(delta)
    if dlt <= 0 or pieces == 1:
        return basic
    e, log_term = float(epsilon), math.log(1.0 / float(dlt))

    def total(e0: float) -> float:
        return e0 * math.sqrt(2 * pieces * log_term) + pieces * e0 * math.expm1(e0)

    lo, hi = 0.0, e
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if total(mid) <= e else (lo, mid)
    if lo < 1e-9:  # below the smallest ε a sampler takes: basic composition stands
        return basic
    adv = epsilon_to_fraction(lo)
    while adv > basic and advanced_epsilon(adv, pieces, dlt) > epsilon:
        adv = epsilon_to_fraction(adv * (1 - Fraction(1, 2**20)))
    return max(basic, adv)
