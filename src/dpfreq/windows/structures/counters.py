"""Continual counters for the cumulative family: the simple counter, the layered tree and the
square-root factorization.

Cumulative structures count one point per item, the period of its k-th occurrence, so ``Δ``
(points changed by one neighbour) is 1 at ``unit="item"`` (add or remove one item: its point
appears or vanishes) and 2 at ``unit="event"`` or ``"item_replace"`` (the point moves from one
period to another, or appears or vanishes). Point values are ``t−1 ∈ [0, T−1]``.

=================  =======================================  ==============================
method             structure                                node noise γ
=================  =======================================  ==============================
cumulative/simple  one noise per period, running sums       ``ε_s/Δ``
cumulative/tree    one ``B``-ary tree over ``T``            ``ε_s/(Δ·L_{T,B})``
cumulative/        ``u = R x + z``, answers ``L u``         discrete Gaussian only,
factorization      (:mod:`dpfreq.windows.layouts.factorization`)    ``σ² >= ‖R‖²_{Δ}/(2ρ_s)``
=================  =======================================  ==============================

``ε_s`` is the budget of the (family, k) structure and ``L_{T,B} = ⌈log_B T⌉ + 1`` the levels of
the layout (:func:`~dpfreq.windows.layouts.layered.layer_layout`): every point lies in one block per
level. A moved point changes the blocks holding either period, except a top block over all
``T`` periods, which holds both.

Every counter is *measured*: once its key is attached it takes the exact per-period counts
``x`` and keeps only its noisy measurement — the noisy block counts ``B x + z`` of a layered
counter, ``u = R x + z`` of the factorization, integers — and every answer it publishes is a
deterministic function of that measurement (integer cover sums; the exact dyadic least-squares
weights of :func:`~dpfreq.windows.layouts.weights.consistent_estimates`; ``L u`` by
:func:`~dpfreq.windows.layouts.factorization.prefix_answer`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any, ClassVar, cast

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import message
from dpfreq.errors import ParameterError
from dpfreq.noise import gaussian_sigma2
from dpfreq.windows.layouts.factorization import (
    ALLOWANCE,
    MAX_HORIZON,
    SCALE,
    factor_shape,
    measurement,
    prefix_answers,
    prefix_variance_factors,
    sensitivity,
    sub_gaussian_halfwidth,
)
from dpfreq.windows.layouts.layered import layer_layout, layer_signed_cover, layer_signed_ranges
from dpfreq.windows.layouts.weights import Layout, consistent_estimates
from dpfreq.windows.structures.bands import walk_multiplier
from dpfreq.windows.structures.base import (
    BRANCHINGS,
    CONSISTENCY_MAX_WEIGHTS,
    Structure,
    eager_noise,
    register,
)
from dpfreq.windows.structures.protocol import Calibration, CounterShape, NodeSampler, Shape

__all__ = ["FactorShape", "FactorizationCounter", "SimpleCounter", "TreeCounter"]

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]


def period_counts(exact: Any, horizon: int) -> IntArray:
    """The per-period counts ``x`` of a cumulative family (periods ``1 … T``) from its exact
    prefix counts ``exact(1, t)``."""
    ts = np.arange(1, horizon + 1, dtype=np.int64)
    prefix: IntArray = np.asarray(exact(np.ones_like(ts), ts), dtype=np.int64)
    out: IntArray = np.diff(prefix, prepend=np.int64(0))
    return out


class _LayeredCounter(Structure):
    """Blocks of periods, level by level, with one eagerly drawn noise per block; the
    measurement is the noisy block counts."""

    families = ("cumulative",)
    #: the layout has tree parameters (``B``, top level, block sizes) to record
    tree_layout: ClassVar[bool] = True
    shape: CounterShape
    _impl: IntArray  # the block noises

    @property
    def measured(self) -> bool:
        return True

    @property
    def measurement_size(self) -> int:
        return self.shape.tree_nodes

    def measure(self, exact: Any) -> None:
        x = period_counts(exact, self.horizon)
        sizes, _ = self._blocks()
        starts = [np.arange(0, self.horizon, size) for size in sizes]
        self._noisy = np.concatenate([np.add.reduceat(x, st) for st in starts]) + self._impl
        self._measured()

    def _draw(self, key: bytes, name: tuple[str | int, ...]) -> None:
        self._impl = self._block_noise(key, name)

    def _blocks(self) -> tuple[tuple[int, ...], IntArray]:
        """``(sizes, offsets)`` of the levels
        (:func:`~dpfreq.windows.layouts.layered.layer_layout`)."""
        raise NotImplementedError

    def _shape(self) -> CounterShape:
        t = self.horizon
        points = 1 if self.unit == "item" else 2
        sizes, offsets = self._blocks()
        lv = len(sizes)
        # a moved point keeps the blocks holding both periods: at least the top one when it
        # spans all T periods
        l1 = lv if points == 1 else (max(lv, 2 * lv - 2) if sizes[-1] >= t else 2 * lv)
        tree = self.tree_layout
        return CounterShape(1, l1, math.sqrt(l1), periods=t, levels=lv, points=points,
                            tree_nodes=int(offsets[-1]),
                            branching=self.branching if tree else None, top=self.top,
                            block_sizes=sizes)

    def _block_noise(self, key: bytes, name: tuple[str | int, ...]) -> IntArray:
        """One noise per flat block id (:func:`~dpfreq.windows.layouts.layered.layer_layout`)."""
        tree0 = (*name, 0)
        size = self.shape.tree_nodes
        if self.keyed_eager:
            return self.noise_source(key, tree0).noise(np.arange(size))
        return eager_noise(self.gamma, size, key, tree0)


@register
class SimpleCounter(_LayeredCounter):
    """One noise per period; the answer at ``t`` is the running sum of the first ``t``."""

    name = "simple"
    tree_layout = False

    def _blocks(self) -> tuple[tuple[int, ...], IntArray]:
        return (1,), np.array([0, self.horizon])

    def nodes(self, t1: Any, t2: Any) -> IntArray:
        q1 = np.asarray(t1, dtype=np.int64)
        return np.asarray(t2, dtype=np.int64) + 0 * q1  # one leaf noise per period

    _walk: IntArray  # running sums of the noisy per-period counts

    def _measured(self) -> None:
        self._walk = np.cumsum(self._noisy)

    def noise(self, t1: Any, t2: Any) -> IntArray:
        _, q2 = np.broadcast_arrays(np.asarray(t1, dtype=np.int64),
                                    np.asarray(t2, dtype=np.int64))
        walk: IntArray = np.cumsum(self._impl)[q2 - 1]
        return walk

    def estimates(self, t1: Any, t2: Any) -> NDArray[Any]:
        _, q2 = np.broadcast_arrays(np.asarray(t1, dtype=np.int64),
                                    np.asarray(t2, dtype=np.int64))
        out: IntArray = self._walk[q2 - 1]
        return out

    def simulate_band(self, beta: float, draws: int, sample: NodeSampler) -> float | None:
        return walk_multiplier(self, beta, draws, sample)


@register
class TreeCounter(_LayeredCounter):
    """A layered ``B``-ary tree (with or without a root block); answers by signed covers, or by
    least squares over every block when its dense weights are small enough
    (:data:`~dpfreq.windows.structures.base.CONSISTENCY_MAX_WEIGHTS`)."""

    name = "tree"
    _cons_est: NDArray[np.float64]  # consistent estimates of every prefix (least squares)
    _run: IntArray  # running sums of the noisy blocks (signed covers)
    #: the signed ranges of the last queries asked: ((shape, bytes), (lo, hi, sign))
    _last_ranges: tuple[Any, tuple[IntArray, IntArray, IntArray]] | None = None

    @classmethod
    def best_for(cls, family: str, k: int, horizon: int, unit: str, eps: Fraction,
                 delta: float, width: int | None, *, rho: float | None, noise_kind: str,
                 layouts: dict[str, float] | None = None) -> TreeCounter | None:
        """The tree whose branching factor ``B`` and top level (a root block over all periods,
        or none) predict the least error for ``T`` (each layout once)."""
        choice, rmse = _tree_choice(cast(Any, cls), family, k, horizon, unit, eps, delta, rho,
                                    noise_kind)
        if layouts is not None:
            layouts.update(rmse)
        if choice is None:
            return None
        return cls(family, k, horizon, unit, eps, delta, rho=rho, noise_kind=noise_kind,
                   branching=choice[0], top=choice[1])

    def _layout_parameters(self, branching: int, top: bool) -> tuple[int, bool]:
        return branching, top

    def _blocks(self) -> tuple[tuple[int, ...], IntArray]:
        return layer_layout(self.horizon, self.branching, self.top)

    def _consistent(self) -> bool:
        return self.domain > 0 and self.domain * self.shape.tree_nodes <= CONSISTENCY_MAX_WEIGHTS

    def _layout(self) -> Layout:
        return ("layer", self.horizon, self.branching, self.top)

    def _prefix_index(self, t1: Any, t2: Any) -> IntArray:
        return np.asarray(t2, dtype=np.int64) - 1 + 0 * np.asarray(t1, dtype=np.int64)

    def _tree_limits(self) -> IntArray | None:
        return np.array([self.horizon], dtype=np.int64) if self.consistent else None

    def describe(self, name: str) -> str:
        return f"{name} (B={self.branching}, blocks {list(self.shape.block_sizes)})"

    def cover(self, x: Any) -> list[tuple[NDArray[np.bool_], IntArray, IntArray]]:
        """Signed block covers of the prefixes ``{p <= x}`` without least squares
        (:func:`~dpfreq.windows.layouts.layered.layer_signed_cover`)."""
        return layer_signed_cover(x, self.horizon, self.branching, self.top)

    def _ranges(self, q2: IntArray) -> tuple[IntArray, IntArray, IntArray]:
        """:func:`~dpfreq.windows.layouts.layered.layer_signed_ranges` of the prefixes ``q2 − 1``,
        remembered for the last set of queries: an ask's noise, variance and half-widths
        use the same (public: they depend on the queries and the layout only)."""
        memo = (q2.shape, q2.tobytes())
        last = self._last_ranges
        if last is not None and last[0] == memo:
            return last[1]
        got = layer_signed_ranges(q2 - 1, self.horizon, self.branching, self.top)
        self._last_ranges = (memo, got)
        return got

    def nodes(self, t1: Any, t2: Any) -> IntArray:
        q1 = np.asarray(t1, dtype=np.int64)
        lo, hi, _ = self._ranges(np.asarray(t2, dtype=np.int64))
        out: IntArray = (hi - lo).sum(axis=0) + 0 * q1
        return out

    def node_cover(self, t1: IntArray, t2: IntArray) -> tuple[IntArray, IntArray, IntArray]:
        slots = self.cover(t2 - 1)  # flat block ids of the layered layout, signed covers
        rows = [np.flatnonzero(used) for used, _, _ in slots]
        return (np.concatenate(rows),
                np.concatenate([ids[q] for (_, ids, _), q in zip(slots, rows, strict=True)]),
                np.concatenate([sg[q] for (_, _, sg), q in zip(slots, rows, strict=True)]))

    def _measured(self) -> None:
        if self.consistent:  # once per structure: the same value for every query
            self._cons_est = consistent_estimates(self.layout, self._noisy)
        else:  # int64: differences of running sums are exact
            self._run = np.concatenate(([0], np.cumsum(self._noisy))).astype(np.int64)

    def _signed_sums(self, run: IntArray, q2: IntArray) -> IntArray:
        """``Σ sign · block`` over the signed covers of the prefixes ``q2``, from the running
        sums ``run`` of some block values."""
        lo, hi, sign = self._ranges(q2)
        out: IntArray = (sign * (run[hi] - run[lo])).sum(axis=0)
        return out

    def noise(self, t1: Any, t2: Any) -> NDArray[Any]:
        """The noise of each answer: the signed cover sum of block noises, or for a
        consistent tree the least-squares combination of every block noise (float)."""
        _, q2 = np.broadcast_arrays(np.asarray(t1, dtype=np.int64),
                                    np.asarray(t2, dtype=np.int64))
        if self.consistent:
            out: NDArray[Any] = consistent_estimates(self.layout, self._impl)[q2 - 1]
            return out
        run = np.concatenate(([0], np.cumsum(self._impl))).astype(np.int64)
        return self._signed_sums(run, q2)

    def estimates(self, t1: Any, t2: Any) -> NDArray[Any]:
        _, q2 = np.broadcast_arrays(np.asarray(t1, dtype=np.int64),
                                    np.asarray(t2, dtype=np.int64))
        if self.consistent:
            out: NDArray[Any] = self._cons_est[q2 - 1]
            return out
        return self._signed_sums(self._run, q2)


@dataclass(frozen=True)
class FactorShape(Shape):
    """The (damped) square-root factor over ``T`` periods: ℓ2² exact, ``Δ`` points per neighbour."""

    periods: int
    points: int
    l2_squared: int

    @property
    def domain(self) -> int:
        return self.periods

    def record(self) -> dict[str, Any]:
        return {"domain": self.periods, "points_per_neighbour": self.points,
                "pieces": self.pieces,
                "factor": "damped square root", "factor_scale": SCALE,
                "factor_shape": list(factor_shape(min(self.periods, MAX_HORIZON),
                                                  self.points > 1)),
                "l2_squared": self.l2_squared}


@register
class FactorizationCounter(Structure):
    """Measures ``u = R x + z`` (``z`` i.i.d. discrete Gaussian) and answers every prefix by
    ``L u`` from ``u`` alone (:mod:`dpfreq.windows.layouts.factorization`)."""

    name = "factorization"
    families = ("cumulative",)
    requires = (f"delta > 0 (zCDP accounting, discrete Gaussian noise) and at most "
                f"{MAX_HORIZON} periods")
    shape: FactorShape
    _impl: IntArray  # the node noises z
    _est: FloatArray  # L u, every prefix
    _allow: FloatArray  # the floating-point allowance of each prefix

    @property
    def measured(self) -> bool:
        return True

    @property
    def _moves(self) -> bool:
        """Whether a point may move (``event``, ``item_replace``): the coefficients' shape."""
        return bool(self.unit != "item")

    @property
    def measurement_size(self) -> int:
        return self.horizon

    @classmethod
    def best_for(cls, family: str, k: int, horizon: int, unit: str, eps: Fraction,
                 delta: float, width: int | None, *, rho: float | None, noise_kind: str,
                 layouts: dict[str, float] | None = None) -> Structure | None:
        if noise_kind != "gaussian" or horizon > MAX_HORIZON:
            return None
        return super().best_for(family, k, horizon, unit, eps, delta, width, rho=rho,
                                noise_kind=noise_kind, layouts=layouts)

    def _shape(self) -> FactorShape:
        t = min(self.horizon, MAX_HORIZON)
        l1, l2sq = sensitivity(t, self.unit, self._moves)
        return FactorShape(1, l1, math.sqrt(l2sq), periods=self.horizon,
                           points=1 if self.unit == "item" else 2, l2_squared=l2sq)

    def _calibrate_exact(self) -> tuple[Fraction, int, Calibration]:
        if self.rho is None or self.noise_kind != "gaussian" or self.horizon > MAX_HORIZON:
            raise ParameterError(message("method",
                                         f"used with {self.requires}", self.name))
        # σ² >= ℓ2²/(2ρ) exactly: the sensitivity is an integer, ρ a public float
        target = math.ceil(Fraction(self.shape.l2_squared) / (2 * Fraction(self.rho)))
        sigma2 = gaussian_sigma2(float(target))[0] if target < 2**60 else 0
        return Fraction(0), sigma2, Calibration(self.shape.l1, "zCDP", rho_piece=self.rho,
                                                l2_sensitivity=self.shape.l2, sigma2=sigma2)

    def nodes(self, t1: Any, t2: Any) -> IntArray:
        q1 = np.asarray(t1, dtype=np.int64)
        return np.asarray(t2, dtype=np.int64) + 0 * q1  # prefix t mixes t node noises

    def variance(self, t1: Any, t2: Any) -> FloatArray:
        factors = prefix_variance_factors(self.horizon, self._moves)
        q2 = np.asarray(t2, dtype=np.int64) + 0 * np.asarray(t1, dtype=np.int64)
        out: FloatArray = factors[q2 - 1] * self.node_variance
        return out

    def halfwidth(self, t1: Any, t2: Any, beta: float, *, exact: bool = True) -> FloatArray:
        """The σ²-sub-Gaussian tail of ``Σ e_m z_m`` (the exact law is a weighted sum of ``t``
        distinct weights; its tail bound is what the interval states)."""
        factors = prefix_variance_factors(self.horizon, self._moves)
        q2 = np.asarray(t2, dtype=np.int64) + 0 * np.asarray(t1, dtype=np.int64)
        out: FloatArray = np.ceil(sub_gaussian_halfwidth(factors, self.sigma2, beta))[q2 - 1]
        return out

    def simulate_band(self, beta: float, draws: int, sample: NodeSampler) -> float | None:
        return None  # the band is the union bound over the T prefixes

    def describe(self, name: str) -> str:
        a, damping = factor_shape(self.horizon, self._moves)
        return (f"{name} (damped square-root factorization over {self.horizon} periods, "
                f"a={a:g}, lambda=1-{damping:.4g})")

    def _draw(self, key: bytes, name: tuple[str | int, ...]) -> None:
        z = self.noise_source(key, (*name, 0)).noise(np.arange(self.horizon))
        self._impl = np.asarray(z, dtype=np.int64)

    def measure(self, exact: Any) -> None:
        self._noisy = measurement(period_counts(exact, self.horizon), self._impl, self._moves)
        self._measured()

    def _measured(self) -> None:
        self._est = prefix_answers(self._noisy, self._moves)
        self._allow = ALLOWANCE * prefix_answers(np.abs(self._noisy), self._moves)

    def noise(self, t1: Any, t2: Any) -> NDArray[Any]:
        """``L z``: the noise of each answer (float; the answers never add it to counts)."""
        _, q2 = np.broadcast_arrays(np.asarray(t1, dtype=np.int64),
                                    np.asarray(t2, dtype=np.int64))
        out: NDArray[Any] = prefix_answers(self._impl, self._moves)[q2 - 1]
        return out

    def estimates(self, t1: Any, t2: Any) -> NDArray[Any]:
        _, q2 = np.broadcast_arrays(np.asarray(t1, dtype=np.int64),
                                    np.asarray(t2, dtype=np.int64))
        out: NDArray[Any] = self._est[q2 - 1]
        return out

    def allowance(self, t1: Any, t2: Any) -> FloatArray:
        _, q2 = np.broadcast_arrays(np.asarray(t1, dtype=np.int64),
                                    np.asarray(t2, dtype=np.int64))
        out: FloatArray = self._allow[q2 - 1]
        return out


@lru_cache(maxsize=1024)
def _tree_choice(cls: Any, family: str, k: int, horizon: int, unit: str,
                 eps: Fraction, delta: float, rho: float | None, noise_kind: str
                 ) -> tuple[tuple[int, bool] | None, tuple[tuple[str, float], ...]]:
    """``((B, top) of the least predicted error or None, (layout, predicted RMSE) of every
    usable layout tried)`` for :meth:`TreeCounter.best_for`: a function of public parameters
    only, cached, since every release and plan asks it again (up to 14 trees calibrated and
    predicted per call). ``cls`` is :class:`TreeCounter` or a subclass."""
    best: TreeCounter | None = None
    choice: tuple[int, bool] | None = None
    seen: set[tuple[int, ...]] = set()
    rmse: list[tuple[str, float]] = []
    for b in BRANCHINGS:
        for top in (False, True):
            s = cls(family, k, horizon, unit, eps, delta, rho=rho, noise_kind=noise_kind,
                    branching=b, top=top)
            if s.shape.block_sizes in seen or not s.usable:
                continue
            seen.add(s.shape.block_sizes)
            rmse.append((f"B={b}{', root' if top else ''}", float(np.sqrt(s.mean_mse()))))
            if best is None or s.mean_mse() < best.mean_mse():
                best, choice = s, (b, top)
    return choice, tuple(rmse)
