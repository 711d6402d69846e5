"""The smallest ε whose plan meets a target: the search every plan's ``epsilon_for`` runs.

A plan's measure (a half-width, an ℓ1 bound) does not increase with ε. The search checks the
target is reachable at :data:`~dpfreq._validate.EPSILON_MAX`, brackets it around the planned ε
(walking down a decade at a time below it: a plan at a tiny ε can cost more than all the others
together), bisects log ε until both ends of the bracket round to the same value (at most 40
halvings), and rounds up to 3 significant digits, so the answer always meets the target when
the measure is monotone.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from dpfreq._validate import EPSILON_MAX, EPSILON_MIN, message
from dpfreq.errors import ParameterError

__all__ = ["round_up3", "smallest_epsilon", "step3"]


def step3(x: float) -> float:
    """The spacing of 3-significant-digit numbers at ``x`` (> 0).

    Examples
    --------
    >>> step3(0.352), step3(12.0)
    (0.001, 0.1)
    """
    return float(10 ** (math.floor(math.log10(x)) - 2))


def round_up3(x: float, steps: int = 0) -> float:
    """``x`` (> 0) rounded up to 3 significant digits, then ``steps`` grid steps up.

    Examples
    --------
    >>> round_up3(0.35112), round_up3(0.352), round_up3(0.352, 1)
    (0.352, 0.352, 0.353)
    """
    step = step3(x)
    return float(f"{(math.ceil(x / step - 1e-9) + steps) * step:.3g}")


def _unbounded_where_refused(value: Callable[[float], float]) -> Callable[[float], float]:
    """``value`` with a ParameterError (no plan at that ε) read as an unbounded error."""
    def guarded(eps: float) -> float:
        try:
            return value(eps)
        except ParameterError:
            return math.inf

    return guarded


def smallest_epsilon(value: Callable[[float], float], target: float, *, planned: float,
                     what: str = "") -> float:
    """The smallest ε in [EPSILON_MIN, EPSILON_MAX] (3 significant digits, rounded up) with
    ``value(ε) <= target``; ``value`` is non-increasing in ε (``math.inf``, or a
    ParameterError it raises, where no plan exists at that ε: a budget too small to calibrate)
    and ``planned`` is where the bracket starts.

    Raises
    ------
    ParameterError
        Naming the public call, when even ε = EPSILON_MAX misses the target (``what``: the measure,
        said in the message).

    Examples
    --------
    >>> smallest_epsilon(lambda eps: 10 / eps, 3.0, planned=1.0)  # 10/3, up
    3.34
    """
    value = _unbounded_where_refused(value)
    if value(EPSILON_MAX) > target:
        rule = f"reachable at ε <= {EPSILON_MAX:g}" + (f" for {what}" if what else "")
        raise ParameterError(message("target", rule, target))
    if value(planned) > target:
        lo, hi = math.log(planned), math.log(EPSILON_MAX)
    else:
        eps_lo = eps_hi = planned
        while True:
            eps_lo = max(eps_lo / 10, EPSILON_MIN)
            if value(eps_lo) > target:
                break
            if eps_lo == EPSILON_MIN:
                return EPSILON_MIN
            eps_hi = eps_lo
        lo, hi = math.log(eps_lo), math.log(eps_hi)
    for _ in range(40):  # 40 halvings of a log-range <= 21: < 1e-10 relative
        if _rounded(math.exp(lo)) == _rounded(math.exp(hi)):
            break  # the answer lies in [lo, hi] and every ε there rounds to the same value
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if value(math.exp(mid)) > target else (lo, mid)
    return _rounded(math.exp(hi))  # meets the target; rounded up (no tolerance), it still does


def _rounded(eps: float) -> float:
    """``eps`` rounded up to 3 significant digits (at most EPSILON_MAX): non-decreasing in
    ``eps``, so the bisection can stop as soon as both ends of its bracket round alike."""
    return min(float(f"{math.ceil(eps / step3(eps)) * step3(eps):.3g}"), EPSILON_MAX)
