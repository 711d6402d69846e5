"""``smallest_epsilon`` (the search behind every plan's ``epsilon_for``): the bisection that stops
once both ends of its bracket round to the same 3-significant-digit ε returns the answer of the
full 40 halvings, bit for bit, with fewer evaluations of the plan."""

from __future__ import annotations

import math

import numpy as np

from dpfreq._epsilon_search import smallest_epsilon, step3
from dpfreq._validate import EPSILON_MAX, EPSILON_MIN


def _full_bisection(value, target: float, planned: float) -> float:
    """The search before the early stop: bracket as smallest_epsilon does, then 40 halvings."""
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
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if value(math.exp(mid)) > target else (lo, mid)
    eps = math.exp(hi)
    return min(float(f"{math.ceil(eps / step3(eps)) * step3(eps):.3g}"), EPSILON_MAX)


def test_early_stop_returns_the_full_bisection_answer() -> None:
    """300 measures ``a/ε^p + c`` and staircases ``floor(7a/ε)/7`` (non-increasing, with flat
    steps), targets and planned ε over their whole ranges (seeded)."""
    gen = np.random.Generator(np.random.PCG64(20261207))
    counted = {"full": 0, "early": 0}
    for case in range(300):
        a, p = 10 ** gen.uniform(-6, 3), gen.uniform(0.2, 3.0)
        c = 0.0 if case % 3 else gen.uniform(0.0, 1.0)
        target, planned = 10 ** gen.uniform(-3, 3), 10 ** gen.uniform(-5, 3)
        stair = case % 2 == 1

        def measure(eps: float, who: str, a: float = a, p: float = p, c: float = c,
                    stair: bool = stair) -> float:
            counted[who] += 1
            return math.floor(7 * a / eps) / 7 if stair else a / eps**p + c

        if measure(EPSILON_MAX, "full") > target:  # unreachable: refused, as tested elsewhere
            continue
        want = _full_bisection(lambda e: measure(e, "full"), target, planned)
        got = smallest_epsilon(lambda e: measure(e, "early"), target, planned=planned)
        assert got == want, (case, a, p, c, target, planned)
    assert counted["early"] < counted["full"] / 2  # the point of the early stop
