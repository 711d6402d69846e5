"""Privacy budgets and an explicit accountant.

There is no global or default accountant: a caller who wants to cap the total loss over several
releases creates an :class:`Accountant` (in memory) or a :class:`dpfreq.ledger.Ledger` (a SQLite
file shared by processes) and passes it to each release (``accountant=``), which calls
``spend`` after validating its parameters and **before** drawing any noise. Both satisfy the
:class:`BudgetAccountant` protocol, which is what release functions accept.

Arithmetic is exact: every ε and δ is held as a :class:`fractions.Fraction` of its shortest
decimal representation (``0.1`` is 1/10), so ten spends of 0.1 exactly exhaust a budget of 1.0.

Units of privacy are currencies (:data:`dpfreq.release.RELATIONS`). An accountant keeps them
apart: without a ``unit`` of its own it accepts spends at one unit only; given a ``unit`` it
converts the spends that convert soundly (:func:`convert_spend`) and records the conversion
beside the spend, and refuses the others with the reason.
"""

from __future__ import annotations

import math
from dataclasses import InitVar, dataclass, field
from fractions import Fraction
from typing import Any, Protocol, runtime_checkable

from dpfreq._validate import check_choice, check_delta, check_epsilon, check_int, message
from dpfreq.errors import BudgetExceededError, ParameterError
from dpfreq.release import UNITS

__all__ = [
    "Accountant",
    "BudgetAccountant",
    "PrivacyBudget",
    "advanced_composition",
    "check_accountant",
    "convert_spend",
    "exact_fraction",
    "group_privacy",
    "sequential_composition",
]


def exact_fraction(value: float | Fraction) -> Fraction:
    """The exact rational an accountant records for ε or δ: the shortest decimal of a float
    (``0.1`` is 1/10), or the :class:`~fractions.Fraction` itself.

    Parameters
    ----------
    value : float or Fraction
        ε or δ as the caller gave it.

    Returns
    -------
    fractions.Fraction
        The rational the float's shortest ``repr`` denotes (not its binary value).

    Raises
    ------
    ValueError
        If ``value`` is not a finite number (callers validate ε and δ first).

    Examples
    --------
    >>> exact_fraction(0.1)
    Fraction(1, 10)
    >>> sum(exact_fraction(0.1) for _ in range(10)) == 1  # while sum([0.1] * 10) != 1.0
    True
    """
    return value if isinstance(value, Fraction) else Fraction(repr(float(value)))



@dataclass(frozen=True)
class PrivacyBudget:
    """An (ε, δ) pair; δ = 0 is pure ε-DP.

    Parameters
    ----------
    epsilon : float
        ε > 0, finite. No default.
    delta : float, default 0
        δ in [0, 1).

    Raises
    ------
    ParameterError
        If ε is not a number in [1e-6, 1000] or δ is not in [0, 1).

    Examples
    --------
    >>> budget = PrivacyBudget(1.0, delta=1e-6)
    >>> budget
    PrivacyBudget(epsilon=1.0, delta=1e-06)
    >>> PrivacyBudget(0.1).exact_epsilon
    Fraction(1, 10)
    """

    epsilon: float
    delta: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon, "epsilon", "PrivacyBudget"))
        object.__setattr__(self, "delta", check_delta(self.delta, "delta", "PrivacyBudget"))

    @classmethod
    def _left(cls, epsilon: Fraction, delta: Fraction) -> PrivacyBudget:
        """What an accountant has left: ``max(ε, 0)``, ``max(δ, 0)``, unchecked.

        A remaining budget may be 0 (exhausted) or below the smallest ε a release accepts, so
        it is built without the range checks a budget to spend must pass.
        """
        left = object.__new__(cls)
        object.__setattr__(left, "epsilon", float(max(epsilon, Fraction(0))))
        object.__setattr__(left, "delta", float(max(delta, Fraction(0))))
        return left

    @property
    def exact_epsilon(self) -> Fraction:
        """ε as the exact fraction an accountant records (:func:`exact_fraction`)."""
        return exact_fraction(self.epsilon)

    @property
    def exact_delta(self) -> Fraction:
        """δ as the exact fraction an accountant records (:func:`exact_fraction`)."""
        return exact_fraction(self.delta)


def sequential_composition(*budgets: PrivacyBudget) -> PrivacyBudget:
    """Basic composition: (Σε_i, Σδ_i), computed exactly and returned as floats.

    Running mechanisms that are (ε_i, δ_i)-DP on the same data is (Σε_i, Σδ_i)-DP, whatever
    the order and even when each is chosen after seeing the previous outputs (Dwork & Roth
    2014, Theorem 3.16).

    Parameters
    ----------
    *budgets : PrivacyBudget
        The budgets of the releases, at least one.

    Returns
    -------
    PrivacyBudget
        Their sum, exact up to the final rounding to float.

    Raises
    ------
    ParameterError
        If no budget is given.

    Examples
    --------
    >>> sequential_composition(PrivacyBudget(0.1), PrivacyBudget(0.2, delta=1e-6))
    PrivacyBudget(epsilon=0.3, delta=1e-06)
    """
    if not budgets:
        raise ParameterError(message("budgets", "sequential_composition", "non-empty", budgets))
    eps = sum((b.exact_epsilon for b in budgets), Fraction(0))
    dlt = sum((b.exact_delta for b in budgets), Fraction(0))
    return PrivacyBudget(float(eps), float(dlt))


def advanced_composition(budget: PrivacyBudget, k: int, delta_prime: float) -> PrivacyBudget:
    """k-fold adaptive composition (Dwork, Rothblum & Vadhan 2010).

    ``ε' = sqrt(2k ln(1/δ')) ε + k ε (e^ε − 1)`` and ``δ' + k δ``. Returns the smaller of this and
    basic composition's ε (both hold).

    Parameters
    ----------
    budget : PrivacyBudget
        The (ε, δ) of each of the ``k`` mechanisms.
    k : int
        Number of mechanisms composed, >= 1.
    delta_prime : float
        The extra δ' in (0, 1) traded for a smaller ε.

    Returns
    -------
    PrivacyBudget
        The guarantee of the k-fold composition.

    Raises
    ------
    ParameterError
        If ``k`` < 1, δ' is not in (0, 1), or the total δ would reach 1.

    Examples
    --------
    A thousand releases at ε = 0.01 each: 10 under basic composition, about 1.76 here.

    >>> total = advanced_composition(PrivacyBudget(0.01), k=1000, delta_prime=1e-6)
    >>> round(total.epsilon, 2), total.delta
    (1.76, 1e-06)
    """
    k = check_int(k, "k", "advanced_composition", minimum=1)
    dp = check_delta(delta_prime, "delta_prime", "advanced_composition")
    if dp == 0:
        raise ParameterError(message("delta_prime", "advanced_composition", "> 0", delta_prime))
    e = budget.epsilon
    eps_adv = math.sqrt(2 * k * math.log(1 / dp)) * e + k * e * math.expm1(e)
    eps = min(eps_adv, k * e)
    dlt = dp + k * budget.delta if eps_adv < k * e else k * budget.delta
    if dlt >= 1:
        raise ParameterError(message("delta_prime", "advanced_composition",
                                     "small enough that the total δ stays < 1", delta_prime))
    return PrivacyBudget(eps, dlt)


def group_privacy(budget: PrivacyBudget, group_size: int) -> PrivacyBudget:
    """Guarantee for groups of ``group_size`` individuals: (gε, g e^{(g−1)ε} δ).

    A mechanism that is (ε, δ)-DP for one unit of privacy protects any ``g`` units together
    with this weaker guarantee (Dwork & Roth 2014, Theorem 2.2 for δ = 0).

    Parameters
    ----------
    budget : PrivacyBudget
        The guarantee for one unit.
    group_size : int
        g >= 1.

    Returns
    -------
    PrivacyBudget
        The guarantee for groups of ``g`` units.

    Raises
    ------
    ParameterError
        If g < 1 or the group δ would reach 1.

    Examples
    --------
    >>> group_privacy(PrivacyBudget(0.5), 3)
    PrivacyBudget(epsilon=1.5, delta=0.0)
    """
    g = check_int(group_size, "group_size", "group_privacy", minimum=1)
    dlt = g * math.exp((g - 1) * budget.epsilon) * budget.delta
    if dlt >= 1:
        raise ParameterError(message("group_size", "group_privacy",
                                     "small enough that the group δ stays < 1", group_size))
    return PrivacyBudget(g * budget.epsilon, dlt)


# (unit spent at, unit of the budget) → the multiplier of ε that converts soundly
_CONVERSIONS = {("item", "item_replace"): 2, ("item_replace", "item"): 1}
_APART = {
    "event": "an ε at 'event' protects one row, not one item's rows: event and item are "
             "different currencies (an item with k rows is only protected at kε)",
    "device": "'device' is the longitudinal system's unit and converts to no other",
}


def convert_spend(epsilon: Fraction, delta: Fraction, unit: str | None,
                  budget_unit: str | None, func: str) -> tuple[Fraction, Fraction, str | None]:
    """``(ε', δ', note)``: a spend at ``unit`` as charged to a budget stated at ``budget_unit``.

    Parameters
    ----------
    epsilon, delta : Fraction
        The spend, at ``unit``.
    unit : str or None
        The unit the release protects.
    budget_unit : str or None
        The unit the budget is stated at (None: no conversion, the spend is charged as is).
    func : str
        The spending method, for the error message.

    Returns
    -------
    (Fraction, Fraction, str or None)
        The charge, and a sentence saying how it was converted (None when not converted).

    Raises
    ------
    ParameterError
        When the spend does not convert soundly (``event`` and ``device`` convert to no other
        unit), or has no unit while the budget has one.

    Notes
    -----
    Over a public domain an item's rows removed are one particular replacement (by no rows),
    so ``item`` neighbours are ``item_replace`` neighbours: (ε, δ)-DP at ``item_replace``
    implies the same at ``item`` (factor 1). A replacement is a removal followed by an
    addition, so (ε, δ)-DP at ``item`` implies ``(2ε, (1 + e^ε)δ)`` at ``item_replace``
    (group privacy for 2; ``e^ε`` rounded up).

    Examples
    --------
    >>> convert_spend(Fraction(1, 2), Fraction(0), "item", "item_replace", "spend")[:2]
    (Fraction(1, 1), Fraction(0, 1))
    """
    if budget_unit is None or unit == budget_unit:
        return epsilon, delta, None
    if unit is None:
        raise ParameterError(message("unit", func, f"given (the budget is stated at unit="
                                     f"{budget_unit!r})", unit))
    factor = _CONVERSIONS.get((unit, budget_unit))
    if factor is None:
        reason = _APART.get(unit) or _APART.get(budget_unit) or "not a unit of privacy"
        raise ParameterError(message("unit", func, f"{budget_unit!r} or convertible to it "
                                     f"({reason})", unit))
    if factor == 1:
        return epsilon, delta, (f"ε at {unit!r} counts as ε at {budget_unit!r} (removing an "
                                "item's rows is one replacement of them)")
    grow = Fraction(math.exp(float(epsilon)) * (1 + 1e-12)) + 1  # 1 + e^ε, rounded up
    return 2 * epsilon, delta * grow, (f"ε at {unit!r} counts as 2ε at {budget_unit!r} (a "
                                       "replacement is a removal and an addition)")


@runtime_checkable
class BudgetAccountant(Protocol):
    """What a release function needs from an accountant (``accountant=``).

    :class:`Accountant` (in memory) and :class:`dpfreq.ledger.Ledger` (SQLite, shared between
    processes) implement it. ``spend`` must be atomic: it either records the whole (ε, δ) or
    raises :class:`~dpfreq.errors.BudgetExceededError` and records nothing; release functions
    call it after validating everything and before drawing any noise.

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
    def spent(self) -> tuple[float, float]: ...

    @property
    def remaining(self) -> PrivacyBudget: ...

    @property
    def ledger(self) -> list[dict[str, Any]]: ...

    def check(self, epsilon: float, delta: float = 0.0, *,
              unit: str | None = None) -> None: ...

    def spend(self, epsilon: float, delta: float = 0.0, *, label: str = "",
              unit: str | None = None, source: str | None = None) -> None: ...


def check_accountant(accountant: Any, func: str) -> BudgetAccountant | None:
    """``accountant`` if it is ``None`` or a :class:`BudgetAccountant`, else a ParameterError.

    Parameters
    ----------
    accountant : Any
        The ``accountant=`` argument of a release function.
    func : str
        Name of that function, for the error message.

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
    >>> check_accountant(None, "release_profile") is None
    True
    >>> check_accountant("all of it", "release_profile")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dpfreq.errors.ParameterError: accountant of release_profile must be an Accountant, ...
    """
    if accountant is None or isinstance(accountant, BudgetAccountant):
        return accountant
    raise ParameterError(message("accountant", func, "an Accountant, a Ledger or None",
                                 type(accountant).__name__))


@dataclass
class Accountant:
    """Tracks spending against a total (ε, δ) budget under sequential composition.

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
    epsilon, delta : float, optional
        The same budget given as numbers, ``Accountant(epsilon=2.0)``; give either ``total`` or
        ``epsilon`` (with ``delta``, default 0), never both.

    Raises
    ------
    ParameterError
        If ``total`` is not a :class:`PrivacyBudget`, both or neither of ``total`` and
        ``epsilon`` are given, or ``unit`` is not a unit of privacy.

    Examples
    --------
    >>> acct = Accountant(PrivacyBudget(1.0), unit="item_replace")
    >>> acct.spend(0.25, label="profile", unit="item")
    >>> acct.remaining, acct.ledger[0]["charged_epsilon"]
    (PrivacyBudget(epsilon=0.5, delta=0.0), 0.5)
    """

    total: PrivacyBudget = None  # type: ignore[assignment]  # set from epsilon when None
    unit: str | None = None
    _ledger: list[dict[str, Any]] = field(default_factory=list, repr=False)
    epsilon: InitVar[float | None] = None
    delta: InitVar[float] = 0.0

    def __post_init__(self, epsilon: float | None, delta: float) -> None:
        if (self.total is None) == (epsilon is None):
            raise ParameterError(message("total", "Accountant", "given once: a PrivacyBudget, "
                                         "or epsilon= (and delta=)", self.total))
        if epsilon is not None:
            self.total = PrivacyBudget(epsilon, delta)
        if not isinstance(self.total, PrivacyBudget):
            raise ParameterError(message("total", "Accountant", "a PrivacyBudget", self.total))
        if self.unit is not None:
            check_choice(self.unit, "unit", "Accountant", UNITS)

    def _charge(self, epsilon: float, delta: float, unit: str | None,
                func: str) -> tuple[Fraction, Fraction, str | None]:
        """The spend converted to the budget's unit; refused when relations would mix."""
        e, d = exact_fraction(epsilon), exact_fraction(delta)
        if self.unit is None and unit is not None:
            seen = {row["unit"] for row in self._ledger} - {None, unit}
            if seen:
                raise ParameterError(message(
                    "unit", func, f"{seen.pop()!r}, the unit already spent at (this accountant "
                    "keeps relations apart; state the budget's unit, e.g. Accountant(total, "
                    "unit='item_replace'), to convert where that is sound)", unit))
        return convert_spend(e, d, unit, self.unit, func)

    @property
    def spent_exact(self) -> tuple[Fraction, Fraction]:
        eps = sum((row["charged_epsilon"] for row in self._ledger), Fraction(0))
        dlt = sum((row["charged_delta"] for row in self._ledger), Fraction(0))
        return eps, dlt

    @property
    def spent(self) -> tuple[float, float]:
        """(ε, δ) spent so far."""
        eps, dlt = self.spent_exact
        return float(eps), float(dlt)

    @property
    def remaining(self) -> PrivacyBudget:
        """What is left, in the budget's unit (:attr:`unit`, or the one unit spent at when the
        accountant keeps relations apart): ``PrivacyBudget(epsilon=0.0, ...)`` once the ε budget
        is exhausted. It may be 0 or below the smallest ε a release accepts."""
        eps, dlt = self.spent_exact
        return PrivacyBudget._left(self.total.exact_epsilon - eps, self.total.exact_delta - dlt)

    @property
    def ledger(self) -> list[dict[str, Any]]:
        """Every spend, in order: label, ε, δ and unit as spent, source (``None`` when not
        given), the charge against the budget (``charged_epsilon``, ``charged_delta``) and
        ``conversion`` (the sentence saying how the unit was converted, or ``None``)."""
        return [{**row, **{k: float(row[k]) for k in
                           ("epsilon", "delta", "charged_epsilon", "charged_delta")}}
                for row in self._ledger]

    def check(self, epsilon: float, delta: float = 0.0, *, unit: str | None = None) -> None:
        """Raise :class:`BudgetExceededError` if spending (ε, δ) at ``unit`` would exceed the
        total (a ParameterError if the unit does not convert to the budget's)."""
        check_epsilon(epsilon, "epsilon", "Accountant.spend")
        check_delta(delta, "delta", "Accountant.spend")
        e, d, _ = self._charge(epsilon, delta, unit, "Accountant.spend")
        eps, dlt = self.spent_exact
        left_e = self.total.exact_epsilon - eps
        left_d = self.total.exact_delta - dlt
        if e > left_e or d > left_d:
            raise BudgetExceededError(
                f"spending (epsilon={float(e)!r}, delta={float(d)!r}) would exceed the budget: "
                f"remaining (epsilon={float(left_e)!r}, delta={float(left_d)!r}) of total "
                f"(epsilon={self.total.epsilon!r}, delta={self.total.delta!r}); no noise was drawn."
            )

    def spend(self, epsilon: float, delta: float = 0.0, *, label: str = "",
              unit: str | None = None, source: str | None = None) -> None:
        """Record a spend of (ε, δ), refusing it (before any noise) if it would overspend.

        ``label`` names what spent (the release function), ``unit`` the unit of privacy and
        ``source`` the data. The unit is converted to the budget's unit where sound, and the
        row records the conversion (see the class docstring).
        """
        self.check(epsilon, delta, unit=unit)
        e, d, note = self._charge(epsilon, delta, unit, "Accountant.spend")
        self._ledger.append({"label": str(label), "epsilon": exact_fraction(epsilon),
                             "delta": exact_fraction(delta), "unit": unit, "source": source,
                             "charged_epsilon": e, "charged_delta": d, "conversion": note})
