"""Privacy budgets as values: an (ε, δ) pair, and how pairs compose in closed form.

:class:`PrivacyBudget` is what an accountant is given and what it has left; the functions here
state the classical closed forms on such pairs (basic and advanced composition, group privacy),
rounded up on fractions (:mod:`dpfreq.accounting.composition`). An accountant does better for
many releases (:mod:`dpfreq.accounting.rules`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from dpfreq._validate import check_delta, check_epsilon, check_int, message
from dpfreq.accounting.composition import advanced_epsilon, group_delta
from dpfreq.accounting.numbers import exact_fraction, float_at_least
from dpfreq.errors import ParameterError, public_errors

__all__ = ["PrivacyBudget", "advanced_composition", "group_privacy", "sequential_composition"]


def _stated(x: Fraction) -> float:
    """The float a budget states for ``x``: its nearest float when that float's shortest
    decimal (what an accountant records, :func:`exact_fraction`) is at least ``x``, else the
    smallest float above ``x``."""
    f = float(x)
    return f if exact_fraction(f) >= x else float_at_least(x)


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

    @public_errors("PrivacyBudget")
    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon, "epsilon"))
        object.__setattr__(self, "delta", check_delta(self.delta, "delta"))

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


@public_errors("sequential_composition")
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
        raise ParameterError(message("budgets", "non-empty", budgets))
    eps = sum((b.exact_epsilon for b in budgets), Fraction(0))
    dlt = sum((b.exact_delta for b in budgets), Fraction(0))
    return PrivacyBudget(float(eps), float(dlt))


@public_errors("advanced_composition")
def advanced_composition(budget: PrivacyBudget, k: int, delta_prime: float) -> PrivacyBudget:
    """k-fold adaptive composition (Dwork, Rothblum & Vadhan 2010).

    ``ε' = sqrt(2k ln(1/δ')) ε + k ε (e^ε − 1)`` and ``δ' + k δ``. Returns the smaller of this and
    basic composition's ε (both hold), rounded up (:func:`dpfreq.accounting.advanced_epsilon`).
    An accountant does better still for many releases (:mod:`dpfreq.accounting.rules`).

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
    k = check_int(k, "k", minimum=1)
    dp = check_delta(delta_prime, "delta_prime")
    if dp == 0:
        raise ParameterError(message("delta_prime", "> 0", delta_prime))
    e = budget.exact_epsilon
    eps_adv = advanced_epsilon(e, k, exact_fraction(dp))
    use_advanced = eps_adv < k * e
    dlt = k * budget.exact_delta + (exact_fraction(dp) if use_advanced else 0)
    if dlt >= 1:
        raise ParameterError(message("delta_prime",
                                     "small enough that the total δ stays < 1", delta_prime))
    return PrivacyBudget(_stated(min(eps_adv, k * e)), _stated(dlt))


@public_errors("group_privacy")
def group_privacy(budget: PrivacyBudget, group_size: int) -> PrivacyBudget:
    """Guarantee for groups of ``group_size`` individuals: (gε, (1 + e^ε + … + e^{(g−1)ε}) δ).

    A mechanism that is (ε, δ)-DP for one unit of privacy protects any ``g`` units together
    with this weaker guarantee (Dwork & Roth 2014, Theorem 2.2 for δ = 0; with δ by induction
    over a path of ``g`` neighbours, :func:`dpfreq.accounting.group_delta`). Rounded up.

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
    g = check_int(group_size, "group_size", minimum=1)
    dlt = group_delta(budget.exact_epsilon, budget.exact_delta, g)
    if dlt >= 1:
        raise ParameterError(message("group_size",
                                     "small enough that the group δ stays < 1", group_size))
    return PrivacyBudget(_stated(g * budget.exact_epsilon), _stated(dlt))
