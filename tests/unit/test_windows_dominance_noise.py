"""dominance_noise_sum (level pair by level pair, shared nodes listed once) equals the sum of
node noise over the dominance pairs, node by node, for both keyed noise laws."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpfreq.windows import dyadic
from dpfreq.windows import tree as tree_mod
from dpfreq.windows.lazy_noise import KeyedDiscreteGaussian
from dpfreq.windows.tree import Tree2DNoise, dominance_noise_sum

KEY = bytes(range(32))


def pair_sum(trees: list[Tree2DNoise], signs: tuple[int, ...], x: np.ndarray,
             y: np.ndarray) -> np.ndarray:
    """The reference: every (query, node) pair of the covers, each node's noise, summed."""
    q, nids = dyadic.dominance_pairs(x, y, trees[0].domain)
    out = np.zeros(x.size, dtype=np.int64)
    for tree, sign in zip(trees, signs, strict=True):
        np.add.at(out, q, sign * tree.noise_of(nids))
    return out


@pytest.mark.parametrize("gaussian", [False, True])
@pytest.mark.parametrize("dense_cells", [0, 4, 10**9])
def test_level_pairs_equal_the_pair_sum(monkeypatch: pytest.MonkeyPatch, gaussian: bool,
                                        dense_cells: int) -> None:
    monkeypatch.setattr(dyadic, "DENSE_CELLS", dense_cells)
    monkeypatch.setattr(tree_mod, "_QUERY_CHUNK", 97)
    domain = 64
    rng = np.random.default_rng(11)
    x = np.concatenate(([-1, 63, -1, 0, 63], rng.integers(-1, domain, 400)))
    y = np.concatenate(([-1, 63, 5, -1, 0], rng.integers(-1, domain, 400)))
    trees = []
    for i in (0, 1):
        src = KeyedDiscreteGaussian(KEY, ("all", 1, i), 30.0) if gaussian else None
        trees.append(Tree2DNoise(domain, Fraction(1, 7), KEY, ("all", 1, i), noise_source=src))
    got = dominance_noise_sum(trees, (1, -1), x, y)
    assert np.array_equal(got, pair_sum(trees, (1, -1), x, y))
    assert np.array_equal(dominance_noise_sum(trees[:1], (1,), x.reshape(5, 81), y.reshape(5, 81)),
                          pair_sum(trees[:1], (1,), x, y).reshape(5, 81))


def test_level_pair_nodes_lists_each_dense_node_once() -> None:
    domain = 16
    rng = np.random.default_rng(3)
    x1, y1 = rng.integers(0, domain + 1, 300), rng.integers(0, domain + 1, 300)
    parts, ids = dyadic.level_pair_nodes(x1, y1, domain)
    q, nids = dyadic.dominance_pairs(x1 - 1, y1 - 1, domain)
    got = sorted((int(i), int(ids[a])) for sel, at in parts for i, a in zip(sel, at, strict=True))
    assert got == sorted(zip(q.tolist(), nids.tolist(), strict=True))
    assert ids.size < nids.size
