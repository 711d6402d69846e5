"""One online counter: a public layout with its calibrated node law, and the law of its answers.

A **counter** answers the cumulative count of one (group, k) structure at every period. It is
made of a layout (which rows it measures at each period and how an answer combines them:
:mod:`~dpfreq.stream.mechanisms.intervals`, :mod:`~dpfreq.stream.mechanisms.smooth`,
:mod:`~dpfreq.stream.mechanisms.factorization`) and the node law calibrated to the layout's exact
sensitivity (:mod:`~dpfreq.stream.mechanisms.law`). The horizon-free counter
(:mod:`~dpfreq.stream.mechanisms.epochs`) is a sequence of such counters.

The noise of an answer is a sum of independent **parts**, each one counter's node noises: the
``m`` node noises of a cover (exact law: :meth:`NodeLaw.cover_halfwidth`), or the weighted sum
``Σ e_m z_m`` of a factorization (σ²-sub-Gaussian). :func:`sum_halfwidth` gives a certified
half-width for any sum of parts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.stream.mechanisms.law import NodeLaw

__all__ = ["Counter", "Part", "sum_halfwidth"]

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]

#: grid of the Chernoff bound of a sum of discrete Laplace parts (fractions of min γ)
_GRID = np.concatenate((np.geomspace(1e-6, 0.5, 400), 1 - np.geomspace(0.5, 1e-7, 400)))


@dataclass(frozen=True)
class Part:
    """One independent part of an answer's noise: ``size`` node noises of ``law`` summed
    (``weight is None``), or a weighted sum with ``Σ weights² = weight`` (factorization)."""

    law: NodeLaw
    size: int
    weight: float | None = None

    @property
    def variance(self) -> float:
        return self.law.variance * (self.size if self.weight is None else self.weight)

    def halfwidth(self, beta: float) -> float:
        """Certified ``x`` with ``Pr[|part| > x] <= β``."""
        if self.weight is None:
            return float(self.law.cover_halfwidth(np.array([self.size]), beta)[0])
        proxy = float(self.law.sigma2 or 0) * self.weight
        return float(math.ceil(math.sqrt(2.0 * proxy * math.log(2.0 / beta))))


def _laplace_chernoff(parts: list[Part], beta: float) -> float:
    """``x`` with ``2 e^{−λx} Π M_j(λ)^{m_j} <= β`` (``M`` the discrete Laplace mgf), the
    best over a grid of ``λ < min γ_j``: a Chernoff bound on a sum of independent parts."""
    gammas = np.array([float(p.law.gamma or 0) for p in parts])
    sizes = np.array([p.size for p in parts], dtype=np.float64)
    lam = float(gammas.min()) * _GRID
    g = gammas[:, None]
    log_m = (2 * np.log1p(-np.exp(-g)) - np.log1p(-np.exp(lam[None, :] - g))
             - np.log1p(-np.exp(-lam[None, :] - g)))
    total = (sizes[:, None] * log_m).sum(axis=0)
    return float(np.ceil(np.min((total + math.log(2.0 / beta)) / lam)))


def sum_halfwidth(parts: list[Part], beta: float) -> float:
    """Certified ``x`` with ``Pr[|Σ parts| > x] <= β`` for independent parts.

    One part: its own certified quantile. Several: the smallest of the union bound (each part
    at ``β/J``, half-widths added) and, when every part is Gaussian, the sub-Gaussian tail of
    the sum (variance proxies add), or when every part is a discrete Laplace cover, the
    Chernoff bound of the product of their moment generating functions."""
    parts = [p for p in parts if p.size > 0]
    if not parts:
        return 0.0
    if len(parts) == 1:
        return parts[0].halfwidth(beta)
    union = sum(p.halfwidth(beta / len(parts)) for p in parts)
    kinds = {p.law.kind for p in parts}
    if kinds == {"gaussian"}:
        proxy = sum(float(p.law.sigma2 or 0) * (p.size if p.weight is None else p.weight)
                    for p in parts)
        return min(union, float(math.ceil(math.sqrt(2.0 * proxy * math.log(2.0 / beta)))))
    if kinds == {"laplace"} and all(p.weight is None for p in parts):
        return min(union, _laplace_chernoff(parts, beta))
    return union


class Counter:
    """A bounded online counter: a layout over ``horizon`` periods and its node law.

    Parameters
    ----------
    layout : layout object
        Rows measured per period and how answers combine them (public).
    law : NodeLaw
        The calibrated law of every node noise.
    """

    def __init__(self, layout: Any, law: NodeLaw) -> None:
        self.layout, self.law = layout, law
        self.name: str = layout.name
        self.horizon: int | None = layout.horizon

    def rows_through(self, t: int) -> int:
        """Rows measured by the end of period ``t`` (public)."""
        return int(self.layout.rows_through(t))

    def rows(self, t: int) -> list[tuple[int, NodeLaw, IntArray]]:
        """``(tree index, node law, keyed ids)`` of the rows first measured at period ``t``."""
        return [(0, self.law, self.layout.row_ids(t))]

    def row_values(self, prefix: IntArray, t: int) -> IntArray:
        """Exact values of those rows (``prefix``: running sums of the exact counts)."""
        out: IntArray = self.layout.row_values(prefix, t)
        return out

    def answer(self, noisy: IntArray, t: int) -> NDArray[Any]:
        """The published answers at ``t`` from the noisy rows alone (one per group)."""
        out: NDArray[Any] = self.layout.answer(noisy, t)
        return out

    def allowance(self, noisy: IntArray, t: int) -> FloatArray:
        """Floating-point allowance of the answers (factorization only; else 0)."""
        if hasattr(self.layout, "allowance"):
            out: FloatArray = self.layout.allowance(noisy, t)
            return out
        return np.zeros(noisy.shape[0])

    def parts(self, t: int) -> list[Part]:
        """The law of the answer's noise at ``t`` (public)."""
        if hasattr(self.layout, "factor"):
            return [Part(self.law, t, self.layout.factor(t))]
        return [Part(self.law, self.layout.nodes(t))]

    def variance(self, t: int) -> float:
        """Exact variance of the answer's noise at ``t``."""
        return sum(p.variance for p in self.parts(t))

    def mean_variance(self, horizon: int) -> float:
        """Mean of :meth:`variance` over ``t = 1..horizon`` (what ``auto`` compares)."""
        if hasattr(self.layout, "factors"):
            return float(np.mean(self.layout.factors[:horizon])) * self.law.variance
        if hasattr(self.layout, "cover_sizes"):
            return float(np.mean(self.layout.cover_sizes[:horizon])) * self.law.variance
        return (horizon + 1) / 2 * self.law.variance

    def describe(self) -> str:
        """The layout and its node law, in words."""
        law = self.law
        noise = (f"discrete Gaussian sigma2={law.sigma2}" if law.kind == "gaussian"
                 else f"discrete Laplace gamma={law.gamma}")
        return f"{self.layout.describe()}; {noise}"

    def record(self) -> dict[str, Any]:
        """JSON-ready layout and calibration."""
        return {**self.layout.record(), **self.law.record()}

    def spec(self) -> dict[str, Any]:
        """The layout and the kind of node noise: what rebuilds this counter without a plan
        (:func:`~dpfreq.stream.mechanisms.saved.rebuild_counter`; public)."""
        return {**self.layout.spec(), "noise": self.law.kind}
