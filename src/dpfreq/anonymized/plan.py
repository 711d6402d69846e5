"""Accuracy before release: predict an anonymized histogram's error statement from public values.

:func:`plan_anonymized` uses only ε, the method, the confidence and a range of totals
``n_range`` the user expects — never the data:

* the half-width of the interval for the total is exact (it depends on ε1 and the confidence);
* the sorted-ℓ1 bound depends on the histogram's shape, which is private, so it is predicted on
  a public reference shape — the expected counts of a Zipf(1) sample of size ``n`` on ``n/2``
  items, a common model of password, word and degree frequencies — with the same simulation as
  the release's error statement. Above ``10^5`` the reference is simulated at ``n = 10^5`` and
  scaled by ``sqrt(n / 10^5)``, the rate of Suresh (2019, Theorem 1). It is a prediction for
  histograms of that shape, not a guarantee for every histogram;
* a range may start at ``n = 0`` (a dataset that may be empty): there the bound is the exact
  statement of a release with ``N = 0``, the top of the total's interval.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpfreq._display import PlanSummary
from dpfreq._docstrings import fill_doc
from dpfreq._validate import (
    check_choice,
    check_confidence,
    check_epsilon,
    check_int,
    check_positive_float,
    message,
)
from dpfreq.accounting.plans import ACCOUNTANT_PARAMETER, BudgetShare, with_budget_share
from dpfreq.anonymized import auto
from dpfreq.anonymized.accuracy import (
    MAX_WORKING_BYTES,
    run_plan,
    simulation_count,
    working_bytes,
    working_elements,
)
from dpfreq.anonymized.distance import l1_between
from dpfreq.anonymized.steps import I64, SimulationNoise, epsilon_fractions
from dpfreq.errors import ParameterError, public_errors
from dpfreq.noise import discrete_laplace_tail_bound
from dpfreq.release import RELATIONS
from dpfreq.rng import keyed_generator

__all__ = ["AnonymizedPlan", "epsilon_for_l1", "plan_anonymized", "reference_histogram"]

_SIM_TOTAL = 10**5  # largest reference total simulated directly
_RUNS = 39
_EPS_LOW, _EPS_HIGH = 0.01, 1000.0


@dataclass(frozen=True, repr=False)
class AnonymizedPlan(PlanSummary):
    """What a release at ``epsilon`` should say, predicted from public values only.

    Attributes
    ----------
    epsilon, confidence, method : float, float, str
        The planned release (``method`` as ``auto`` would run it).
    n_range : tuple of int
        The totals the user expects (public).
    total_halfwidth : int
        Exact: the release's interval for the true total is ``N ± total_halfwidth``.
    predicted_l1 : tuple of float
        Predicted sorted-ℓ1 bound at the ends of ``n_range`` (reference shape; see the module).
        At ``n = 0`` it is exact: what a release with ``N = 0`` states (``total_halfwidth``).
    vacuous : bool
        True when the predicted bound at the top of the range is no better than the trivial
        ``2n`` (never at ``n_range == (0, 0)``, as a release with ``N = 0`` is not flagged);
        ``description`` then names the ε that would make it useful.
    description : str
        One paragraph a person can read.
    unit, relation : str
        The unit of privacy the release protects (``"event"``, the only one this system
        supports) and its neighbouring relation in words.
    requested_method : str
        The ``method`` asked for (``"auto"`` included), which :meth:`epsilon_for` re-plans.
    budget : BudgetShare or None
        With ``accountant=``: what the release would take from it under its rule, and how
        many such releases still fit (:meth:`dpfreq.budget.Accountant.share`).

    Examples
    --------
    >>> plan_anonymized(n_range=(10_000, 100_000), epsilon=1.0).vacuous
    False
    """

    epsilon: float
    confidence: float
    method: str
    n_range: tuple[int, int]
    total_halfwidth: int
    predicted_l1: tuple[float, float]
    vacuous: bool
    description: str
    unit: str
    relation: str
    requested_method: str = field(default="auto", repr=False)
    budget: BudgetShare | None = None

    @public_errors("AnonymizedPlan.epsilon_for")
    def epsilon_for(self, target: float, *, measure: str = "l1_bound") -> float:
        """The smallest ε on the planner's grid (0.01 to 1000, 25 points) whose plan meets
        ``target``, every other parameter as planned (the method as requested, ``"auto"``
        re-choosing at each ε).

        Parameters
        ----------
        target : float
            The largest acceptable sorted-ℓ1 bound, in occurrences, at the top of ``n_range``.
        measure : {"l1_bound"}, keyword-only
            What to bound: the predicted sorted-ℓ1 bound (the one measure this planner
            predicts as a function of ε; the total's half-width is exact at the planned ε).

        Raises
        ------
        ParameterError
            If the target is not a finite number > 0, the measure is unknown, or no ε up to
            1000 meets the target.
        """
        target = check_positive_float(target, "target")
        check_choice(measure, "measure", ("l1_bound",))
        found = epsilon_for_l1(float(target), self.n_range[1], self.requested_method,
                               self.confidence)
        if found is None:
            raise ParameterError(message("target", "reachable with epsilon <= 1000 "
                                         "for the top of n_range", target))
        return found


def reference_histogram(n: int) -> tuple[I64, I64]:
    """Prevalence form of the expected counts of a Zipf(1) sample of size ``n`` on ``n/2``
    items (rounded; items rounded to 0 are left out)."""
    k = max(n // 2, 1)
    weights = 1.0 / np.arange(1, k + 1, dtype=np.float64)
    counts = np.rint(n * weights / weights.sum()).astype(np.int64)
    counts = counts[counts > 0]
    if counts.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    values, prev = np.unique(counts, return_counts=True)
    return values.astype(np.int64), prev.astype(np.int64)


def _predicted_l1(n: int, epsilon: float, plan: auto.Plan, confidence: float) -> float:
    """The simulated bound on the reference shape; ``inf`` when a release at this ε would be
    refused for its working memory (then nothing useful can be predicted either). At ``n = 0``
    the statement of a release with ``N = 0`` (exact): the top of the total's interval
    ``[0, q]``, ``q`` its half-width."""
    if n == 0:
        return float(discrete_laplace_tail_bound(1.0 - confidence,
                                                 epsilon_fractions(plan.split)[0]))
    sim_n = min(n, _SIM_TOTAL)
    if working_bytes(n, epsilon, plan) > MAX_WORKING_BYTES:
        return math.inf
    counts, prev = reference_histogram(sim_n)
    noise = SimulationNoise(keyed_generator(b"dpfreq-anonymized-plan", "plan", sim_n,
                                            repr(float(epsilon)), plan.method))
    runs = min(_RUNS, simulation_count(working_elements(sim_n, epsilon, plan), confidence,
                                       plan))
    errors = np.sort([l1_between(*_run(plan, counts, prev, epsilon, noise), counts, prev)
                      for _ in range(runs)])
    rank = math.ceil(confidence * (runs + 1))
    value = float(errors[min(rank, runs) - 1])
    return value * math.sqrt(n / sim_n)


def _run(plan: auto.Plan, counts: I64, prev: I64, epsilon: float,
         noise: SimulationNoise) -> tuple[I64, I64]:
    out = run_plan(plan, counts, prev, epsilon=epsilon, noise=noise)
    return out.counts, out.prevalences


def epsilon_for_l1(target: float, n: int, method: str = "auto",
                   confidence: float = 0.95) -> float | None:
    """Smallest ε on a geometric grid (0.01 to 1000, 25 points) whose predicted sorted-ℓ1
    bound at total ``n`` (Zipf(1) reference shape) is at most ``target``; ``None`` if none.

    Public values only. Used to name the ε that would make a vacuous statement useful. The
    target is rounded to two significant digits and the answer cached, so that the many
    property estimates of one release share the search.
    """
    rounded = float(f"{float(target):.2g}")
    return _epsilon_for_cached(rounded, max(int(n), 0), method, float(confidence))


@functools.lru_cache(maxsize=256)
def _epsilon_for_cached(target: float, n: int, method: str, confidence: float) -> float | None:
    grid = np.geomspace(_EPS_LOW, _EPS_HIGH, 25)
    lo, hi = 0, grid.size - 1
    if _grid_l1(n, float(grid[hi]), method, confidence) > target:
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if _grid_l1(n, float(grid[mid]), method, confidence) <= target:
            hi = mid
        else:
            lo = mid + 1
    return float(grid[lo])


@functools.lru_cache(maxsize=1024)
def _grid_l1(n: int, epsilon: float, method: str, confidence: float) -> float:
    """:func:`_predicted_l1` at a grid point (cached: searches for different targets at one
    total visit the same few points; the simulation is a function of these values alone)."""
    return _predicted_l1(n, epsilon, auto.plan_for(method, epsilon), confidence)


def _check_range(n_range: Any) -> tuple[int, int]:
    rule = "a pair (lo, hi) of integers with 0 <= lo <= hi <= 2**52"
    if isinstance(n_range, str | bytes) or not isinstance(n_range, tuple | list) or len(
            n_range) != 2:
        raise ParameterError(message("n_range", rule, n_range))
    lo = check_int(n_range[0], "n_range", minimum=0, maximum=2**52)
    hi = check_int(n_range[1], "n_range", minimum=lo, maximum=2**52)
    return lo, hi


def _plan_grouped(n_range: tuple[int, int], epsilon: Any, target_l1: Any, confidence: float,
                  method: str, group: Any, groups: Any, max_groups_per_item: Any,
                  delta: Any) -> Any:
    """The grouped plan: each group (total in ``n_range``) at ε (ε/2 with selection)."""
    if group is None:
        raise ParameterError(message("group", "the group column when groups, "
                                     "max_groups_per_item or delta is given", group))
    if max_groups_per_item is not None:
        raise ParameterError(message(
            "max_groups_per_item", "None at unit='event' (each row lies in exactly one "
            "group, so every group gets the full epsilon by parallel composition)",
            max_groups_per_item))
    if target_l1 is not None:
        raise ParameterError(message("target_l1", "None with group= (plan a grouped "
                                     "release at a given epsilon)", target_l1))
    from dpfreq.grouped.plan import plan_grouped

    eps = check_epsilon(epsilon, "epsilon")

    def plan_one(e: float, level: float | None) -> AnonymizedPlan:
        return plan_anonymized(n_range=n_range, epsilon=e, confidence=level or confidence,
                               method=method)

    def summary(p: AnonymizedPlan) -> str:
        return (f"total N ± {p.total_halfwidth} (exact), sorted-ℓ1 bound about "
                f"{p.predicted_l1[0]:.4g} .. {p.predicted_l1[1]:.4g} for group totals "
                f"{p.n_range[0]} .. {p.n_range[1]} (confidence {p.confidence:.6g}).")

    return plan_grouped(epsilon=eps, unit="event", max_groups_per_item=None, groups=groups,
                        delta=delta, plan_one=plan_one, summary=summary)


@fill_doc(accountant=ACCOUNTANT_PARAMETER)
@public_errors("plan_anonymized")
def plan_anonymized(*, n_range: tuple[int, int], epsilon: float | None = None,
                    target_l1: float | None = None, confidence: float = 0.95,
                    method: str = "auto", group: str | None = None, groups: Any = None,
                    max_groups_per_item: int | None = None,
                    delta: float | None = None, accountant: Any = None) -> Any:
    """Predict the error statement of an anonymized-histogram release, or the ε for a target.

    Parameters
    ----------
    n_range : (int, int)
        The smallest and largest total (number of occurrences) the data may have: public,
        ``0 <= lo <= hi``. At ``n = 0`` the prediction is the statement of a release with
        ``N = 0`` (exact: the top of the total's interval).
    epsilon : float, optional
        The ε to plan for. Give this or ``target_l1``.
    target_l1 : float, optional
        A sorted-ℓ1 bound wanted at the top of ``n_range``: the smallest ε on a grid from
        0.01 to 1000 whose predicted bound meets it is planned for.
    confidence : float
        Confidence of the statements (default 0.95).
    method : {"auto", "privhist", "privhist-tuned", "hay"}
        The method the release will use.
    group, groups, delta : optional
        Plan a grouped release (as in ``release_anonymized_histogram``; ``n_range`` is then the
        range of each group's total): each group at ε, or ε/2 with ``delta`` (which plans the
        private partition selection), and over a public list the simultaneous plan.
    max_groups_per_item : None
        Refused, as at release: at ``unit="event"`` each row lies in one group.
    [[accountant]]

    Returns
    -------
    AnonymizedPlan or GroupedPlan

    Raises
    ------
    ParameterError
        Both or neither of ``epsilon`` and ``target_l1``; invalid values; a target no ε up to
        1000 meets.

    Notes
    -----
    Uses no data and spends no budget. The total's half-width is exact; the ℓ1 prediction is
    for a Zipf(1)-shaped histogram (module docstring) and may be optimistic for histograms with
    many distinct large counts.

    Examples
    --------
    >>> p = plan_anonymized(n_range=(10_000, 100_000), epsilon=1.0)
    >>> p.total_halfwidth
    60
    """
    lo, hi = _check_range(n_range)
    confidence = check_confidence(confidence, "confidence")
    check_choice(method, "method", ("auto", "privhist", "privhist-tuned", "hay"))
    if any(x is not None for x in (group, groups, max_groups_per_item, delta)):
        grouped = _plan_grouped((lo, hi), epsilon, target_l1, confidence, method, group,
                                groups, max_groups_per_item, delta)
        return with_budget_share(grouped, accountant, epsilon=grouped.epsilon,
                                 delta=grouped.delta, unit="event")
    if (epsilon is None) == (target_l1 is None):
        raise ParameterError(message("epsilon", "given exactly when target_l1 is not",
                                     epsilon))
    if target_l1 is not None:
        target_l1 = check_positive_float(target_l1, "target_l1")
        found = epsilon_for_l1(target_l1, hi, method, confidence)
        if found is None:
            raise ParameterError(message("target_l1", "reachable with epsilon <= 1000 "
                                         "for the top of n_range", target_l1))
        epsilon = found
    epsilon = check_epsilon(epsilon, "epsilon")
    plan = auto.plan_for(method, epsilon)
    half = discrete_laplace_tail_bound(1.0 - confidence, epsilon_fractions(plan.split)[0])
    predicted = (_predicted_l1(lo, epsilon, plan, confidence),
                 _predicted_l1(hi, epsilon, plan, confidence))
    vacuous = hi > 0 and predicted[1] >= 2 * hi  # at n = 0 as the release at N = 0: not
    share = f" ({predicted[1] / hi:.2%} of n)" if hi > 0 else ""
    text = (f"At epsilon={epsilon:g} ({plan.method}), the release's interval for the total is "
            f"N ± {half} (exact, confidence {confidence:g}); its sorted-ℓ1 bound is predicted at "
            f"about {predicted[0]:.4g} for n = {lo} and {predicted[1]:.4g} for n = {hi}"
            f"{share}, for a Zipf(1)-shaped histogram.")
    if lo == 0:
        text += (f" At n = 0 (an empty dataset) a release that draws N = 0 states exactly "
                 f"{half}: the true total, which is the sorted-ℓ1 distance to the empty "
                 f"histogram it releases, is at most {half} with probability >= {confidence:g}.")
    if vacuous:
        useful = epsilon_for_l1(hi / 2, hi, method, confidence)
        text += (" This is no better than the trivial bound 2n: the release would carry little "
                 "information" + (f"; epsilon of about {useful:.3g} would bring the bound "
                                  f"under n/2." if useful is not None else "."))
    out = AnonymizedPlan(epsilon=epsilon, confidence=confidence, method=plan.method,
                         n_range=(lo, hi), total_halfwidth=half, predicted_l1=predicted,
                         vacuous=vacuous, description=text, unit="event",
                         relation=RELATIONS["event"], requested_method=method)
    return with_budget_share(out, accountant, epsilon=epsilon, delta=0.0, unit="event")
