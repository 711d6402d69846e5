"""Batches declared in advance, and how much of a budget one more release would take.

**A declared plan** is a batch of releases fixed before any of its results is seen (the
mechanisms and their parameters; running only some of them later is post-processing). Its
loss is then a fixed composition, whose ε at δ is the smallest of three certified bounds
(:func:`declared_epsilon`): the exact composition of its privacy loss distributions
(:mod:`dpfreq.accounting.pld`), its Rényi divergences minimised over every order at once
(valid for a fixed batch, unlike a filter), and the sum of its pure bounds.

**A budget share** (:func:`budget_share`) says what one more release of a given loss would take
from an accountant under its own rule: the increase of the ε spent, as a share of what is left,
and how many more such releases the rule still admits.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dpfreq._validate import message
from dpfreq.accounting.losses import PrivacyLoss, runs
from dpfreq.accounting.renyi import smallest_epsilon_over_orders
from dpfreq.accounting.rules import Cost, Rule, Totals, admit, spent_epsilon
from dpfreq.errors import ParameterError

__all__ = ["ACCOUNTANT_PARAMETER", "BudgetShare", "budget_share", "declared_epsilon",
           "required_epsilon", "with_budget_share"]

#: The numpydoc entry of a planner's ``accountant`` (fill_doc): :func:`with_budget_share`.
ACCOUNTANT_PARAMETER = """accountant : Accountant or Ledger, optional
    Say (``budget``) how much of its remaining budget the release would take under its
    rule and how many such releases still fit; nothing is spent."""


def declared_epsilon(loss: PrivacyLoss, delta: Fraction) -> tuple[Fraction | None, str]:
    """``(ε, method)``: a certified ε at ``δ`` of a loss fixed in advance (None: none found).

    Examples
    --------
    >>> from dpfreq.accounting.mechanisms import DiscreteLaplace
    >>> from dpfreq.accounting.losses import Composed
    >>> plan = Composed((DiscreteLaplace(Fraction(1, 20), 1),) * 365)
    >>> eps, how = declared_epsilon(plan, Fraction(1, 10**6))
    >>> round(float(eps), 3), how
    (4.613, 'privacy loss distribution')
    """
    options: list[tuple[Fraction, str]] = []
    bad = loss.bad_delta()
    bound = loss.epsilon_bound()
    if bound is not None and bad <= delta:
        options.append((bound, "sum of the pure bounds"))
    if delta > bad:
        eps, alpha = smallest_epsilon_over_orders(loss.renyi, delta - bad)
        options.append((eps, f"Rényi divergence at order {float(alpha):.4g}"))
    pld = loss.pld()
    if pld is not None:
        eps_pld = pld.epsilon_at(delta)
        if eps_pld is not None:
            options.append((eps_pld, "privacy loss distribution"))
    if not options:
        return None, "none"
    return min(options, key=lambda o: o[0])


@dataclass(frozen=True)
class BudgetShare:
    """What one more release would take from an accountant, under its rule.

    Attributes
    ----------
    composition : str
        The accountant's rule (``"tight"`` or ``"basic"``).
    epsilon : float
        How much the ε spent under the rule (at the accountant's δ) would grow.
    fraction_of_remaining : float
        That growth as a share of the ε left (1.0 or more: it does not fit).
    releases_that_fit : int
        How many such releases, this one included, the rule still admits one after another.
    binding : str
        The branch of the rule that admits them (``"sum"`` or ``"renyi"``; ``"none"``).

    Examples
    --------
    >>> from dpfreq.budget import Accountant
    >>> share = Accountant(epsilon=1.0).share(0.25, unit="item")
    >>> share.fraction_of_remaining, share.releases_that_fit, share.binding
    (0.25, 4, 'sum')
    """

    composition: str
    epsilon: float
    fraction_of_remaining: float
    releases_that_fit: int
    binding: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"composition": self.composition, "epsilon": self.epsilon,
                "fraction_of_remaining": self.fraction_of_remaining,
                "releases_that_fit": self.releases_that_fit, "binding": self.binding}

    def describe(self) -> str:
        """One sentence."""
        return (f"takes epsilon {self.epsilon:.4g} ({100 * self.fraction_of_remaining:.3g} % "
                f"of what is left) under the {self.composition} rule; "
                f"{self.releases_that_fit} such release(s) fit")


_MAX_COUNT = 10**6


def _fits(rule: Rule, totals: Totals, cost: Cost) -> int:
    """How many copies of ``cost`` the rule admits one after another (at most 10^6)."""
    def ok(n: int) -> bool:
        if n == 0:
            return True
        many = Cost(cost.epsilon * n, cost.delta * n, cost.bad * n,
                    None if cost.bound is None else cost.bound * n,
                    None if cost.renyi is None else cost.renyi * n)
        return admit(rule, totals, many) is not None

    lo, hi = 0, 1
    while hi <= _MAX_COUNT and ok(hi):
        lo, hi = hi, 2 * hi
    hi = min(hi, _MAX_COUNT + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def budget_share(rule: Rule, totals: Totals, cost: Cost) -> BudgetShare:
    """The :class:`BudgetShare` of one more ``cost`` after ``totals`` under ``rule``.

    ``n`` copies are admitted together exactly when each is admitted in turn (the accounts only
    grow, so a branch that holds for all of them held at each step), which the count uses.
    """
    before, _ = spent_epsilon(rule, totals)
    after, branch = spent_epsilon(rule, totals.plus(cost))
    left = rule.epsilon - (before if before is not None else rule.epsilon)
    grow = (after - before) if after is not None and before is not None else rule.epsilon
    share = float(grow / left) if left > 0 else float("inf")
    fits = _fits(rule, totals, cost)
    return BudgetShare(rule.composition, float(grow), share, fits,
                       branch if fits else "none")


def required_epsilon(losses: Sequence[PrivacyLoss], delta: Fraction, *,
                     precision: Fraction = Fraction(1, 10**4)) -> Fraction | None:
    """The smallest total ε (on a grid of ``precision``) at which an accountant of the
    ``"tight"`` rule with total ``delta`` admits every one of ``losses``, one after another:
    what a sequence of releases costs when chosen adaptively. None if none up to 1000 does.

    Examples
    --------
    >>> from dpfreq.accounting.losses import PureDP
    >>> eps = required_epsilon([PureDP(Fraction(1, 20))] * 365, Fraction(1, 10**6))
    >>> 5.0 < float(eps) < 5.1
    True
    """
    grouped = runs(tuple(losses))

    def fits(eps: Fraction) -> bool:
        rule = Rule.make("tight", eps, delta)
        totals = Totals()
        for loss, count in grouped:
            one = Cost.of(rule, Fraction(0), Fraction(0), loss)
            totals = totals.plus(Cost(Fraction(0), Fraction(0), one.bad * count,
                                      None if one.bound is None else one.bound * count,
                                      None if one.renyi is None else one.renyi * count))
        return admit(rule, Totals(), Cost(totals.epsilon, totals.delta, totals.bad,
                                          totals.bound, totals.renyi)) is not None

    lo, hi = 0, int(1000 / precision)
    if not fits(hi * precision):
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid * precision) else (mid, hi)
    return hi * precision


def with_budget_share(plan: Any, accountant: Any, *, epsilon: float, delta: float,
                      unit: str | None, loss: PrivacyLoss | None = None) -> Any:
    """``plan`` (a frozen dataclass with a ``budget`` field) with ``budget`` set to what the
    planned release would take from ``accountant`` (its ``share``), or unchanged when
    ``accountant`` is None: a plan function's ``accountant=`` argument. Nothing is spent.

    Raises
    ------
    ParameterError
        If ``accountant`` is not an accountant (an object with ``share``), or the release's
        unit does not convert to its.

    Examples
    --------
    >>> from dpfreq.budget import Accountant
    >>> from dpfreq.profile import plan_profile
    >>> acct = Accountant(epsilon=5.0, delta=1e-6)
    >>> plan = plan_profile(domain_size=1000, max_count=5, epsilon=0.05, unit="item",
    ...                     accountant=acct)
    >>> plan.budget.releases_that_fit
    358
    """
    if accountant is None:
        return plan
    share = getattr(accountant, "share", None)
    if not callable(share):
        raise ParameterError(message("accountant", "an Accountant, a Ledger or None",
                                     type(accountant).__name__))
    return dataclasses.replace(plan, budget=share(epsilon, delta, unit=unit, loss=loss))
