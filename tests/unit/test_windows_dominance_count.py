"""The merge-sort tree of DominanceCounter against brute force: random and crafted points, on the
numpy path and on the compiled pass (extra ``fast``), in both layouts of its levels (32-bit pairs,
and 64-bit pairs when a ``y`` or a partial sum of the weights needs more)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from dpfreq.windows.data.dominance_count import DominanceCounter
from dpfreq.windows.noise import kernel as node_kernel

PATHS = ["numpy", pytest.param("compiled", marks=pytest.mark.skipif(
    importlib.util.find_spec("numba") is None, reason="the compiled pass needs numba"))]


@pytest.fixture(params=PATHS)
def path(request, monkeypatch):
    """Which counting pass runs: numpy's, or the compiled one (the kernels loaded)."""
    kern = node_kernel.load() if request.param == "compiled" else None
    if request.param == "compiled":
        assert kern is not None
    monkeypatch.setattr(node_kernel, "loaded", lambda: kern)
    return request.param


def brute(x, y, w, qx, qy):
    """``Σ w [x <= qx, y <= qy]`` per query, in Python integers."""
    return [sum(int(wi) for xi, yi, wi in zip(x.tolist(), y.tolist(), w.tolist(), strict=True)
                if xi <= a and yi <= b) for a, b in zip(qx.tolist(), qy.tolist(), strict=True)]


def queries(rng, x_max, y_max, n):
    """Random queries with the edges: below 0, at 0, at and beyond the maxima."""
    qx = np.concatenate((rng.integers(-3, x_max + 4, size=n), [-1, 0, x_max, x_max + 1, -5]))
    qy = np.concatenate((rng.integers(-3, y_max + 4, size=n), [0, -1, y_max + 7, y_max, 2]))
    return qx, qy


@pytest.mark.parametrize(("n", "x_max", "y_max", "seed"),
                         [(0, 5, 5, 0), (1, 0, 0, 1), (7, 2, 100, 2), (9, 64, 3, 3),
                          (333, 31, 31, 4), (1_000, 200, 1_000, 5), (2_049, 1_000, 77, 6)])
def test_counts_equal_brute_force(path, n, x_max, y_max, seed):
    """Random points with repeats and negative or zero weights, against brute force; sizes
    around the 8 pairs of a cache line and levels with empty nodes."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, x_max + 1, size=n)
    y = rng.integers(0, y_max + 1, size=n)
    w = rng.integers(-3, 4, size=n)
    dc = DominanceCounter(x, y, w, x_max, y_max, table_limit=0)
    qx, qy = queries(rng, x_max, y_max, 300)
    assert dc.count(qx, qy).tolist() == brute(x, y, w, qx, qy)


def test_large_nodes_and_crowded_ys(path):
    """Many points on few x (nodes of hundreds of lines: several steps of the search over the
    samples) and long runs of one y (a target equal to many samples)."""
    rng = np.random.default_rng(7)
    x = rng.integers(0, 4, size=6_000)
    y = np.where(rng.random(6_000) < 0.5, 50, rng.integers(0, 101, size=6_000))
    w = rng.choice([-2, -1, 1, 5], size=6_000)
    dc = DominanceCounter(x, y, w, 40, 100, table_limit=0)
    qx, qy = queries(rng, 40, 100, 200)
    qy[:50] = 50
    assert dc.count(qx, qy).tolist() == brute(x, y, w, qx, qy)


def test_wide_values_take_64_bit_pairs(path):
    """Weights whose partial sums pass 2^31, and y up to 2^62 (queries ordered without one
    int64 key): the 64-bit layout, exact; the same points scaled down: the 32-bit one."""
    rng = np.random.default_rng(8)
    y_max = 1 << 62
    x = rng.integers(0, 50, size=500)
    y = rng.integers(0, y_max + 1, size=500)
    w = rng.choice([-(1 << 33), 1, 1 << 35], size=500)
    dc = DominanceCounter(x, y, w, 49, y_max, table_limit=0)
    qx, qy = queries(rng, 49, y_max, 200)
    qy[:100] = y[rng.integers(0, 500, size=100)]  # targets on points
    assert dc.count(qx, qy).tolist() == brute(x, y, w, qx, qy)
    small = DominanceCounter(x, y % 1000, np.sign(w), 49, 999, table_limit=0)
    assert small.count(qx, qy % 1000).tolist() == brute(x, y % 1000, np.sign(w), qx, qy % 1000)


def test_shapes_and_the_table_agree(path):
    """A 2d batch keeps its shape, and the tree gives the prefix-sum table's counts."""
    rng = np.random.default_rng(9)
    x = rng.integers(0, 30, size=400)
    y = rng.integers(0, 20, size=400)
    w = rng.integers(-2, 3, size=400)
    tree = DominanceCounter(x, y, w, 29, 19, table_limit=0)
    table = DominanceCounter(x, y, w, 29, 19)
    qx = rng.integers(-2, 33, size=(6, 7))
    qy = rng.integers(-2, 23, size=(6, 7))
    got = tree.count(qx, qy)
    assert got.shape == (6, 7)
    assert np.array_equal(got, table.count(qx, qy))
