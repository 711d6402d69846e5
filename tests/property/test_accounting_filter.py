"""No interleaving of releases, refusals, declared plans, unit conversions and concurrent
processes ever lets an accountant's composed loss exceed its total.

The check is independent of the code under test: each admitted release is re-described here
from what the test asked for (its stated (ε, δ), its mechanism, its unit), converted to the
budget's unit here, and the theorem of its rule is checked here at 80 decimal digits — for
``basic`` the sums of ε and δ; for ``tight`` the bad events within half of δ and either the
pure bounds within ε or the order-α Rényi divergences within the budget whose conversion
(Canonne, Kamath & Steinke 2020, Proposition 12) at the other half of δ is ε.
"""

from __future__ import annotations

import decimal
import json
import multiprocessing
import random
import sqlite3
from dataclasses import dataclass
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from dpfreq.accounting import (
    ApproximateDP,
    DiscreteGaussian,
    DiscreteLaplace,
    PrivacyLoss,
    ZeroConcentratedDP,
)
from dpfreq.budget import Accountant, PrivacyBudget
from dpfreq.errors import BudgetExceededError
from dpfreq.ledger import Ledger

D = decimal.Decimal


@dataclass(frozen=True)
class Asked:
    """One release as the test asked for it (at its own unit)."""

    kind: str  # pure, approximate, zcdp, dlap, dgauss
    a: Fraction  # ε, ρ, γ or σ²
    b: Fraction  # δ or sensitivity
    unit: str

    def stated(self) -> tuple[Fraction, Fraction]:
        with decimal.localcontext() as c:
            c.prec = 80
            if self.kind == "pure":
                return self.a, Fraction(0)
            if self.kind == "approximate":
                return self.a, self.b
            if self.kind == "dlap":
                return self.a * self.b, Fraction(0)
            rho = self.a if self.kind == "zcdp" else self.b * self.b / (2 * self.a)
            delta = Fraction(1, 10**8)
            eps = _dec(rho) + 2 * (_dec(rho) * (1 / _dec(delta)).ln()).sqrt()
            return Fraction(eps) * (1 + Fraction(1, 10**20)), delta

    def loss(self) -> PrivacyLoss | None:
        return {"pure": None, "approximate": ApproximateDP(self.a, self.b),
                "zcdp": ZeroConcentratedDP(self.a), "dlap": DiscreteLaplace(self.a, int(self.b)),
                "dgauss": DiscreteGaussian(self.a, self.b, True)}[self.kind]


def _dec(x: Fraction) -> D:
    return D(x.numerator) / D(x.denominator)


def _rr(eps: D, alpha: D) -> D:
    return ((alpha * eps).exp() + ((1 - alpha) * eps).exp()).ln() / (alpha - 1) - \
        (1 + eps.exp()).ln() / (alpha - 1)


def _views(asked: Asked, budget_unit: str) -> tuple[D, D | None, object]:
    """(bad δ, pure bound or None, Rényi curve) of the release at the budget's unit."""
    double = asked.unit == "item" and budget_unit == "item_replace"
    a, b = _dec(asked.a), _dec(asked.b)
    if asked.kind in ("pure", "approximate", "dlap"):
        eps = a * b if asked.kind == "dlap" else a
        bad = b if asked.kind == "approximate" else D(0)
        if double:
            bad, eps = bad * (1 + eps.exp()), 2 * eps
        return bad, eps, lambda alpha, e=eps: _rr(e, alpha)
    rho = a if asked.kind == "zcdp" else b * b / (2 * a)
    rho = 4 * rho if double else rho
    return D(0), None, lambda alpha, r=rho: r * alpha


def guarantee_holds(acct_rule, admitted: list[Asked], budget_unit: str) -> bool:
    """The rule's theorem, checked independently on what was admitted."""
    with decimal.localcontext() as c:
        c.prec = 80
        eps_t, delta_t = _dec(acct_rule.epsilon), _dec(acct_rule.delta)
        if acct_rule.composition == "basic":
            stated = [a.stated() for a in admitted]
            return (sum((_dec(e) for e, _ in stated), D(0)) <= eps_t * (1 + D("1e-30"))
                    and sum((_dec(d) for _, d in stated), D(0)) <= delta_t * (1 + D("1e-12")))
        views = [_views(a, budget_unit) for a in admitted]
        if sum((v[0] for v in views), D(0)) > delta_t / 2 * (1 + D("1e-30")):
            return False
        if all(v[1] is not None for v in views) and \
                sum((v[1] for v in views if v[1] is not None), D(0)) <= eps_t:
            return True
        if acct_rule.order is None:
            return not admitted
        alpha = _dec(acct_rule.order)
        spent = sum((v[2](alpha) for v in views), D(0))
        term = ((2 / delta_t).ln() + (alpha - 1) * (1 - 1 / alpha).ln() - alpha.ln()) \
            / (alpha - 1)
        return spent + term <= eps_t


fractions = st.fractions(min_value=Fraction(1, 100), max_value=Fraction(3, 2),
                         max_denominator=1000)
releases = st.one_of(
    st.builds(Asked, st.just("pure"), fractions, st.just(Fraction(0)),
              st.sampled_from(["item", "item_replace"])),
    st.builds(Asked, st.just("approximate"), fractions,
              st.sampled_from([Fraction(1, 10**8), Fraction(1, 10**7)]),
              st.sampled_from(["item", "item_replace"])),
    st.builds(Asked, st.just("zcdp"),
              st.fractions(Fraction(1, 10**4), Fraction(1, 20), max_denominator=10**4),
              st.just(Fraction(0)), st.sampled_from(["item", "item_replace"])),
    st.builds(Asked, st.just("dlap"),
              st.fractions(Fraction(1, 100), Fraction(1, 2), max_denominator=100),
              st.sampled_from([Fraction(1), Fraction(2)]), st.sampled_from(["item"])),
    st.builds(Asked, st.just("dgauss"), st.integers(20, 2000).map(Fraction), st.just(Fraction(1)),
              st.sampled_from(["item", "item_replace"])),
)


@given(st.lists(releases, min_size=1, max_size=60),
       st.sampled_from([(1.0, 1e-6), (3.0, 1e-6), (0.5, 0.0), (2.0, 1e-8)]),
       st.sampled_from(["tight", "basic"]))
@settings(max_examples=80, deadline=None)
def test_no_interleaving_exceeds_the_total(asks, total, composition):
    acct = Accountant(PrivacyBudget(*total), unit="item_replace", composition=composition)
    admitted: list[Asked] = []
    for asked in asks:
        eps, dlt = asked.stated()
        try:
            acct.check(eps, dlt, unit=asked.unit, loss=asked.loss())
            acct.spend(eps, dlt, unit=asked.unit, loss=asked.loss())
        except BudgetExceededError:
            refused = acct.ledger
            assert len(refused) == len(admitted)  # nothing recorded on a refusal
            continue
        admitted.append(asked)
        assert guarantee_holds(acct.rule, admitted, "item_replace")
    assert len(acct.ledger) == len(admitted)


def _worker(path: str, seed: int, barrier) -> list[str]:
    gen = random.Random(seed)
    ledger = Ledger(path, command="worker")
    barrier.wait()
    done = []
    for _ in range(25):
        asked = gen.choice([Asked("pure", Fraction(gen.randint(1, 30), 100), Fraction(0), "item"),
                            Asked("approximate", Fraction(1, 10), Fraction(1, 10**8), "item"),
                            Asked("zcdp", Fraction(1, 200), Fraction(0), "item")])
        eps, dlt = asked.stated()
        try:
            ledger.spend(eps, dlt, unit="item", loss=asked.loss(), label=json.dumps(
                [asked.kind, str(asked.a), str(asked.b)]))
        except BudgetExceededError:
            continue
        done.append(asked.kind)
    return done


def test_concurrent_processes_never_exceed_the_total(tmp_path):
    """Three processes spending a seeded mix against one tight ledger: every admitted release
    is recorded once, and together they satisfy the rule's theorem."""
    path = tmp_path / "shared.db"
    ledger = Ledger.create(path, PrivacyBudget(2.0, 1e-6), unit="item")
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(3)
        with ctx.Pool(3) as pool:
            done = pool.starmap(_worker, [(str(path), seed, barrier) for seed in (1, 2, 3)])
    with sqlite3.connect(path) as conn:
        labels = [json.loads(label) for (label,) in
                  conn.execute("SELECT label FROM releases ORDER BY id")]
    admitted = [Asked(k, Fraction(a), Fraction(b), "item") for k, a, b in labels]
    assert len(admitted) == sum(len(d) for d in done) > 0
    assert guarantee_holds(Accountant(epsilon=2.0, delta=1e-6).rule, admitted, "item")
    assert ledger.verify() == len(admitted)


def test_the_checker_sees_the_renyi_branch_and_a_violation():
    """The independent check is not vacuous: 365 releases of 0.05 pass by the Rényi branch
    (the sum is 18.25), and one release more than the filter admits fails it."""
    acct = Accountant(PrivacyBudget(5.2, 1e-6))
    asked = Asked("pure", Fraction(1, 20), Fraction(0), "item")
    admitted = []
    while True:
        try:
            acct.spend(0.05, unit="item")
        except BudgetExceededError:
            break
        admitted.append(asked)
    assert len(admitted) >= 365
    assert acct.spending().binding == "renyi"
    assert guarantee_holds(acct.rule, admitted, "item")
    assert not guarantee_holds(acct.rule, [*admitted, asked], "item")
