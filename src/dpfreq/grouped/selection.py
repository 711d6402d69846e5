"""Private partition selection: which group names of the data may be published.

A grouped release without a public list of groups must not print a name just because it occurs
in the data: a group held by one item would reveal that item. The groups are instead chosen by
the **truncated geometric mechanism** on the number of items of each group (after each item was
bounded to at most ``m`` groups), the optimal partition selection for a per-group
``(ε', δ')`` (Desfontaines, Voss, Gipson & Mandayam 2022):

    release group g  ⇔  n_g + Z_g ≥ k + 1,   Z_g ~ TGeom(α, k) independent,  α = e^{-γ},

where ``TGeom(α, k)`` is the two-sided geometric law truncated to ``[−k, k]``,
``Pr[Z = z] = α^{|z|} / C`` with ``C = (1 + α − 2α^{k+1}) / (1 − α)``; ``γ = ε_sel/m`` and
``k`` is the smallest integer with ``p₁ = α^k / C ≤ δ_sel/m``. Only groups with ``n_g ≥ 1``
(present in the bounded data) are candidates; the noisy values are never published, only the
set of names passing the threshold.

**The exact law, and why it is optimal.** A group with ``n`` items is released with probability
``π_n = Pr[Z ≥ k + 1 − n]``: ``π_0 = 0``, ``π_1 = p₁`` and, while ``n ≤ k + 1``,
``π_n = e^γ π_{n−1} + p₁`` — the largest probability an ``(γ, p₁)``-DP one-bit mechanism may
give (DVGM22, Theorem 1: ``π_n ≤ min(e^γ π_{n−1} + δ, 1 − e^{−γ}(1 − δ − π_{n−1}))``); above
``k + 1`` the law is symmetric (``1 − π_n`` shrinks by ``α`` per item, the second bound). So no
``(γ, p₁)``-DP selection releases any group more often.

**Why it is (ε_sel, δ_sel)-DP at the unit of the counts.** Adding or removing one unit (an item
with its rows, or one row at ``unit="event"`` with ``m = 1``) changes ``n_g`` by at most 1 in at
most ``m`` groups and leaves the others unchanged. Per group the output is one bit whose
release probabilities for ``n`` and ``n + 1`` satisfy ``π_{n+1} ≤ e^γ π_n + p₁`` and
``1 − π_n ≤ e^γ (1 − π_{n+1}) + p₁`` (the recurrence above and its mirror), and for a group
present only with the added unit the bit is 1 with probability ``p₁`` and otherwise 0: each
touched group's bit is ``(γ, p₁)``-DP. Basic composition over the at most ``m`` touched groups
gives ``(m·γ, m·p₁) ≤ (ε_sel, δ_sel)``.

**Exact sampling.** ``γ`` is an exact fraction (rounded down: less privacy loss); ``Z`` is an
exact discrete Laplace draw (:func:`dpfreq.noise.sample_discrete_laplace`) conditioned on
``|Z| ≤ k`` by rejection, which is exactly ``TGeom(α, k)``; ``k`` is decided on 60-digit
logarithms with a margin (a closer call takes the next ``k``), so ``p₁ ≤ δ_sel/m`` holds
exactly. The selection's cost against the Laplace thresholding it replaces: the threshold falls
by about ``ln(1/γ)/γ`` items (e.g. 23 % at ``γ = 1/32``).
"""

from __future__ import annotations

import decimal
from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._docstrings import fill_doc
from dpfreq._validate import DELTA_CEILING, check_choice, check_epsilon, check_int, message
from dpfreq.accounting.mechanisms import PartitionSelection
from dpfreq.accounting.numbers import exp_bound, fixed_point
from dpfreq.errors import ParameterError, public_errors
from dpfreq.grouped.set_union import (
    SELECTION_PARAMETERS,
    SetUnionPlan,
    plan_set_union,
    set_union_weights,
)
from dpfreq.noise import epsilon_to_fraction, sample_discrete_laplace

__all__ = [
    "SELECTION_MECHANISMS",
    "SELECTION_SHARE",
    "ZCDP_DELTA_SHARE",
    "AnySelection",
    "SelectionPlan",
    "check_selection_delta",
    "check_selection_mechanism",
    "group_entries",
    "group_weights",
    "plan_partition_selection",
    "plan_selection",
    "sample_truncated_geometric",
    "select_groups",
    "selection_statement",
    "truncated_tail",
]

#: the values of ``selection=``: chosen from public parameters, or one mechanism
SELECTION_MECHANISMS = ("auto", "truncated_geometric", "set_union")


def selection_statement(counted: str, plan: Any = None) -> str:
    """How a release's groups were chosen, in its mechanism parameters (``counted``: what each
    group's noised count counts, e.g. ``"item count"``; ``plan``: the selection, whose
    mechanism is named)."""
    if getattr(plan, "mechanism", "") == "weighted_set_union":
        return ("private partition selection of the data's groups (weighted set union, exact: "
                "each item spreads one unit of weight over its kept groups; see 'selection')")
    return ("private partition selection of the data's groups (the truncated geometric "
            f"mechanism, exact, on each group's {counted}; see 'selection')")


def group_entries(counted: str, plan: Any, split: str) -> dict[str, Any]:
    """The last entries of a grouped release's ``mechanism_params``, in this order: how its
    groups were chosen (``"groups"``: a public list, or :func:`selection_statement` of
    ``counted`` and the selection ``plan``), how ε was shared (``"split"``) and, when the
    groups were selected, the selection itself (``"selection"``)."""
    if plan is None:
        return {"groups": "public list (rows of other groups dropped)", "split": split}
    return {"groups": selection_statement(counted, plan), "split": split,
            "selection": plan.to_dict()}


#: Share of a grouped call's ε spent on selecting the groups (the rest releases them).
SELECTION_SHARE = Fraction(1, 2)

#: Share of δ the selection keeps when the groups' releases compose in zCDP (the release takes
#: the rest; under pure accounting the selection keeps all of δ).
ZCDP_DELTA_SHARE = Fraction(1, 2)

_PRECISION = 60  # decimal digits: exp and ln are correctly rounded at this precision
_MARGIN = decimal.Decimal(10) ** -40  # closer calls take the next threshold (conservative)


def _decimal(gamma: Fraction) -> decimal.Decimal:
    return decimal.Decimal(gamma.numerator) / decimal.Decimal(gamma.denominator)


def _log_p1(k: int, gamma: Fraction) -> decimal.Decimal:
    """``−ln p₁(k) = −ln(α^k (1 − α) / (1 + α − 2α^{k+1}))`` to 60 digits (``α = e^{−γ}``)."""
    with decimal.localcontext() as ctx:
        ctx.prec = _PRECISION
        g = _decimal(gamma)
        alpha = (-g).exp()
        return k * g - (1 - alpha).ln() + (1 + alpha - 2 * alpha ** (k + 1)).ln()


def truncated_tail(j: int, gamma: Fraction, k: int) -> float:
    """``Pr[Z ≥ j]`` for ``Z ~ TGeom(e^{−γ}, k)`` (any integer ``j``)."""
    if j > k:
        return 0.0
    if j <= -k:
        return 1.0
    with decimal.localcontext() as ctx:
        ctx.prec = _PRECISION
        alpha = (-_decimal(gamma)).exp()
        norm = (1 + alpha - 2 * alpha ** (k + 1)) / (1 - alpha)
        if j >= 1:  # Σ_{z=j}^{k} α^z
            mass = (alpha ** j - alpha ** (k + 1)) / (1 - alpha)
            return float(mass / norm)
        below = (alpha ** (1 - j) - alpha ** (k + 1)) / (1 - alpha)  # Σ_{z=1-j}^{k} α^z
        return float(1 - below / norm)


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
        ``τ = k + 1``: a group is released when its noisy item count is at least ``τ``.

    Notes
    -----
    The noise is ``TGeom(e^{−γ}, k)`` with ``k = τ − 1`` (module docstring).
    """

    epsilon: float
    delta: float
    max_groups_per_item: int
    gamma: Fraction
    threshold: int
    why: str = ""

    mechanism = "truncated_geometric"
    #: what the engine counts per item for this selection (its rows in the group)
    per_item = "rows"

    @property
    def truncation(self) -> int:
        """``k``: the noise lies in ``[−k, k]``."""
        return self.threshold - 1

    def release_probability(self, count: int) -> float:
        """``π_count = Pr[count + Z ≥ τ]``: the chance a group with ``count`` items is released
        (0 for a group absent from the data)."""
        if count <= 0:
            return 0.0
        return truncated_tail(self.threshold - count, self.gamma, self.truncation)

    @property
    def single_item_probability(self) -> float:
        """``p₁``: the chance that a group held by one item is released (``≤ δ/m``)."""
        return self.release_probability(1)

    def count_for(self, probability: float, groups_per_item: int = 1) -> int:
        """The smallest item count released with at least ``probability`` (in (0, 1)):
        ``π_n`` grows with ``n`` and reaches 1 at ``n = 2k + 1``, so a bisection finds it
        (the same whatever number of groups the items hold)."""
        lo, hi = 1, 2 * self.truncation + 1
        while lo < hi:
            mid = (lo + hi) // 2
            if self.release_probability(mid) >= probability:
                hi = mid
            else:
                lo = mid + 1
        return lo

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
        return {"mechanism": "truncated geometric partition selection (Desfontaines, Voss, "
                             "Gipson & Mandayam 2022) on each group's item count, exact",
                "epsilon": self.epsilon, "delta": self.delta,
                "max_groups_per_item": self.max_groups_per_item, "gamma": str(self.gamma),
                "threshold": self.threshold, "truncation": self.truncation,
                "single_item_release_probability": self.single_item_probability,
                "items_for_half_chance": self.count_for(0.5),
                "items_for_95_percent": self.count_for(0.95),
                "why": self.why,
                "guarantee": f"(ε={self.epsilon:g}, δ={self.delta:g}): a group held by one "
                             f"item is released with probability "
                             f"{self.single_item_probability:.3g} <= δ/m"}


def check_selection_delta(delta: Any, what: str = "for private partition "
                          "selection") -> float:
    """δ of a selection (or, ``what`` saying so, of a grouped release): a number in (0, 1e-3]
    (selection without δ is impossible)."""
    rule = (f"a number in (0, 1e-3] {what} (a larger delta lets a release publish one record "
            "in a thousand outright)")
    if isinstance(delta, bool) or not isinstance(delta, int | float | np.integer | np.floating):
        raise ParameterError(message("delta", rule, delta))
    x = float(delta)
    if not 0.0 < x <= DELTA_CEILING:  # also refuses NaN
        raise ParameterError(message("delta", rule, delta))
    return x


@fill_doc(selection_parameters=SELECTION_PARAMETERS)
@public_errors("plan_selection")
def plan_selection(epsilon: float, delta: float, max_groups_per_item: int,
                   why: str = "") -> SelectionPlan:
    """Calibrate the selection: ``γ = ε/m`` and the exact truncation ``k`` (threshold
    ``τ = k + 1``).

    Parameters
    ----------
    [[selection_parameters]]

    Returns
    -------
    SelectionPlan
        ``k`` is the smallest integer with ``p₁ = α^k (1−α)/(1 + α − 2α^{k+1}) ≤ δ/m``
        (α = e^{-γ}), decided on logarithms correctly rounded to 60 digits; a comparison closer
        than 10^-40 takes the next integer, so the inequality holds exactly.

    Examples
    --------
    >>> plan = plan_selection(0.5, 1e-6, 2)
    >>> plan.threshold, plan.single_item_probability <= 1e-6 / 2
    (51, True)
    """
    eps = check_epsilon(epsilon, "epsilon")
    dlt = check_selection_delta(delta)
    m = check_int(max_groups_per_item, "max_groups_per_item", minimum=1)
    gamma = epsilon_to_fraction(epsilon_to_fraction(eps) / m)
    with decimal.localcontext() as ctx:
        ctx.prec = _PRECISION
        need = (decimal.Decimal(m) / decimal.Decimal(dlt)).ln()  # ln(m/δ), δ exact as a float
        # p₁(k) falls with k: the smallest k with −ln p₁(k) >= ln(m/δ) (+ margin), by doubling
        # then bisection (a few dozen 60-digit evaluations, whatever γ)
        hi = 1
        while _log_p1(hi, gamma) < need + _MARGIN:
            hi *= 2
        lo = 0
        while lo < hi:
            mid = (lo + hi) // 2
            if _log_p1(mid, gamma) >= need + _MARGIN:
                hi = mid
            else:
                lo = mid + 1
        k = lo
    return SelectionPlan(epsilon=eps, delta=dlt, max_groups_per_item=m, gamma=gamma,
                         threshold=k + 1, why=why)


def sample_truncated_geometric(gamma: Fraction, truncation: int, size: int,
                               generator: np.random.Generator) -> NDArray[np.int64]:
    """Exact ``TGeom(e^{−γ}, k)`` draws: exact discrete Laplace draws, those with
    ``|Z| > k`` drawn again (rejection: the accepted draws have exactly the truncated law)."""
    out = sample_discrete_laplace(gamma, size, rng=generator)
    bad = np.flatnonzero(np.abs(out) > truncation)
    while bad.size:
        out[bad] = sample_discrete_laplace(gamma, bad.size, rng=generator)
        bad = bad[np.abs(out[bad]) > truncation]
    return out


def select_groups(names: Sequence[str], counts: NDArray[np.int64], plan: Any,
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
    of exact truncated geometric noise ``TGeom(e^{-γ}, τ − 1)`` per candidate, compared with
    ``τ``.

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
    if isinstance(plan, SetUnionPlan):  # ``counts`` are the groups' set-union weights
        return plan.select(list(names), c, generator)
    noisy = c + sample_truncated_geometric(plan.gamma, plan.truncation, c.size, generator)
    chosen = [str(names[int(i)]) for i in np.flatnonzero(noisy >= plan.threshold)]
    return tuple(sorted(chosen))


#: a calibrated partition selection: the truncated geometric or the weighted set union
AnySelection = SelectionPlan | SetUnionPlan


def check_selection_mechanism(value: Any) -> str:
    """``selection=``: one of :data:`SELECTION_MECHANISMS`."""
    return check_choice(value, "selection", SELECTION_MECHANISMS)


@public_errors("plan_partition_selection")
def plan_partition_selection(epsilon: float, delta: float, max_groups_per_item: int,
                             mechanism: str = "auto") -> AnySelection:
    """The partition selection of one grouped call: the truncated geometric mechanism, the
    weighted set union (:mod:`dpfreq.grouped.set_union`), or with ``"auto"`` the one public
    parameters favour, with why.

    ``"auto"``: with ``m = 1`` the truncated geometric (optimal for one group per unit). With
    ``m >= 2`` both are calibrated at ``(ε, δ)`` and compared at the items a group needs to be
    released half the time: the truncated geometric needs ``n_TG`` whatever its items hold; the
    set union needs ``n_SU(s)`` when each item holds ``s`` groups, growing with ``s``. The
    break-even ``s*`` is the largest ``s`` with ``n_SU(s) <= n_TG``; the set union is chosen
    when ``2·s* >= m`` — it then needs no more items for every group whose items hold at most
    half the groups they may (``m`` is a bound, set above what most items hold), and the
    truncated geometric otherwise. Public parameters only: nothing here reads data.

    Examples
    --------
    >>> plan = plan_partition_selection(0.5, 1e-6, 8)
    >>> plan.mechanism, plan.why.split(":")[0]
    ('weighted_set_union', 'set union')
    >>> plan_partition_selection(0.5, 1e-6, 1).mechanism
    'truncated_geometric'
    """
    m = check_int(max_groups_per_item, "max_groups_per_item", minimum=1)
    if mechanism == "truncated_geometric":
        return plan_selection(epsilon, delta, m, why="given: selection='truncated_geometric'")
    dlt = check_selection_delta(delta)
    if mechanism == "set_union":
        return plan_set_union(epsilon, dlt, m, why="given: selection='set_union'")
    if m == 1:
        return plan_selection(epsilon, delta, m, why=(
            "truncated geometric: one group per unit (the set union would give each group the "
            "same ε, and the truncated geometric is the optimal selection for it)"))
    tg = plan_selection(epsilon, delta, m)
    su = plan_set_union(epsilon, dlt, m)
    n_tg = tg.count_for(0.5)
    s_star = max((s for s in range(1, m + 1) if su.count_for(0.5, s) <= n_tg), default=0)
    numbers = (f"a group is released half the time with {n_tg} items under the truncated "
               f"geometric, and under the set union with {su.count_for(0.5, 1)} items holding "
               f"1 group each, {su.count_for(0.5, m)} holding m = {m}; break-even at s* = "
               f"{s_star} groups per item")
    if 2 * s_star >= m:
        return replace(su, why=f"set union: {numbers} >= m/2 (public parameters only)")
    return replace(tg, why=f"truncated geometric: {numbers} < m/2 (public parameters only)")


def group_weights(gp: Any, plan: AnySelection, bounded: bool) -> NDArray[np.int64]:
    """Each group's selection count from the engine's grouped count-of-counts ``gp`` (asked
    with ``per_item=plan.per_item``): the weights of the set union; for the truncated
    geometric the items of each group (``bounded``), or its rows (one row per unit)."""
    n = len(gp.groups)
    if isinstance(plan, SetUnionPlan):
        return set_union_weights(gp.group_index, gp.counts, gp.prevalences, n, plan.scale)
    weights = gp.prevalences if bounded else gp.prevalences * gp.counts
    return np.bincount(gp.group_index, weights=weights, minlength=n).astype(np.int64)
