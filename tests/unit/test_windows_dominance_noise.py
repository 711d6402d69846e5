"""dominance_noise_sum / DominanceNoise (upper level pairs from kept row tables, lower pairs
node by node) equal the sum of node noise over the dominance pairs, node by node, for both
keyed noise laws, whatever the split between the two halves and the order of the asks."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpfreq.windows.layouts import dyadic
from dpfreq.windows.noise import dominance as dn
from dpfreq.windows.noise.keyed import KeyedDiscreteGaussian
from dpfreq.windows.noise.trees import Tree2DNoise, dominance_noise_sum

KEY = bytes(range(32))


def pair_sum(trees: list[Tree2DNoise], signs: tuple[int, ...], x: np.ndarray,
             y: np.ndarray) -> np.ndarray:
    """The reference: every (query, node) pair of the covers, each node's noise, summed."""
    q, nids = dyadic.dominance_pairs(x, y, trees[0].domain)
    out = np.zeros(x.size, dtype=np.int64)
    for tree, sign in zip(trees, signs, strict=True):
        np.add.at(out, q, sign * tree.noise_of(nids))
    return out


def make_trees(domain: int, gaussian: bool) -> list[Tree2DNoise]:
    trees = []
    for i in (0, 1):
        src = KeyedDiscreteGaussian(KEY, ("all", 1, i), 30.0) if gaussian else None
        trees.append(Tree2DNoise(domain, Fraction(1, 7), KEY, ("all", 1, i), noise_source=src))
    return trees


def queries(domain: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = np.concatenate(([-1, domain - 1, -1, 0, domain - 1], rng.integers(-1, domain, n)))
    y = np.concatenate(([-1, domain - 1, 5 % domain, -1, 0], rng.integers(-1, domain, n)))
    return x, y


@pytest.mark.parametrize("gaussian", [False, True])
@pytest.mark.parametrize("max_cells", [1, 4, 64, 10**9])
def test_every_split_equals_the_pair_sum(monkeypatch: pytest.MonkeyPatch, gaussian: bool,
                                         max_cells: int) -> None:
    monkeypatch.setattr(dn, "MAX_CELLS", max_cells)
    monkeypatch.setattr(dn, "_QUERY_CHUNK", 97)
    domain = 64
    x, y = queries(domain, 400, 11)
    trees = make_trees(domain, gaussian)
    got = dominance_noise_sum(trees, (1, -1), x, y)
    assert np.array_equal(got, pair_sum(trees, (1, -1), x, y))
    assert np.array_equal(dominance_noise_sum(trees[:1], (1,), x.reshape(5, 81), y.reshape(5, 81)),
                          pair_sum(trees[:1], (1,), x, y).reshape(5, 81))


def test_kept_tables_give_the_same_values_in_any_order() -> None:
    """A small ask (high split), then a large one (lower split: more grids, new row tables),
    then the small one again: every answer equals the node-by-node sum."""
    domain = 1 << 7
    trees = make_trees(domain, False)
    dom = dn.DominanceNoise(trees, (1, -1))
    small, large = queries(domain, 20, 1), queries(domain, 6000, 2)
    splits = []
    for x, y in (small, large, small):
        assert np.array_equal(dom(x, y), pair_sum(trees, (1, -1), x, y))
        splits.append(dom._split)
    assert splits[0] > splits[1] == splits[2]  # the lower split is kept and reused
    assert 0 < splits[1] < 2 * dom.levels - 1  # both halves are used


@pytest.mark.parametrize("domain", [1, 2, 8])
def test_tiny_domains(domain: int) -> None:
    trees = make_trees(domain, False)
    x, y = queries(domain, 50, domain)
    for n in (1, x.size):
        dom = dn.DominanceNoise(trees, (1, -1))
        assert np.array_equal(dom(x[:n], y[:n]), pair_sum(trees, (1, -1), x[:n], y[:n]))
    assert dn.DominanceNoise(trees, (1, -1))(0, 0).shape == ()
