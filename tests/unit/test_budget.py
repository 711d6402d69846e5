"""Budgets: exact sequential composition, refusal before sampling, advanced composition and
group privacy formulas."""

from __future__ import annotations

import math
import re
from fractions import Fraction

import numpy as np
import pytest

from dpfreq.budget import (
    Accountant,
    PrivacyBudget,
    advanced_composition,
    group_privacy,
    sequential_composition,
)
from dpfreq.errors import BudgetExceededError, ParameterError
from dpfreq.noise import discrete_laplace_gamma, sample_discrete_laplace
from dpfreq.rng import resolve_rng

SHAPE = re.compile(r"^\w+ of [\w.]+ must be .+; got .+\.$")


def _fake_release(counts, *, epsilon, accountant=None, rng=None):
    """A release following the conventions: validate, spend, then draw noise."""
    gen = resolve_rng(rng).generator
    gamma = discrete_laplace_gamma(epsilon, 1)
    if accountant is not None:
        accountant.spend(epsilon, label="fake_release")
    return np.asarray(counts) + sample_discrete_laplace(gamma, len(counts), rng=gen)


def test_overspend_refused_before_any_noise_is_drawn(rng):
    acct = Accountant(PrivacyBudget(1.0))
    _fake_release([1, 2, 3], epsilon=0.75, accountant=acct, rng=rng)
    state = rng.bit_generator.state
    with pytest.raises(BudgetExceededError) as info:
        _fake_release([1, 2, 3], epsilon=0.5, accountant=acct, rng=rng)
    assert rng.bit_generator.state == state  # the generator did not advance: no draw
    text = str(info.value)
    assert text.startswith("spending ε=0.5, δ=0.0 would exceed the budget: ")  # what was asked
    assert "; remaining ε=0.25, δ=0.0 of total ε=1.0, δ=0.0. " in text  # what is left
    assert text.endswith("ask for no more than what remains.")  # what to do
    # the refused spend is not recorded; spent is a PrivacyBudget, as remaining is
    assert acct.spent == PrivacyBudget(0.75)
    assert acct.remaining == PrivacyBudget(0.25)
    assert [e["label"] for e in acct.ledger] == ["fake_release"]


def test_ten_spends_of_a_tenth_exhaust_one_exactly():
    acct = Accountant(PrivacyBudget(1.0))
    for _ in range(10):
        acct.spend(0.1, label="q")
    assert acct.spent_exact == (Fraction(1), Fraction(0))
    assert acct.remaining == PrivacyBudget._left(Fraction(0), Fraction(0))
    assert (acct.remaining.epsilon, acct.remaining.delta) == (0.0, 0.0)
    with pytest.raises(BudgetExceededError):
        acct.spend(1e-6)


def test_fraction_spends_are_exact():
    acct = Accountant(PrivacyBudget(1.0))
    for _ in range(3):
        acct.spend(Fraction(1, 3))
    assert acct.spent_exact[0] == 1
    with pytest.raises(BudgetExceededError):
        acct.spend(Fraction(1, 10**6))


def test_delta_budget():
    acct = Accountant(PrivacyBudget(2.0, 1e-6), composition="basic")
    acct.spend(0.5, 4e-7)
    assert acct.remaining == PrivacyBudget(1.5, 6e-7)
    with pytest.raises(BudgetExceededError):
        acct.spend(0.5, 7e-7)
    acct.spend(0.5, 6e-7)
    assert acct.spent_exact[1] == Fraction(1, 10**6)


def test_the_tight_rule_keeps_half_of_delta_for_its_conversion():
    acct = Accountant(PrivacyBudget(2.0, 1e-6))  # tight: 5e-7 for the releases' own delta
    acct.spend(0.5, 4e-7)
    assert acct.remaining == PrivacyBudget(1.5, 1e-7)
    with pytest.raises(BudgetExceededError, match="half of the total δ"):
        acct.spend(0.5, 2e-7)
    acct.spend(0.5, 1e-7)
    assert acct.spent_exact == (Fraction(1), Fraction(5, 10**7))


def test_check_does_not_record():
    acct = Accountant(PrivacyBudget(1.0))
    acct.check(1.0)
    assert (acct.spent.epsilon, acct.spent.delta) == (0.0, 0.0)
    with pytest.raises(BudgetExceededError):
        acct.check(1.5)


def test_sequential_composition_exact():
    total = sequential_composition(*[PrivacyBudget(0.1, 1e-7)] * 10)
    assert total == PrivacyBudget(1.0, 1e-6)


@pytest.mark.parametrize(("eps", "k", "dp"), [(0.1, 100, 1e-6), (0.01, 1000, 1e-5), (1.0, 4, 1e-3)])
def test_advanced_composition_formula(eps, k, dp):
    out = advanced_composition(PrivacyBudget(eps, 1e-9), k, dp)
    adv = math.sqrt(2 * k * math.log(1 / dp)) * eps + k * eps * (math.exp(eps) - 1)
    if adv < k * eps:
        assert out.epsilon == pytest.approx(adv, rel=1e-12)
        assert out.delta == pytest.approx(dp + k * 1e-9, rel=1e-12)
    else:  # basic composition is better and needs no δ'
        assert out.epsilon == pytest.approx(k * eps)
        assert out.delta == pytest.approx(k * 1e-9)


def test_advanced_composition_beats_basic_for_many_small_steps():
    out = advanced_composition(PrivacyBudget(0.01), 10_000, 1e-6)
    assert out.epsilon < 10_000 * 0.01
    assert out.delta == pytest.approx(1e-6)


@pytest.mark.parametrize(("eps", "delta", "g"), [(0.5, 0.0, 3), (0.1, 1e-8, 10), (1.0, 1e-6, 1)])
def test_group_privacy_formula(eps, delta, g):
    out = group_privacy(PrivacyBudget(eps, delta), g)
    assert out.epsilon == pytest.approx(g * eps)
    # a path of g neighbours: δ (1 + e^ε + … + e^{(g−1)ε}), at most g e^{(g−1)ε} δ
    exact = delta * sum(math.exp(i * eps) for i in range(g))
    assert exact <= out.delta <= exact * (1 + 1e-12)
    assert out.delta <= g * math.exp((g - 1) * eps) * delta * (1 + 1e-12)


@pytest.mark.parametrize(
    "call",
    [
        lambda: PrivacyBudget(float("nan")),
        lambda: PrivacyBudget(0.0),
        lambda: PrivacyBudget(-1.0),
        lambda: PrivacyBudget(float("inf")),
        lambda: PrivacyBudget(True),
        lambda: PrivacyBudget("1"),
        lambda: PrivacyBudget(1.0, 1.0),
        lambda: PrivacyBudget(1.0, -1e-9),
        lambda: PrivacyBudget(1.0, float("nan")),
        lambda: Accountant(1.0),
        lambda: Accountant(PrivacyBudget(1.0)).spend(float("nan")),
        lambda: Accountant(PrivacyBudget(1.0)).spend(0.1, 2.0),
        lambda: advanced_composition(PrivacyBudget(0.1), 0, 1e-6),
        lambda: advanced_composition(PrivacyBudget(0.1), 10, 0.0),
        lambda: advanced_composition(PrivacyBudget(0.1), 2.5, 1e-6),
        lambda: group_privacy(PrivacyBudget(0.1), 0),
        lambda: group_privacy(PrivacyBudget(0.1), True),
        lambda: group_privacy(PrivacyBudget(1.0, 0.1), 10),
        lambda: sequential_composition(),
        lambda: Accountant(PrivacyBudget(1.0), composition="advanced"),
        lambda: Accountant(PrivacyBudget(1.0)).spend(0.1, loss=0.1),
        lambda: Accountant(PrivacyBudget(1.0)).declare([], delta=1e-6),
        lambda: Accountant(PrivacyBudget(1.0)).declare([0.1], delta=1e-6),
    ],
)
def test_invalid_parameters(call):
    with pytest.raises(ParameterError) as info:
        call()
    assert SHAPE.match(str(info.value)), str(info.value)


def test_no_default_budget():
    with pytest.raises(TypeError):
        PrivacyBudget()  # type: ignore[call-arg]
    with pytest.raises(ParameterError):  # no budget is defaulted: one line says what to give
        Accountant()


def test_spend_records_unit_and_source():
    acct = Accountant(PrivacyBudget(1.0))
    acct.spend(0.5, label="release_profile", unit="item", source="events.csv")
    acct.spend(0.25)
    assert acct.ledger == [
        {"label": "release_profile", "epsilon": 0.5, "delta": 0.0, "unit": "item",
         "source": "events.csv", "charged_epsilon": 0.5, "charged_delta": 0.0,
         "conversion": None, "rule": "sum", "loss": "pure 0.5-DP"},
        {"label": "", "epsilon": 0.25, "delta": 0.0, "unit": None, "source": None,
         "charged_epsilon": 0.25, "charged_delta": 0.0, "conversion": None, "rule": "sum",
         "loss": "pure 0.25-DP"},
    ]


def test_accountant_keeps_relations_apart_without_a_unit():
    acct = Accountant(PrivacyBudget(1.0))
    acct.spend(0.25, label="profile", unit="item")
    for other in ("item_replace", "event", "device"):
        with pytest.raises(ParameterError, match=r"^unit of Accountant\.spend must be 'item'"):
            acct.spend(0.25, unit=other)
    assert (acct.spent.epsilon, acct.spent.delta) == (0.25, 0.0)


def test_accountant_converts_soundly_and_says_so():
    acct = Accountant(PrivacyBudget(1.0, 1e-6), unit="item_replace")
    acct.spend(0.25, 1e-8, unit="item")  # add/remove ε implies 2ε at replacement
    acct.spend(0.25, unit="item_replace")
    row = acct.ledger[0]
    assert (row["epsilon"], row["charged_epsilon"]) == (0.25, 0.5)
    assert row["charged_delta"] >= 1e-8 * (1 + math.exp(0.25))
    assert "2ε" in row["conversion"]
    assert acct.ledger[1]["conversion"] is None
    assert acct.spent.epsilon == 0.75
    with pytest.raises(BudgetExceededError):
        acct.spend(0.2, unit="item")  # charged 0.4 > 0.25 left
    for apart in ("event", "device"):
        with pytest.raises(ParameterError, match=r"different currencies|converts to no other"):
            acct.spend(0.01, unit=apart)
    with pytest.raises(ParameterError, match="given"):
        acct.spend(0.01)
    assert acct.spent.epsilon == 0.75
    item = Accountant(PrivacyBudget(1.0), unit="item")
    item.spend(0.5, unit="item_replace")  # replacement ε implies ε at add/remove
    assert (item.spent.epsilon, item.spent.delta) == (0.5, 0.0)
    assert "counts as ε" in item.ledger[0]["conversion"]
    with pytest.raises(ParameterError, match="unit of Accountant"):
        Accountant(PrivacyBudget(1.0), unit="user")


def test_accountant_takes_epsilon_and_delta_as_numbers():
    assert Accountant(epsilon=2.0).total == PrivacyBudget(2.0)
    assert Accountant(epsilon=1.0, delta=1e-6).total == PrivacyBudget(1.0, 1e-6)
    assert Accountant(PrivacyBudget(2.0)).total == PrivacyBudget(2.0)


@pytest.mark.parametrize("kwargs", [{}, {"total": PrivacyBudget(1.0), "epsilon": 1.0}])
def test_accountant_needs_exactly_one_budget(kwargs):
    with pytest.raises(ParameterError, match=r"^total of Accountant must be given once"):
        Accountant(**kwargs)


def test_remaining_is_a_zero_budget_when_exhausted_and_may_be_tiny():
    acct = Accountant(PrivacyBudget(1.0, 1e-6), unit="item", composition="basic")
    acct.spend(Fraction(9_999_999, 10**7), 1e-6, unit="item")
    assert acct.remaining.epsilon == pytest.approx(1e-7)  # below the smallest ε to spend
    acct = Accountant(PrivacyBudget(1.0, 1e-6), unit="item", composition="basic")
    acct.spend(1.0, 1e-6, unit="item")
    left = acct.remaining
    assert isinstance(left, PrivacyBudget)
    assert (left.epsilon, left.delta) == (0.0, 0.0)
