"""Privacy budgets and an explicit accountant.

There is no global or default accountant: a caller who wants to cap the total loss over several
releases creates an :class:`Accountant` (in memory) or a :class:`dpfreq.ledger.Ledger` (a SQLite
file shared by processes) and passes it to each release (``accountant=``), which calls
``spend`` after validating its parameters and **before** drawing any noise. Both satisfy the
:class:`BudgetAccountant` protocol, which is what release functions accept, and both admit
releases by the same rule (:mod:`dpfreq.accounting.rules`): ``"tight"`` (the default: the sum, or
a Rényi privacy filter, whichever admits more) or ``"basic"`` (the sum of the stated ε and δ).

Arithmetic is exact: every ε and δ is held as a :class:`fractions.Fraction` of its shortest
decimal representation (``0.1`` is 1/10), so ten spends of 0.1 exactly exhaust a budget of 1.0;
every conversion is a certified bound (:mod:`dpfreq.accounting`).

Units of privacy are currencies (:data:`dpfreq.release.RELATIONS`). An accountant keeps them
apart: without a ``unit`` of its own it accepts spends at one unit only; given a ``unit`` it
converts the spends that convert soundly (:func:`convert_spend`) and records the conversion
beside the spend, and refuses the others with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import InitVar, dataclass, field
from fractions import Fraction
from typing import Any, Protocol, runtime_checkable

from dpfreq._validate import check_choice, message
from dpfreq.accounting.book import (
    Entry,
    Spending,
    admission,
    declaration,
    refused_spend,
    share,
    spending,
)
from dpfreq.accounting.budgets import (
    PrivacyBudget,
    advanced_composition,
    group_privacy,
    sequential_composition,
)
from dpfreq.accounting.losses import PrivacyLoss
from dpfreq.accounting.numbers import exact_fraction
from dpfreq.accounting.plans import BudgetShare
from dpfreq.accounting.rules import COMPOSITIONS, Rule, Totals, spent_epsilon
from dpfreq.accounting.units import convert_loss, convert_spend, plan_items, prepare_spend
from dpfreq.errors import BudgetExceededError, ParameterError, public_errors
from dpfreq.release import UNITS

__all__ = [
    "COMPOSITIONS",
    "Accountant",
    "BudgetAccountant",
    "PrivacyBudget",
    "advanced_composition",
    "check_accountant",
    "convert_loss",
    "convert_spend",
    "group_privacy",
    "sequential_composition",
]


@runtime_checkable
class BudgetAccountant(Protocol):
    """What a release function needs from an accountant (``accountant=``).

    :class:`Accountant` (in memory) and :class:`dpfreq.ledger.Ledger` (SQLite, shared between
    processes) implement it. ``spend`` must be atomic: it either records the whole release or
    raises :class:`~dpfreq.errors.BudgetExceededError` and records nothing; release functions
    call it after validating everything and before drawing any noise. ``loss`` (optional)
    describes the release's privacy loss more precisely than its (ε, δ)
    (:mod:`dpfreq.accounting`); it must imply the stated (ε, δ).

    Examples
    --------
    >>> isinstance(Accountant(PrivacyBudget(1.0)), BudgetAccountant)
    True
    >>> isinstance(object(), BudgetAccountant)
    False
    """

    @property
    def total(self) -> PrivacyBudget: ...

    @property
    def spent(self) -> PrivacyBudget: ...

    @property
    def remaining(self) -> PrivacyBudget: ...

    @property
    def ledger(self) -> list[dict[str, Any]]: ...

    def check(self, epsilon: float, delta: float = 0.0, *, unit: str | None = None,
              loss: PrivacyLoss | None = None) -> None: ...

    def spend(self, epsilon: float, delta: float = 0.0, *, label: str = "",
              unit: str | None = None, source: str | None = None,
              loss: PrivacyLoss | None = None) -> None: ...

    def spending(self) -> Spending: ...

    def share(self, epsilon: float, delta: float = 0.0, *, unit: str | None = None,
              loss: PrivacyLoss | None = None) -> BudgetShare: ...


def check_accountant(accountant: Any) -> BudgetAccountant | None:
    """``accountant`` if it is ``None`` or a :class:`BudgetAccountant`, else a ParameterError.

    Parameters
    ----------
    accountant : Any
        The ``accountant=`` argument of a release function.

    Returns
    -------
    BudgetAccountant or None
        ``accountant`` unchanged.

    Raises
    ------
    ParameterError
        If ``accountant`` is neither ``None`` nor an accountant.

    Examples
    --------
    >>> from dpfreq.errors import public_call
    >>> check_accountant(None) is None
    True
    >>> with public_call("release_profile"):  # doctest: +ELLIPSIS
    ...     check_accountant("all of it")
    Traceback (most recent call last):
    ...
    dpfreq.errors.ParameterError: accountant of release_profile must be an Accountant, ...
    """
    if accountant is None or isinstance(accountant, BudgetAccountant):
        return accountant
    raise ParameterError(message("accountant", "an Accountant, a Ledger or None",
                                 type(accountant).__name__))


@dataclass
class Accountant:
    """Tracks spending against a total (ε, δ) budget, in memory.

    Parameters
    ----------
    total : PrivacyBudget, optional
        The budget that all spends together may not exceed.
    unit : {"event", "item", "item_replace", "device"}, optional
        The unit the budget is stated at. Given: spends at other units are converted where
        that is sound (:func:`convert_spend`: ε at ``"item"`` counts as 2ε at
        ``"item_replace"``, ε at ``"item_replace"`` as ε at ``"item"``), the ledger row says
        so, and the others are refused. Omitted: the accountant keeps relations apart, and
        refuses a spend at a unit other than the one already spent at.
    composition : {"tight", "basic"}, default "tight"
        How releases compose against the total (:mod:`dpfreq.accounting.rules`). ``"tight"``
        admits every sequence the sum admits whose releases' own δ stays within half of the
        total δ, and many more: a Rényi privacy filter, valid for releases chosen one after
        another from earlier results; half of δ converts it. ``"basic"``: the stated ε and δ
        add up. With δ = 0 both are the sum. Not a privacy parameter: it decides how a given
        total is accounted, never how much is spent.
    epsilon, delta : float, optional
        The same budget given as numbers, ``Accountant(epsilon=2.0)``; give either ``total`` or
        ``epsilon`` (with ``delta``, default 0), never both.

    Raises
    ------
    ParameterError
        If ``total`` is not a :class:`PrivacyBudget`, both or neither of ``total`` and
        ``epsilon`` are given, ``unit`` is not a unit of privacy or ``composition`` not a rule.

    Examples
    --------
    >>> acct = Accountant(PrivacyBudget(1.0), unit="item_replace")
    >>> acct.spend(0.25, label="profile", unit="item")
    >>> acct.remaining, acct.ledger[0]["charged_epsilon"]
    (PrivacyBudget(epsilon=0.5, delta=0.0), 0.5)

    Many small releases go further under the tight rule:

    >>> acct = Accountant(epsilon=5.2, delta=1e-6)
    >>> for day in range(365):
    ...     acct.spend(0.05, label=f"day {day}", unit="item")
    >>> report = acct.spending()
    >>> report.sum_epsilon, round(report.filter_epsilon, 3), report.binding
    (18.25, 5.055, 'renyi')
    """

    total: PrivacyBudget = None  # type: ignore[assignment]  # set from epsilon when None
    unit: str | None = None
    composition: str = "tight"
    _entries: list[Entry] = field(default_factory=list, repr=False)
    _rows: list[dict[str, Any]] = field(default_factory=list, repr=False)
    epsilon: InitVar[float | None] = None
    delta: InitVar[float] = 0.0

    @public_errors("Accountant")
    def __post_init__(self, epsilon: float | None, delta: float) -> None:
        if (self.total is None) == (epsilon is None):
            raise ParameterError(message("total", "given once: a PrivacyBudget, "
                                         "or epsilon= (and delta=)", self.total))
        if epsilon is not None:
            self.total = PrivacyBudget(epsilon, delta)
        if not isinstance(self.total, PrivacyBudget):
            raise ParameterError(message("total", "a PrivacyBudget", self.total))
        if self.unit is not None:
            check_choice(self.unit, "unit", UNITS)
        check_choice(self.composition, "composition", COMPOSITIONS)
        self._rule = Rule.make(self.composition, self.total.exact_epsilon,
                               self.total.exact_delta)
        self._totals = Totals()

    @property
    def rule(self) -> Rule:
        """The composition rule and its fixed parameters (order, δ split)."""
        return self._rule

    def _charge(self, epsilon: Any, delta: Any, unit: str | None,
                loss: Any) -> tuple[Fraction, Fraction, PrivacyLoss, str | None]:
        """The spend converted to the budget's unit; refused when relations would mix."""
        if self.unit is None and unit is not None:
            seen = {row["unit"] for row in self._rows} - {None, unit}
            if seen:
                raise ParameterError(message(
                    "unit", f"{seen.pop()!r}, the unit already spent at (this accountant "
                    "keeps relations apart; state the budget's unit, e.g. Accountant(total, "
                    "unit='item_replace'), to convert where that is sound)", unit))
        return prepare_spend(epsilon, delta, unit, self.unit, loss)

    @property
    def spent_exact(self) -> tuple[Fraction, Fraction]:
        """(ε, δ) spent under the rule, exactly: ε of the branch that binds, and the stated δ
        (basic) or the releases' own δ (tight)."""
        totals = self._totals
        eps, _ = spent_epsilon(self._rule, totals)
        dlt = totals.delta if self._rule.composition == "basic" else totals.bad
        return (eps if eps is not None else self._rule.epsilon), dlt

    @property
    def spent(self) -> PrivacyBudget:
        """What was spent so far under the rule, in the budget's unit, as a
        :class:`PrivacyBudget` like :attr:`remaining` (:attr:`spent_exact` rounded to floats):
        ``PrivacyBudget(epsilon=0.0, delta=0.0)`` before any spend."""
        eps, dlt = self.spent_exact
        return PrivacyBudget._left(eps, dlt)

    @property
    def remaining(self) -> PrivacyBudget:
        """What is left, in the budget's unit: ``PrivacyBudget(epsilon=0.0, ...)`` once the ε
        budget is exhausted; it may be below the smallest ε a release accepts. Under the tight
        rule the δ left is what the releases' own δ may still take (half the total)."""
        eps, dlt = self.spent_exact
        return PrivacyBudget._left(self._rule.epsilon - eps,
                                   self._rule.release_delta - dlt)

    @property
    def ledger(self) -> list[dict[str, Any]]:
        """Every entry, in order: label, ε, δ and unit as spent, source (``None`` when not
        given), the charge against the budget (``charged_epsilon``, ``charged_delta``),
        ``conversion`` (how the unit was converted, or ``None``), ``rule`` (the branch that
        admitted it: ``"sum"``, ``"renyi"``, ``"declared"`` or ``"plan"``) and ``loss``."""
        return [dict(row) for row in self._rows]

    @public_errors("Accountant.spend")
    def check(self, epsilon: float, delta: float = 0.0, *, unit: str | None = None,
              loss: PrivacyLoss | None = None) -> None:
        """Raise :class:`BudgetExceededError` if spending (ε, δ) at ``unit`` would not be
        admitted (a ParameterError if the unit does not convert to the budget's)."""
        self._admit(epsilon, delta, unit, loss)

    def _admit(self, epsilon: Any, delta: Any, unit: str | None,
               loss: Any) -> tuple[Entry, Fraction, Fraction, str | None]:
        e, d, charged, note = self._charge(epsilon, delta, unit, loss)
        entry, why = admission(self._rule, self._entries, e, d, charged, self._totals)
        if entry is None:
            left = self.remaining
            raise BudgetExceededError(refused_spend(
                "the budget", (epsilon, delta), (e, d), why, (left.epsilon, left.delta),
                (self.total.epsilon, self.total.delta)))
        return entry, e, d, note

    @public_errors("Accountant.spend")
    def spend(self, epsilon: float, delta: float = 0.0, *, label: str = "",
              unit: str | None = None, source: str | None = None,
              loss: PrivacyLoss | None = None) -> None:
        """Record a spend of (ε, δ), refusing it (before any noise) if it is not admitted.

        ``label`` names what spent (the release function), ``unit`` the unit of privacy,
        ``source`` the data and ``loss`` the release's privacy loss (default: the one its
        (ε, δ) states). The unit is converted to the budget's unit where sound, and the row
        records the conversion (see the class docstring).
        """
        entry, e, d, note = self._admit(epsilon, delta, unit, loss)
        self._record(entry, label, exact_fraction(epsilon), exact_fraction(delta), unit,
                     source, e, d, note)

    def _record(self, entry: Entry, label: str, epsilon: Fraction, delta: Fraction,
                unit: str | None, source: str | None, e: Fraction, d: Fraction,
                note: str | None) -> None:
        self._entries.append(entry)
        if entry.rule != "plan":
            self._totals = self._totals.plus(entry.cost)
        self._rows.append({"label": str(label), "epsilon": float(epsilon),
                           "delta": float(delta), "unit": unit, "source": source,
                           "charged_epsilon": float(e), "charged_delta": float(d),
                           "conversion": note, "rule": entry.rule,
                           "loss": entry.loss.describe()})

    @public_errors("Accountant.declare")
    def declare(self, losses: Sequence[PrivacyLoss], *, delta: float, unit: str | None = None,
                label: str = "") -> None:
        """Declare a plan: a batch of releases fixed before any of them runs.

        The batch is admitted (or refused) now, as one release whose ε is its certified
        composed loss at the plan's ``delta`` (exact privacy loss distributions,
        :func:`dpfreq.accounting.declared_epsilon`); each later spend whose loss is one of the
        batch's is recorded against it (``rule="plan"``) at no further cost.

        Parameters
        ----------
        losses : sequence of PrivacyLoss
            The releases of the plan, at ``unit``.
        delta : float
            The δ the plan's composed loss is stated at (no default: a privacy parameter).
        unit : str, optional
            The unit the losses protect (converted as a spend would be).
        label : str
            What the plan is.

        Raises
        ------
        BudgetExceededError
            If the plan does not fit (nothing is recorded).
        """
        if self.unit is None and unit is not None:
            self._charge(1.0, 0.0, unit, None)  # the units check alone
        items, dlt = plan_items(losses, delta, unit, self.unit)
        entry, how = declaration(self._rule, self._entries, items, dlt)
        if entry is None:
            raise BudgetExceededError(how)
        self._record(entry, label or "declared plan", entry.cost.epsilon, dlt, unit, None,
                     entry.cost.epsilon, dlt, f"{len(items)} releases; epsilon by {how}")

    def spending(self) -> Spending:
        """What was spent under each rule (sum, filter, declared plan) and what is left under
        this accountant's own (:class:`dpfreq.accounting.Spending`)."""
        return spending(self._rule, self._entries)

    @public_errors("Accountant.share")
    def share(self, epsilon: float, delta: float = 0.0, *, unit: str | None = None,
              loss: PrivacyLoss | None = None) -> BudgetShare:
        """What one more release of (ε, δ) at ``unit`` would take under this accountant's rule,
        and how many such releases still fit (:class:`dpfreq.accounting.BudgetShare`)."""
        e, d, charged, _ = self._charge(epsilon, delta, unit, loss)
        return share(self._rule, self._entries, e, d, charged)
