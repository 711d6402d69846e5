"""What a stream publishes, computed from its noisy measurements and public parameters alone.

The answer of structure ``(g, k)`` at period ``t`` is its counter's answer
(:meth:`Counter.answer`) of the noisy rows measured by ``t``; rows never change once measured,
so **an answer published at t never changes**. The intervals and bands are public: they depend
on the counter's layout and node law only (plus, for the factorization, the floating-point
allowance computed from the measurement); a stream saves their half-widths at its own
confidence (:func:`widths_through`).

* **Interval** at ``t``: ``answer ± x_t`` with ``Pr[|noise| > x_t] <= β = 1 − confidence``,
  the certified quantile of the answer's exact noise law
  (:func:`~dpfreq.stream.mechanisms.counter.sum_halfwidth`).
* **Band**: the same at level ``β_t = β·w_t/(G·K)`` with ``w_t = 1/T`` (horizon ``T``) or
  ``w_t = 1/(t(t+1))`` (no horizon): ``Σ_t w_t <= 1``, so by the union bound every answer of
  every period, group and k — of the whole stream, however long — lies in its band at once with
  probability at least ``1 − β``. A period's band never changes after it is published.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.stream.mechanisms import sum_halfwidth

__all__ = ["band_level", "curve", "halfwidths", "widths_through"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


def curve(counter: Any, noisy: IntArray, through: int, first: int = 1
          ) -> tuple[NDArray[Any], FloatArray]:
    """``(answers, allowances)`` of periods ``first … through`` for every group: arrays of
    shape ``(G, periods)`` computed from the noisy rows ``noisy`` (``(G, rows)``) alone."""
    if counter.name == "simple":
        run = np.cumsum(noisy[:, :through], axis=1)[:, first - 1:]
        return run, np.zeros(run.shape)
    ans = [counter.answer(noisy, t) for t in range(first, through + 1)]
    allow = [counter.allowance(noisy, t) for t in range(first, through + 1)]
    g = noisy.shape[0]
    return (np.stack(ans, axis=1) if ans else np.zeros((g, 0)),
            np.stack(allow, axis=1) if allow else np.zeros((g, 0)))


def band_level(beta: float, t: int, horizon: int | None, n_structures: int) -> float:
    """The per-answer level of the band at period ``t`` (module docstring)."""
    weight = 1.0 / horizon if horizon is not None else 1.0 / (t * (t + 1))
    return beta * weight / n_structures


@functools.lru_cache(maxsize=4096)
def _halfwidth(counter: Any, t: int, beta: float) -> float:
    return sum_halfwidth(counter.parts(t), beta)


def halfwidths(counter: Any, through: int, beta: float, *, band: int | None = None,
               first: int = 1) -> FloatArray:
    """Half-widths of periods ``first … through``: the intervals at ``β``, or with ``band``
    (the number of structures ``G·K``) the band (:func:`band_level`). Public values."""
    ts = range(first, through + 1)
    if band is None:
        return np.array([_halfwidth(counter, t, beta) for t in ts], dtype=np.float64)
    return np.array([_halfwidth(counter, t, band_level(beta, t, counter.horizon, band))
                     for t in ts], dtype=np.float64)


def widths_through(counter: Any, saved: FloatArray, through: int, beta: float,
                   n_structures: int) -> FloatArray:
    """``[interval half-widths, band half-widths]`` of periods ``1 … through`` (shape ``(2,
    through)``): the ``saved`` ones (a stream saves those of its own confidence: public, and
    each costs a certified quantile, so a long stream does not compute every period's again
    on every append and show) extended by the periods after them."""
    have = saved.shape[1]
    if have >= through:
        out: FloatArray = saved[:, :through]
        return out
    new = np.stack([halfwidths(counter, through, beta, first=have + 1),
                    halfwidths(counter, through, beta, band=n_structures, first=have + 1)])
    return np.concatenate([saved, new], axis=1)
