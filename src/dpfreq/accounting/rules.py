"""The composition rules an accountant admits releases by: ``basic`` and ``tight``.

Releases are chosen adaptively — the analyst reads one result before asking for the next, and
may choose the next mechanism and its ε from it — so a rule must be a *privacy filter*: it admits
a release only if the composed loss of everything admitted, under a theorem that allows adaptively
chosen mechanisms and parameters, stays within the total ``(ε, δ)`` (Rogers, Roth, Ullman & Vadhan
2016). A refused release runs nothing and reveals only the refusal, which depends on public
parameters and earlier outputs.

**basic** — the sum: admit while ``Σε_i <= ε`` and ``Σδ_i <= δ`` over the releases' stated
``(ε_i, δ_i)`` (basic composition is a valid filter, Rogers et al. 2016).

**tight** — with ``δ > 0``, δ is split once, at creation: ``δ_c = δ/2`` converts a Rényi
account into ε, and ``D = δ/2`` bounds the releases' own δ (the probability of their bad events,
:meth:`~dpfreq.accounting.losses.PrivacyLoss.bad_delta`). A release is admitted when
``Σ bad_i <= D`` and either branch holds over everything admitted with it:

* *sum branch*: ``Σ b_i <= ε``, with ``b_i`` the bound on each good output's loss (pure and
  ``(ε, δ)`` releases; a Gaussian release has none and closes this branch);
* *Rényi branch*: ``Σ τ_i <= B`` at one order ``α`` fixed at creation, with ``τ_i`` the order-α
  Rényi divergence of each release's good part and ``B`` the largest budget whose conversion
  (:func:`~dpfreq.accounting.renyi.renyi_epsilon`) at ``δ_c`` is within ε.

Why the whole is ``(ε, δ)``-DP: split every release's laws into their bad event and good part,
so that the bad events of the admitted releases together have probability at most
``E[Σ bad_i] <= D``. Off them, the hockey-stick divergence ``E[(1 − e^{ε−L})_+]`` of the
transcript splits over the two events "the sum branch held at the end" (there ``L <= Σ b_i <=
ε`` on every path, so the integrand is 0) and "only the Rényi branch held": there the filter
stopped at or before the stopping time of a single-order Rényi filter, whose
``E[e^{(α−1)L}] <= e^{(α−1)B}`` by optional stopping of the supermartingale
``e^{(α−1)(L_n − Σ τ_i)}`` (Feldman & Zrnic 2021, Theorem 3.1; Lécuyer 2021), and the pointwise
conversion inequality bounds the integral by ``δ_c``. So δ totals at most ``D + δ_c``. One order
is fixed because a filter that switched orders along the way would pay a union bound over them
(Lécuyer 2021); the order chosen (:func:`~dpfreq.accounting.renyi.best_order`) is the one at which
the budget admits the most small releases. With ``δ = 0`` only the sum branch exists and tight is
basic.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dpfreq.accounting.losses import PrivacyLoss, fraction_text
from dpfreq.accounting.numbers import fixed_point
from dpfreq.accounting.renyi import best_order, renyi_budget, renyi_epsilon

__all__ = ["COMPOSITIONS", "Cost", "Rule", "Totals", "admit", "refusal", "spent_epsilon"]

#: the composition rules an accountant or a ledger is created with
COMPOSITIONS = ("tight", "basic")

#: the share of a tight budget's δ that converts the Rényi account (the rest bounds the
#: releases' own δ), as in the filters of Rogers et al. (2016)
CONVERSION_SHARE = Fraction(1, 2)


@dataclass(frozen=True)
class Rule:
    """A total ``(ε, δ)`` and how releases are composed against it (module docstring).

    Examples
    --------
    >>> Rule.make("basic", Fraction(1), Fraction(1, 10**6)).describe()
    'basic: the stated epsilons and deltas add up'
    """

    composition: str
    epsilon: Fraction
    delta: Fraction
    order: Fraction | None
    renyi_budget: Fraction | None
    release_delta: Fraction
    conversion_delta: Fraction

    @classmethod
    def make(cls, composition: str, epsilon: Fraction, delta: Fraction) -> Rule:
        """The rule of a new accountant (``composition`` already checked).

        Examples
        --------
        >>> rule = Rule.make("tight", Fraction(5), Fraction(1, 10**6))
        >>> rule.order, rule.release_delta, round(float(rule.renyi_budget), 3)
        (Fraction(629, 100), Fraction(1, 2000000), 2.839)
        """
        if composition == "basic" or delta == 0:
            return cls(composition, epsilon, delta, None, None, delta, Fraction(0))
        conversion = delta * CONVERSION_SHARE
        order = best_order(epsilon, conversion)
        budget = fixed_point(renyi_budget(order, epsilon, conversion), up=False)
        return cls(composition, epsilon, delta, order, budget, delta - conversion, conversion)

    def header(self) -> dict[str, str]:
        """The rule as text entries (a ledger's header stores and hashes them)."""
        out = {"composition": self.composition,
               "release_delta": fraction_text(self.release_delta),
               "conversion_delta": fraction_text(self.conversion_delta)}
        if self.order is not None and self.renyi_budget is not None:
            out.update(order=fraction_text(self.order),
                       renyi_budget=fraction_text(self.renyi_budget))
        return out

    def describe(self) -> str:
        """The rule in one sentence."""
        if self.composition == "basic":
            return "basic: the stated epsilons and deltas add up"
        if self.order is None:
            return "tight with delta = 0: the sum (no delta to convert a Rényi account)"
        return (f"tight: the sum or a Rényi filter at order {float(self.order):.4g}; delta "
                f"{float(self.release_delta):.3g} for the releases' own delta, "
                f"{float(self.conversion_delta):.3g} for the conversion")


@dataclass(frozen=True)
class Cost:
    """What one admitted release (or declared plan) adds to each account of a rule."""

    epsilon: Fraction
    delta: Fraction
    bad: Fraction
    bound: Fraction | None
    renyi: Fraction | None

    @classmethod
    def of(cls, rule: Rule, epsilon: Fraction, delta: Fraction, loss: PrivacyLoss) -> Cost:
        """The cost of a release stating ``(ε, δ)`` whose loss is ``loss``."""
        renyi = fixed_point(loss.renyi(rule.order), up=True) if rule.order is not None else None
        return cls(epsilon, delta, loss.bad_delta(), loss.epsilon_bound(), renyi)

    def record(self) -> dict[str, str | None]:
        """Text entries (a ledger row stores them)."""
        return {"bad": fraction_text(self.bad),
                "bound": None if self.bound is None else fraction_text(self.bound),
                "renyi": None if self.renyi is None else fraction_text(self.renyi)}


@dataclass(frozen=True)
class Totals:
    """The accounts of everything admitted so far."""

    epsilon: Fraction = Fraction(0)
    delta: Fraction = Fraction(0)
    bad: Fraction = Fraction(0)
    bound: Fraction | None = Fraction(0)
    renyi: Fraction | None = Fraction(0)
    count: int = 0

    def plus(self, cost: Cost) -> Totals:
        """The accounts with one more admitted cost."""
        bound = None if self.bound is None or cost.bound is None else self.bound + cost.bound
        renyi = None if self.renyi is None or cost.renyi is None else self.renyi + cost.renyi
        return Totals(self.epsilon + cost.epsilon, self.delta + cost.delta, self.bad + cost.bad,
                      bound, renyi, self.count + 1)


def admit(rule: Rule, totals: Totals, cost: Cost) -> str | None:
    """The branch that admits ``cost`` after ``totals`` (``"sum"`` or ``"renyi"``), or None.

    Examples
    --------
    >>> rule = Rule.make("tight", Fraction(5), Fraction(1, 10**6))
    >>> from dpfreq.accounting.losses import PureDP
    >>> cost = Cost.of(rule, Fraction(1, 20), Fraction(0), PureDP(Fraction(1, 20)))
    >>> admit(rule, Totals(), cost), admit(rule, Totals(bound=Fraction(5)), cost)
    ('sum', 'renyi')
    """
    after = totals.plus(cost)
    if rule.composition == "basic":
        return "sum" if after.epsilon <= rule.epsilon and after.delta <= rule.delta else None
    if after.bad > rule.release_delta:
        return None
    if after.bound is not None and after.bound <= rule.epsilon:
        return "sum"
    if rule.renyi_budget is not None and after.renyi is not None \
            and after.renyi <= rule.renyi_budget:
        return "renyi"
    return None


def spent_epsilon(rule: Rule, totals: Totals) -> tuple[Fraction | None, str]:
    """``(ε, branch)``: what the admitted releases cost under the rule at its δ (None when
    no branch holds, as after an accountant of another rule), and the branch that gives it."""
    if rule.composition == "basic":
        return totals.epsilon, "sum"
    options: list[tuple[Fraction, str]] = []
    if totals.bound is not None:
        options.append((totals.bound, "sum"))
    if rule.order is not None and totals.renyi is not None:
        options.append((renyi_epsilon(rule.order, totals.renyi, rule.conversion_delta),
                        "renyi"))
    if not options:
        return None, "none"
    return min(options, key=lambda o: o[0])


def refusal(rule: Rule, totals: Totals, cost: Cost) -> str:
    """Why :func:`admit` refuses ``cost``, in words (public figures only; ε and δ written as
    symbols, so that the command line never reads them as its own options)."""
    after = totals.plus(cost)
    if rule.composition == "basic":
        return (f"the sum would reach ε={float(after.epsilon):.6g}, "
                f"δ={float(after.delta):.3g} of total ε={float(rule.epsilon):.6g}, "
                f"δ={float(rule.delta):.3g}")
    if after.bad > rule.release_delta:
        return (f"the releases' own δ would reach {float(after.bad):.3g}, above the "
                f"{float(rule.release_delta):.3g} the tight rule keeps for it (half of the "
                "total δ; the other half converts the Rényi account)")
    spent, _ = spent_epsilon(rule, after)
    shown = "no finite ε" if spent is None else f"ε={float(spent):.6g}"
    return (f"it would take the composed loss to {shown} (sum and Rényi filter both over) of "
            f"total ε={float(rule.epsilon):.6g}")


def totals_record(totals: Totals) -> dict[str, Any]:
    """The accounts as floats (for reports)."""
    return {"epsilon": float(totals.epsilon), "delta": float(totals.delta),
            "bad_delta": float(totals.bad),
            "bound": None if totals.bound is None else float(totals.bound),
            "renyi": None if totals.renyi is None else float(totals.renyi),
            "count": totals.count}
