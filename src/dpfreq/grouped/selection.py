"""Private partition selection: which group names of the data may be published.

A grouped release without a public list of groups must not print a name just because it occurs
in the data: a group held by one item would reveal that item. The groups are instead chosen by
**thresholded discrete Laplace noise** on the number of items of each group (after each item was
bounded to at most ``m`` groups):

    release group g  ⇔  n_g + Z_g ≥ τ,   Z_g ~ DLap(e^{-γ}) independent,  γ = ε_sel/m,

where ``τ`` is the smallest integer with ``m · Pr[1 + Z ≥ τ] ≤ δ``. Only groups with
``n_g ≥ 1`` (present in the bounded data) are candidates; the noisy values are never published,
only the set of names passing the threshold.

**Why it is (ε_sel, δ)-DP at the unit of the counts.** Adding or removing one unit (an item with
its rows, or one row at ``unit="event"`` with ``m = 1``) changes ``n_g`` by at most 1 in at most
``m`` groups and leaves the others unchanged. Per group the output is one bit. For a group
present on both sides, ``Pr[n + Z ≥ τ]`` and ``Pr[n + 1 + Z ≥ τ]`` differ by a factor at most
``e^γ`` (and so do their complements): the discrete Laplace law shifted by one. For a group that
exists only with the added unit (``n_g = 1``) the bit is 1 with probability
``p₁ = Pr[Z ≥ τ − 1] = α^{τ−1}/(1+α)`` (α = e^{-γ}) and 0 otherwise, while without it the
group is never a candidate: that group's bit is ``(0, p₁)``-DP. Basic composition over the at
most ``m`` touched groups gives ``(m·γ, m·p₁) ≤ (ε_sel, δ)``. In particular a group held by a
single item is published with probability ``p₁ ≤ δ/m ≤ δ``, and one item's ``m`` private
groups together with probability ``1 − (1 − p₁)^m ≤ δ``.

This is the Laplace thresholding of Korolova et al. (2009) and Wilson et al. (2020) with the
per-group budget split ``(ε/m, δ/m)`` of Desfontaines et al. (2022) for ``m`` groups per item,
on exact integer noise so that ``τ`` and ``p₁`` are exact.
"""

from __future__ import annotations

import decimal
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import DELTA_CEILING, check_epsilon, check_int, message
from dpfreq.accounting.mechanisms import PartitionSelection
from dpfreq.accounting.numbers import exp_bound, fixed_point
from dpfreq.errors import ParameterError
from dpfreq.noise import epsilon_to_fraction, sample_discrete_laplace

__all__ = [
    "SELECTION_SHARE",
    "ZCDP_DELTA_SHARE",
    "SelectionPlan",
    "check_selection_delta",
    "plan_selection",
    "select_groups",
    "selection_statement",
]

def selection_statement(counted: str) -> str:
    """How a release's groups were chosen, in its mechanism parameters (``counted``: what each
    group's noised count counts, e.g. ``"item count"``)."""
    return ("private partition selection of the data's groups (thresholded exact discrete "
            f"Laplace on each group's {counted}; see 'selection')")


#: Share of a grouped call's ε spent on selecting the groups (the rest releases them).
SELECTION_SHARE = Fraction(1, 2)

#: Share of δ the selection keeps when the groups' releases compose in zCDP (the release takes
#: the rest; under pure accounting the selection keeps all of δ).
ZCDP_DELTA_SHARE = Fraction(1, 2)

_PRECISION = 60  # decimal digits: exp and ln are correctly rounded at this precision
_MARGIN = decimal.Decimal(10) ** -40  # closer calls take the next threshold (conservative)


def _log_tail(k: int, gamma: Fraction) -> decimal.Decimal:
    """``−ln Pr[Z ≥ k] = kγ + ln(1 + e^{-γ})`` for an integer ``k ≥ 1``, to 60 digits."""
    with decimal.localcontext() as ctx:
        ctx.prec = _PRECISION
        g = decimal.Decimal(gamma.numerator) / decimal.Decimal(gamma.denominator)
        return k * g + (1 + (-g).exp()).ln()


def tail_probability(k: int, gamma: Fraction) -> float:
    """``Pr[Z ≥ k]`` of ``DLap(e^{-γ})`` for any integer ``k`` (symmetric law)."""
    if k >= 1:
        with decimal.localcontext() as ctx:
            ctx.prec = _PRECISION
            return float((-_log_tail(k, gamma)).exp())
    return 1.0 - tail_probability(1 - k, gamma)


@dataclass(frozen=True)
class SelectionPlan:
    """The calibrated partition selection of one grouped call.

    Attributes
    ----------
    epsilon, delta : float
        What the selection spends (ε of the selection, all of the call's δ).
    max_groups_per_item : int
        ``m``: groups one unit may touch (1 at ``unit="event"``).
    gamma : Fraction
        The per-group noise parameter ``γ = ε/m`` (rounded down to an exact fraction).
    threshold : int
        ``τ``: a group is released when its noisy item count is at least ``τ``.
    """

    epsilon: float
    delta: float
    max_groups_per_item: int
    gamma: Fraction
    threshold: int

    def release_probability(self, count: int) -> float:
        """``Pr[count + Z ≥ τ]``: the chance a group with ``count`` items is released (0 for
        a group absent from the data)."""
        if count <= 0:
            return 0.0
        return tail_probability(self.threshold - count, self.gamma)

    @property
    def single_item_probability(self) -> float:
        """``p₁``: the chance that a group held by one item is released (``≤ δ/m``)."""
        return self.release_probability(1)

    def count_for(self, probability: float) -> int:
        """The smallest item count released with at least ``probability`` (in (0, 1)).

        Solved on the closed-form tails (``Pr[Z ≥ k] = α^k/(1+α)`` for ``k ≥ 1``), then checked
        against :meth:`release_probability` a step either way.
        """
        with decimal.localcontext() as ctx:
            ctx.prec = _PRECISION
            g = decimal.Decimal(self.gamma.numerator) / decimal.Decimal(self.gamma.denominator)
            one_plus = 1 + (-g).exp()
            p = decimal.Decimal(probability)
            if p * one_plus <= 1:  # reached below τ: α^k/(1+α) >= p with k = τ - c >= 0
                k = int((-(p * one_plus).ln() / g).to_integral_value(decimal.ROUND_FLOOR))
                c = self.threshold - k
            else:  # above τ: 1 - α^j/(1+α) >= p with j = c - τ + 1 >= 1
                j = int((-((1 - p) * one_plus).ln() / g).to_integral_value(decimal.ROUND_CEILING))
                c = self.threshold + j - 1
        c = max(c, 1)
        while self.release_probability(c) < probability:
            c += 1
        while c > 1 and self.release_probability(c - 1) >= probability:
            c -= 1
        return c

    @property
    def loss(self) -> PartitionSelection:
        """The selection's privacy loss (:class:`dpfreq.accounting.PartitionSelection`): ``m``
        bits, each γ-DP or released with probability at most ``p₁ = α^{τ−1}/(1+α) <= δ/m``
        (rounded up on fractions)."""
        alpha_low = exp_bound(-self.gamma, up=False)
        p1 = fixed_point(exp_bound(-(self.threshold - 1) * self.gamma, up=True) / (1 + alpha_low),
                         up=True)
        return PartitionSelection(self.gamma, p1, self.max_groups_per_item)

    def to_dict(self) -> dict[str, Any]:
        """The plan in words and numbers (for ``mechanism_params``)."""
        return {"mechanism": "thresholded exact discrete Laplace on each group's item count",
                "epsilon": self.epsilon, "delta": self.delta,
                "max_groups_per_item": self.max_groups_per_item, "gamma": str(self.gamma),
                "threshold": self.threshold,
                "single_item_release_probability": self.single_item_probability,
                "items_for_half_chance": self.count_for(0.5),
                "items_for_95_percent": self.count_for(0.95),
                "guarantee": f"(ε={self.epsilon:g}, δ={self.delta:g}): a group held by one "
                             f"item is released with probability "
                             f"{self.single_item_probability:.3g} <= δ/m"}


def check_selection_delta(delta: Any, func: str, what: str = "for private partition "
                          "selection") -> float:
    """δ of a selection (or, ``what`` saying so, of a grouped release): a number in (0, 1e-3]
    (selection without δ is impossible)."""
    rule = (f"a number in (0, 1e-3] {what} (a larger delta lets a release publish one record "
            "in a thousand outright)")
    if isinstance(delta, bool) or not isinstance(delta, int | float | np.integer | np.floating):
        raise ParameterError(message("delta", func, rule, delta))
    x = float(delta)
    if not 0.0 < x <= DELTA_CEILING:  # also refuses NaN
        raise ParameterError(message("delta", func, rule, delta))
    return x


def plan_selection(epsilon: float, delta: float, max_groups_per_item: int,
                   func: str = "plan_selection") -> SelectionPlan:
    """Calibrate the selection: ``γ = ε/m`` and the exact threshold ``τ``.

    Parameters
    ----------
    epsilon : float
        ε spent on the selection.
    delta : float
        δ in (0, 1e-3].
    max_groups_per_item : int
        ``m >= 1``.
    func : str
        Public function name for error messages.

    Returns
    -------
    SelectionPlan
        ``τ`` is the smallest integer with ``m · α^{τ−1}/(1+α) ≤ δ`` (α = e^{-γ}), decided on
        logarithms correctly rounded to 60 digits; a comparison closer than 10^-40 takes the
        next integer, so the inequality holds exactly.

    Examples
    --------
    >>> plan = plan_selection(0.5, 1e-6, 2)
    >>> plan.threshold, plan.single_item_probability <= 1e-6 / 2
    (57, True)
    """
    eps = check_epsilon(epsilon, "epsilon", func)
    dlt = check_selection_delta(delta, func)
    m = check_int(max_groups_per_item, "max_groups_per_item", func, minimum=1)
    gamma = epsilon_to_fraction(epsilon_to_fraction(eps) / m)
    with decimal.localcontext() as ctx:
        ctx.prec = _PRECISION
        need = (decimal.Decimal(m) / decimal.Decimal(dlt)).ln()  # ln(m/δ), δ exact as a float
        g = decimal.Decimal(gamma.numerator) / decimal.Decimal(gamma.denominator)
        k = max(1, int(((need - (1 + (-g).exp()).ln()) / g).to_integral_value(
            rounding=decimal.ROUND_FLOOR)) - 1)
        while _log_tail(k, gamma) < need + _MARGIN:
            k += 1
        while k > 1 and _log_tail(k - 1, gamma) >= need + _MARGIN:
            k -= 1
    return SelectionPlan(epsilon=eps, delta=dlt, max_groups_per_item=m, gamma=gamma,
                         threshold=k + 1)


def select_groups(names: Sequence[str], counts: NDArray[np.int64], plan: SelectionPlan,
                  generator: np.random.Generator) -> tuple[str, ...]:
    """The names whose noisy item count reaches the threshold, sorted by name.

    Parameters
    ----------
    names : sequence of str
        The candidate groups of the (bounded) data: private, never published unselected.
    counts : numpy.ndarray of int64
        Each candidate's number of items (rows at ``unit="event"``), every entry ``>= 1``,
        after each unit was bounded to at most ``plan.max_groups_per_item`` groups.
    plan : SelectionPlan
        From :func:`plan_selection`.
    generator : numpy.random.Generator
        The release's random source (secure unless seeded).

    Returns
    -------
    tuple of str
        The selected names, in name order (an order that depends on the set alone); the noisy
        counts are discarded.

    Notes
    -----
    **Privacy.** With counts of sensitivity 1 in at most ``m`` groups per unit (one item with
    all its rows, or one row with ``m = 1``), the selected set is ``(plan.epsilon,
    plan.delta)``-DP under adding or removing one unit (module docstring): one vectorised draw
    of exact discrete Laplace noise ``DLap(e^{-γ})`` per candidate, compared with ``τ``.

    Examples
    --------
    >>> import numpy as np
    >>> plan = plan_selection(1.0, 1e-6, 1)
    >>> select_groups(["big", "tiny"], np.array([500, 1]), plan, np.random.default_rng(0))
    ('big',)
    """
    c = np.asarray(counts, dtype=np.int64)
    if len(names) != c.size or (c.size and int(c.min()) < 1):
        raise ValueError("select_groups needs one count >= 1 per candidate name")
    if c.size == 0:
        return ()
    noisy = c + sample_discrete_laplace(plan.gamma, c.size, rng=generator)
    chosen = [str(names[int(i)]) for i in np.flatnonzero(noisy >= plan.threshold)]
    return tuple(sorted(chosen))
