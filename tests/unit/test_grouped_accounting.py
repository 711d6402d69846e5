"""Grouped profiles and anonymized histograms choose their accounting: per-group ε/m, or zCDP
across groups when δ > 0 and m >= 2 give every group a larger ε; exactly accounted, stated,
followed by the plans, and nothing spent on a refusal."""

from __future__ import annotations

import decimal
import itertools
import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from dpfreq.accounting import log_inverse_upper, zcdp_rho, zcdp_rho_at_most
from dpfreq.anonymized import release_anonymized_histogram
from dpfreq.budget import Accountant, PrivacyBudget
from dpfreq.cli.main import cli
from dpfreq.errors import ParameterError
from dpfreq.grouped.accounting import choose_group_accounting
from dpfreq.grouped.selection import SELECTION_SHARE, ZCDP_DELTA_SHARE
from dpfreq.noise import discrete_laplace_pmf, epsilon_to_fraction
from dpfreq.profile import plan_profile, release_profile
from dpfreq.profile.direct import direct_layout

EPSILONS = [0.1, 0.5, 1.0, 4.0]
DELTAS = [0.0, 1e-9, 1e-6, 1e-3]
MS = [1, 2, 5, 28, 29, 50, 100, 1000]


def _zcdp_to_dp_epsilon(rho: Fraction, delta: float) -> decimal.Decimal:
    """``ρ + 2√(ρ ln(1/δ))`` in 80-digit decimal arithmetic, independent of the module's
    fractions (δ at its exact binary value)."""
    with decimal.localcontext() as ctx:
        ctx.prec = 80
        r = decimal.Decimal(rho.numerator) / decimal.Decimal(rho.denominator)
        d = Fraction(delta)
        log_term = (decimal.Decimal(d.denominator) / decimal.Decimal(d.numerator)).ln()
        return r + 2 * (r * log_term).sqrt()


def _as_decimal(x: Fraction) -> decimal.Decimal:
    with decimal.localcontext() as ctx:
        ctx.prec = 80
        return decimal.Decimal(x.numerator) / decimal.Decimal(x.denominator)


@pytest.mark.parametrize(("epsilon", "delta", "named"), [
    (e, d, n) for e, d, n in itertools.product(EPSILONS, DELTAS, (True, False))
    if n or d > 0])
def test_the_chosen_per_group_epsilon_satisfies_its_composition_bound(
        epsilon: float, delta: float, named: bool) -> None:
    """For every m: the mechanism's ε (ε_g rounded down to its fraction) composes to at most
    what the call may spend, under the accounting the release states, computed here on
    fractions and 80-digit decimals; the selection and the release together stay within
    (ε, δ); the choice is the larger per-group ε, pure when δ = 0 or m = 1."""
    for m in MS:
        acc = choose_group_accounting(epsilon=epsilon, delta=delta, max_groups_per_item=m,
                                      named=named)
        eps_g = epsilon_to_fraction(acc.epsilon_per_group)  # what each group's noise uses
        sel = acc.selection
        assert (sel is None) == named
        eps_s = Fraction(0) if sel is None else Fraction(sel.epsilon)
        if sel is not None:
            assert eps_s == Fraction(epsilon) * SELECTION_SHARE
            share = ZCDP_DELTA_SHARE if acc.accounting == "zcdp" else 1
            assert Fraction(sel.delta) == Fraction(delta) * share
            assert sel.max_groups_per_item == m
        eps_r = Fraction(epsilon) - eps_s
        assert Fraction(acc.release_epsilon) == eps_r
        delta_r = delta - (0.0 if sel is None else sel.delta)
        if acc.accounting == "pure":
            assert m * eps_g <= eps_r
            assert acc.rho is None
            assert acc.release_delta == 0.0
        else:
            assert acc.release_delta == delta_r > 0
            rho = m * eps_g**2 / 2
            assert rho == acc.rho
            assert _zcdp_to_dp_epsilon(rho, delta_r) <= _as_decimal(eps_r)
            # and not needlessly loose: within a relative 1e-9 of the float conversion
            assert acc.epsilon_per_group >= math.sqrt(
                2 * zcdp_rho(float(eps_r), delta_r) / m) * (1 - 1e-9)
        if delta == 0 or m == 1:
            assert acc.accounting == "pure"
            assert set(acc.candidates) == {"pure"}
        else:
            assert set(acc.candidates) == {"pure", "zcdp"}
            best = max(acc.candidates, key=lambda k: (acc.candidates[k], k == "pure"))
            assert acc.accounting == best
        assert acc.epsilon_per_group == acc.candidates[acc.accounting]
        # the pure candidate is ε_r/m up to the float below it
        assert acc.candidates["pure"] <= float(eps_r / m) * (1 + 1e-15)
        assert acc.candidates["pure"] >= float(eps_r / m) * (1 - 1e-15)


@pytest.mark.parametrize(("m", "expected"), [(1, "pure"), (5, "pure"), (20, "pure"),
                                              (28, "pure"), (29, "zcdp"), (50, "zcdp"),
                                              (100, "zcdp")])
def test_zcdp_wins_from_29_groups_at_epsilon_one(m: int, expected: str) -> None:
    """At ε = 1, δ = 1e-6 with a public list zCDP wins once m > ε²/(2ρ) ≈ 28.6."""
    acc = choose_group_accounting(epsilon=1.0, delta=1e-6, max_groups_per_item=m, named=True)
    assert acc.accounting == expected
    assert 1.0 / (2 * zcdp_rho(1.0, 1e-6)) == pytest.approx(28.62, abs=0.005)
    assert acc.candidates["pure"] == 1.0 / m  # ε/m, the nearest float, already exact enough


def test_exact_rho_and_log_bounds() -> None:
    """``L >= ln(1/δ)`` and ``ρ + 2√(ρ L) <= ε`` on fractions, ``ρ`` within 1e-12 of the
    float conversion."""
    for eps, delta in itertools.product([Fraction(1, 10), Fraction(1), Fraction(4)],
                                        [1e-12, 1e-6, 1e-3]):
        big_l = log_inverse_upper(delta)
        with decimal.localcontext() as ctx:
            ctx.prec = 80
            d = Fraction(delta)
            exact = (decimal.Decimal(d.denominator) / decimal.Decimal(d.numerator)).ln()
        assert _as_decimal(big_l) >= exact
        assert _as_decimal(big_l) - exact < decimal.Decimal(10) ** -38
        rho = zcdp_rho_at_most(eps, delta)
        assert 4 * rho * big_l <= (eps - rho) ** 2
        assert rho <= eps
        assert float(rho) == pytest.approx(zcdp_rho(float(eps), delta), rel=1e-12)


def test_one_group_alone_is_epsilon_g_dp_by_its_exact_law() -> None:
    """Each group's mechanism at unit "item" adds DLap(e^{-γ}) to classes of ℓ1 sensitivity 1:
    from the exact pmf, the worst ratio between a count and its neighbour is e^γ <= e^{ε_g}
    for the zCDP-chosen ε_g (the composition is the test above)."""
    acc = choose_group_accounting(epsilon=1.0, delta=1e-6, max_groups_per_item=50,
                                  named=True)
    assert acc.accounting == "zcdp"
    gamma = direct_layout("item", acc.epsilon_per_group, 5).gamma
    assert gamma <= epsilon_to_fraction(acc.epsilon_per_group)
    k = np.arange(-2000, 2001)
    p = discrete_laplace_pmf(k, gamma)
    ratio = float(np.max(np.maximum(p[:-1] / p[1:], p[1:] / p[:-1])))
    assert ratio <= math.exp(acc.epsilon_per_group) * (1 + 1e-12)
    assert ratio == pytest.approx(math.exp(float(gamma)), rel=1e-12)


def _log() -> pd.DataFrame:
    """60 users, each in up to 40 of 60 campaigns."""
    users = np.repeat(np.arange(60), 40)
    campaigns = (users * 7 + np.tile(np.arange(40), 60)) % 60
    return pd.DataFrame({"u": users, "g": [f"c{c}" for c in campaigns]})


GROUPS = [f"c{c}" for c in range(60)]
PROFILE = {"item": "u", "group": "g", "domain_size": 1000, "max_count": 3, "unit": "item",
           "groups": GROUPS}


def test_a_zcdp_release_equals_the_release_at_its_per_group_epsilon() -> None:
    """Seeded: the zCDP-accounted grouped profile (m = 50, ε = 1, δ = 1e-6) gives every group
    exactly the values of the pure grouped profile whose ε/m is the same per-group ε; it states
    both candidates, the choice and each group's guarantee, and charges (ε, δ) once."""
    acct = Accountant(PrivacyBudget(2.0, 1e-5))
    rel = release_profile(_log(), max_groups_per_item=50, epsilon=1.0, delta=1e-6, rng=7,
                          accountant=acct, **PROFILE)
    acc = rel.mechanism_params["accounting"]
    assert acc["accounting"] == "zcdp"
    assert acc["candidates"]["pure"] == 0.02
    assert acc["candidates"]["zcdp"] == acc["epsilon_per_group"] > 0.026
    assert "zCDP across groups" in acc["why"]
    assert "public parameters only" in acc["why"]
    eps_g = rel.mechanism_params["epsilon_per_group"]
    assert (acct.spent.epsilon, acct.spent.delta) == (1.0, 1e-6)
    assert (rel.epsilon, rel.delta) == (1.0, 1e-6)
    same = float(50 * Fraction(eps_g))  # ε whose ε/50 is the same mechanism
    pure = choose_group_accounting(epsilon=same, delta=0.0, max_groups_per_item=50,
                                   named=True)
    assert epsilon_to_fraction(pure.epsilon_per_group) == epsilon_to_fraction(eps_g)
    ref = release_profile(_log(), max_groups_per_item=50, epsilon=same, rng=7, **PROFILE)
    assert ref.mechanism_params["accounting"]["accounting"] == "pure"
    assert list(rel) == list(ref) == GROUPS
    for g in GROUPS:
        assert rel[g].epsilon == eps_g
        assert rel[g].delta == 0.0
        assert np.array_equal(rel[g].value, ref[g].value)
        assert np.array_equal(rel[g].noisy_profile, ref[g].noisy_profile)
        assert f"ε_g = {eps_g:.6g}-DP" in rel[g].mechanism_params["per_group_guarantee"]


def test_with_few_groups_per_item_delta_changes_nothing() -> None:
    """m = 5: pure wins, and the release equals the one without δ (a public list, seeded)."""
    with_delta = release_profile(_log(), max_groups_per_item=5, epsilon=1.0, delta=1e-6,
                                 rng=3, **PROFILE)
    without = release_profile(_log(), max_groups_per_item=5, epsilon=1.0, rng=3, **PROFILE)
    for rel in (with_delta, without):
        assert rel.mechanism_params["accounting"]["accounting"] == "pure"
        assert rel.mechanism_params["epsilon_per_group"] == 0.2
    assert set(without.mechanism_params["accounting"]["candidates"]) == {"pure"}
    assert with_delta.mechanism_params["accounting"]["candidates"]["zcdp"] < 0.2
    for g in GROUPS:
        assert np.array_equal(with_delta[g].value, without[g].value)


def test_selection_under_zcdp_keeps_half_of_delta() -> None:
    """Without a list and with m = 100 the groups compose in zCDP: the selection gets ε/2 and
    half of δ, the release the other half; the plan and the release agree."""
    rel = release_profile(_log(), item="u", group="g", domain_size=1000, max_count=3,
                          unit="item", max_groups_per_item=100, epsilon=1.0, delta=1e-6, rng=1)
    params = rel.mechanism_params
    assert params["accounting"]["accounting"] == "zcdp"
    assert params["selection"]["delta"] == 5e-7
    assert params["selection"]["epsilon"] == 0.5
    assert params["accounting"]["release_delta"] == 5e-7
    plan = plan_profile(domain_size=1000, max_count=3, epsilon=1.0, unit="item", group="g",
                        max_groups_per_item=100, delta=1e-6)
    assert plan.epsilon_per_group == params["epsilon_per_group"]
    assert plan.selection.threshold == params["selection"]["threshold"]


@pytest.mark.parametrize("m", [5, 50])
def test_the_plan_follows_the_choice(m: int) -> None:
    """plan_profile(group=...) predicts each group's error at the per-group ε of the choice."""
    plan = plan_profile(domain_size=10**5, max_count=10, epsilon=1.0, unit="item", group="g",
                        max_groups_per_item=m, groups=GROUPS, delta=1e-6)
    acc = choose_group_accounting(epsilon=1.0, delta=1e-6, max_groups_per_item=m, named=True)
    assert plan.accounting == acc
    assert plan.epsilon_per_group == plan.per_group.epsilon == acc.epsilon_per_group
    alone = plan_profile(domain_size=10**5, max_count=10, epsilon=acc.epsilon_per_group,
                         unit="item")
    assert plan.per_group.half_width == alone.half_width
    word = "zCDP across groups" if m == 50 else "ε/m with m = 5"
    assert word in plan.description
    assert plan.to_dict()["accounting"]["accounting"] == acc.accounting


@pytest.mark.parametrize("kwargs", [
    {"max_groups_per_item": 50, "delta": 0.01},
    {"max_groups_per_item": 50, "delta": 0.0},
    {"max_groups_per_item": 0, "delta": 1e-6},
    {"max_groups_per_item": 50, "delta": 1e-6, "epsilon": -1.0},
    {"max_groups_per_item": 10**4, "delta": 1e-6, "epsilon": 1e-6},  # < 1e-6 per group
])
def test_a_refused_call_spends_nothing(kwargs: dict[str, object]) -> None:
    """Every check, the accounting's included, runs before the accountant is charged."""
    acct = Accountant(PrivacyBudget(10.0, 1e-3))
    args = {**PROFILE, "epsilon": 1.0, **kwargs}
    with pytest.raises(ParameterError) as info:
        release_profile(_log(), rng=0, accountant=acct, **args)
    assert "\n" not in str(info.value)
    assert (acct.spent.epsilon, acct.spent.delta) == (0.0, 0.0)


def test_the_anonymized_groups_use_parallel_composition() -> None:
    """One row lies in one group (m = 1): pure accounting with the whole release ε per group,
    whatever δ, and it says why."""
    frame = pd.DataFrame({"item": [f"p{i % 7}" for i in range(300)],
                          "site": [f"s{i % 3}" for i in range(300)]})
    rel = release_anonymized_histogram(frame, item="item", group="site", epsilon=1.0,
                                       unit="event", delta=1e-6, rng=0)
    acc = rel.mechanism_params["accounting"]
    assert acc["accounting"] == "pure"
    assert acc["candidates"] == {"pure": 0.5}
    assert "parallel composition" in acc["why"]
    assert rel.mechanism_params["epsilon_per_group"] == 0.5


def test_cli_states_the_accounting_and_json_stays_clean(tmp_path: Path) -> None:
    log = tmp_path / "log.csv"
    _log().rename(columns={"u": "user", "g": "campaign"}).to_csv(log, index=False)
    groups = tmp_path / "groups.txt"
    groups.write_text("\n".join(GROUPS) + "\n")
    args = ["profile", str(log), "--item", "user", "--domain-size", "1000", "--max-count", "3",
            "--epsilon", "1", "--unit", "item", "--group", "campaign", "--groups", str(groups),
            "--max-groups-per-item", "50", "--delta", "1e-6", "--seed", "1"]
    out = CliRunner().invoke(cli, [*args, "--json", "-"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert doc["mechanism_params"]["accounting"]["accounting"] == "zcdp"
    assert doc["delta"] == 1e-6
    table = CliRunner().invoke(cli, args)
    assert "(zCDP across groups; per-group ε of each accounting: pure 0.02" in table.stdout
    plan = CliRunner().invoke(cli, ["plan", "profile", "--domain-size", "1000", "--max-count",
                                    "3", "--epsilon", "1", "--unit", "item", "--group",
                                    "campaign", "--max-groups-per-item", "50", "--groups",
                                    str(groups), "--delta", "1e-6"])
    assert plan.exit_code == 0, plan.output
    assert "zCDP across groups: √(2ρ/m) with m = 50" in plan.stdout
