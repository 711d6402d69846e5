"""dpfreq's composition against Google's ``dp_accounting`` (a test-only dependency).

On sequences of discrete Laplace and discrete Gaussian releases, at δ = 1e-6:

* declared plans (a batch fixed in advance): dpfreq's certified ε is within 1 % of
  ``dp_accounting``'s PLD accountant (its pessimistic estimate) and never below its *optimistic*
  estimate, which rounds every loss down (a lower reference: the true ε lies between the two);
  the exact true value of the discrete Laplace sequences is checked against the binomial law in
  ``test_accounting_pld.py``;
* adaptive use: the smallest total ε at which the tight rule admits the sequence release by
  release (a filter at one order, with half of δ for its conversion) is within 5 % of
  ``dp_accounting``'s RDP accountant, which composes the same losses non-adaptively over all
  its orders with all of δ.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from dpfreq.accounting import (
    Composed,
    DiscreteGaussian,
    DiscreteLaplace,
    PrivacyLoss,
    declared_epsilon,
    required_epsilon,
)

dpa = pytest.importorskip("dp_accounting")
pld_mod = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
rdp_mod = pytest.importorskip("dp_accounting.rdp.rdp_privacy_accountant")

DELTA = 1e-6
LAPLACE = [(365, "0.05"), (100, "0.1"), (30, "0.5"), (50, "0.2")]
GAUSSIAN = [(30, 100), (100, 400), (10, 4)]


def _laplace_pld(parameter: float, count: int, pessimistic: bool = True):
    one = pld_mod.from_discrete_laplace_mechanism(parameter, sensitivity=1,
                                                  pessimistic_estimate=pessimistic)
    return one.self_compose(count)


def _gaussian_pld(sigma2: int, count: int, pessimistic: bool = True):
    one = pld_mod.from_discrete_gaussian_mechanism(math.sqrt(sigma2), sensitivity=1,
                                                   pessimistic_estimate=pessimistic)
    return one.self_compose(count)


def _declared(losses: list[PrivacyLoss]) -> float:
    eps, how = declared_epsilon(Composed(tuple(losses)), Fraction(DELTA))
    assert eps is not None
    assert how == "privacy loss distribution"
    return float(eps)


@pytest.mark.parametrize(("count", "eps0"), LAPLACE)
def test_a_declared_discrete_laplace_plan_matches_the_pld_accountant(count, eps0):
    ours = _declared([DiscreteLaplace(Fraction(eps0), 1)] * count)
    theirs = _laplace_pld(float(eps0), count).get_epsilon_for_delta(DELTA)
    low = _laplace_pld(float(eps0), count, pessimistic=False).get_epsilon_for_delta(DELTA)
    assert low <= ours * (1 + 1e-9)
    assert abs(ours / theirs - 1) <= 0.01


@pytest.mark.parametrize(("count", "sigma2"), GAUSSIAN)
def test_a_declared_discrete_gaussian_plan_matches_the_pld_accountant(count, sigma2):
    ours = _declared([DiscreteGaussian(Fraction(sigma2), Fraction(1), True)] * count)
    theirs = _gaussian_pld(sigma2, count).get_epsilon_for_delta(DELTA)
    low = _gaussian_pld(sigma2, count, pessimistic=False).get_epsilon_for_delta(DELTA)
    assert low <= ours * (1 + 1e-9)
    assert abs(ours / theirs - 1) <= 0.01


def test_a_declared_mixed_plan_matches_the_pld_accountant():
    losses = ([DiscreteLaplace(Fraction(1, 10), 1)] * 40
              + [DiscreteGaussian(Fraction(400), Fraction(1), True)] * 20)
    theirs = _laplace_pld(0.1, 40).compose(_gaussian_pld(400, 20))
    low = _laplace_pld(0.1, 40, False).compose(_gaussian_pld(400, 20, False))
    ours = _declared(losses)
    assert low.get_epsilon_for_delta(DELTA) <= ours * (1 + 1e-9)
    assert abs(ours / theirs.get_epsilon_for_delta(DELTA) - 1) <= 0.01


def _rdp(events: list[tuple[object, int]], replace_one: bool) -> float:
    relation = (dpa.NeighboringRelation.REPLACE_ONE if replace_one
                else dpa.NeighboringRelation.ADD_OR_REMOVE_ONE)
    acct = rdp_mod.RdpAccountant(neighboring_relation=relation)
    for event, count in events:
        acct.compose(dpa.SelfComposedDpEvent(event, count))
    return float(acct.get_epsilon(DELTA))


def _randomized_response(eps: float) -> object:
    """The two-bucket randomized response with parameter ε: the discrete Laplace pair of
    sensitivity 1 (a bit flip is dp_accounting's ``REPLACE_ONE`` for this event)."""
    return dpa.RandomizedResponseDpEvent(2 / (1 + math.exp(eps)), 2)


@pytest.mark.parametrize(("count", "eps0"), LAPLACE)
def test_the_adaptive_filter_is_within_5_percent_of_the_rdp_accountant(count, eps0):
    ours = required_epsilon([DiscreteLaplace(Fraction(eps0), 1)] * count, Fraction(DELTA))
    theirs = _rdp([(_randomized_response(float(eps0)), count)], replace_one=True)
    assert ours is not None
    assert float(ours) <= 1.05 * theirs
    assert float(ours) >= _declared([DiscreteLaplace(Fraction(eps0), 1)] * count)


@pytest.mark.parametrize(("count", "sigma2"), GAUSSIAN)
def test_the_adaptive_filter_on_gaussians_is_within_5_percent_of_rdp(count, sigma2):
    ours = required_epsilon([DiscreteGaussian(Fraction(sigma2), Fraction(1), False)] * count,
                            Fraction(DELTA))
    theirs = _rdp([(dpa.GaussianDpEvent(math.sqrt(sigma2)), count)], replace_one=False)
    assert ours is not None
    assert theirs <= float(ours) <= 1.05 * theirs
