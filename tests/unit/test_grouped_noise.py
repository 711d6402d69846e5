"""The shared node noise of a grouped window release (dpfreq.windows.grouped.noise)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpfreq.errors import ParameterError
from dpfreq.windows.grouped.noise import GroupNoise
from dpfreq.windows.noise.keyed import KeyedDiscreteGaussian, KeyedDiscreteLaplace
from dpfreq.windows.structures.base import build_structure

KEY = bytes(range(32))


@pytest.mark.parametrize("gaussian", [False, True])
def test_group_values_are_the_shared_source_at_counter_v_times_g_plus_g(gaussian: bool) -> None:
    """Group g's node v is the tree's keyed source (same law) at counter v·G + g, whether
    asked as an eager prefix 0..n−1 (drawn for all groups at once) or lazily at any ids."""
    s = (build_structure("cumulative", "tree", 1, 16, "item", Fraction(1), 0.0, rho=0.5,
                         noise_kind="gaussian") if gaussian
         else build_structure("cumulative", "tree", 1, 16, "item", Fraction(1), 0.0))
    name = ("cumulative", 1, 0)
    src = (KeyedDiscreteGaussian(KEY, name, s.sigma2) if gaussian
           else KeyedDiscreteLaplace(KEY, name, s.gamma))
    n_groups = 5
    shared = GroupNoise(KEY, n_groups)
    ids = np.array([7, 0, 3, 3, 40])
    for g in range(n_groups):
        eager = shared.for_group(g)(s, name).noise(np.arange(12))
        assert np.array_equal(eager, src.noise(np.arange(12) * n_groups + g))
        lazy = GroupNoise(KEY, n_groups).for_group(g)(s, name).noise(ids.reshape(5, 1))
        assert lazy.shape == (5, 1)
        assert np.array_equal(lazy.ravel(), src.noise(ids * n_groups + g))
        assert np.array_equal(shared.for_group(g)(s, name).noise(ids), lazy.ravel())
    shared.drop_eager()
    assert np.array_equal(shared.for_group(2)(s, name).noise(np.arange(3)),
                          src.noise(np.arange(3) * n_groups + 2))


def test_structure_draws_through_the_hook() -> None:
    """A structure with ``node_noise`` set draws its eager tree from the shared source."""
    s = build_structure("cumulative", "tree", 1, 8, "item", Fraction(1), 0.0)
    assert not s.keyed_eager
    shared = GroupNoise(KEY, 2)
    s.node_noise = shared.for_group(1)
    assert s.keyed_eager
    s.attach(bytes(32), ("cumulative", 1))
    src = KeyedDiscreteLaplace(KEY, ("cumulative", 1, 0), s.gamma)
    size = s.shape.tree_nodes
    assert np.array_equal(s._impl, src.noise(np.arange(size) * 2 + 1))


def test_bad_group_counts_and_huge_ids_are_refused() -> None:
    s = build_structure("cumulative", "tree", 1, 8, "item", Fraction(1), 0.0)
    with pytest.raises(ParameterError, match="n_groups of GroupNoise"):
        GroupNoise(KEY, 0)
    with pytest.raises(ParameterError, match=r"group of GroupNoise\.for_group"):
        GroupNoise(KEY, 2).for_group(2)
    with pytest.raises(ParameterError, match="node_ids of GroupNoise"):
        GroupNoise(KEY, 4).for_group(3)(s, ("c", 1, 0)).noise([1 << 62])
