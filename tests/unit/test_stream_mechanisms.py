"""The online counters of dpfreq.stream: exact sensitivities (against brute force over the
released nodes), answers that are exactly the prefix sums of what they measure, the smooth
binary mechanism's constant cover, the factorization's answers (bit for bit ``prefix_answer``),
the epochs across their boundaries, and the calibration of the node law."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dpfreq.accounting.zcdp import zcdp_rho
from dpfreq.stream.mechanisms import BOUNDED_METHODS, Budget, EpochCounter, best_counters
from dpfreq.stream.mechanisms.counter import Part, sum_halfwidth
from dpfreq.stream.mechanisms.epochs import epoch_length, epoch_of, epoch_start
from dpfreq.stream.mechanisms.factorization import FactorizationLayout
from dpfreq.stream.mechanisms.intervals import SimpleLayout, TreeLayout
from dpfreq.stream.mechanisms.law import calibrate
from dpfreq.stream.mechanisms.smooth import SmoothLayout, output_leaves, smooth_shapes
from dpfreq.windows.layouts.factorization import prefix_answer

PURE = Budget(Fraction(1))
ZCDP = Budget(Fraction(1), zcdp_rho(1.0, 1e-6))


def _brute(first: np.ndarray, last: np.ndarray, horizon: int, unit: str) -> int:
    """max |N(p)| (item) or max over single points and pairs of |N(p) Δ N(q)| (moves)."""
    keep = first <= last
    f, la = first[keep], last[keep]
    sets = [set(np.flatnonzero((f <= p) & (la >= p)).tolist()) for p in range(1, horizon + 1)]
    single = max(len(s) for s in sets)
    if unit == "item" or horizon == 1:
        return single
    return max(single, max(len(a ^ b) for i, a in enumerate(sets) for b in sets[i + 1:]))


@pytest.mark.parametrize("horizon", [1, 2, 5, 8, 13, 27])
@pytest.mark.parametrize("unit", ["item", "event"])
def test_tree_sensitivity_is_exact(horizon: int, unit: str) -> None:
    for b in (2, 3, 4, 7):
        for top in (False, True):
            lay = TreeLayout(horizon, b, top)
            assert lay.sensitivity(unit) == (_brute(lay.first, lay.last, horizon, unit),) * 2


def test_wide_trees_of_long_horizons_are_exact(seed: int) -> None:
    """The branching factors past 16 that long horizons try (two-level trees, B ≈ √T): exact
    sensitivity at both units, answers the exact prefix, and auto takes one at T = 365."""
    from dpfreq.stream.mechanisms.candidates import _branchings
    from dpfreq.stream.mechanisms.counter import Counter

    assert [b for b in _branchings(120) if b > 16] == [17]
    assert max(_branchings(365)) == 29
    x = np.random.default_rng(seed).integers(0, 5, size=(2, 130))
    for b in (17, 21, 29):
        for top in (False, True):
            lay = TreeLayout(130, b, top)
            for unit in ("item", "event"):
                assert lay.sensitivity(unit) == (_brute(lay.first, lay.last, 130, unit),) * 2
            _replay(Counter(lay, calibrate(PURE, "laplace", *lay.sensitivity("event"))), x)
    [(_, chosen, _)] = best_counters(365, "item", PURE, ("tree",))
    assert chosen.layout.branching > 16


@pytest.mark.parametrize("horizon", [1, 3, 10, 30])
@pytest.mark.parametrize("unit", ["item", "event"])
def test_smooth_sensitivity_is_exact(horizon: int, unit: str) -> None:
    for h, k in smooth_shapes(horizon)[:8]:
        lay = SmoothLayout(horizon, h, k)
        assert lay.sensitivity(unit)[0] == _brute(lay.first, lay.last, horizon, unit)


def test_smooth_cover_has_k_nodes_at_every_step_and_bounded_sensitivity() -> None:
    lay = SmoothLayout(300, 11, 5)
    assert set(lay.cover_sizes.tolist()) == {5}
    assert lay.sensitivity("item")[0] <= 11 - 5 + 1
    leaves = output_leaves(300, 11, 5)
    assert all(bin(int(v)).count("1") == 5 for v in leaves)
    assert np.all(np.diff(leaves) > 0)


def _prefix(x: np.ndarray) -> np.ndarray:
    return np.concatenate((np.zeros((x.shape[0], 1), dtype=np.int64), np.cumsum(x, axis=1)),
                          axis=1)


def _replay(counter, x: np.ndarray) -> None:
    """Measuring exact rows (no noise) period by period, every answer is the exact prefix."""
    pre = _prefix(x)
    rows = []
    for t in range(1, x.shape[1] + 1):
        rows.append(counter.row_values(pre, t))
        y = np.concatenate(rows, axis=1)
        assert y.shape[1] == counter.rows_through(t)
        np.testing.assert_allclose(counter.answer(y, t), pre[:, t], rtol=0, atol=1e-6)


@pytest.mark.parametrize("budget", [PURE, ZCDP], ids=["pure", "zcdp"])
def test_every_bounded_counter_answers_the_prefix_of_its_rows(seed: int, budget) -> None:
    x = np.random.default_rng(seed).integers(0, 6, size=(3, 40))
    found = best_counters(40, "event", budget, BOUNDED_METHODS)
    assert {lab.split("/")[0] for lab, _, _ in found} >= {"simple", "tree", "smooth"}
    for _, counter, _ in found:
        _replay(counter, x)


def test_epochs_answer_the_prefix_across_epoch_boundaries(seed: int) -> None:
    """Past 2^k and past the epochs' ends (16, 80, 336): every answer is the exact prefix."""
    x = np.random.default_rng(seed).integers(0, 4, size=(2, 350))
    for budget in (PURE, ZCDP):
        _replay(EpochCounter("item", budget), x)
    assert [epoch_start(j) for j in range(4)] == [1, 17, 81, 337]
    assert [epoch_of(t) for t in (1, 16, 17, 80, 81, 336, 337)] == [0, 0, 1, 1, 2, 2, 3]
    assert epoch_length(2) == 256


def test_epoch_variance_is_the_sum_of_its_parts() -> None:
    e = EpochCounter("item", PURE)
    t = 100  # epoch 2: the totals of epochs 0 and 1 plus the current answer
    want = (e.epoch(0).variance(16) + e.epoch(1).variance(64) + e.epoch(2).variance(t - 80))
    assert math.isclose(e.variance(t), want, rel_tol=1e-12)
    assert len(e.parts(t)) == 3


def test_factorization_answers_are_prefix_answer_bit_for_bit(seed: int) -> None:
    lay = FactorizationLayout(300, False)
    u = np.random.default_rng(seed).integers(-10**12, 10**12, size=(4, 300))
    for t in (1, 2, 17, 128, 300):
        got = lay.answer(u, t)
        for g in range(4):
            assert got[g] == prefix_answer(u[g], t - 1, 300, False)  # the same float, exactly


def test_simple_counter_needs_no_horizon() -> None:
    lay = SimpleLayout(None)
    assert lay.sensitivity("item") == (1, 1)
    assert lay.sensitivity("event") == (2, 2)
    assert lay.nodes(10**6) == 10**6


def test_calibration_rounds_as_the_offline_counters() -> None:
    law = calibrate(PURE, "laplace", 3, 3)
    assert law is not None
    assert law.gamma == Fraction(1, 3)
    g = calibrate(ZCDP, "gaussian", 5, 5)
    assert g is not None
    assert g.sigma2 >= math.ceil(Fraction(5) / (2 * Fraction(ZCDP.rho)))
    assert calibrate(PURE, "gaussian", 5, 5) is None  # no Gaussian noise without zCDP
    tiny = Budget(Fraction(1, 2**40))
    assert calibrate(tiny, "laplace", 1, 1) is None


def test_sum_halfwidth_single_part_is_its_certified_quantile_and_sums_grow() -> None:
    law = calibrate(PURE, "laplace", 1, 1)
    assert law is not None
    one = sum_halfwidth([Part(law, 4)], 0.05)
    assert one == float(law.cover_halfwidth(np.array([4]), 0.05)[0])
    two = sum_halfwidth([Part(law, 4), Part(law, 3)], 0.05)
    assert one < two <= sum_halfwidth([Part(law, 4)], 0.025) + sum_halfwidth(
        [Part(law, 3)], 0.025)
    assert sum_halfwidth([], 0.05) == 0.0
