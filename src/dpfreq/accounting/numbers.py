"""Certified arithmetic: exact fractions, and logarithms, exponentials and roots rounded outward.

Every privacy figure the accountant compares is a :class:`fractions.Fraction` that is a proven
bound on the true value: an ε or a Rényi divergence is rounded **up**, a budget is rounded
**down**. Transcendental functions run in :mod:`decimal` at 60 significant digits, where ``exp``
and ``ln`` are correctly rounded (the General Decimal Arithmetic specification); the result is
then moved outward by a relative margin of 10^-40 plus an absolute one of 10^-60, far above the
rounding error of those digits, so the returned fraction is on the stated side of the true value.
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Iterable
from fractions import Fraction

__all__ = [
    "decimal_of",
    "exact_fraction",
    "exact_sum",
    "exp_bound",
    "fixed_point",
    "float_at_least",
    "float_at_most",
    "ln_bound",
    "outward",
    "sqrt_bound",
]

PRECISION = 60  # decimal digits of every transcendental evaluation
_RELATIVE = Fraction(1, 10**40)
_ABSOLUTE = Fraction(1, 10**60)
_ROOT_SCALE = 10**30  # square roots are bracketed to 10^-30


def exact_fraction(value: float | Fraction) -> Fraction:
    """The exact rational an accountant records for ε or δ: the shortest decimal of a float
    (``0.1`` is 1/10), or the :class:`~fractions.Fraction` itself.

    Parameters
    ----------
    value : float or Fraction
        ε or δ as the caller gave it.

    Returns
    -------
    fractions.Fraction
        The rational the float's shortest ``repr`` denotes (not its binary value).

    Raises
    ------
    ValueError
        If ``value`` is not a finite number (callers validate ε and δ first).

    Examples
    --------
    >>> exact_fraction(0.1)
    Fraction(1, 10)
    >>> sum(exact_fraction(0.1) for _ in range(10)) == 1  # while sum([0.1] * 10) != 1.0
    True
    """
    return value if isinstance(value, Fraction) else Fraction(repr(float(value)))


def exact_sum(values: Iterable[Fraction]) -> Fraction:
    """The exact sum of fractions, fast when many share a denominator (as a ledger's costs do:
    integer sums per denominator, one fraction addition per distinct denominator).

    Examples
    --------
    >>> exact_sum([Fraction(1, 10)] * 10)
    Fraction(1, 1)
    """
    per: dict[int, int] = {}
    for v in values:
        per[v.denominator] = per.get(v.denominator, 0) + v.numerator
    return sum((Fraction(n, d) for d, n in per.items()), Fraction(0))


def decimal_of(x: Fraction) -> decimal.Decimal:
    """``x`` as a 60-digit decimal (correctly rounded)."""
    with decimal.localcontext() as ctx:
        ctx.prec = PRECISION
        return decimal.Decimal(x.numerator) / decimal.Decimal(x.denominator)


def outward(value: decimal.Decimal, up: bool) -> Fraction:
    """A fraction on the ``up`` (or lower) side of the true value a 60-digit ``value`` rounds."""
    exact = Fraction(value)
    step = abs(exact) * _RELATIVE + _ABSOLUTE
    return exact + step if up else exact - step


def exp_bound(x: Fraction, *, up: bool) -> Fraction:
    """A fraction ``>= e^x`` (``up``) or ``<= e^x`` (never below 0).

    Examples
    --------
    >>> lo, hi = exp_bound(Fraction(1), up=False), exp_bound(Fraction(1), up=True)
    >>> lo < Fraction(math.e) < hi, float(hi - lo) < 1e-39
    (True, True)
    """
    if x == 0:
        return Fraction(1)
    with decimal.localcontext() as ctx:
        ctx.prec = PRECISION
        value = decimal_of(x).exp()
    return max(outward(value, up), Fraction(0))


def ln_bound(x: Fraction, *, up: bool) -> Fraction:
    """A fraction ``>= ln x`` (``up``) or ``<= ln x``, for ``x > 0``.

    Examples
    --------
    >>> lo, hi = ln_bound(Fraction(2), up=False), ln_bound(Fraction(2), up=True)
    >>> lo < hi, float(hi - lo) < 1e-39, round(float(hi), 12)
    (True, True, 0.69314718056)
    """
    if x <= 0:
        raise ValueError("ln_bound needs x > 0")
    if x == 1:
        return Fraction(0)
    with decimal.localcontext() as ctx:
        ctx.prec = PRECISION
        value = decimal_of(x).ln()
    return outward(value, up)


def sqrt_bound(x: Fraction, *, up: bool) -> Fraction:
    """A fraction ``>= √x`` (``up``) or ``<= √x``, for ``x >= 0``, within 10^-30 of it.

    Exact integer arithmetic: ``⌊√(x·S²)⌋/S`` rounded down, one step more rounded up.

    Examples
    --------
    >>> sqrt_bound(Fraction(4), up=False), sqrt_bound(Fraction(4), up=True) > 2
    (Fraction(2, 1), True)
    """
    if x < 0:
        raise ValueError("sqrt_bound needs x >= 0")
    scaled = x * _ROOT_SCALE * _ROOT_SCALE
    root = math.isqrt(scaled.numerator // scaled.denominator)
    low = Fraction(root, _ROOT_SCALE)
    if not up or low * low == x:
        return low
    return Fraction(root + 1, _ROOT_SCALE)


def fixed_point(x: Fraction, *, up: bool) -> Fraction:
    """``x`` rounded up (or down) to a multiple of 10^-30: sums of many such bounds keep a small
    denominator (a ledger adds thousands of them).

    Examples
    --------
    >>> fixed_point(Fraction(1, 3), up=True) - Fraction(1, 3) < Fraction(1, 10**30)
    True
    """
    scaled = x * _ROOT_SCALE
    whole = -(-scaled.numerator // scaled.denominator) if up else \
        scaled.numerator // scaled.denominator
    return Fraction(whole, _ROOT_SCALE)


def float_at_most(x: Fraction) -> float:
    """The largest float at most ``x`` (a share of a budget that must not round up).

    Examples
    --------
    >>> float_at_most(Fraction(1, 3)) <= Fraction(1, 3) < Fraction(float_at_least(Fraction(1, 3)))
    True
    """
    f = float(x)
    while Fraction(f) > x:
        f = math.nextafter(f, -math.inf)
    return f


def float_at_least(x: Fraction) -> float:
    """The smallest float at least ``x`` (an ε a release states must not round down).

    Examples
    --------
    >>> float_at_least(Fraction(1, 3)) > 1 / 3
    True
    """
    f = float(x)
    while Fraction(f) < x:
        f = math.nextafter(f, math.inf)
    return f
