"""Tree mechanisms over a time domain (dyadic and B-ary trees, lazy 2d noise).

The dyadic node layout, its prefix covers and the dominance covers of product trees are in
:mod:`dpfreq.windows.layouts.dyadic`.

* :class:`Tree1D`: every node's count plus exact discrete-Laplace noise; noise is drawn once per
  node from a keyed stream (a deterministic function of the secret key and node id).
  Because a prefix cover partitions the prefix, the noisy prefix count equals the exact count
  plus the sum of the cover's node noise; that is how answers are computed.
* :class:`TreeBary`: the b-ary variant (prefix and canonical range covers, explicit noisy
  levels and the consistency pass), the building block for range-heavy uses (B = 16).
* :func:`consistent_tree`: the Hay et al. least-squares consistency pass for a complete B-ary
  tree (two passes; equals ordinary least squares, tested against ``numpy.linalg.lstsq``);
  its prefix weights are :func:`dpfreq.windows.layouts.weights.consistent_prefix_weights`.
* :class:`OnlineCounter`: the continual binary mechanism (noise fixed per dyadic node when it
  closes).
* :class:`Tree2DNoise`: the product dyadic tree with lazy keyed noise
  (:class:`~dpfreq.windows.noise.keyed.KeyedDiscreteLaplace`); dominance covers are products of
  the two 1d prefix covers.

The exact dominance counts of the window oracles are in :mod:`dpfreq.windows.data.dominance_count`.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import check_int, message
from dpfreq.errors import ParameterError
from dpfreq.noise import discrete_laplace_variance, sample_discrete_laplace
from dpfreq.windows.layouts.dyadic import (
    domain_size,
    dominance_pairs,
    node_counts,
    popcount,
    prefix_cover,
)
from dpfreq.windows.noise.dominance import DominanceNoise
from dpfreq.windows.noise.keyed import KeyedDiscreteLaplace, eager_generator

__all__ = [
    "OnlineCounter",
    "Tree1D",
    "Tree2DNoise",
    "TreeBary",
    "consistent_tree",
    "dominance_noise_sum",
]

IntArray = NDArray[np.int64]


class Tree1D:
    """A 1d dyadic tree with exact discrete-Laplace node noise, drawn eagerly from a keyed stream.

    Parameters
    ----------
    domain : int
        ``D``, a power of two.
    gamma : Fraction
        Node noise ``Pr[Z = z] ∝ exp(−γ|z|)`` (γ = ε_structure / (Δ·levels)).
    key : bytes
        Secret key; the noise is ``sample_discrete_laplace(γ, copies·2D)`` from
        ``eager_generator(key, structure)`` (:mod:`dpfreq.windows.noise.keyed`), so it is a
        deterministic function of the key and the node id and survives save/load.
    structure : int, str or tuple of them
        The structure's name (independent noise per name under one key).
    copies : int
        Number of trees sharing this layout (e.g. the blocks of a fixed-window release); tree
        ``c``'s node ``v`` has id ``c·2D + v``.

    Examples
    --------
    >>> tree = Tree1D(8, Fraction(1, 2), bytes(32), ("cumulative", 1, 0))
    >>> int(tree.prefix_nodes(5)), tree.noise.shape
    (2, (16,))
    """

    def __init__(self, domain: int, gamma: Fraction, key: bytes, structure: Any,
                 copies: int = 1, noise_source: Any = None) -> None:
        if domain < 1 or domain & (domain - 1):
            raise ParameterError(message("domain", "Tree1D", "a power of two", domain))
        self.domain = domain
        self.levels = domain.bit_length()
        self.gamma = Fraction(gamma)
        self.copies = copies
        if noise_source is not None:  # e.g. KeyedDiscreteGaussian: noise(node id) per node
            self.noise = noise_source.noise(np.arange(copies * 2 * domain))
        else:
            gen = eager_generator(key, structure)
            self.noise = sample_discrete_laplace(self.gamma, copies * 2 * domain, rng=gen)

    @property
    def node_variance(self) -> float:
        return discrete_laplace_variance(self.gamma)

    def prefix_noise(self, x: Any, copy: Any = 0) -> IntArray:
        """Σ node noise over the prefix cover of each ``x`` (in tree ``copy``)."""
        base = np.asarray(copy, dtype=np.int64) * (2 * self.domain)
        total = np.zeros(np.broadcast(np.asarray(x), base).shape, dtype=np.int64)
        for used, ids in prefix_cover(x, self.domain):
            total = total + np.where(used, self.noise[base + ids], 0)
        return total

    def prefix_nodes(self, x: Any) -> IntArray:
        """Number of nodes in the prefix cover of each ``x`` (``popcount(x+1)``)."""
        return popcount(np.asarray(x, dtype=np.int64) + 1)

    def noisy_node_counts(self, points: Any, copy: int = 0) -> IntArray:
        """Explicit-tree path: exact node counts plus node noise (heap-indexed)."""
        counts = node_counts(points, self.domain)
        base = copy * 2 * self.domain
        out = counts + self.noise[base:base + 2 * self.domain]
        out[0] = 0
        return out


def consistent_tree(noisy_levels: list[NDArray[Any]], branching: int) -> list[NDArray[Any]]:
    """Least-squares consistent node values of a complete B-ary tree (Hay et al. 2010).

    Parameters
    ----------
    noisy_levels : list of arrays
        Noisy node values level by level, leaves first (level 0 has ``B^H−1`` entries, the last
        level is the root with one entry). Equal noise variance on every node is assumed.
        Extra trailing dimensions are batch dimensions (many trees at once).
    branching : int
        ``B >= 2``.

    Returns
    -------
    list of arrays
        Consistent values (every parent equals the sum of its children), same layout. This is
        post-processing: it takes no randomness and costs no privacy.

    Examples
    --------
    >>> import numpy as np
    >>> levels = [np.array([1.0, 2.0]), np.array([3.0])]  # leaves, then the root
    >>> [lev.tolist() for lev in consistent_tree(levels, 2)]  # already consistent: unchanged
    [[1.0, 2.0], [3.0]]
    """
    b = check_int(branching, "branching", "consistent_tree", minimum=2)
    levels = [np.asarray(v, dtype=np.float64) for v in noisy_levels]
    for i in range(1, len(levels)):
        if levels[i - 1].shape[0] != b * levels[i].shape[0]:
            raise ParameterError(message("noisy_levels", "consistent_tree",
                                         "levels of a complete B-ary tree", "mismatched sizes"))
    z = [levels[0].copy()]
    for i in range(1, len(levels)):
        height = i + 1
        prev = z[i - 1]
        child_sum = prev.reshape((-1, b, *prev.shape[1:])).sum(axis=1)
        w_self = (b ** height - b ** (height - 1)) / (b ** height - 1)
        w_kids = (b ** (height - 1) - 1) / (b ** height - 1)
        z.append(w_self * levels[i] + w_kids * child_sum)
    out = [np.empty(0)] * len(levels)
    out[-1] = z[-1].copy()
    for i in range(len(levels) - 2, -1, -1):
        parent = np.repeat(out[i + 1], b, axis=0)
        sib_sum = np.repeat(z[i].reshape((-1, b, *z[i].shape[1:])).sum(axis=1), b, axis=0)
        out[i] = z[i] + (parent - sib_sum) / b
    return out


class TreeBary:
    """A 1d B-ary tree with exact discrete-Laplace node noise: prefix and range queries.

    The b-ary variant: over ``{0, …, D−1}`` with ``D = B^h``
    there are ``L = h + 1`` levels; node ``(ℓ, j)`` covers ``[j·B^ℓ, (j+1)·B^ℓ − 1]``. A prefix
    ``{p ≤ x}`` is covered by ``Σ_ℓ digit_ℓ(x+1)`` nodes (at most ``B−1`` per level); a range
    ``[a, b]`` by its canonical cover (at most ``2(B−1)`` per level). Every point lies in ``L``
    nodes, so node noise ``DLap(γ)`` with ``γ = ε/(Δ·L)`` makes the noisy tree ε-DP for inputs
    whose point multisets differ by ``Δ`` points. Answers are ``exact count + Σ cover noise``,
    which equals summing the noisy node counts of the cover (the cover partitions the range).
    With ``B = 16`` and the consistency pass (:meth:`consistent_leaves`) range answers are more
    accurate than binary ones (Qardaji–Yang–Li 2013); for prefixes alone keep ``B = 2``.

    Parameters
    ----------
    n_values : int
        Size of the value domain; ``D`` is the smallest power of ``B`` at least this.
    branching : int
        ``B >= 2``.
    gamma : Fraction
        Node noise ``Pr[Z = z] ∝ exp(−γ|z|)``.
    key : bytes
        Secret key: the noise is drawn once from ``eager_generator(key, structure)``, so it
        is a deterministic function of the key and the node id (never redrawn).
    structure : int, str or tuple of them
        The structure's name (independent noise per name under one key).

    Examples
    --------
    >>> tree = TreeBary(9, 3, Fraction(1, 2), bytes(32), ("range", 1, 0))
    >>> tree.domain, tree.levels
    (9, 3)
    """

    def __init__(self, n_values: int, branching: int, gamma: Fraction, key: bytes,
                 structure: Any) -> None:
        n = check_int(n_values, "n_values", "TreeBary", minimum=1)
        self.branching = b = check_int(branching, "branching", "TreeBary", minimum=2)
        h = 0
        while b**h < n:
            h += 1
        self.height = h
        self.domain = b**h
        self.levels = h + 1
        self.gamma = Fraction(gamma)
        sizes = [b ** (h - lev) for lev in range(h + 1)]
        self._offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        gen = eager_generator(key, structure)
        self.noise = sample_discrete_laplace(self.gamma, int(self._offsets[-1]), rng=gen)

    @property
    def node_variance(self) -> float:
        return discrete_laplace_variance(self.gamma)

    def node_id(self, level: int, j: Any) -> IntArray:
        """Flat id of node ``(level, j)`` (levels leaves first, as :func:`consistent_tree`)."""
        return self._offsets[level] + np.asarray(j, dtype=np.int64)

    def range_cover(self, lo: Any, hi: Any) -> list[tuple[NDArray[np.bool_], IntArray]]:
        """Canonical covers of ``[lo, hi]`` (arrays, ``0 <= lo``, ``hi <= D−1``; empty if
        ``lo > hi``) as a list of ``(used, node ids)`` slots: slot ``i`` of every query either
        holds one node of its cover (``used``) or nothing."""
        b = self.branching
        a = np.asarray(lo, dtype=np.int64).copy()
        e = np.maximum(np.asarray(hi, dtype=np.int64) + 1, a)  # half-open [a, e)
        a, e = np.broadcast_arrays(a, e)
        a, e = a.copy(), e.copy()
        out = []
        for lev in range(self.levels):
            if lev == self.height:  # the root level: whatever is left
                for i in range(b):
                    used = a + i < e
                    out.append((used, self.node_id(lev, np.where(used, a + i, 0))))
                break
            n_left = np.minimum((-a) % b, e - a)
            for i in range(b - 1):
                used = i < n_left
                out.append((used, self.node_id(lev, np.where(used, a + i, 0))))
            a = a + n_left
            n_right = np.minimum(e % b, e - a)
            for i in range(b - 1):
                used = i < n_right
                out.append((used, self.node_id(lev, np.where(used, e - 1 - i, 0))))
            e = e - n_right
            a, e = a // b, e // b
        return out

    def range_noise(self, lo: Any, hi: Any) -> IntArray:
        """Σ node noise over the canonical cover of each ``[lo, hi]``."""
        total = np.zeros(np.broadcast(np.asarray(lo), np.asarray(hi)).shape, dtype=np.int64)
        for used, ids in self.range_cover(lo, hi):
            total = total + np.where(used, self.noise[ids], 0)
        return total

    def range_nodes(self, lo: Any, hi: Any) -> IntArray:
        """Number of nodes in each canonical cover (the answer's variance is this times
        :attr:`node_variance`)."""
        total = np.zeros(np.broadcast(np.asarray(lo), np.asarray(hi)).shape, dtype=np.int64)
        for used, _ in self.range_cover(lo, hi):
            total = total + used
        return total

    def prefix_noise(self, x: Any) -> IntArray:
        """Σ node noise over the cover of ``{p ≤ x}`` (``x = −1``: empty)."""
        xs = np.asarray(x, dtype=np.int64)
        return self.range_noise(np.zeros_like(xs), xs)

    def noisy_levels(self, points: Any) -> list[IntArray]:
        """Explicit-tree path: exact node counts plus node noise, level by level (leaves
        first)."""
        p = np.asarray(points, dtype=np.int64)
        counts = np.bincount(p, minlength=self.domain).astype(np.int64)
        out = []
        for lev in range(self.levels):
            lo, hi = int(self._offsets[lev]), int(self._offsets[lev + 1])
            out.append(counts + self.noise[lo:hi])
            counts = counts.reshape(-1, self.branching).sum(axis=1) if lev < self.height \
                else counts
        return out

    def consistent_leaves(self, points: Any) -> NDArray[np.float64]:
        """Least-squares consistent leaf estimates of the noisy tree (Hay et al.; free
        post-processing); a range answer is the sum of its leaves."""
        return consistent_tree(self.noisy_levels(points), self.branching)[0]


class OnlineCounter:
    """Continual binary mechanism: feed one count per step, get a noisy running total.

    The noise of a dyadic node is drawn once, when the node closes (its last step arrives), and
    never redrawn; the running total at step ``t`` sums the ``popcount(t)`` closed nodes that
    cover ``[1, t]``. With node noise ``DLap(γ)`` and γ = ε/(Δ·L), ``L = ⌈log2 T⌉ + 1`` levels,
    the whole stream of outputs is ε-DP for inputs whose per-step counts change by Δ in total.

    Parameters
    ----------
    horizon : int
        Public number of steps ``T``.
    gamma : Fraction
        Node noise parameter.
    key : bytes
        Secret key (node noise is a deterministic function of key and node id).

    Examples
    --------
    >>> ctr = OnlineCounter(4, Fraction(1, 2), bytes(32))
    >>> isinstance(ctr.step(3), int)
    True
    """

    def __init__(self, horizon: int, gamma: Fraction, key: bytes, structure: Any = 0) -> None:
        self.horizon = check_int(horizon, "horizon", "OnlineCounter", minimum=1)
        self._noise = KeyedDiscreteLaplace(key, structure, gamma)
        self._levels = domain_size(self.horizon).bit_length()
        self._partial = [0] * self._levels
        self._closed: dict[int, int] = {}
        self.t = 0

    def step(self, count: int) -> int:
        """Add this step's exact count and return the noisy total over steps ``1..t``."""
        if self.t >= self.horizon:
            raise ParameterError(message("step", "OnlineCounter.step",
                                         f"called at most horizon={self.horizon} times", self.t))
        self.t += 1
        t = self.t
        for lev in range(self._levels):
            self._partial[lev] += int(count)
        for lev in range(self._levels):
            if t % (1 << lev) == 0:
                j = t // (1 << lev) - 1
                node = (lev << 40) | j
                self._closed[lev] = self._partial[lev] + int(self._noise.noise([node])[0])
                self._partial[lev] = 0
        total = 0
        for lev in range(self._levels):
            if (t >> lev) & 1:
                total += self._closed[lev]
        return total


class Tree2DNoise:
    """Lazy keyed noise of a product dyadic tree over ``D × D``.

    Node ``(u, v)`` (1d heap ids) has id ``u·2D + v``; its noise is
    ``KeyedDiscreteLaplace(key, structure, γ).noise(id)``: drawn on demand, never stored in a
    ``D²`` table, never redrawn.

    Examples
    --------
    >>> tree = Tree2DNoise(8, Fraction(1, 2), bytes(32), ("all", 1, 0))
    >>> int(tree.dominance_nodes(2, 5))
    4
    """

    def __init__(self, domain: int, gamma: Fraction, key: bytes, structure: Any,
                 noise_source: Any = None) -> None:
        self.domain = domain
        self.levels = domain.bit_length()
        self.gamma = Fraction(gamma)
        self._noise = (noise_source if noise_source is not None
                       else KeyedDiscreteLaplace(key, structure, self.gamma))

    @property
    def node_variance(self) -> float:
        return discrete_laplace_variance(self.gamma)

    def dominance_pairs(self, x: IntArray, y: IntArray) -> tuple[IntArray, IntArray]:
        """Every (query, node id) of the dominance covers of flat query arrays ``x, y``."""
        return dominance_pairs(x, y, self.domain)

    def prepare(self) -> None:
        """Build the noise source's tables ahead of the first ask (if it has any)."""
        prepare = getattr(self._noise, "prepare", None)
        if prepare is not None:
            prepare()

    @property
    def source(self) -> Any:
        """The noise source (element-wise ``noise(ids)``)."""
        return self._noise

    def noise_of(self, node_ids: IntArray) -> IntArray:
        """Noise of each node id (``u·2D + v``), element-wise."""
        out: IntArray = self._noise.noise(node_ids)
        return out

    def dominance_noise(self, x: Any, y: Any) -> IntArray:
        """Σ node noise over the dominance cover of ``{(p, q): p ≤ x, q ≤ y}`` per query."""
        return dominance_noise_sum((self,), (1,), x, y)

    def dominance_nodes(self, x: Any, y: Any) -> IntArray:
        """Number of nodes in the dominance cover: ``popcount(x+1)·popcount(y+1)``."""
        return popcount(np.asarray(x) + 1) * popcount(np.asarray(y) + 1)


def dominance_noise_sum(trees: Sequence[Tree2DNoise], signs: Sequence[int], x: Any,
                        y: Any) -> IntArray:
    """``Σ_i signs[i] · trees[i].dominance_noise(x, y)``, sharing the covers of the trees.

    The trees must have one domain and element-wise noise sources (a value per id); see
    :class:`~dpfreq.windows.noise.dominance.DominanceNoise` (keep one to reuse its tables).
    """
    return DominanceNoise(trees, signs)(x, y)
