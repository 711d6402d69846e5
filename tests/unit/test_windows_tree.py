"""Noise trees and lazy noise (dyadic trees, consistency, lazily drawn node noise)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpfreq.errors import ParameterError
from dpfreq.windows.data.dominance_count import DominanceCounter
from dpfreq.windows.layouts.dyadic import domain_size, node_counts, popcount, prefix_cover
from dpfreq.windows.layouts.least_squares import consistent_tree
from dpfreq.windows.noise.keyed import KeyedDiscreteLaplace
from dpfreq.windows.noise.trees import Tree1D, Tree2DNoise

KEY = bytes(range(32))


def test_tree_vector_46():
    counts = node_counts([0, 1, 3, 6], 8)  # cumulative k=1 points of the worked log, values t-1
    assert list(counts[8:16]) == [1, 1, 0, 1, 0, 0, 1, 0]
    assert list(counts[4:8]) == [2, 1, 0, 1]
    assert list(counts[2:4]) == [3, 1]
    assert counts[1] == 4
    cover = [(int(ids[0])) for used, ids in prefix_cover([5], 8) if used[0]]
    assert sorted(cover) == [2, 6]  # heap ids of [0,3] and [4,5]
    assert counts[2] + counts[6] == 3


def test_prefix_cover_partitions_prefix():
    for domain in (1, 2, 8, 16):
        for x in range(-1, domain):
            covered = []
            for lev, (used, ids) in enumerate(prefix_cover([x], domain)):
                if used[0]:
                    j = int(ids[0]) - (domain >> lev)
                    covered += list(range(j << lev, (j + 1) << lev))
            assert sorted(covered) == list(range(x + 1))
    assert list(popcount([0, 1, 5, 7, 8])) == [0, 1, 2, 3, 1]
    assert domain_size(5) == 8
    assert domain_size(1) == 1


def test_tree1d_noisy_prefix_equals_explicit_tree_and_is_deterministic():
    tree = Tree1D(16, Fraction(1, 3), KEY, 5)
    again = Tree1D(16, Fraction(1, 3), KEY, 5)
    assert np.array_equal(tree.noise, again.noise)
    other = Tree1D(16, Fraction(1, 3), KEY, 6)
    assert not np.array_equal(tree.noise, other.noise)
    pts = np.array([0, 3, 3, 7, 15, 9])
    noisy = tree.noisy_node_counts(pts)
    xs = np.arange(-1, 16)
    for x in xs:
        explicit = sum(int(noisy[ids[0]]) for used, ids in prefix_cover([x], 16) if used[0])
        lazy = int((pts <= x).sum() + tree.prefix_noise([x])[0])
        assert explicit == lazy
    assert list(tree.prefix_nodes(xs)) == list(popcount(xs + 1))


@pytest.mark.parametrize(("branching", "height"), [(2, 3), (2, 4), (3, 3), (4, 2)])
def test_consistency_equals_least_squares(rng, branching, height):
    levels_n = [branching ** (height - 1 - i) for i in range(height)]
    noisy = [rng.normal(size=n) * 3 + 5 for n in levels_n]
    got = np.concatenate(consistent_tree(noisy, branching))
    n_leaves = levels_n[0]
    rows = []
    for i, n in enumerate(levels_n):
        span = branching ** i
        for j in range(n):
            r = np.zeros(n_leaves)
            r[j * span:(j + 1) * span] = 1
            rows.append(r)
    design = np.array(rows)
    leaves, *_ = np.linalg.lstsq(design, np.concatenate(noisy), rcond=None)
    assert np.allclose(got, design @ leaves, atol=1e-9)


def test_consistency_rejects_bad_layout():
    with pytest.raises(ParameterError):
        consistent_tree([np.zeros(3), np.zeros(1)], 2)


def test_lazy_noise_deterministic_any_batch():
    ln = KeyedDiscreteLaplace(KEY, 3, Fraction(2, 7))
    ids = np.array([5, 10**9, 3, 2**40 + 7, 5])
    a = ln.noise(ids)
    assert a[0] == a[4]
    fresh = KeyedDiscreteLaplace(KEY, 3, Fraction(2, 7))
    assert np.array_equal(fresh.noise(ids[::-1]), a[::-1])
    assert fresh.noise([3])[0] == a[2]
    big = fresh.noise(np.arange(5000))
    assert np.array_equal(KeyedDiscreteLaplace(KEY, 3, Fraction(2, 7)).noise([3, 5]), big[[3, 5]])
    assert not np.array_equal(KeyedDiscreteLaplace(KEY, 4, Fraction(2, 7)).noise(np.arange(50)),
                              big[:50])
    with pytest.raises(ParameterError):
        KeyedDiscreteLaplace(b"short", 1, Fraction(1))
    with pytest.raises(ParameterError):
        ln.noise([-1])


def test_tree2d_lazy_equals_explicit_sum():
    domain = 8
    tree = Tree2DNoise(domain, Fraction(1, 2), KEY, 9)
    lazy = KeyedDiscreteLaplace(KEY, 9, Fraction(1, 2))
    for x in range(-1, domain):
        for y in range(-1, domain):
            want = 0
            for ux, ix in prefix_cover([x], domain):
                for uy, iy in prefix_cover([y], domain):
                    if ux[0] and uy[0]:
                        want += int(lazy.noise([int(ix[0]) * 2 * domain + int(iy[0])])[0])
            assert tree.dominance_noise([x], [y])[0] == want
    xs = np.array([3, 0, 7, 5])
    ys = np.array([6, 2, 7, 0])
    assert np.array_equal(tree.dominance_noise(xs, ys),
                          [tree.dominance_noise([a], [b])[0] for a, b in zip(xs, ys, strict=False)])
    assert list(tree.dominance_nodes(xs, ys)) == list(popcount(xs + 1) * popcount(ys + 1))


@pytest.mark.parametrize("limit", [1 << 24, 1])
def test_dominance_counter_modes(rng, limit):
    x = rng.integers(0, 20, size=300)
    y = rng.integers(0, 30, size=300)
    w = rng.choice([-1, 1, 2], size=300)
    dc = DominanceCounter(x, y, w, 19, 29, table_limit=limit)
    qx = rng.integers(-1, 25, size=200)
    qy = rng.integers(-1, 35, size=200)
    want = [int(w[(x <= a) & (y <= b)].sum()) for a, b in zip(qx, qy, strict=False)]
    assert list(dc.count(qx, qy)) == want


def test_public_names():
    import dpfreq.windows as w

    assert w.__all__ == sorted(w.__all__)
    for name in w.__all__:
        assert hasattr(w, name)
    ns: dict = {}
    exec("from dpfreq.windows import *", ns)
    assert set(w.__all__) <= set(ns)
