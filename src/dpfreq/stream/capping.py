"""What a grouped stream's cap dropped, measured privately with a share ``ε_c`` of its budget.

A grouped stream at ``unit="item"`` keeps each item's first ``m`` groups
(:mod:`dpfreq.stream.items.update`). With ``capping_epsilon=ε_c`` it also releases, every
period, the fraction of (item, group) pairs the cap dropped **to date**: with ``g_i(t)`` the
distinct groups (of the listed ones) item ``i`` was seen in through period ``t`` and the public
bound ``M = 4m`` (:func:`dpfreq.grouped.dropped.capping_bound`), the two sums of the one-off
estimate (:mod:`dpfreq.grouped.dropped`)

* ``T(t) = Σ_i min(g_i(t), M)`` and
* ``D(t) = Σ_i min((g_i(t) − m)⁺, M − m)``

are counted by two more online counters of the stream's kind, over their per-period
**increments** (the per-item state remembers up to ``M`` pairs per item, the kept ones and,
with count 0, those the cap dropped). The released fraction is ``D̃(t)/T̃(t)`` clipped to
``[0, (M − m)/M]`` and its interval the one-off's (:func:`~dpfreq.grouped.dropped.
dropped_interval`), with both counters' answers within their certified half-widths at
``β/2`` each (union bound: probability at least ``1 − β``).

**Privacy.** Unit ``"item"``: a neighbour adds or removes one item with all its events. ``g_i``
only grows, and the item's increments depend on its own events only, so over the whole stream
they add at most ``M`` to ``T``'s increment stream and at most ``M − m`` to ``D``'s, however
they are spread over the periods. A counter's rows are sums of increments with coefficients
0 or 1, so an increment vector of ℓ1 mass ``w`` changes them by at most ``w`` times the ℓ1
sensitivity ``s`` of one point (the counter's exact sensitivity at ``unit="item"``): the two
counters' rows change by at most ``(2M − m)·s`` in ℓ1 (checked by enumeration in the tests).
Each counter's node law is therefore calibrated to the pure budget ``ε_c/(2M − m)`` per point
(discrete Laplace ``γ <= ε_c/((2M − m)·s)``), and the pair is pure ``ε_c``-DP (a grouped
stream's unit is ``"item"``: ``"item_replace"`` is refused with groups). The reach counters
run at ``ε − ε_c`` (rounded down), so the stream is ``(ε, δ)``-DP by basic composition,
charged once at creation. Nothing is capped at
``unit="event"``: ``capping_epsilon`` is refused there, as without ``max_groups_per_item``.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import message
from dpfreq.errors import ParameterError
from dpfreq.grouped.dropped import DroppedFraction, capping_bound, dropped_interval
from dpfreq.noise import epsilon_to_fraction
from dpfreq.rng import derive_key
from dpfreq.stream.auto import choose_counter
from dpfreq.stream.mechanisms import Budget
from dpfreq.stream.mechanisms.saved import rebuild_counter
from dpfreq.stream.publish import curve, halfwidths

__all__ = ["capping_budget", "capping_counter", "capping_key", "capping_widths",
           "dropped_fractions", "rebuilt_counter", "sensitivity"]

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]


def sensitivity(m: int) -> int:
    """The ℓ1 mass of one item's change of the two increment streams: ``2M − m``.

    Examples
    --------
    >>> sensitivity(2)
    14
    """
    return 2 * capping_bound(m) - m


def capping_budget(capping_epsilon: float, m: int) -> Budget:
    """The pure budget of each counter per point: ``ε_c`` over :func:`sensitivity`."""
    return Budget(epsilon_to_fraction(capping_epsilon) / sensitivity(m))


def capping_counter(params: Any) -> tuple[Any, str]:
    """``(counter, why)``: the online counter of both sums, chosen like the stream's
    (smallest predicted error, public parameters only) at :func:`capping_budget` with a
    point's sensitivity at ``unit="item"``."""
    budget = capping_budget(params.capping_epsilon, params.max_groups_per_item)
    counter, _, why = choose_counter(params.horizon, "item", budget, "auto")
    if counter is None:
        raise ParameterError(message("capping_epsilon", "large enough to calibrate the "
                                     "dropped-fraction counters' noise", params.capping_epsilon))
    return counter, why


def rebuilt_counter(params: Any, spec: dict[str, Any]) -> Any:
    """The capping counter of a saved stream, from its saved spec (ValueError if it does not
    fit these parameters)."""
    budget = capping_budget(params.capping_epsilon, params.max_groups_per_item)
    return rebuild_counter(spec, "item", budget)


def capping_key(key: bytes) -> bytes:
    """The sub-key of the two counters' node noise (never the reach counters')."""
    return derive_key(key, "stream", "capping")


def _halfwidth(counter: Any, t: int, beta: float) -> float:
    return float(halfwidths(counter, t, beta / 2.0, first=t)[0])


def capping_widths(counter: Any, saved: FloatArray, through: int, beta: float) -> FloatArray:
    """Each counter's half-width at ``β/2`` for periods ``1 … through`` (public), the
    ``saved`` ones extended."""
    have = saved.shape[0]
    if have >= through:
        out: FloatArray = saved[:through]
        return out
    new = halfwidths(counter, through, beta / 2.0, first=have + 1)
    return np.concatenate([saved, new])


def dropped_fractions(params: Any, counter: Any, noisy: IntArray, widths: FloatArray,
                      first: int, last: int, confidence: float
                      ) -> list[DroppedFraction]:
    """The estimates of periods ``first … last`` from the two counters' noisy rows ``noisy``
    (``(2, 1, rows)``) and their half-widths (post-processing only)."""
    m = int(params.max_groups_per_item)
    bound = capping_bound(m)
    rows = counter.rows_through(last)
    tot, allow_t = curve(counter, noisy[0][:, :rows], last, first)
    drop, allow_d = curve(counter, noisy[1][:, :rows], last, first)
    if np.asarray(tot).dtype.kind not in "iu" or np.asarray(drop).dtype.kind not in "iu":
        raise ValueError("the dropped-fraction counters answer in integers")
    law = counter.law
    out = []
    for i, t in enumerate(range(first, last + 1)):
        allow = max(float(allow_t[0, i]), float(allow_d[0, i]))
        q = math.ceil(float(widths[t - 1]) + allow)
        noisy_total, noisy_dropped = int(tot[0, i]), int(drop[0, i])
        est, lower, upper = dropped_interval(noisy_total, noisy_dropped, q, m, bound)
        out.append(DroppedFraction(est, lower, upper, confidence, float(params.capping_epsilon),
                                   m, bound, sensitivity(m),
                                   float(law.gamma or Fraction(0)), noisy_total, noisy_dropped,
                                   q, "stream"))
    return out
