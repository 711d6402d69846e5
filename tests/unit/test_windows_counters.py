"""The cumulative counters (simple counter, B-ary trees): exact sensitivity by enumeration for
every unit, the prefix covers, and ``auto`` never worse than any structure by its own
prediction."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from dpfreq.windows.plan import make_plan
from dpfreq.windows.reductions import cumulative_points
from dpfreq.windows.strategy import BRANCHINGS, STRATEGIES, build_structure
from dpfreq.windows.tree import bary_layout, bary_prefix_cover, prefix_cover

HORIZON = 5


def _incidence(s):
    """Node × point incidence of a cumulative structure (rows: released noisy counts)."""
    t = s.horizon
    if s.strategy == "simple":
        return np.eye(t)
    d, h, offsets = bary_layout(t, s.branching)
    out = np.zeros((int(offsets[-1]), t))
    for lev in range(h + 1):
        out[offsets[lev] + np.arange(t) // s.branching**lev, np.arange(t)] = 1.0
    return out


def _histories(horizon, max_events):
    """Every multiset of at most ``max_events`` event times of one item."""
    out = []
    for m in range(max_events + 1):
        out.extend(itertools.combinations_with_replacement(range(1, horizon + 1), m))
    return out


def _point_vector(history, k, horizon):
    """The item's contribution to the per-period point counts (its k-th occurrence)."""
    vec = np.zeros(horizon)
    if len(history) >= k:
        p = cumulative_points(np.zeros(len(history), dtype=np.int64),
                              np.asarray(history, dtype=np.int64), k)
        vec[int(p[0]) - 1] += 1
    return vec


def _neighbours(history, unit, histories):
    """Every neighbouring history of one item (``()``: the item absent)."""
    if unit == "item":
        return [()]  # add or remove the item with all its events
    if unit == "item_replace":
        return histories
    out = [tuple(sorted((*history, t))) for t in range(1, HORIZON + 1)]
    out += [history[:i] + history[i + 1:] for i in range(len(history))]
    return out


@pytest.mark.parametrize("unit", ["item", "event", "item_replace"])
@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize(("strategy", "branching"),
                         [("simple", 2), ("tree", 2), ("tree", 3), ("tree", 5)])
def test_sensitivity_is_exact_by_enumeration(unit, k, strategy, branching):
    """ℓ1 and ℓ2 changes of the released node counts over all neighbours equal the stated
    sensitivities. Counts add over items, so one item's histories (up to 3 events over
    T = 5 periods) and their neighbours enumerate every change a neighbour can make."""
    s = build_structure("cumulative", strategy, k, HORIZON, unit, Fraction(1), 0.0,
                        branching=branching)
    m = _incidence(s)
    histories = _histories(HORIZON, 3)
    l1 = l2 = 0.0
    for h in histories:
        base = m @ _point_vector(h, k, HORIZON)
        for other in _neighbours(h, unit, histories):
            diff = np.abs(m @ _point_vector(other, k, HORIZON) - base)
            l1, l2 = max(l1, diff.sum()), max(l2, math.sqrt((diff**2).sum()))
    assert l1 == s.detail["l1_sensitivity"]
    gauss = build_structure("cumulative", strategy, k, HORIZON, unit, Fraction(1), 0.0,
                            branching=branching, rho=0.5, noise_kind="gaussian")
    assert l2 == pytest.approx(gauss.detail["l2_sensitivity"], rel=1e-12)


@pytest.mark.parametrize("branching", [2, 3, 4, 7])
@pytest.mark.parametrize("n_values", [1, 6, 16, 50])
def test_bary_prefix_cover_partitions_the_prefix(branching, n_values):
    d, _, offsets = bary_layout(n_values, branching)
    s = build_structure("cumulative", "tree", 1, n_values, "item", Fraction(1), 0.0,
                        branching=branching)
    m = _incidence(s)
    x = np.arange(-1, n_values)
    cover = np.zeros((x.size, int(offsets[-1])))
    for used, ids in bary_prefix_cover(x, branching, n_values):
        np.add.at(cover, (np.flatnonzero(used), ids[used]), 1.0)
    assert np.array_equal(cover @ m, (np.arange(n_values)[None, :] <= x[:, None]) * 1.0)
    assert np.array_equal(cover.sum(axis=1)[1:], s.nodes(1, x[1:] + 1))
    if branching == 2:  # the binary digits: the heap-id cover of prefix_cover
        sizes = sum(used.astype(int) for used, _ in prefix_cover(x, d))
        assert np.array_equal(cover.sum(axis=1), sizes)


@pytest.mark.parametrize("unit", ["item", "event", "item_replace"])
@pytest.mark.parametrize("horizon", [1, 7, 30, 90, 365, 2000])
@pytest.mark.parametrize("epsilon", [0.1, 1.0])
def test_auto_is_never_worse_than_any_structure_by_its_own_prediction(unit, horizon, epsilon):
    plan = make_plan(("cumulative",), (1,), horizon, unit, epsilon, 0.0, "auto", False)
    chosen = plan.structures[("cumulative", 1)].mean_mse()
    eps = Fraction(epsilon)
    for strategy in STRATEGIES["cumulative"]:
        for b in BRANCHINGS if strategy == "tree" else (2,):
            s = build_structure("cumulative", strategy, 1, horizon, unit, eps, 0.0, branching=b)
            assert chosen <= s.mean_mse() * (1 + 1e-12)
    why = plan.record["cumulative, k=1"]["why"]
    assert why.startswith(plan.structures[("cumulative", 1)].strategy)


def test_item_level_simple_counter_is_the_issue_setting():
    """T = 30, item level, ε = 1/3: the counter auto keeps predicts at most 0.35 of the error of
    the former calibration (binary tree, two points per item)."""
    plan = make_plan(("cumulative",), (1,), 30, "item", 1 / 3, 0.0, "auto", False)
    chosen = plan.structures[("cumulative", 1)]
    former = build_structure("cumulative", "tree", 1, 30, "item_replace", Fraction(1, 3), 0.0)
    former_l1 = 2 * 6  # Δ = 2 points, 6 levels of the tree over D = 32
    assert former.detail["levels"] == 6
    assert former.detail["l1_sensitivity"] == 10  # the exact replacement sensitivity now
    ratio = math.sqrt(chosen.mean_mse() / former.mean_mse()) * 10 / former_l1
    assert ratio <= 0.35
