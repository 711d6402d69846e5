"""Privacy loss distributions: exact checks on enumerable cases.

The hockey-stick divergence ``δ(ε) = Σ_o max(0, P(o) − e^ε Q(o))`` is computed here directly,
by enumeration: for k-fold randomized response (the discrete Laplace pair of sensitivity 1) by
the binomial law of the number of +ε losses, for one and two discrete Laplace / discrete Gaussian
releases by summing over the output lattice, at 60 decimal digits. dpfreq's certified δ must
never be below it (soundness) and must be close to it (tightness); its ε at a δ must never be
below the true ε at that δ.
"""

from __future__ import annotations

import decimal
import math
from fractions import Fraction

import pytest

from dpfreq.accounting.pld import (
    PrivacyLossDistribution,
    approximate_pld,
    discrete_gaussian_pld,
    discrete_laplace_pld,
)

D = decimal.Decimal


@pytest.fixture(autouse=True)
def digits():
    with decimal.localcontext() as local:
        local.prec = 60
        yield


def dec(x: Fraction | float) -> D:
    f = Fraction(x)
    return D(f.numerator) / D(f.denominator)


def rr_delta(eps0: Fraction, k: int, eps: D, delta0: Fraction = Fraction(0)) -> D:
    """Exact δ(ε) of k-fold (ε0, δ0) four-point pairs (randomized response when δ0 = 0)."""
    e0 = dec(eps0)
    p = e0.exp() / (1 + e0.exp())
    q = 1 - p
    out = D(0)
    for j in range(k + 1):
        loss = (2 * j - k) * e0
        if loss > eps:
            out += math.comb(k, j) * p**j * q ** (k - j) * (1 - (eps - loss).exp())
    keep = (1 - dec(delta0)) ** k
    return 1 - keep + keep * out


def exact_epsilon(delta_of, target: float) -> D:
    lo, hi = D(0), D(100)
    for _ in range(90):  # to 100 · 2^-90

        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if delta_of(mid) <= D(target) else (mid, hi)
    return hi


@pytest.mark.parametrize(("k", "eps0"), [(365, Fraction(1, 20)), (100, Fraction(1, 10)),
                                         (30, Fraction(1, 2)), (7, Fraction(1, 3))])
def test_k_fold_randomized_response_against_the_binomial_law(k, eps0):
    pld = approximate_pld(eps0, Fraction(0)).self_compose(k)
    on_grid = (eps0 * 10**4).denominator == 1  # else each loss is rounded up onto the grid
    for eps in (0.0, 0.5, 2.0, 4.0):
        true = rr_delta(eps0, k, D(eps))
        got = D(pld.delta_at(Fraction(eps)))
        assert true <= got  # certified: never below the true δ
        assert got <= true * (1 + D("1e-6" if on_grid else "1e-2")) + D("1e-15")
    for delta in (1e-3, 1e-6, 1e-9):
        true_eps = exact_epsilon(lambda e: rr_delta(eps0, k, e), delta)
        got_eps = dec(pld.epsilon_at(delta))
        assert true_eps <= got_eps
        # the grid (1e-4) is a lattice of ±ε0 when ε0 is on it; 1/3 is rounded up onto it
        slack = D("1e-6") if on_grid else D(k) * D("1e-4")
        assert got_eps <= true_eps + slack


def test_approximate_pairs_compose_with_their_bad_events():
    eps0, d0, k = Fraction(1, 5), Fraction(1, 10**7), 20
    pld = approximate_pld(eps0, d0).self_compose(k)
    for eps in (0.5, 1.5):
        true = rr_delta(eps0, k, D(eps), d0)
        got = D(pld.delta_at(Fraction(eps)))
        assert true <= got <= true * (1 + D("1e-6"))
    assert pld.epsilon_at(1e-7) is None  # below the bad events' 2e-6: no ε works


def _lattice_delta(p: dict[int, D], q: dict[int, D], eps: D) -> D:
    e = eps.exp()
    return sum((max(D(0), p[z] - e * q.get(z, D(0))) for z in p), D(0))


def _dlap(gamma: Fraction, shift: int, reach: int) -> dict[int, D]:
    a = (-dec(gamma)).exp()
    norm = (1 - a) / (1 + a)
    return {z: norm * a ** abs(z - shift) for z in range(-reach, reach + 1)}


def _dgauss(sigma2: int, shift: int, reach: int) -> dict[int, D]:
    w = {z: (D(-(z - shift) ** 2) / (2 * sigma2)).exp() for z in range(-reach - 50, reach + 51)}
    norm = sum(w.values(), D(0))
    return {z: w[z] / norm for z in range(-reach, reach + 1)}


def _product(p: dict[int, D]) -> dict[tuple[int, int], D]:
    return {(a, b): p[a] * p[b] for a in p for b in p}


@pytest.mark.parametrize(("make", "pld", "reach"), [
    (lambda s: _dlap(Fraction(1, 3), s, 120), discrete_laplace_pld(Fraction(1, 3), 3), 120),
    (lambda s: _dgauss(9, s, 60), discrete_gaussian_pld(Fraction(9), 2), 60),
])
def test_one_and_two_lattice_releases_against_enumeration(make, pld, reach):
    shift = 3 if reach == 120 else 2
    p, q = make(0), make(shift)
    two = pld.compose(pld)
    rounding = D("1e-50")  # the 60-digit reference's own rounding (δ(γΔ) is exactly 0)
    for eps in (D("0.25"), D("1"), D("2")):
        one_true = _lattice_delta(p, q, eps)
        got = D(pld.delta_at(Fraction(str(eps))))
        assert one_true - rounding <= got <= one_true * (1 + D("1e-3")) + D("1e-12")
        two_true = _lattice_delta(_product(p), _product(q), eps)  # type: ignore[arg-type]
        got = D(two.delta_at(Fraction(str(eps))))
        assert two_true - rounding <= got <= two_true * (1 + D("1e-3")) + D("1e-12")


def test_composition_is_commutative_and_self_composition_is_repeated_composition():
    a = approximate_pld(Fraction(1, 10), Fraction(0))
    b = discrete_gaussian_pld(Fraction(50), 1)
    ab, ba = a.compose(b), b.compose(a)
    assert ab.delta_at(Fraction(1)) == pytest.approx(ba.delta_at(Fraction(1)), rel=1e-12)
    step = PrivacyLossDistribution.identity()
    for _ in range(5):
        step = step.compose(b)
    assert b.self_compose(5).delta_at(Fraction(1, 2)) == pytest.approx(
        step.delta_at(Fraction(1, 2)), rel=1e-9)


def test_a_wide_distribution_is_coarsened_upward():
    """Coarsening rounds losses up: δ only grows."""
    pld = discrete_gaussian_pld(Fraction(10**6), 1)
    coarse = pld.coarsened(64)
    for eps in (Fraction(0), Fraction(1, 1000), Fraction(1, 100)):
        assert coarse.delta_at(eps) >= pld.delta_at(eps)
