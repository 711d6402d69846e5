"""Privacy budgets and an explicit accountant.

There is no global or default accountant: a caller who wants to cap the total loss over several
releases creates an :class:`Accountant` (in memory) or a :class:`dpfreq.ledger.Ledger` (a SQLite
file shared by processes) and passes it to each release (``accountant=``), which calls
``spend`` after validating its parameters and **before** drawing any noise. Both satisfy the
:class:`BudgetAccountant` protocol, which is what release functions accept.

Arithmetic is exact: every ε and δ is held as a :class:`fractions.Fraction` of its shortest
decimal representation (``0.1`` is 1/10), so ten spends of 0.1 exactly exhaust a budget of 1.0.
"""

from __future__ import annotations

import math
from dataclasses import InitVar, dataclass, field
from fractions import Fraction
from typing import Any, Protocol, runtime_checkable

from dpfreq._validate import check_delta, check_epsilon, check_int, message
from dpfreq.errors import BudgetExceededError, ParameterError

__all__ = [
    "Accountant",
    "BudgetAccountant",
    "PrivacyBudget",
    "advanced_composition",
    "check_accountant",
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
    def remaining(self) -> PrivacyBudget | None: ...

    @property
    def ledger(self) -> list[dict[str, Any]]: ...

    def check(self, epsilon: float, delta: float = 0.0) -> None: ...

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
    epsilon, delta : float, optional
        The same budget given as numbers, ``Accountant(epsilon=2.0)``; give either ``total`` or
        ``epsilon`` (with ``delta``, default 0), never both.

    Raises
    ------
    ParameterError
        If ``total`` is not a :class:`PrivacyBudget`, or both or neither of ``total`` and
        ``epsilon`` are given.

    Examples
    --------
    >>> acct = Accountant(PrivacyBudget(1.0))
    >>> acct.spend(0.25, label="profile")
    >>> acct.remaining
    PrivacyBudget(epsilon=0.75, delta=0.0)
    """

    total: PrivacyBudget = None  # type: ignore[assignment]  # set from epsilon when None
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

    @property
    def spent_exact(self) -> tuple[Fraction, Fraction]:
        eps = sum((row["epsilon"] for row in self._ledger), Fraction(0))
        dlt = sum((row["delta"] for row in self._ledger), Fraction(0))
        return eps, dlt

    @property
    def spent(self) -> tuple[float, float]:
        """(ε, δ) spent so far."""
        eps, dlt = self.spent_exact
        return float(eps), float(dlt)

    @property
    def remaining(self) -> PrivacyBudget | None:
        """What is left, or ``None`` when the ε budget is exhausted."""
        eps, dlt = self.spent_exact
        left_e = self.total.exact_epsilon - eps
        left_d = self.total.exact_delta - dlt
        if left_e <= 0:
            return None
        return PrivacyBudget(float(left_e), float(max(left_d, Fraction(0))))

    @property
    def ledger(self) -> list[dict[str, Any]]:
        """Every spend, in order: label, ε, δ, unit and source (``None`` when not given)."""
        return [{**row, "epsilon": float(row["epsilon"]), "delta": float(row["delta"])}
                for row in self._ledger]

    def check(self, epsilon: float, delta: float = 0.0) -> None:
        """Raise :class:`BudgetExceededError` if spending (ε, δ) would exceed the total."""
        check_epsilon(epsilon, "epsilon", "Accountant.spend")
        check_delta(delta, "delta", "Accountant.spend")
        e, d = exact_fraction(epsilon), exact_fraction(delta)  # exactly what spend() records
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
        ``source`` the data; they are recorded as given and never affect the arithmetic.
        """
        self.check(epsilon, delta)
        self._ledger.append({"label": str(label), "epsilon": exact_fraction(epsilon),
                             "delta": exact_fraction(delta), "unit": unit, "source": source})
