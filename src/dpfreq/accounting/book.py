"""The book of an accountant: its admitted entries, what they spent under each rule, and why.

Both accountants (:class:`dpfreq.budget.Accountant` in memory, :class:`dpfreq.ledger.Ledger` in
SQLite) keep a list of :class:`Entry` and ask this module what to admit and what to report, so
they admit exactly the same sequences.

An entry is a release (admitted by the ``"sum"`` or the ``"renyi"`` branch of the rule), a
declared plan (``"declared"``: its whole batch admitted at once, as one loss), or a release
that belongs to a declared plan (``"plan"``: already paid for by its declaration, costs nothing
more).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dpfreq.accounting.losses import ApproximateDP, Composed, PrivacyLoss
from dpfreq.accounting.numbers import exact_sum
from dpfreq.accounting.plans import BudgetShare, budget_share, declared_epsilon
from dpfreq.accounting.rules import Cost, Rule, Totals, admit, refusal, spent_epsilon

__all__ = ["Entry", "Spending", "admission", "declaration", "refused_spend", "share",
           "spending", "totals_of"]


@dataclass(frozen=True)
class Entry:
    """One admitted entry of a book (the loss and cost at the budget's unit)."""

    loss: PrivacyLoss
    cost: Cost
    rule: str
    plan: int | None = None
    items: tuple[PrivacyLoss, ...] = ()


def totals_of(rule: Rule, entries: Sequence[Entry], *, recompute: bool = False) -> Totals:
    """The accounts of the entries (a plan's releases are paid by its declaration);
    ``recompute``: costs taken afresh from the losses under ``rule`` (another rule's order)."""
    costs = [Cost.of(rule, e.cost.epsilon, e.cost.delta, e.loss) if recompute else e.cost
             for e in entries if e.rule != "plan"]
    bounds = [c.bound for c in costs]
    renyis = [c.renyi for c in costs]
    return Totals(exact_sum(c.epsilon for c in costs), exact_sum(c.delta for c in costs),
                  exact_sum(c.bad for c in costs),
                  None if None in bounds else exact_sum(b for b in bounds if b is not None),
                  None if None in renyis else exact_sum(r for r in renyis if r is not None),
                  len(costs))


def admission(rule: Rule, entries: Sequence[Entry], epsilon: Fraction, delta: Fraction,
              loss: PrivacyLoss, totals: Totals | None = None) -> tuple[Entry | None, str]:
    """The entry a new release would add (or None) and, when refused, why (``totals``: those
    of ``entries``, when the caller keeps them).

    A release whose loss equals a not yet spent item of a declared plan is that item
    (``"plan"``, no further cost); otherwise it is admitted by a branch of the rule.
    """
    for index, item in _pending(entries):
        if item == loss:
            return Entry(loss, Cost(epsilon, delta, Fraction(0), Fraction(0), Fraction(0)),
                         "plan", plan=index), ""
    cost = Cost.of(rule, epsilon, delta, loss)
    totals = totals_of(rule, entries) if totals is None else totals
    branch = admit(rule, totals, cost)
    if branch is None:
        return None, refusal(rule, totals, cost)
    return Entry(loss, cost, branch), ""


def _number(x: Any) -> str:
    return repr(float(x))


def refused_spend(budget: str, asked: tuple[Any, Any], charged: tuple[Fraction, Fraction] | None,
                  why: str, remaining: tuple[Any, Any], total: tuple[Any, Any], *,
                  plan: tuple[int, str] | None = None) -> str:
    """The one message of a refused spend, for every accountant and every command.

    It says what was asked (and what that is charged at the budget's unit, when a unit
    converts), why the rule refuses it, what remains of the total (public: the budget and its
    spends are public, never the data), and what to do. A declaration (``plan``: how many
    releases, and how their composed ε was certified) is asked at its δ (``asked[1]``) and
    charged at its composed loss ``charged`` (None: it has no finite ε at that δ).

    Examples
    --------
    >>> refused_spend("the budget", (1.0, 0), (Fraction(1), Fraction(0)), "why",
    ...               (0.5, 0.0), (0.5, 0.0))  # doctest: +NORMALIZE_WHITESPACE
    'spending ε=1.0, δ=0.0 would exceed the budget: why; remaining ε=0.5, δ=0.0 of total
    ε=0.5, δ=0.0. Nothing was recorded and no noise was drawn; ask for no more than what
    remains.'
    >>> refused_spend("the budget", (None, 1e-6), (Fraction(3, 2), Fraction(1, 10**6)), "why",
    ...               (1.0, 1e-6), (1.0, 1e-6), plan=(2, "privacy loss distribution"))
    ... # doctest: +NORMALIZE_WHITESPACE
    'declaring a plan of 2 releases at δ=1e-06 (charged as ε=1.5, δ=1e-06: their composed
    loss by privacy loss distribution) would exceed the budget: why; remaining ε=1.0,
    δ=1e-06 of total ε=1.0, δ=1e-06. Nothing was recorded and no noise was drawn; declare no
    more than what remains.'
    """
    if plan is None:
        assert charged is not None
        eps, dlt = (_number(x) for x in asked)
        shown = f"spending ε={eps}, δ={dlt}"
        if (float(charged[0]), float(charged[1])) != (float(asked[0]), float(asked[1])):
            shown += (f" (charged as ε={_number(charged[0])}, δ={_number(charged[1])} at the "
                      "budget's unit)")
        verb = "ask for"
    else:
        releases, how = plan
        shown = (f"declaring a plan of {releases} release{'s' if releases != 1 else ''} at "
                 f"δ={float(asked[1]):.3g}")
        if charged is not None:
            shown += (f" (charged as ε={float(charged[0]):.6g}, δ={float(charged[1]):.3g}: "
                      f"their composed loss by {how})")
        verb = "declare"
    where = "" if budget == "the budget" else f" of {budget}"
    return (f"{shown} would exceed the budget{where}: {why}; remaining "
            f"ε={_number(remaining[0])}, δ={_number(remaining[1])} of total "
            f"ε={_number(total[0])}, δ={_number(total[1])}. Nothing was recorded and no "
            f"noise was drawn; {verb} no more than what remains.")


def _pending(entries: Sequence[Entry]) -> list[tuple[int, PrivacyLoss]]:
    """``(declaration index, item)`` of every declared item not yet spent, in order."""
    left: list[tuple[int, PrivacyLoss]] = []
    for index, entry in enumerate(entries):
        if entry.rule == "declared":
            left.extend((index, item) for item in entry.items)
        elif entry.rule == "plan":
            where = next(i for i, (d, item) in enumerate(left)
                         if d == entry.plan and item == entry.loss)
            del left[where]
    return left


def declaration(rule: Rule, entries: Sequence[Entry], items: Sequence[PrivacyLoss],
                delta: Fraction, budget: str = "the budget") -> tuple[Entry | None, str]:
    """The entry declaring a plan of ``items`` at the plan's own ``delta`` and how its ε was
    certified, or None and the refusal (:func:`refused_spend`, naming ``budget``).

    The plan counts as one ``(ε_P, δ)``-DP release, ``ε_P`` the certified ε of its fixed
    composition (:func:`~dpfreq.accounting.plans.declared_epsilon`).
    """
    eps, how = declared_epsilon(Composed(tuple(items)), delta)
    totals = totals_of(rule, entries)
    if eps is None:
        why = (f"the plan has no finite ε at its δ={float(delta):.3g} (its own bad events are "
               "more likely than that)")
        charged = None
    else:
        eps = eps if eps > 0 else Fraction(1, 10**12)
        loss = ApproximateDP(eps, delta)
        cost = Cost.of(rule, eps, delta, loss)
        branch = admit(rule, totals, cost)
        if branch is not None:
            return Entry(loss, cost, "declared", items=tuple(items)), how
        why, charged = refusal(rule, totals, cost), (eps, delta)
    left = spending(rule, entries, with_plan=False)
    return None, refused_spend(budget, (None, delta), charged, why,
                               (left.remaining_epsilon, left.remaining_delta),
                               (rule.epsilon, rule.delta), plan=(len(items), how))


@dataclass(frozen=True)
class Spending:
    """What an accountant spent, under each rule, and what is left under its own.

    Attributes
    ----------
    composition, rule : str
        The accountant's rule and its description.
    total_epsilon, total_delta : float
        The budget.
    sum_epsilon, sum_delta : float
        The releases' stated ε and δ added up (basic composition).
    filter_epsilon : float or None
        The ε at the total δ under the tight rule's filter (for a basic accountant: what the
        tight rule would say of the same releases); None when no branch of it holds.
    filter_branch : str
        The branch of the filter that gives it (``"sum"`` or ``"renyi"``).
    plan_epsilon : float or None
        The ε at the total δ had every release been declared at once, in advance (exact
        composition of the privacy loss distributions; valid only for such a batch).
    plan_method : str
        Which bound gave it.
    spent_epsilon, spent_delta : float
        Spent under the accountant's own rule (tight: the smaller branch, and the releases'
        own δ).
    remaining_epsilon, remaining_delta : float
        Left under the accountant's own rule (tight: δ left for the releases' own δ; the
        conversion's half of δ is kept aside).
    binding : str
        The branch of the accountant's own rule that gives ``spent_epsilon``.
    releases : int
        Entries recorded (declarations and their releases included).

    Examples
    --------
    >>> from dpfreq.budget import Accountant
    >>> acct = Accountant(epsilon=1.0, delta=1e-6)
    >>> acct.spend(0.5, unit="item")
    >>> s = acct.spending()
    >>> s.sum_epsilon, s.spent_epsilon, s.remaining_epsilon, s.binding
    (0.5, 0.5, 0.5, 'sum')
    """

    composition: str
    rule: str
    total_epsilon: float
    total_delta: float
    sum_epsilon: float
    sum_delta: float
    filter_epsilon: float | None
    filter_branch: str
    plan_epsilon: float | None
    plan_method: str
    spent_epsilon: float
    spent_delta: float
    remaining_epsilon: float
    remaining_delta: float
    binding: str
    releases: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return dict(self.__dict__)


def _as_float(value: Fraction | None) -> float | None:
    return None if value is None else float(value)


def spending(rule: Rule, entries: Sequence[Entry], *, with_plan: bool = True) -> Spending:
    """The :class:`Spending` of a book (``with_plan``: compute the declared-plan figure, the
    one costly part)."""
    totals = totals_of(rule, entries)
    tight = rule if rule.composition == "tight" else Rule.make("tight", rule.epsilon, rule.delta)
    tight_totals = totals if tight is rule else totals_of(tight, entries, recompute=True)
    filter_eps, filter_branch = spent_epsilon(tight, tight_totals)
    plan_eps, plan_how = (None, "not computed")
    if with_plan:
        parts = tuple(p for e in entries if e.rule != "plan"
                      for p in (e.items if e.rule == "declared" else (e.loss,)))
        plan_eps, plan_how = declared_epsilon(Composed(parts), rule.delta) if parts else \
            (Fraction(0), "nothing spent")
    own, binding = spent_epsilon(rule, totals)
    spent_eps = own if own is not None else rule.epsilon
    if rule.composition == "basic":
        spent_dlt, left_dlt = totals.delta, rule.delta - totals.delta
    else:
        spent_dlt, left_dlt = totals.bad, rule.release_delta - totals.bad
    return Spending(
        rule.composition, rule.describe(), float(rule.epsilon), float(rule.delta),
        float(totals.epsilon), float(totals.delta), _as_float(filter_eps), filter_branch,
        _as_float(plan_eps), plan_how, float(spent_eps), float(spent_dlt),
        float(max(rule.epsilon - spent_eps, Fraction(0))), float(max(left_dlt, Fraction(0))),
        binding, len(entries))


def share(rule: Rule, entries: Sequence[Entry], epsilon: Fraction, delta: Fraction,
          loss: PrivacyLoss) -> BudgetShare:
    """What one more release of ``loss`` (stating ``(ε, δ)``) would take under ``rule``."""
    return budget_share(rule, totals_of(rule, entries), Cost.of(rule, epsilon, delta, loss))
