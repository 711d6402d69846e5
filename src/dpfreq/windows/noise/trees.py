"""Noise trees over a time domain (dyadic trees, lazy 2d noise).

The dyadic node layout, its prefix covers and the dominance covers of product trees are in
:mod:`dpfreq.windows.layouts.dyadic`.

* :class:`Tree1D`: every node's count plus exact discrete-Laplace noise; noise is drawn once per
  node from a keyed stream (a deterministic function of the secret key and node id).
  Because a prefix cover partitions the prefix, the noisy prefix count equals the exact count
  plus the sum of the cover's node noise; that is how answers are computed.
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

from dpfreq._validate import message
from dpfreq.errors import ParameterError, public_errors
from dpfreq.noise import discrete_laplace_variance, sample_discrete_laplace
from dpfreq.windows.layouts.dyadic import (
    dominance_pairs,
    node_counts,
    popcount,
    prefix_cover,
)
from dpfreq.windows.noise.dominance import DominanceNoise
from dpfreq.windows.noise.keyed import KeyedDiscreteLaplace, eager_generator

__all__ = ["Tree1D", "Tree2DNoise", "dominance_noise_sum"]

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
        Number of trees sharing this layout (e.g. the blocks of a rolling-window release); tree
        ``c``'s node ``v`` has id ``c·2D + v``.

    Examples
    --------
    >>> tree = Tree1D(8, Fraction(1, 2), bytes(32), ("cumulative", 1, 0))
    >>> int(tree.prefix_nodes(5)), tree.noise.shape
    (2, (16,))
    """

    @public_errors("Tree1D")
    def __init__(self, domain: int, gamma: Fraction, key: bytes, structure: Any,
                 copies: int = 1, noise_source: Any = None) -> None:
        if domain < 1 or domain & (domain - 1):
            raise ParameterError(message("domain", "a power of two", domain))
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
