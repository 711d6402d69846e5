"""The bounded counters a plan compares, each at the best of its public tuning parameters.

For a horizon ``T``, a unit and a structure's budget, every method is calibrated to its exact
sensitivity and scored by the mean variance of its answers over ``t = 1..T`` (public: it
depends on the layout and the node law only):

* ``simple`` — one node per period;
* ``tree`` — the layered ``B``-ary tree, ``B = 2 … 16`` and a grid up to ``⌊√(2T)⌋ + 2``,
  with or without a level of whole top blocks (each distinct released layout once). An online
  tree cannot subtract blocks that end in the future, so a prefix costs about ``(B − 1)/2``
  nodes per level and its best shape is flatter than the offline tree's: two levels with
  ``B ≈ √T`` (``B = 21`` at ``T = 365``) where the offline tree takes three;
* ``smooth`` — the smooth binary mechanism, the heights and bit counts of
  :func:`~dpfreq.stream.mechanisms.smooth.smooth_shapes` (the few best by the bound
  ``k·(h − k + 1)^p`` computed exactly);
* ``factorization`` — the online square-root factorization (zCDP, discrete Gaussian, ``T <=
  8192``).

Under zCDP each method is tried with discrete Laplace and discrete Gaussian node noise. An
**epoch** of the horizon-free counter (:mod:`~dpfreq.stream.mechanisms.epochs`) is calibrated
at ``max(ℓ_event, 2·ℓ_item)`` for ``unit="event"`` and ``"item_replace"`` (a point that moves
between epochs changes one point in each), and scored with the variance of its last answer
added (that total is carried into every later answer).
"""

from __future__ import annotations

import functools
import math
from typing import Any

from dpfreq.stream.mechanisms.counter import Counter
from dpfreq.stream.mechanisms.factorization import MAX_HORIZON, FactorizationLayout
from dpfreq.stream.mechanisms.intervals import SimpleLayout, TreeLayout
from dpfreq.stream.mechanisms.law import Budget, calibrate
from dpfreq.stream.mechanisms.smooth import SmoothLayout, smooth_shapes

__all__ = ["BOUNDED_METHODS", "best_counters", "counter_from_spec", "counter_score"]

#: the bounded methods, in the order ``auto`` lists them
BOUNDED_METHODS = ("simple", "tree", "smooth", "factorization")

#: largest branching factor of a tree candidate for a short horizon (longer: ``⌊√(2T)⌋ + 2``)
_MAX_BRANCHING = 16

#: smooth shapes computed exactly per (T, unit): the best by the bound
_SMOOTH_EXACT = 3


def _branchings(horizon: int) -> list[int]:
    """The branching factors a tree candidate tries for ``T`` periods: every ``B <= 16``, and
    above it up to ``⌊√(2T)⌋ + 2`` a geometric grid (steps of about 8 %; the error is flat
    near its best ``B``, and each layout costs ``O(T)`` to build)."""
    top = min(horizon, math.isqrt(2 * horizon) + 2)
    out = list(range(2, _MAX_BRANCHING + 1))
    b = _MAX_BRANCHING + 1
    while b <= top:
        out.append(b)
        b = max(b + 1, round(b * 1.08))
    return out


@functools.lru_cache(maxsize=256)
def _tree(horizon: int, branching: int, top: bool) -> TreeLayout:
    return TreeLayout(horizon, branching, top)


@functools.lru_cache(maxsize=256)
def _smooth(horizon: int, height: int, ones: int) -> SmoothLayout:
    return SmoothLayout(horizon, height, ones)


@functools.lru_cache(maxsize=64)
def _simple(horizon: int) -> SimpleLayout:
    return SimpleLayout(horizon)


@functools.lru_cache(maxsize=32)
def _factorization(horizon: int, moves: bool) -> FactorizationLayout:
    return FactorizationLayout(horizon, moves)


def _sensitivity(layout: Any, unit: str, epoch: bool) -> tuple[int, int]:
    """The layout's exact sensitivity at ``unit``; in an epoch, at least twice a point's."""
    l1, l2 = layout.sensitivity(unit)
    if epoch and unit != "item":
        i1, i2 = layout.sensitivity("item")
        l1, l2 = max(l1, 2 * i1), max(l2, 2 * i2)
    return l1, l2


def counter_score(counter: Counter, horizon: int, carry: bool) -> float:
    """What a plan minimizes: the mean answer variance over ``1..T`` (plus, for an epoch,
    the variance of its last answer, carried into every later one)."""
    score = counter.mean_variance(horizon)
    return score + counter.variance(horizon) if carry else score


def _layouts(method: str, horizon: int, unit: str, epoch: bool) -> list[Any]:
    """The layouts of one method a plan tries for ``T`` periods."""
    if method == "simple":
        return [_simple(horizon)]
    if method == "factorization":
        return [_factorization(horizon, unit != "item")] if horizon <= MAX_HORIZON else []
    if method == "tree":
        seen: dict[bytes, Any] = {}
        for b in _branchings(horizon):
            for top in (False, True):
                lay = _tree(horizon, b, top)
                seen.setdefault(lay.first.tobytes() + lay.last.tobytes(), lay)
        return list(seen.values())
    shapes = smooth_shapes(horizon)
    picked: dict[tuple[int, int], None] = {}
    for power in (1, 2):  # ℓ2² (Gaussian) and ℓ1² (Laplace) of a point: about h − k + 1
        ranked = sorted(shapes, key=lambda hk: hk[1] * (hk[0] - hk[1] + 1) ** power)
        picked.update(dict.fromkeys(ranked[:_SMOOTH_EXACT]))
    return [_smooth(horizon, h, k) for h, k in picked]


@functools.lru_cache(maxsize=128)
def best_counters(horizon: int, unit: str, budget: Budget, methods: tuple[str, ...],
                  epoch: bool = False) -> tuple[tuple[str, Counter, float], ...]:
    """``(label, counter, score)`` of the best calibration of each method in ``methods``
    and each node law the budget allows (label ``method`` or ``method/kind`` under zCDP);
    methods that cannot be calibrated are left out."""
    out = []
    for method in methods:
        for kind in budget.kinds():
            if method == "factorization" and kind != "gaussian":
                continue
            best: tuple[Counter, float] | None = None
            for layout in _layouts(method, horizon, unit, epoch):
                law = calibrate(budget, kind, *_sensitivity(layout, unit, epoch))
                if law is None:
                    continue
                counter = Counter(layout, law)
                score = counter_score(counter, horizon, epoch)
                if best is None or score < best[1]:
                    best = (counter, score)
            if best is not None:
                label = method if budget.rho is None else f"{method}/{kind}"
                out.append((label, best[0], best[1]))
    return tuple(out)


def _layout_of(spec: Any) -> Any:
    """The layout a spec names (:meth:`Counter.spec`), built by the plan's caches."""
    kind, horizon = spec["layout"], spec["horizon"]
    if kind == "simple":
        return _simple(None if horizon is None else int(horizon))
    if kind == "tree":
        return _tree(int(horizon), int(spec["branching"]), bool(spec["top"]))
    if kind == "smooth":
        return _smooth(int(horizon), int(spec["height"]), int(spec["ones"]))
    if kind == "factorization":
        return _factorization(int(horizon), bool(spec["moves"]))
    raise ValueError(f"no layout {kind!r}")


def counter_from_spec(spec: Any, unit: str, budget: Budget, epoch: bool = False) -> Counter:
    """The counter a spec names, its node law calibrated to the layout's exact sensitivity at
    ``unit`` (in an epoch as :func:`best_counters` calibrates it) and ``budget``; ValueError
    when the spec is malformed or does not calibrate."""
    try:
        layout = _layout_of(spec)
        kind = str(spec["noise"])
    except (KeyError, TypeError) as exc:
        raise ValueError(f"a malformed counter spec ({exc})") from None
    law = calibrate(budget, kind, *_sensitivity(layout, unit, epoch))
    if law is None:
        raise ValueError("the counter does not calibrate at this budget")
    return Counter(layout, law)
