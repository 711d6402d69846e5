"""Structures for rolling windows and arbitrary windows, and per-query noise for every family.

=================  =======================================  ==============================
method             structure                                node noise γ
=================  =======================================  ==============================
rolling/blocks       2 trees per block over ``W``             event ``(ε_s/2)/(4k·L_W)``;
                                                            item ``ε_B/(4k·L_W)``, ε_B=ε_s/B
rolling/single       2 trees over ``T+1`` (event only)        ``ε_s/((4k+2)·L_T)``
all/tree2d         2 product trees (event only)             ``ε_s/(4k·L²)``
all/per_start      one cumulative tree per start            ``ε_T/(2·L_T)``, ε_T = ε_s/T
all/compressed     per_start on groups of s steps           as per_start on ``⌈T/s⌉``
``*``/per_query    one noise per window                     ``ε_s/Δ_q``
=================  =======================================  ==============================

``ε_s`` is the budget of the (family, k) structure and ``L_D`` the levels of a dyadic tree over
``D`` values. ``per_query``: ``Δ_q`` is the number of windows one neighbour changes — ``T`` for
a cumulative curve (the answers at ``t >= p`` all change), 1 for the whole period, ``W`` (event)
or ``T`` (item) for rolling windows, the most windows holding one event (event) or all
``T(T+1)/2`` (item) for arbitrary windows.

Domains hold only the point values a query can count (never-counted points may be dropped,
which can only lower the sensitivity): block values ``a−W, c−W`` restricted to ``[0, W−1]``
(queries ``x = t_loc − W <= W−1``); single-instance values ``[0, T]``; 2d points
``(x, y−1) ∈ [0, T−1]²`` (queries ``x <= t1−1``, ``y <= t2``, so points with ``x = T`` or
``y = T+1`` are never counted).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from dpfreq.windows.layouts.dyadic import domain_size, dominance_pairs, popcount, prefix_cover
from dpfreq.windows.layouts.weights import consistent_estimates, row_squares
from dpfreq.windows.noise.dominance import DominanceNoise
from dpfreq.windows.noise.keyed import KeyedDiscreteGaussian, KeyedDiscreteLaplace
from dpfreq.windows.noise.trees import Tree1D, Tree2DNoise
from dpfreq.windows.structures.base import (
    CONSISTENCY_MAX_DOMAIN,
    Structure,
    eager_noise,
    register,
)
from dpfreq.windows.structures.protocol import PerQueryShape, TreeShape

__all__ = ["Blocks", "Compressed", "PerQuery", "PerStart", "ProductTrees", "SingleTree"]

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]
Copies = tuple[tuple[IntArray | int, int], ...]


def _tree_shape(leaves: int, points: int, pieces: int, per_point_levels: int | None = None,
                **extra: int) -> TreeShape:
    """Sensitivity of dyadic trees over ``leaves`` values where a neighbour moves ``points``
    points, each in one node per level (``per_point_levels`` nodes for product trees)."""
    lv = leaves.bit_length()
    per_point = lv if per_point_levels is None else per_point_levels
    return TreeShape(pieces, points * per_point, points * math.sqrt(per_point), leaves=leaves,
                     levels=lv, points=points, **extra)


def _max_popcount_value(n: int) -> int:
    """The value in ``[1, n]`` with the most set bits (the largest such, ``n`` if tied)."""
    top = n.bit_length() - 1
    return n if n.bit_count() >= top else (1 << top) - 1


class _PrefixTrees(Structure):
    """Two or more copies of one 1d dyadic tree; an answer is tree ``a`` minus tree ``b`` at
    one prefix value (:meth:`prefix_layout`)."""

    shape: TreeShape
    _impl: Tree1D

    def prefix_layout(self, t2: IntArray) -> tuple[IntArray, Copies]:
        """The prefix value ``x`` and the ``(tree, sign)`` pairs whose prefix noises at ``x``
        the answer to the window ending at each ``t2`` sums."""
        raise NotImplementedError

    def _draw(self, key: bytes, name: tuple[str | int, ...]) -> None:
        tree0 = (*name, 0)
        src = self.noise_source(key, tree0) if self.keyed_eager else None
        copies = 2 * (self.shape.blocks or 1)
        self._impl = Tree1D(self.domain, self.gamma, key, tree0, copies=copies, noise_source=src)

    def noise(self, t1: Any, t2: Any) -> IntArray:
        _, q2 = np.broadcast_arrays(np.asarray(t1, dtype=np.int64),
                                    np.asarray(t2, dtype=np.int64))
        x, copies = self.prefix_layout(q2)  # the layout the band simulates (node_cover)
        total = np.zeros(q2.shape, dtype=np.int64)
        for tree, sign in copies:
            total = total + sign * self._impl.prefix_noise(x, tree)
        return total

    def node_cover(self, t1: IntArray, t2: IntArray) -> tuple[IntArray, IntArray, IntArray]:
        """Tree ``c``'s node ``v`` has id ``c·2D + v``."""
        d = self.domain
        x, copies = self.prefix_layout(t2)
        rows, ids, signs = [], [], []
        for used, heap in prefix_cover(x, d):
            q = np.flatnonzero(used)
            for copy, sign in copies:
                rows.append(q)
                ids.append(np.broadcast_to(copy, x.shape)[q] * (2 * d) + heap[q])
                signs.append(np.full(q.size, sign, dtype=np.int64))
        return np.concatenate(rows), np.concatenate(ids), np.concatenate(signs)


@register
class Blocks(_PrefixTrees):
    """Rolling windows of width ``W`` from two trees per block of ``W`` periods."""

    name = "blocks"
    families = ("rolling",)

    def _shape(self) -> TreeShape:
        w = int(self.width or 1)
        blocks = self.horizon // w + 1
        return _tree_shape(domain_size(w), 4 * self.k,
                           2 if self.level == "event" else blocks, blocks=blocks)

    def _piece_epsilon(self, pieces: int) -> Fraction:
        if self.level == "event":
            return self.eps / 2  # two parity groups, parallel composition inside each
        return super()._piece_epsilon(pieces)

    def prefix_layout(self, t2: IntArray) -> tuple[IntArray, Copies]:
        w = int(self.width or 1)  # tree 2b + 1 minus tree 2b of block b = t2 // W, at t2 − b·W
        b = t2 // w
        return t2 - b * w, ((2 * b + 1, 1), (2 * b, -1))

    def nodes(self, t1: Any, t2: Any) -> IntArray:
        q1 = np.asarray(t1, dtype=np.int64)
        q2 = np.asarray(t2, dtype=np.int64)
        w = int(self.width or 1)
        b = q2 // w
        x = q2 - (b - 1) * w - w
        return 2 * popcount(x + 1) + 0 * q1


@register
class SingleTree(_PrefixTrees):
    """Rolling windows from two trees over ``T + 1`` values (event level only)."""

    name = "single"
    families = ("rolling",)

    @classmethod
    def admissible(cls, unit: str, singleton: bool) -> bool:
        return unit == "event"  # unbounded per-item point count at item level

    def _shape(self) -> TreeShape:
        return _tree_shape(domain_size(self.horizon + 1), 4 * self.k + 2, 1)

    def prefix_layout(self, t2: IntArray) -> tuple[IntArray, Copies]:
        return t2, ((1, 1), (0, -1))  # tree 1 minus tree 0

    def nodes(self, t1: Any, t2: Any) -> IntArray:
        q1 = np.asarray(t1, dtype=np.int64)
        return 2 * popcount(np.asarray(t2, dtype=np.int64) + 1) + 0 * q1


@register
class ProductTrees(Structure):
    """Arbitrary windows from two product dyadic trees with lazy noise (event level only)."""

    name = "tree2d"
    families = ("all",)
    _impl: tuple[Tree2DNoise, ...]
    _sum: DominanceNoise

    @classmethod
    def admissible(cls, unit: str, singleton: bool) -> bool:
        return unit == "event"  # unbounded per-item point count at item level

    def _shape(self) -> TreeShape:
        lv = domain_size(self.horizon).bit_length()
        return _tree_shape(domain_size(self.horizon), 4 * self.k, 1, lv * lv)

    def nodes(self, t1: Any, t2: Any) -> IntArray:
        return 2 * popcount(np.asarray(t1, dtype=np.int64)) * popcount(
            np.asarray(t2, dtype=np.int64))

    def mean_mse(self) -> float:
        t = self.horizon
        pc = popcount(np.arange(1, t + 1, dtype=np.int64)).astype(np.float64)
        mean_nodes = float(np.sum(2 * pc * np.cumsum(pc))) / (t * (t + 1) / 2)
        return mean_nodes * self.node_variance

    def worst_windows(self) -> tuple[IntArray, IntArray]:
        """``2·popcount(t1)·popcount(t2)`` terms, largest at the value with most set bits."""
        v = np.array([_max_popcount_value(self.horizon)], dtype=np.int64)
        return v, v.copy()

    def node_cover(self, t1: IntArray, t2: IntArray) -> tuple[IntArray, IntArray, IntArray]:
        """Tree 0 minus tree 1 over the dominance cover of ``(t1 − 1, t2 − 1)``; node ids of
        tree ``i`` start at ``i·(2D)²``."""
        d = self.domain
        q, pairs = dominance_pairs(t1 - 1, t2 - 1, d)
        ones = np.ones(q.size, dtype=np.int64)
        return (np.concatenate([q, q]), np.concatenate([pairs, pairs + (2 * d) ** 2]),
                np.concatenate([ones, -ones]))

    def _draw(self, key: bytes, name: tuple[str | int, ...]) -> None:
        self._impl = tuple(
            Tree2DNoise(self.domain, self.gamma, key, (*name, i),
                        noise_source=self.noise_source(key, (*name, i)))
            for i in (0, 1))
        self._sum = DominanceNoise(self._impl, (1, -1))  # keeps the upper-level tables
        for tree in self._impl:  # the per-law integer tables, once, at release
            tree.prepare()

    def noise(self, t1: Any, t2: Any) -> IntArray:
        q1, q2 = np.broadcast_arrays(np.asarray(t1, dtype=np.int64),
                                     np.asarray(t2, dtype=np.int64))
        return self._sum(q1 - 1, q2 - 1)


@register
class PerStart(Structure):
    """Arbitrary windows from one cumulative binary tree per start (item level), with lazy
    keyed noise; least squares per tree when its domain is at most
    :data:`~dpfreq.windows.structures.base.CONSISTENCY_MAX_DOMAIN`."""

    name = "per_start"
    families = ("all",)
    shape: TreeShape
    _impl: KeyedDiscreteGaussian | KeyedDiscreteLaplace
    _cons_starts: dict[int, FloatArray]  # consistent estimates of each measured start's tree
    _exact: Any = None  # exact window counts (measure): a start's tree is measured on demand

    def _shape(self) -> TreeShape:
        pieces = -(-self.horizon // self.group_size)
        return _tree_shape(domain_size(pieces), 2, pieces, group_size=self.group_size)

    def _consistent(self) -> bool:
        return 0 < self.domain <= CONSISTENCY_MAX_DOMAIN

    def _tree_limits(self) -> IntArray | None:
        if not self.consistent:
            return None
        groups = self.shape.pieces  # the tree of group g answers x <= G − g
        return np.arange(groups, 0, -1, dtype=np.int64)

    def nodes(self, t1: Any, t2: Any) -> IntArray:
        g1, g2 = self.query_map(np.asarray(t1, dtype=np.int64), np.asarray(t2, dtype=np.int64))
        return popcount(g2 - g1 + 1)

    def worst_windows(self) -> tuple[IntArray, IntArray]:
        """The noise depends on ``x = g2 − g1`` only (groups of ``s`` periods): every ``x``
        when the trees are consistent, else the ``x`` whose prefix cover is largest."""
        g = self.group_size
        groups = -(-self.horizon // g)
        xs = (np.arange(groups, dtype=np.int64) if self.consistent
              else np.array([_max_popcount_value(groups) - 1], dtype=np.int64))
        return np.ones_like(xs), xs * g + 1

    def mean_mse(self) -> float:
        ts = np.arange(1, self.horizon + 1, dtype=np.int64)
        n_g = np.bincount(-(-ts // self.group_size))[1:].astype(np.float64)  # periods per group
        size = 2 * n_g.size
        spec = np.fft.rfft(n_g, size)
        # autocorrelation corr[d] = Σ_g n(g) n(g+d) (zero padding: no wrap-around)
        corr = np.rint(np.fft.irfft(spec * np.conj(spec), size)[:n_g.size])
        corr[0] = float(np.sum(n_g * (n_g + 1) / 2))
        diffs = np.arange(n_g.size, dtype=np.int64)
        if self.consistent:
            per = row_squares(self.layout)[diffs]
        else:
            per = popcount(diffs + 1).astype(np.float64)
        mean_nodes = float(np.sum(corr * per)) / (self.horizon * (self.horizon + 1) / 2)
        return (math.sqrt(mean_nodes * self.node_variance) + self.bias_bound()) ** 2

    @property
    def measured(self) -> bool:
        return self.consistent

    def _draw(self, key: bytes, name: tuple[str | int, ...]) -> None:
        self._cons_starts = {}
        self._exact = None
        self._impl = self.noise_source(key, (*name, 0))

    def measure(self, exact: Any) -> None:
        """Keep ``exact``: the tree of a start is measured (its noisy node counts) when a
        query first needs it."""
        self._cons_starts = {}
        self._exact = exact

    def noise(self, t1: Any, t2: Any) -> NDArray[Any]:
        """The noise of each answer: the signed cover sum of node noises, or for consistent
        trees the least-squares combination of the tree's node noises (float)."""
        q1, q2 = np.broadcast_arrays(np.asarray(t1, dtype=np.int64),
                                     np.asarray(t2, dtype=np.int64))
        g1, g2 = self.query_map(q1, q2)
        d = self.domain
        x = g2 - g1  # prefix value (t − 1) of the tree that starts at g1, in its own time
        if self.consistent:
            starts, where = np.unique(g1, return_inverse=True)
            est = consistent_estimates(self.layout, self._tree_measurements(starts, False).T).T
            return est[where.reshape(g1.shape), x]
        cover = prefix_cover(x.ravel(), d)
        used = np.stack([u for u, _ in cover])
        ids = np.stack([(g1.ravel() - 1) * (2 * d) + i for _, i in cover])
        vals = np.zeros(used.shape, dtype=np.int64)
        vals[used] = self._impl.noise(ids[used])
        return vals.sum(axis=0).reshape(q1.shape)

    def _tree_measurements(self, starts: IntArray, counts: bool = True) -> IntArray:
        """Noisy node counts (rows: the trees of ``starts``; columns: heap ids ``0 … 2D−1``,
        id 0 unused) — the exact node counts (``counts``) plus the keyed node noise."""
        d, s, t = self.domain, self.group_size, self.horizon
        nodes = np.zeros((starts.size, 2 * d), dtype=np.int64)
        ids = ((starts - 1) * (2 * d))[:, None] + np.arange(2 * d)[None, :]
        nodes += self._impl.noise(ids.ravel()).reshape(starts.size, 2 * d)
        nodes[:, 0] = 0  # heap id 0 is not a node
        if not counts:
            return nodes
        xs = np.arange(d, dtype=np.int64)
        first = (starts - 1) * s + 1  # the first period of each start's group
        last = np.minimum(t, (starts[:, None] + xs[None, :]) * s)  # prefix x ends here
        prefix = np.asarray(self._exact(np.broadcast_to(first[:, None], last.shape).ravel(),
                                        last.ravel()), dtype=np.int64).reshape(last.shape)
        exact = np.zeros((starts.size, 2 * d), dtype=np.int64)
        exact[:, d:] = np.diff(prefix, axis=1, prepend=0)  # leaves: the per-group counts
        for lev in range(d.bit_length() - 1):  # each level's nodes sum their two children
            lo = d >> (lev + 1)
            exact[:, lo:2 * lo] = exact[:, 2 * lo:4 * lo:2] + exact[:, 2 * lo + 1:4 * lo:2]
        exact[:, 0] = 0
        return nodes + exact

    def estimates(self, t1: Any, t2: Any) -> NDArray[Any]:
        """Least-squares estimates of the prefix ``x`` of the tree starting at group ``g1``,
        from that tree's noisy node counts alone (not integral)."""
        q1, q2 = np.broadcast_arrays(np.asarray(t1, dtype=np.int64),
                                     np.asarray(t2, dtype=np.int64))
        g1, g2 = self.query_map(q1, q2)
        x = g2 - g1
        out = np.empty(g1.shape, dtype=np.float64)
        starts = np.unique(g1)
        if len(self._cons_starts) + starts.size > 4096:
            self._cons_starts.clear()
        missing = np.array([g for g in starts.tolist() if g not in self._cons_starts],
                           dtype=np.int64)
        if missing.size:  # measure the whole tree of every new start in one batch
            noisy = self._tree_measurements(missing)
            est = consistent_estimates(self.layout, noisy.T).T  # (starts, prefixes)
            for g, row in zip(missing.tolist(), est, strict=True):
                self._cons_starts[g] = row
        for g in starts.tolist():
            sel = g1 == g
            out[sel] = self._cons_starts[g][x[sel]]
        return out


@register
class PerQuery(Structure):
    """One independent noise per window, for every family."""

    name = "per_query"
    families: ClassVar[tuple[str, ...]] = ("cumulative", "total", "rolling", "all")
    independent_answers = True
    _impl: IntArray | KeyedDiscreteGaussian | KeyedDiscreteLaplace

    def _shape(self) -> PerQueryShape:
        t = self.horizon
        if self.family == "total":  # one window: one item, event or replacement changes it by 1
            windows = 1
        elif self.family == "cumulative":
            windows = t
        elif self.family == "rolling":
            windows = int(self.width or 1) if self.level == "event" else t
        elif self.level == "event":
            half = (t + 1) // 2
            windows = half * (t - half + 1)
        else:
            windows = t * (t + 1) // 2
        return PerQueryShape(1, windows, math.sqrt(windows), windows=windows)

    def nodes(self, t1: Any, t2: Any) -> IntArray:
        shape = np.broadcast(np.asarray(t1, dtype=np.int64), np.asarray(t2, dtype=np.int64))
        return np.ones(shape.shape, dtype=np.int64)

    def mean_mse(self) -> float:
        if self.family == "all":
            return 1.0 * self.node_variance
        return super().mean_mse()

    def _draw(self, key: bytes, name: tuple[str | int, ...]) -> None:
        tree0 = (*name, 0)
        if self.family == "all":  # lazily, one noise per (t1, t2)
            self._impl = self.noise_source(key, tree0)
        elif self.keyed_eager:
            self._impl = self.noise_source(key, tree0).noise(np.arange(self.horizon + 1))
        else:
            self._impl = eager_noise(self.gamma, self.horizon + 1, key, tree0)

    def noise(self, t1: Any, t2: Any) -> IntArray:
        q1, q2 = np.broadcast_arrays(np.asarray(t1, dtype=np.int64),
                                     np.asarray(t2, dtype=np.int64))
        if isinstance(self._impl, np.ndarray):  # one noise per t2 of the curve
            out: IntArray = self._impl[q2]
            return out
        return self._impl.noise(q1 * (self.horizon + 1) + q2)


@register
class Compressed(PerStart):
    """Per-start trees over groups of ``s`` periods (item level, logs with one event per
    period); a window is widened to whole groups, with bias at most ``2(s − 1)``."""

    name = "compressed"

    @classmethod
    def admissible(cls, unit: str, singleton: bool) -> bool:
        return unit != "event" and singleton

    @classmethod
    def best_for(cls, family: str, k: int, horizon: int, unit: str, eps: Fraction,
                 delta: float, width: int | None, *, rho: float | None, noise_kind: str,
                 layouts: dict[str, float] | None = None) -> Compressed | None:
        """The group size ``s`` with the least predicted mean squared error."""
        best = (1, float("inf"))
        sizes = np.unique(np.concatenate((np.arange(1, min(horizon, 64) + 1),
                                          np.geomspace(1, horizon, 60).astype(np.int64))))
        for g in sizes:
            trial = cls(family, k, horizon, "item", eps, delta, group_size=int(g), rho=rho,
                        noise_kind=noise_kind)
            mse = trial.mean_mse() if trial.usable else math.inf
            if mse < best[1]:
                best = (int(g), mse)
        s = cls(family, k, horizon, unit, eps, delta, width, best[0], rho=rho,
                noise_kind=noise_kind)
        return s if s.usable else None

    def _prefix_step(self) -> int:
        return self.group_size

    def query_map(self, t1: IntArray, t2: IntArray) -> tuple[IntArray, IntArray]:
        s = self.group_size
        return -(-t1 // s), -(-t2 // s)

    def exact_window(self, t1: IntArray, t2: IntArray) -> tuple[IntArray, IntArray]:
        g = self.group_size
        return (-(-t1 // g) - 1) * g + 1, np.minimum(self.horizon, -(-t2 // g) * g)

    def bias_bound(self) -> int:
        """Bound on |E[answer] − truth| (singleton logs: ``2(s−1)``)."""
        return 2 * (self.group_size - 1)
