"""The composition rules of the accountants (dpfreq.accounting.rules): what each admits, what a
refusal leaves, declared plans, unit conversion of losses, and what a plan says it would take."""

from __future__ import annotations

from fractions import Fraction

import pytest

from dpfreq.accounting import (
    ApproximateDP,
    DiscreteGaussian,
    DiscreteLaplace,
    PureDP,
    ZeroConcentratedDP,
)
from dpfreq.budget import Accountant, PrivacyBudget
from dpfreq.errors import BudgetExceededError, ParameterError
from dpfreq.ledger import Ledger


def _admitted(acct, epsilon: float, count: int, **kwargs) -> int:
    done = 0
    for _ in range(count):
        try:
            acct.spend(epsilon, unit="item", **kwargs)
        except BudgetExceededError:
            break
        done += 1
    return done


@pytest.mark.parametrize(("count", "eps0", "total"), [(365, 0.05, 5.2), (100, 0.1, 5.5)])
def test_the_tight_rule_admits_the_issue_sequences_the_sum_refuses(count, eps0, total):
    tight = Accountant(epsilon=total, delta=1e-6)
    basic = Accountant(epsilon=total, delta=1e-6, composition="basic")
    assert _admitted(tight, eps0, count) == count
    assert _admitted(basic, eps0, count) == round(total / eps0)
    s = tight.spending()
    assert s.binding == "renyi"
    assert s.filter_epsilon <= total
    assert s.sum_epsilon == pytest.approx(count * eps0)
    assert s.plan_epsilon < s.filter_epsilon < s.sum_epsilon


def test_tight_admits_whatever_the_sum_admits_within_half_of_delta():
    for eps in (0.3, 0.7, 1.3):
        tight = Accountant(epsilon=10.0, delta=1e-6)
        basic = Accountant(epsilon=10.0, delta=1e-6, composition="basic")
        assert _admitted(tight, eps, 100, delta=1e-8) >= _admitted(basic, eps, 100, delta=1e-8)


def test_with_delta_zero_tight_is_the_sum():
    tight, basic = Accountant(epsilon=1.0), Accountant(epsilon=1.0, composition="basic")
    assert _admitted(tight, 0.01, 200) == _admitted(basic, 0.01, 200) == 100
    assert tight.rule.order is None
    assert tight.spending().binding == "sum"


def test_a_refused_release_records_nothing_and_says_why_in_one_line():
    acct = Accountant(epsilon=1.0, delta=1e-6)
    acct.spend(0.9, unit="item")
    before = (acct.spent, acct.ledger, acct.spending())
    with pytest.raises(BudgetExceededError) as info:
        acct.spend(0.2, unit="item")
    assert "\n" not in str(info.value)
    assert "no noise was drawn" in str(info.value)
    assert (acct.spent, acct.ledger, acct.spending()) == before


def test_a_gaussian_release_closes_the_sum_branch_and_uses_no_delta():
    acct = Accountant(epsilon=2.0, delta=1e-6)
    loss = DiscreteGaussian(Fraction(50), Fraction(1), False)  # ρ = 1/100
    acct.spend(1.0, 1e-6, unit="item", loss=loss)  # its own (ε, δ) at δ = 1e-6
    row = acct.ledger[0]
    assert row["rule"] == "renyi"
    assert "zCDP" in row["loss"]
    assert acct.spent.delta == 0.0  # no bad event: the release's δ was only its own conversion
    acct.spend(0.5, unit="item")  # the sum branch is closed for good: the filter admits it
    assert acct.ledger[1]["rule"] == "renyi"
    assert acct.spending().filter_branch == "renyi"


def test_a_loss_must_imply_the_stated_epsilon_and_delta():
    acct = Accountant(epsilon=2.0, delta=1e-6)
    with pytest.raises(ParameterError, match="implies the stated"):
        acct.spend(0.1, unit="item", loss=PureDP(Fraction(1, 5)))
    with pytest.raises(ParameterError, match="implies the stated"):
        acct.spend(0.1, 1e-9, unit="item", loss=ZeroConcentratedDP(Fraction(1, 10)))
    acct.spend(0.1, unit="item", loss=DiscreteLaplace(Fraction(1, 20), 2))
    assert acct.ledger[0]["loss"].startswith("discrete Laplace")


def test_losses_convert_with_their_unit():
    acct = Accountant(epsilon=2.0, delta=1e-6, unit="item_replace")
    acct.spend(0.25, unit="item", loss=DiscreteLaplace(Fraction(1, 4), 1))
    acct.spend(0.25, 1e-8, unit="item")
    rows = acct.ledger
    assert rows[0]["charged_epsilon"] == 0.5
    assert "sensitivity 2" in rows[0]["loss"]
    assert rows[1]["charged_delta"] > 1e-8
    assert rows[1]["rule"] == "sum"
    with pytest.raises(ParameterError, match="different currencies"):
        acct.spend(0.1, unit="event")


def test_a_declared_plan_is_admitted_once_and_its_releases_cost_nothing_more():
    plan = [DiscreteLaplace(Fraction(1, 20), 1)] * 365
    acct = Accountant(epsilon=4.62, delta=1e-6, composition="basic")
    acct.declare(plan, delta=1e-6, unit="item", label="a year of daily reach")
    assert acct.spending().sum_epsilon == pytest.approx(4.6134, abs=1e-4)
    for _ in range(365):
        acct.spend(0.05, unit="item", loss=DiscreteLaplace(Fraction(1, 20), 1))
    assert {row["rule"] for row in acct.ledger[1:]} == {"plan"}
    with pytest.raises(BudgetExceededError):  # the 366th is no item of the plan
        acct.spend(0.05, unit="item", loss=DiscreteLaplace(Fraction(1, 20), 1))
    adaptive = Accountant(epsilon=4.62, delta=1e-6, composition="basic")
    with pytest.raises(BudgetExceededError) as refused:
        adaptive.declare(plan * 2, delta=1e-6, unit="item")
    assert adaptive.ledger == []
    # the refusal of every spend (dpfreq.accounting.book.refused_spend), for a declaration
    assert str(refused.value) == (
        "declaring a plan of 730 releases at δ=1e-06 (charged as ε=6.8833, δ=1e-06: their "
        "composed loss by privacy loss distribution) would exceed the budget: the sum would "
        "reach ε=6.8833, δ=1e-06 of total ε=4.62, δ=1e-06; remaining ε=4.62, δ=1e-06 of total "
        "ε=4.62, δ=1e-06. Nothing was recorded and no noise was drawn; declare no more than "
        "what remains.")
    with pytest.raises(BudgetExceededError) as refused:  # no finite ε below its own δ
        adaptive.declare([ApproximateDP(Fraction(1, 10), Fraction(1, 10**5))], delta=1e-6)
    assert str(refused.value).startswith("declaring a plan of 1 release at δ=1e-06 would "
                                         "exceed the budget: the plan has no finite ε at its "
                                         "δ=1e-06")
    assert str(refused.value).endswith("; remaining ε=4.62, δ=1e-06 of total ε=4.62, "
                                       "δ=1e-06. Nothing was recorded and no noise was drawn; "
                                       "declare no more than what remains.")


def test_share_counts_exactly_the_releases_that_fit():
    for composition in ("tight", "basic"):
        acct = Accountant(epsilon=3.0, delta=1e-6, composition=composition)
        for _ in range(20):
            acct.spend(0.05, unit="item")
        share = acct.share(0.05, unit="item")
        assert _admitted(acct, 0.05, share.releases_that_fit) == share.releases_that_fit
        with pytest.raises(BudgetExceededError):
            acct.spend(0.05, unit="item")
        assert 0 < share.fraction_of_remaining <= 1


def test_a_ledger_and_an_accountant_admit_the_same_sequence(tmp_path):
    ledger = Ledger.create(tmp_path / "l.db", PrivacyBudget(3.0, 1e-6))
    acct = Accountant(epsilon=3.0, delta=1e-6)
    mix = [(0.05, 0.0, None), (0.2, 1e-8, None),
           (0.3, 1e-7, ApproximateDP(Fraction(3, 10), Fraction(1, 10**7))),
           (0.1, 0.0, DiscreteLaplace(Fraction(1, 10), 1))] * 15
    for eps, dlt, loss in mix:
        outcomes = []
        for who in (acct, ledger):
            try:
                who.spend(eps, dlt, unit="item", loss=loss)
                outcomes.append(who.ledger[-1]["rule"])
            except BudgetExceededError:
                outcomes.append("refused")
        assert outcomes[0] == outcomes[1]
    assert acct.spending() == ledger.spending()


def test_plans_say_what_the_release_would_take():
    from dpfreq.anonymized import plan_anonymized
    from dpfreq.profile import plan_profile

    acct = Accountant(epsilon=5.0, delta=1e-6)
    plan = plan_profile(domain_size=1000, max_count=5, epsilon=0.05, unit="item",
                        accountant=acct)
    assert plan.budget == acct.share(0.05, unit="item")
    assert plan.to_dict()["budget"]["releases_that_fit"] == plan.budget.releases_that_fit
    assert _admitted(acct, 0.05, 1000) == plan.budget.releases_that_fit
    assert plan_profile(domain_size=1000, max_count=5, epsilon=0.05, unit="item").budget is None
    event = Accountant(epsilon=1.0, unit="event")
    assert plan_anonymized(n_range=(10, 100), epsilon=0.25,
                           accountant=event).budget.releases_that_fit == 4
    with pytest.raises(ParameterError, match="accountant of plan_profile"):
        plan_profile(domain_size=10, max_count=2, epsilon=1.0, unit="item", accountant=1.0)


def test_a_windows_release_that_composes_in_zcdp_charges_its_rho(tmp_path):
    """The release charges the ρ-zCDP loss its plan calibrated (no δ of its own under the
    tight rule), and the ledger recomputes the same (ε, δ) claim from it."""
    import numpy as np

    from dpfreq.windows import plan_window_counts, release_window_counts

    item = np.arange(40) % 13
    times = (np.arange(40) * 7) % 32 + 1
    # every window (rolling windows alone now take the (ε, δ)-calibrated Gaussian per window)
    plan = plan_window_counts(horizon=32, epsilon=1.0, delta=1e-6, unit="item", k_values=[1],
                              windows="all")
    assert plan.accounting.startswith("zCDP")
    ledger = Ledger.create(tmp_path / "l.db", PrivacyBudget(3.0, 1e-6))
    rel = release_window_counts((item, times), horizon=32, epsilon=1.0, delta=1e-6,
                                unit="item", k_values=[1], windows="all", rng=1,
                                accountant=ledger)
    assert rel.epsilon == 1.0
    row = ledger.ledger[0]
    assert "zCDP" in row["loss"]
    assert row["rule"] == "renyi"
    assert ledger.spent.delta == 0.0  # no bad event: δ was only the release's own conversion
    assert ledger.spending().filter_branch == "renyi"  # a Gaussian-like loss: no pure bound


def test_a_ledger_declares_a_plan_and_records_its_releases_against_it(tmp_path):
    plan = [DiscreteLaplace(Fraction(1, 10), 1)] * 50
    ledger = Ledger.create(tmp_path / "l.db", PrivacyBudget(4.0, 1e-6), composition="basic")
    ledger.declare(plan, delta=1e-6, unit="item", label="fifty days")
    for _ in range(50):
        Ledger(ledger.path).spend(0.1, unit="item", loss=DiscreteLaplace(Fraction(1, 10), 1))
    rules = [row["rule"] for row in ledger.ledger]
    assert rules == ["declared"] + ["plan"] * 50
    assert ledger.verify() == 51
    assert ledger.spending().sum_epsilon == pytest.approx(3.173, abs=1e-3)  # not 50 × 0.1
    with pytest.raises(BudgetExceededError) as refused:
        ledger.declare(plan * 3, delta=1e-7, unit="item")
    assert str(refused.value).startswith("declaring a plan of 150 releases at δ=1e-07 (charged "
                                         "as ε=")
    assert f"would exceed the budget of ledger {str(ledger.path)!r}: the sum would reach " \
        in str(refused.value)
    left = ledger.spending()
    assert str(refused.value).endswith(
        f"; remaining ε={left.remaining_epsilon!r}, δ=0.0 of total ε=4.0, δ=1e-06. Nothing was "
        "recorded and no noise was drawn; declare no more than what remains.")
    share = ledger.share(0.1, unit="item")
    assert _admitted(ledger, 0.1, 1000) == share.releases_that_fit
