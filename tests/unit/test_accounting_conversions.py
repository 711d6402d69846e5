"""Certified conversions (dpfreq.accounting): every bound is on its stated side of the true value,
checked against 120-digit decimal references (stdlib ``decimal``, independent of the 60-digit
evaluations under test), and close to it.

Provenance of the references: each true value is computed here from its closed form (Bun &
Steinke 2016 for zCDP; the randomized-response Rényi divergence as a two-term sum; Canonne,
Kamath & Steinke 2020, Proposition 12, for the RDP conversion) at 120 digits.
"""

from __future__ import annotations

import decimal
import math
from fractions import Fraction

import pytest

from dpfreq.accounting import (
    advanced_epsilon,
    float_at_least,
    float_at_most,
    gaussian_sigma2_at_least,
    group_delta,
    log_inverse_upper,
    pieces_epsilon,
    pure_epsilon_for_rho,
    randomized_response_renyi,
    renyi_epsilon,
    zcdp_epsilon,
    zcdp_rho,
    zcdp_rho_at_most,
)
from dpfreq.accounting.numbers import exact_sum, exp_bound, fixed_point, ln_bound, sqrt_bound
from dpfreq.accounting.renyi import best_order, conversion_term, renyi_budget

D = decimal.Decimal
EPSILONS = [0.1, 0.25, 0.5, 1.0, 2.0, 4.0]
DELTAS = [1e-3, 1e-6, 1e-9, 1e-12]


@pytest.fixture(autouse=True)
def digits():
    """Every decimal operation of a test (``+``, ``*`` too) at 120 digits."""
    with decimal.localcontext() as local:
        local.prec = 120
        yield


def ctx() -> decimal.Context:
    return decimal.getcontext()


def dec(x: Fraction | float | int) -> D:
    f = Fraction(x)
    return ctx().divide(D(f.numerator), D(f.denominator))


def test_exp_ln_sqrt_bracket_the_true_value():
    c = ctx()
    for x in [Fraction(-30), Fraction(-1, 3), Fraction(1, 10**9), Fraction(7, 3), Fraction(40)]:
        true = c.exp(dec(x))
        assert dec(exp_bound(x, up=False)) <= true <= dec(exp_bound(x, up=True))
        assert dec(exp_bound(x, up=True) - exp_bound(x, up=False)) <= true * D("1e-39")
    for x in [Fraction(1, 10**12), Fraction(1, 3), Fraction(2), Fraction(10**9, 7)]:
        true = c.ln(dec(x))
        assert dec(ln_bound(x, up=False)) <= true <= dec(ln_bound(x, up=True))
        true = c.sqrt(dec(x))
        assert dec(sqrt_bound(x, up=False)) <= true <= dec(sqrt_bound(x, up=True))
    assert exp_bound(Fraction(0), up=True) == 1
    assert ln_bound(Fraction(1), up=False) == 0


def test_floats_and_fixed_points_round_the_stated_way():
    for x in [Fraction(1, 3), Fraction(2, 7), Fraction(10**20 + 1, 10**20)]:
        assert Fraction(float_at_most(x)) <= x <= Fraction(float_at_least(x))
        assert fixed_point(x, up=False) <= x <= fixed_point(x, up=True)
        assert fixed_point(x, up=True) - fixed_point(x, up=False) <= Fraction(1, 10**30)
    values = [Fraction(k, 10**30) for k in range(1000)] + [Fraction(1, 3), Fraction(2, 7)]
    assert exact_sum(values) == sum(values, Fraction(0))


@pytest.mark.parametrize("epsilon", EPSILONS)
@pytest.mark.parametrize("delta", DELTAS)
def test_zcdp_rho_is_certified_below_the_bound_in_every_pair(epsilon, delta):
    """Issue 43, item 6: the float ρ of every path satisfies ρ + 2√(ρ ln(1/δ)) <= ε exactly."""
    c = ctx()
    log_term = c.ln(1 / dec(delta))  # δ at its exact binary value, as the releases use it
    for rho in (Fraction(zcdp_rho(epsilon, delta)), zcdp_rho_at_most(Fraction(epsilon), delta)):
        r = dec(rho)
        assert r + 2 * c.sqrt(r * log_term) <= dec(epsilon)
        best = (c.sqrt(log_term + dec(epsilon)) - c.sqrt(log_term)) ** 2
        assert r >= best * (1 - D("1e-11"))  # and within 2^-36 of the largest such ρ
    rho = zcdp_rho_at_most(Fraction(epsilon), delta)
    eps_back = zcdp_epsilon(rho, delta)
    assert dec(rho) + 2 * c.sqrt(dec(rho) * log_term) <= dec(eps_back) <= dec(epsilon)
    assert 0 <= dec(log_inverse_upper(delta)) - log_term <= D("1e-38")


@pytest.mark.parametrize("rho", [Fraction(1, 200), Fraction(1, 3), Fraction(7, 10**6)])
def test_pure_pieces_and_gaussian_variance_fit_their_rho_exactly(rho):
    e = pure_epsilon_for_rho(rho)
    assert e * e / 2 <= rho
    assert e.denominator <= 2**32
    assert float(e) == pytest.approx(math.sqrt(2 * float(rho)), rel=1e-9)
    for l2 in (1, Fraction(3, 2), 7):
        s2 = gaussian_sigma2_at_least(l2, rho)
        assert Fraction(l2) ** 2 / (2 * s2) <= rho < Fraction(l2) ** 2 / (2 * (s2 - 1))


@pytest.mark.parametrize("epsilon", [Fraction(1, 20), Fraction(1, 2), Fraction(3)])
@pytest.mark.parametrize("alpha", [Fraction(11, 10), Fraction(2), Fraction(613, 100), Fraction(64)])
def test_randomized_response_renyi_is_an_upper_bound_and_tight(epsilon, alpha):
    c = ctx()
    e, a = dec(epsilon), dec(alpha)
    p = c.exp(e) / (1 + c.exp(e))
    q = 1 - p
    true = c.ln(c.power(p, a) * c.power(q, 1 - a) + c.power(q, a) * c.power(p, 1 - a)) / (a - 1)
    bound = dec(randomized_response_renyi(epsilon, alpha))
    assert true <= bound <= true + D("1e-35") + true * D("1e-35")
    assert bound <= e  # never above the pure bound
    assert float(bound) <= float(alpha) * float(epsilon) ** 2 / 2 * (1 + 1e-12)  # below ε²α/2


@pytest.mark.parametrize("alpha", [Fraction(3, 2), Fraction(6), Fraction(100)])
@pytest.mark.parametrize("delta", [Fraction(1, 10**6), Fraction(1, 2 * 10**6)])
def test_renyi_conversion_is_rounded_up_and_its_budget_down(alpha, delta):
    c = ctx()
    a = dec(alpha)
    true = (c.ln(1 / dec(delta)) + (a - 1) * c.ln(1 - 1 / a) - c.ln(a)) / (a - 1)
    assert dec(conversion_term(alpha, delta, up=False)) <= true
    assert true <= dec(conversion_term(alpha, delta, up=True))
    tau = Fraction(1, 3)
    assert dec(renyi_epsilon(alpha, tau, delta)) >= dec(tau) + true
    budget = renyi_budget(alpha, Fraction(5), delta)
    assert dec(budget) + true <= 5


def test_best_order_is_where_small_releases_fit_most():
    order = best_order(Fraction(5), Fraction(1, 2 * 10**6))
    score = [float(renyi_budget(a, Fraction(5), Fraction(1, 2 * 10**6)) / a)
             for a in (order * Fraction(9, 10), order, order * Fraction(11, 10))]
    assert score[1] >= max(score[0], score[2])


@pytest.mark.parametrize(("eps", "k", "dp"), [(Fraction(1, 100), 1000, Fraction(1, 10**6)),
                                              (Fraction(1, 2), 10, Fraction(1, 10**3))])
def test_advanced_composition_and_group_delta_round_up(eps, k, dp):
    c = ctx()
    true = c.sqrt(2 * k * c.ln(1 / dec(dp))) * dec(eps) + k * dec(eps) * (c.exp(dec(eps)) - 1)
    got = dec(advanced_epsilon(eps, k, dp))
    assert true <= got <= true * (1 + D("1e-30"))
    g = group_delta(eps, Fraction(1, 10**7), 3)
    true_g = dec(Fraction(1, 10**7)) * (1 + c.exp(dec(eps)) + c.exp(2 * dec(eps)))
    assert true_g <= dec(g) <= true_g * (1 + D("1e-30"))


@pytest.mark.parametrize(("pieces", "delta"), [(1, 1e-6), (10, 0.0), (50, 1e-6), (400, 1e-6),
                                               (4000, 1e-9)])
def test_pieces_epsilon_composes_within_the_budget(pieces, delta):
    """Each of ``pieces`` pure runs at the returned ε compose (basic or advanced) to ε."""
    eps = Fraction(1)
    e0 = pieces_epsilon(eps, pieces, delta)
    assert e0 >= eps / pieces
    if e0 > eps / pieces:
        assert advanced_epsilon(e0, pieces, Fraction(delta)) <= eps
        assert e0.denominator <= 2**32


@pytest.mark.parametrize("epsilon", [1e-6, 1e-9, 1e-4])
@pytest.mark.parametrize("delta", [1e-6, 1e-12])
def test_rho_at_a_tiny_epsilon_is_certified_with_a_float_sized_fraction(epsilon, delta) -> None:
    """At ε ≪ ln(1/δ) the float closed form loses digits to cancellation and lies thousands of
    2^-40 steps above the bound; the steps double after 16, so the certified ρ is reached in a
    few dozen steps with a float's denominator (before: one exact step each, a fraction whose
    denominator grew by 2^40 a step, seconds per call, 20 s for one ``plan stream``)."""
    eps = Fraction(epsilon)
    rho = zcdp_rho_at_most(eps, delta)
    big_l = log_inverse_upper(delta)
    assert 0 < rho <= eps
    assert 4 * rho * big_l <= (eps - rho) ** 2
    assert rho.denominator <= 2**1100
    assert float(rho) >= 0.999 * (epsilon / (math.sqrt(-math.log(delta) + epsilon)
                                             + math.sqrt(-math.log(delta)))) ** 2
