"""The cumulative counters (simple counter, B-ary trees): exact sensitivity by enumeration for
every unit, the prefix covers, and ``auto`` never worse than any structure by its own
prediction."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from dpfreq.accounting import zcdp_rho
from dpfreq.noise import discrete_laplace_variance
from dpfreq.windows.data.reductions import cumulative_points
from dpfreq.windows.layouts.layered import (
    layer_incidence,
    layer_layout,
    layer_prefix_cover,
    layer_signed_cover,
    layer_signed_ranges,
)
from dpfreq.windows.params import PlanRequest
from dpfreq.windows.structures.base import BRANCHINGS, METHODS, build_structure
from dpfreq.windows.structures.chooser import make_plan

HORIZON = 5


def _incidence(s):
    """Block × period incidence of a cumulative structure (rows: released noisy counts)."""
    if s.method == "simple":
        return np.eye(s.horizon)
    return layer_incidence(s.horizon, s.branching, s.top)


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
@pytest.mark.parametrize(("method", "branching", "top"),
                         [("simple", 2, False), ("tree", 2, False), ("tree", 2, True),
                          ("tree", 3, True), ("tree", 5, False), ("tree", 5, True)])
def test_sensitivity_is_exact_by_enumeration(unit, k, method, branching, top):
    """ℓ1 and ℓ2 changes of the released node counts over all neighbours equal the stated
    sensitivities. Counts add over items, so one item's histories (up to 3 events over
    T = 5 periods) and their neighbours enumerate every change a neighbour can make."""
    s = build_structure("cumulative", method, k, HORIZON, unit, Fraction(1), 0.0,
                        branching=branching, top=top)
    m = _incidence(s)
    histories = _histories(HORIZON, 3)
    l1 = l2 = 0.0
    for h in histories:
        base = m @ _point_vector(h, k, HORIZON)
        for other in _neighbours(h, unit, histories):
            diff = np.abs(m @ _point_vector(other, k, HORIZON) - base)
            l1, l2 = max(l1, diff.sum()), max(l2, math.sqrt((diff**2).sum()))
    assert l1 == s.detail["l1_sensitivity"]
    gauss = build_structure("cumulative", method, k, HORIZON, unit, Fraction(1), 0.0,
                            branching=branching, top=top, rho=0.5, noise_kind="gaussian")
    assert l2 == pytest.approx(gauss.detail["l2_sensitivity"], rel=1e-12)


@pytest.mark.parametrize("top", [False, True])
@pytest.mark.parametrize("branching", [2, 3, 4, 7])
@pytest.mark.parametrize("n_values", [1, 6, 16, 50])
def test_prefix_cover_partitions_the_prefix_and_least_squares_is_unbiased(n_values, branching,
                                                                          top):
    s = build_structure("cumulative", "tree", 1, n_values, "item", Fraction(1), 0.0,
                        branching=branching, top=top)
    m = _incidence(s)
    x = np.arange(-1, n_values)
    prefixes = (np.arange(n_values)[None, :] <= x[:, None]) * 1.0
    cover = np.zeros((x.size, m.shape[0]))
    for used, ids in layer_prefix_cover(x, n_values, branching, top):
        np.add.at(cover, (np.flatnonzero(used), ids[used]), 1.0)
    assert np.array_equal(cover @ m, prefixes)
    signed = np.zeros((x.size, m.shape[0]))  # balanced digits: never more blocks
    for used, ids, sign in layer_signed_cover(x, n_values, branching, top):
        np.add.at(signed, (np.flatnonzero(used), ids[used]), sign[used])
    assert np.array_equal(signed @ m, prefixes)
    assert np.all(np.abs(signed).sum(axis=1) <= cover.sum(axis=1))
    assert np.array_equal(np.abs(signed).sum(axis=1)[1:], s.nodes(1, x[1:] + 1))
    weights = s.weights()  # dyadic least squares: A M = C exactly and A ≈ C pinv(M)
    assert np.array_equal(weights @ m, prefixes[1:])
    np.testing.assert_allclose(weights, prefixes[1:] @ np.linalg.pinv(m), atol=1e-5)


@pytest.mark.parametrize("unit", ["item", "event", "item_replace"])
@pytest.mark.parametrize("horizon", [1, 7, 30, 90, 365, 2000])
@pytest.mark.parametrize("epsilon", [0.1, 1.0])
def test_auto_is_never_worse_than_any_structure_by_its_own_prediction(unit, horizon, epsilon):
    plan = make_plan(PlanRequest(("cumulative",), (1,), horizon, unit, epsilon, 0.0, "auto", False))
    chosen = plan.structures[("cumulative", 1)].mean_mse()
    eps = Fraction(epsilon)
    for method in METHODS["cumulative"]:
        for b, top in itertools.product(BRANCHINGS if method == "tree" else (2,),
                                        (False, True)):
            s = build_structure("cumulative", method, 1, horizon, unit, eps, 0.0, branching=b,
                                top=top)
            if not s.usable:  # the factorization needs zCDP accounting (δ > 0)
                assert method == "factorization"
                continue
            assert chosen <= s.mean_mse() * (1 + 1e-12)
    why = plan.record["cumulative, k=1"]["why"]
    assert why.startswith(plan.structures[("cumulative", 1)].method)


@pytest.mark.parametrize("unit", ["item", "event"])
@pytest.mark.parametrize("horizon", [7, 90, 365, 2000])
@pytest.mark.parametrize("epsilon", [0.1, 1.0])
def test_with_delta_auto_is_never_worse_than_any_structure_in_either_accounting(
        unit, horizon, epsilon):
    """δ = 1e-3: pure ε-DP structures and zCDP ones (discrete Laplace or Gaussian noise, the
    factorization among them) all compete."""
    delta = 1e-3
    plan = make_plan(PlanRequest(("cumulative",), (1,), horizon, unit, epsilon, delta, "auto",
                                 False))
    chosen = plan.structures[("cumulative", 1)].mean_mse()
    eps, rho = Fraction(epsilon), zcdp_rho(epsilon, delta)
    for method in METHODS["cumulative"]:
        for kind, r in (("laplace", None), ("laplace", rho), ("gaussian", rho)):
            s = build_structure("cumulative", method, 1, horizon, unit, eps, delta, rho=r,
                                noise_kind=kind, branching=2)
            if s.usable:
                assert chosen <= s.mean_mse() * (1 + 1e-12)


def test_the_issue_setting_predicts_at_most_035_of_the_former_error():
    """T = 30, item level, ε = 1/3: the counter ``auto`` keeps predicts at most 0.35 of the
    RMSE of the former calibration (binary tree over D = 32 with its root, 6 levels, two
    points per item: node noise DLap(ε/12), least squares)."""
    plan = make_plan(PlanRequest(("cumulative",), (1,), 30, "item", 1 / 3, 0.0, "auto", False))
    chosen = plan.structures[("cumulative", 1)]
    former = build_structure("cumulative", "tree", 1, 32, "item", Fraction(1, 3), 0.0,
                             branching=2, top=True)
    assert former.detail["levels"] == 6
    assert former.gamma == Fraction(1, 3) / 6  # the former γ is ε/12: twice this noise scale
    rowsq = former.variance(1, np.arange(1, 31)) / former.node_variance
    former_var = float(np.mean(rowsq)) * discrete_laplace_variance(Fraction(1, 36))
    assert math.sqrt(chosen.mean_mse() / former_var) <= 0.35


@pytest.mark.parametrize("unit", ["item", "event", "item_replace"])
@pytest.mark.parametrize("k", [1, 2])
def test_the_whole_period_is_one_query_at_sensitivity_one(unit, k):
    """``windows=["total"]``: f≥k([1, T]) changes by at most 1 between neighbours (every
    history of one item and its neighbours), so its one noise is DLap(ε/1)."""
    histories = _histories(HORIZON, 3)
    worst = 0.0
    for h in histories:
        for other in _neighbours(h, unit, histories):
            worst = max(worst, abs(float(len(other) >= k) - float(len(h) >= k)))
    s = build_structure("total", "per_query", k, HORIZON, unit, Fraction(1), 0.0)
    assert worst == s.detail["l1_sensitivity"] == 1
    assert s.gamma == Fraction(1)
    assert s.n_family == 1


def test_a_total_release_answers_the_whole_period_with_the_whole_budget():
    from dpfreq.windows import plan_window_counts, release_window_counts

    rng = np.random.default_rng(5)
    item, times = rng.integers(0, 80, 400), rng.integers(1, 21, 400)
    rel = release_window_counts((item, times), horizon=20, epsilon=0.5, unit="item",
                                k_values=[1], windows=["total"], rng=3)
    s = rel._state.structures[("total", 1)]
    assert s.gamma == Fraction(1, 2)
    assert np.asarray(rel.value["total"][1]).shape == (1,)
    exact = np.unique(item).size
    assert int(rel.value["total"][1][0]) == exact + int(s.noise(1, 20))
    assert rel.window(1, 20, 1).answered_by == "total/per_query"
    plan = plan_window_counts(horizon=20, epsilon=0.5, unit="item", k_values=[1],
                              windows=["total"])
    assert plan.max_halfwidth["total"][1] == pytest.approx(
        float(np.asarray(rel.error.upper["total"][1])[0] - rel.value["total"][1][0]))


@pytest.mark.parametrize("horizon", [1, 2, 3, 7, 16, 100, 365, 4096])
@pytest.mark.parametrize("branching", [2, 3, 8, 32])
@pytest.mark.parametrize("top", [False, True])
def test_signed_ranges_are_the_signed_covers(horizon, branching, top):
    """Each level's blocks of a signed cover are one run of flat ids with one sign: the runs'
    sums over any block values equal the covers' sums, and their lengths the covers' sizes
    (every prefix, including the empty one)."""
    x = np.arange(-1, horizon)
    _, offsets = layer_layout(horizon, branching, top)
    values = np.random.default_rng(horizon * branching).integers(
        -(10**12), 10**12, size=int(offsets[-1]))
    want = np.zeros(x.size, dtype=np.int64)
    size = np.zeros(x.size, dtype=np.int64)
    for used, ids, sign in layer_signed_cover(x, horizon, branching, top):
        want += np.where(used, sign * values[ids], 0)
        size += used
    lo, hi, sign = layer_signed_ranges(x, horizon, branching, top)
    run = np.concatenate(([0], np.cumsum(values)))
    assert np.array_equal((sign * (run[hi] - run[lo])).sum(axis=0), want)
    assert np.array_equal((hi - lo).sum(axis=0), size)
    assert (lo >= 0).all()
    assert (hi >= lo).all()
    assert (hi <= offsets[-1]).all()


def test_tree_answers_after_other_queries_are_the_covers_sums():
    """The signed ranges kept from the last ask are used only for the same queries: asks of
    other, then the first queries again, give each query's signed cover sum of its blocks."""
    horizon = 5000
    s = build_structure("cumulative", "tree", 1, horizon, "item", Fraction(1), 0.0,
                        branching=8, top=False)
    s.attach(bytes(range(32)), ("cumulative", 1, 0))
    assert not s.consistent  # answers by signed covers, the path that keeps the ranges
    rng = np.random.default_rng(11)
    first, other = rng.integers(1, horizon + 1, 400), rng.integers(1, horizon + 1, 300)
    for q in (first, other, first, other[:7]):
        want = np.zeros(q.size, dtype=np.int64)
        size = np.zeros(q.size, dtype=np.int64)
        for used, ids, sign in layer_signed_cover(q - 1, horizon, 8, False):
            want += np.where(used, sign * s._impl[ids], 0)
            size += used
        assert np.array_equal(s.noise(np.ones_like(q), q), want)
        assert np.array_equal(s.nodes(1, q), size)
