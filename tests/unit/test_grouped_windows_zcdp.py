"""Grouped window counts with δ > 0: pure per-group budgets or zCDP across groups, chosen by
predicted error from public parameters, stated, and accounted to exactly the (ε, δ) asked."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpfreq.accounting import log_inverse_upper, zcdp_rho
from dpfreq.budget import Accountant, PrivacyBudget
from dpfreq.grouped.selection import ZCDP_DELTA_SHARE
from dpfreq.noise import epsilon_to_fraction
from dpfreq.windows import plan_window_counts, release_window_counts
from dpfreq.windows.grouped.budget import _candidate, _plan, group_epsilon
from dpfreq.windows.grouped.result import GroupedWindowRelease
from dpfreq.windows.params import check_window_params
from dpfreq.windows.structures.chooser import plan_score

BASE = {"item": "u", "time": "t", "horizon": 30, "k_values": [1],
        "windows": ["cumulative", "total"]}


def _log() -> pd.DataFrame:
    gen = np.random.default_rng(12)
    n = 30_000
    return pd.DataFrame({"u": gen.integers(0, 5000, n),
                         "g": gen.choice(["a", "b", "c", "d", "e", "f"], n),
                         "t": gen.integers(1, 31, n)})


def _par(epsilon: float, delta: float) -> object:
    return check_window_params(horizon=30, start=None, end=None,
                               period=None, time_unit=None, timezone="UTC", epsilon=epsilon,
                               delta=delta, unit="item", k_values=[1],
                               windows=["cumulative", "total"], method="auto",
                               singleton=False, confidence=0.95)


@pytest.mark.parametrize(("epsilon", "delta", "m", "named"), [
    (1.0, 1e-4, 5, False), (1.0, 1e-4, 5, True), (4.0, 1e-4, 5, False),
    (1.0, 1e-9, 2, False), (1.0, 1e-9, 2, True), (0.5, 1e-6, 5, True)])
def test_choice_is_the_smaller_predicted_error(epsilon: float, delta: float, m: int,
                                               named: bool) -> None:
    """The plan takes the accounting whose per-group plan scores lower (public parameters
    only), the release the same, and each accounting adds up to (ε, δ) exactly."""
    par = _par(epsilon, delta)
    cands = {z: _candidate(par, m, named, z) for z in (False, True)}
    scores = {z: plan_score(_plan(par, b)) for z, b in cands.items()}
    want = min(scores, key=lambda z: scores[z])
    plan = plan_window_counts(horizon=30, epsilon=epsilon, delta=delta, unit="item",
                              k_values=[1], windows=["cumulative", "total"], group="g",
                              groups=["a", "b"] if named else None, max_groups_per_item=m,
                              selection_epsilon="auto" if named else epsilon / 2)
    assert (plan.budget.rho is not None) == want
    assert plan.budget.why.startswith("zCDP across groups" if want else "pure")
    for z, b in cands.items():
        sel_eps = 0.0 if b.selection is None else b.selection.epsilon
        sel_delta = 0.0 if b.selection is None else b.selection.delta
        assert sel_eps + b.release_epsilon == pytest.approx(epsilon, rel=1e-12)
        assert sel_delta + b.release_delta == pytest.approx(delta, rel=1e-12)
        if z:  # m groups of rho each compose to zcdp_rho(ε_r, δ_r), which is (ε_r, δ_r)-DP
            assert m * b.rho == pytest.approx(zcdp_rho(b.release_epsilon, b.release_delta))
            assert group_epsilon(m * b.rho, b.release_delta) <= b.release_epsilon * (1 + 1e-12)
            assert b.epsilon == group_epsilon(b.rho, b.release_delta)
            if not named:
                assert b.selection.delta == delta * float(ZCDP_DELTA_SHARE)
        else:
            assert b.rho is None
            assert m * b.epsilon == pytest.approx(b.release_epsilon, rel=1e-12)
        _exactly_within(b, m, epsilon, delta)


def _exactly_within(b: object, m: int, epsilon: float, delta: float) -> None:
    """On fractions: the selection and the m groups never add up past (ε, δ) — the pure
    shares rounded down, and under zCDP ρ_total + 2√(ρ_total·L) <= ε_r for an upper bound
    L >= ln(1/δ_r), checked squared (4ρL <= (ε_r − ρ)², ρ <= ε_r)."""
    sel_eps = Fraction(0) if b.selection is None else Fraction(b.selection.epsilon)
    sel_delta = Fraction(0) if b.selection is None else Fraction(b.selection.delta)
    eps_r, delta_r = Fraction(epsilon) - sel_eps, Fraction(b.release_delta)
    assert sel_delta + delta_r <= Fraction(delta)
    if b.rho is None:
        assert m * epsilon_to_fraction(b.epsilon) <= eps_r  # the ε the noise is calibrated to
        assert m * Fraction(b.delta) <= delta_r
    else:
        rho = m * Fraction(b.rho)
        assert rho <= eps_r
        assert 4 * rho * log_inverse_upper(b.release_delta) <= (eps_r - rho) ** 2


def test_zcdp_release_states_it_and_spends_once(tmp_path: Path) -> None:
    """A selected release where zCDP across groups predicts less error (m = 5, δ = 1e-4):
    every structure of every group is calibrated at its share of ρ/m, the call is charged
    (ε, δ) once, the reason is stated, and save/load reproduces every group."""
    acct = Accountant(PrivacyBudget(2.0, 1e-3))
    rel = release_window_counts(_log(), group="g", max_groups_per_item=5, epsilon=1.0,
                                delta=1e-4, unit="item", rng=5, accountant=acct, **BASE)
    mp = rel.mechanism_params
    assert mp["accounting"] == "zcdp"
    assert "zCDP across groups" in mp["accounting_why"]
    assert "pure" in mp["accounting_why"]  # the other accounting's predicted RMSE
    assert "zCDP across groups" in mp["split"]
    assert (acct.spent.epsilon, acct.spent.delta) == pytest.approx((1.0, 1e-4))
    rho = mp["rho_per_group"]
    sel = mp["selection"]
    eps_r, delta_r = 1.0 - sel["epsilon"], 1e-4 - sel["delta"]
    assert 5 * rho <= zcdp_rho(eps_r, delta_r) * (1 + 1e-12)
    assert rel.groups
    for g in rel:
        assert rel[g].epsilon == pytest.approx(group_epsilon(rho, delta_r))
        assert rel[g].delta == pytest.approx(delta_r)
        structs = rel[g]._state.structures.values()
        pieces = sum(s.calibration.rho_piece * s.shape.pieces for s in structs)
        assert pieces <= rho * (1 + 1e-12)
        assert all(s.calibration.rho_piece is not None for s in structs)
        assert "zCDP" in rel[g].mechanism_params["accounting"]
    rel.save(tmp_path / "z.dpfreq")
    back = GroupedWindowRelease.load(tmp_path / "z.dpfreq")
    t2 = np.array([30, 20, 9])
    for g in rel:
        assert np.array_equal(back[g].value["cumulative"][1], rel[g].value["cumulative"][1])
        assert np.array_equal(back[g].cumulative(t2, 1).estimate,
                              rel[g].cumulative(t2, 1).estimate)
        assert np.array_equal(back[g].value["total"][1], rel[g].value["total"][1])


def test_pure_when_delta_is_tiny_and_zcdp_epsilon_for() -> None:
    """At δ = 1e-9 and m = 2 the pure budgets win (stated); under zCDP the grouped plan's
    ``epsilon_for`` bisects the whole call's ε and meets the target there."""
    rel = release_window_counts(_log(), group="g", groups=["a", "b"], max_groups_per_item=2,
                                epsilon=1.0, delta=1e-9, unit="item", rng=2, **BASE)
    assert rel.mechanism_params["accounting"] == "pure"
    assert rel["a"].epsilon == pytest.approx(0.5)
    kw = {"horizon": 30, "delta": 1e-4, "unit": "item", "k_values": [1],
          "windows": ["cumulative"], "group": "g", "groups": ["a", "b"],
          "max_groups_per_item": 5}
    plan = plan_window_counts(epsilon=1.0, **kw)
    assert plan.budget.rho is not None
    target = plan.per_group.max_halfwidth["cumulative"][1] / 2
    eps = plan.epsilon_for(target, family="cumulative", k=1)
    again = plan_window_counts(epsilon=eps, **kw)
    assert again.per_group.max_halfwidth["cumulative"][1] <= target
    assert math.isfinite(eps)
    assert eps > 1.0


@pytest.mark.parametrize(("unit", "extra"), [("item", {"max_groups_per_item": 5}),
                                             ("event", {})])
def test_gaussian_lazy_windows_survive_save_load(tmp_path: Path, unit: str,
                                                 extra: dict) -> None:
    """zCDP with discrete Gaussian structures, eager and lazy ("all": drawn on demand from the
    shared source at counters v·G + g): every group answers the same after save/load."""
    rel = release_window_counts(_log(), group="g", epsilon=2.0, delta=1e-4, unit=unit, rng=3,
                                **{**BASE, "k_values": [1, 2], "windows": ["cumulative", "all"]},
                                **extra)
    assert rel.mechanism_params["accounting"] == "zcdp"
    noises = {rec["noise"] for rec in rel[rel.groups[0]].mechanism_params["methods"].values()}
    assert "gaussian" in noises
    rel.save(tmp_path / "g.dpfreq")
    back = GroupedWindowRelease.load(tmp_path / "g.dpfreq")
    t1, t2 = np.array([1, 3, 5, 10]), np.array([30, 9, 5, 20])
    for g in rel:
        assert np.array_equal(back[g].window(t1, t2, 2).estimate,
                              rel[g].window(t1, t2, 2).estimate)
        assert np.array_equal(back[g].value["cumulative"][1], rel[g].value["cumulative"][1])
