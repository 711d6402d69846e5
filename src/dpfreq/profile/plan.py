"""Accuracy of a profile release before it is made, from public parameters alone.

:func:`plan_profile` predicts, for a domain size ``d``, a count cap ``n``, ε, the unit of
privacy, the method and a confidence level, the per-class interval half-width, the expected ℓ1
error and a high-probability ℓ1 bound; :meth:`ProfilePlan.epsilon_for` inverts these into the ε
needed for a target. Nothing here looks at data, so planning spends no privacy budget.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from dpfreq._display import PlanSummary
from dpfreq._docstrings import fill_doc
from dpfreq._epsilon_search import smallest_epsilon
from dpfreq._validate import (
    check_choice,
    check_confidence,
    check_epsilon,
    check_int,
    check_max_count,
    check_positive_float,
    check_unit,
    message,
    warn_large_delta,
)
from dpfreq.accounting.plans import ACCOUNTANT_PARAMETER, BudgetShare, with_budget_share
from dpfreq.errors import ParameterError, public_errors
from dpfreq.grouped.checks import check_ungrouped
from dpfreq.profile.direct import DOMAIN_LIMIT, direct_layout
from dpfreq.profile.intervals import direct_width_values
from dpfreq.release import RELATIONS, TABLE_UNITS

__all__ = [
    "MEASURES",
    "METHODS",
    "UNITS",
    "USEFUL_L1",
    "ProfileParams",
    "ProfilePlan",
    "check_profile_parameters",
    "choose_method",
    "plan_profile",
]

METHODS = ("auto", "direct", "fft", "mle")
UNITS = TABLE_UNITS
MEASURES = ("half_width", "band_half_width", "l1_error", "l1_bound")
USEFUL_L1 = 0.1  # an ℓ1 bound at or below this is called useful (5 % of the items misplaced)

_WHY_AUTO = ("auto chose direct: a one-shot release computes the exact count-of-counts anyway, "
             "and noising its classes is far more accurate than noising all d item counts, at "
             "every unit of privacy")
_SKETCH_UNIT = ("'event' with method={method!r}: the sketch noises each item's count at "
                "sensitivity 1, which covers one event, while one item's rows can move its "
                "count by up to max_count; use method='direct' or 'auto' for unit={unit!r}")


def choose_method(method: str, unit: str) -> tuple[str, str]:
    """The method to run and why, from public parameters only.

    ``"auto"`` always chooses ``"direct"``: this is the one-shot setting (the sketch methods
    exist for updatable and distributed sketches, :class:`dpfreq.profile.ProfileSketch`).
    ``unit="item"`` or ``"item_replace"`` with a sketch method is refused with the reason.
    """
    m = check_choice(method, "method", METHODS)
    if m == "auto":
        return "direct", _WHY_AUTO
    if unit != "event" and m != "direct":
        raise ParameterError(message("unit", _SKETCH_UNIT.format(method=m, unit=unit),
                                     unit))
    return m, f"method={m!r} was asked for"


@dataclass(frozen=True)
class ProfileParams:
    """The checked public parameters of a profile release or plan.

    Built by :func:`check_profile_parameters`; nothing in it comes from data.

    Attributes
    ----------
    domain_size : int
        The public number of items ``d``, ``1 <= d < 2^62``.
    max_count : int
        The public count cap ``n``.
    epsilon : float
        ε of the whole call.
    unit : str
        The unit of privacy, one of :data:`UNITS`.
    confidence : float
        The level of the intervals, the band and the ℓ1 bound.
    method : str
        The method to run (``"auto"`` already resolved by :func:`choose_method`).
    why : str
        Why this method.
    """

    domain_size: int
    max_count: int
    epsilon: float
    unit: str
    confidence: float
    method: str
    why: str


def check_profile_parameters(domain_size: Any, max_count: Any, epsilon: Any, unit: Any,
                             confidence: Any, method: Any) -> ProfileParams:
    """The parameters of a profile release or plan, checked (one-line errors naming the public
    call).

    The method is chosen by :func:`choose_method` (public parameters only).

    Examples
    --------
    >>> p = check_profile_parameters(100, 5, 1.0, "item", 0.95, "auto")
    >>> p.domain_size, p.max_count, p.unit, p.method
    (100, 5, 'item', 'direct')
    """
    d = check_int(domain_size, "domain_size", minimum=1, maximum=DOMAIN_LIMIT - 1)
    n = check_max_count(max_count)
    eps = check_epsilon(epsilon, "epsilon")
    u = check_unit(unit, UNITS)
    conf = check_confidence(confidence, "confidence")
    chosen, why = choose_method(method, u)
    return ProfileParams(domain_size=d, max_count=n, epsilon=eps, unit=u, confidence=conf,
                         method=chosen, why=why)


def _sketch_bound(d: int, n: int, epsilon: float, confidence: float) -> float:
    """Wu & Pagh's Theorem 1.1 ℓ1 bound (explicit constants) at this confidence, capped at 2."""
    from dpfreq.profile.bounds import sketch_l1_bound  # the kernel only when a sketch is planned

    return sketch_l1_bound(d, n, epsilon, confidence)


@dataclass(frozen=True, repr=False)
class ProfilePlan(PlanSummary):
    """Predicted accuracy of a profile release (all from public parameters).

    Attributes
    ----------
    domain_size, max_count, epsilon, unit, method, confidence
        The parameters planned for (``method`` after the ``auto`` choice).
    why : str
        Why this method.
    relation : str
        The neighbouring relation of ``unit``, in words.
    layout, layout_why : str or None
        ``direct``: ``"all classes"`` or ``"class 0 derived"``; ``layout_why`` gives the
        predicted errors of both layouts that chose it (public parameters only).
    half_width : float or None
        Half-width, in items, of the per-class interval of a noised class (``direct``: exact,
        before the projection's shift of typically 0–1 items). None for the sketch methods,
        whose intervals depend on the data.
    band_half_width : float or None
        Half-width, in items, of the simultaneous band over the noised classes (``direct``).
    class0_half_width, class0_band_half_width : float or None
        The same for class 0 (``direct``; with class 0 derived, from the law of the sum of
        the ``n`` other classes' noise).
    l1_error : float or None
        Expected ℓ1 distance (fractions) between the noisy count-of-counts and the truth:
        ``(n + 1) E|Z| / d``, or ``(n E|Z| + E|Z_1 + … + Z_n|) / d`` with class 0 derived; the
        projected release is usually a little better (``direct``).
    l1_bound : float
        ℓ1 bound (fractions, at most 2) holding with probability ``confidence``: twice the
        band's total width over ``d`` for ``direct`` (band plus projection), Wu & Pagh's
        Theorem 1.1 otherwise.
    vacuous : bool
        True when ``l1_bound`` reaches the trivial value 2.
    budget : BudgetShare or None
        With ``accountant=``: what the release would take from it under its rule, and how
        many such releases still fit (:meth:`dpfreq.budget.Accountant.share`).

    Examples
    --------
    >>> from dpfreq.profile import plan_profile
    >>> plan = plan_profile(domain_size=10**6, max_count=20, epsilon=0.5, unit="item")
    >>> plan.method, plan.vacuous, plan.half_width is not None
    ('direct', False, True)
    """

    domain_size: int
    max_count: int
    epsilon: float
    unit: str
    method: str
    confidence: float
    why: str
    half_width: float | None
    band_half_width: float | None
    l1_error: float | None
    l1_bound: float
    vacuous: bool
    relation: str = ""
    layout: str | None = None
    layout_why: str | None = None
    class0_half_width: float | None = None
    class0_band_half_width: float | None = None
    budget: BudgetShare | None = None

    def to_dict(self) -> dict[str, Any]:
        """The plan as a JSON-ready dictionary."""
        return asdict(self)

    @public_errors("ProfilePlan.measure")
    def measure(self, name: str) -> float:
        """The predicted value of one of :data:`MEASURES` (a ParameterError if not predicted)."""
        check_choice(name, "measure", MEASURES)
        value = getattr(self, name)
        if value is None:
            raise ParameterError(message("measure", "a measure predicted "
                                         f"for method={self.method!r} (the sketch methods only "
                                         "predict 'l1_bound')", name))
        return float(value)

    @public_errors("ProfilePlan.epsilon_for")
    def epsilon_for(self, target: float, *, measure: str = "l1_bound") -> float:
        """The smallest ε (3 significant digits, rounded up) whose plan meets ``target``.

        Parameters
        ----------
        target : float
            The largest acceptable value of ``measure`` (items for the half-widths, fractions
            for the ℓ1 measures).
        measure : {"half_width", "band_half_width", "l1_error", "l1_bound"}, keyword-only
            What to bound (default ``"l1_bound"``).

        Raises
        ------
        ParameterError
            If the target is not met even at ε = 1000 (or is not a number > 0).
        """
        target = check_positive_float(target, "target")
        self.measure(measure)

        def value(eps: float) -> float:
            return _plan(replace(self, epsilon=eps)).measure(measure)

        return smallest_epsilon(value, target, planned=self.epsilon, what=measure)

    def useful_epsilon(self) -> float | None:
        """The ε at which ``l1_bound`` falls to :data:`USEFUL_L1` (None if beyond ε = 1000)."""
        try:
            return self.epsilon_for(USEFUL_L1, measure="l1_bound")
        except ParameterError:
            return None


def _plan(p: ProfilePlan) -> ProfilePlan:
    """Fill the predictions of ``p`` for its parameters."""
    d, n, eps, conf = p.domain_size, p.max_count, p.epsilon, p.confidence
    if p.method == "direct":
        lay = direct_layout(p.unit, eps, n)
        q, q_band, q0, q0_band = direct_width_values(lay.gamma, n, conf,
                                                     derive_zero=lay.derive_zero)
        l1_error = min(2.0, lay.predicted_l1 / d)
        l1_bound = min(2.0, 2.0 * (n * q_band + q0_band) / d)
        return replace(p, half_width=float(q), band_half_width=float(q_band),
                       class0_half_width=float(q0), class0_band_half_width=float(q0_band),
                       layout="class 0 derived" if lay.derive_zero else "all classes",
                       layout_why=lay.why,
                       l1_error=l1_error, l1_bound=l1_bound, vacuous=l1_bound >= 2.0)
    bound = _sketch_bound(d, n, eps, conf)
    return replace(p, half_width=None, band_half_width=None, l1_error=None, l1_bound=bound,
                   vacuous=bound >= 2.0)


def _plan_grouped(blank: ProfilePlan, group: Any, max_groups_per_item: Any, groups: Any,
                  delta: Any, grouped_options: dict[str, Any]) -> Any:
    """The grouped plan: each group at the release's per-group ε, simultaneous over a list
    (``grouped_options``: ``selection_epsilon``, ``selection``, ``capping_epsilon``)."""
    if group is None:
        raise ParameterError(message("group", "the group column when "
                                     "max_groups_per_item, groups or delta is given", group))
    from dpfreq.grouped.bound_choice import resolve_auto
    from dpfreq.grouped.checks import check_bound
    from dpfreq.grouped.plan import plan_grouped

    bound, auto = resolve_auto(max_groups_per_item, grouped_options["capping_epsilon"],
                               blank.unit)
    _, m = check_bound(group, bound, blank.unit)

    def plan_one(eps: float, level: float | None) -> ProfilePlan:
        return _plan(replace(blank, epsilon=eps, confidence=level or blank.confidence))

    def summary(p: ProfilePlan) -> str:
        return (f"per-class interval ±{p.half_width:,.0f} items, band ±"
                f"{p.band_half_width:,.0f} items, ℓ1 bound {p.l1_bound:.3g} "
                f"(confidence {p.confidence:.6g}).")

    plan = plan_grouped(epsilon=blank.epsilon, unit=blank.unit, max_groups_per_item=m,
                        groups=groups, delta=delta, plan_one=plan_one,
                        summary=summary, auto=auto, **grouped_options)
    warn_large_delta(plan.delta, blank.domain_size, "the domain size")
    return plan


@fill_doc(accountant=ACCOUNTANT_PARAMETER)
@public_errors("plan_profile")
def plan_profile(*, domain_size: int, max_count: int, epsilon: float, unit: str,
                 method: str = "auto", confidence: float = 0.95, group: str | None = None,
                 max_groups_per_item: int | str | None = None, groups: Any = None,
                 delta: float | None = None, selection_epsilon: Any = "auto",
                 selection: Any = "auto", capping_epsilon: float | None = None,
                 accountant: Any = None) -> Any:
    """Predict the accuracy of :func:`dpfreq.profile.release_profile` before running it.

    Parameters
    ----------
    domain_size : int
        Public number of items ``d`` (``1 <= d < 2^62``).
    max_count : int
        Public count cap ``n``.
    epsilon : float
        ε of the planned release.
    unit : {"event", "item", "item_replace"}
        Unit of privacy (no default; the sketch methods support only ``"event"``).
    method : {"auto", "direct", "fft", "mle"}, default "auto"
        As in ``release_profile``.
    confidence : float, default 0.95
        Level of the intervals and of the ℓ1 bound.
    group, max_groups_per_item, groups, delta : optional
        Plan a grouped release (as in ``release_profile``): each group's plan at the per-group
        ε the release would use (:mod:`dpfreq.grouped.accounting`: ``ε/m``, or with ``delta``
        the zCDP one when larger; without ``groups``, ``delta`` also plans the private
        partition selection with half of ε), and over a public list of groups the
        simultaneous plan. Warns
        (:class:`~dpfreq.errors.PrivacyWarning`) when ``delta >= 1/domain_size``, as the release.
    selection_epsilon, selection, capping_epsilon : optional
        As in ``release_profile``: the selection's share of ε and its mechanism, and the share
        measuring the cap (the rest is planned). With ``max_groups_per_item="auto"``
        (``capping_epsilon`` required) every candidate ``m`` is planned (``plan.candidates``);
        the release chooses one privately.
    [[accountant]]

    Returns
    -------
    ProfilePlan or GroupedPlan

    Notes
    -----
    The ``direct`` predictions are exact for the noise law: with all classes noised (``event``,
    ``item_replace``) the per-class half-width ``q`` is the smallest integer with
    ``Pr[|Z| > q] <= 1 − confidence`` and the band's ``q_band`` the smallest with
    ``(1 − Pr[|Z| > q_band])^(n+1) >= confidence``, for ``Z ~ DLap(e^{−ε/2})``.
    With class 0 derived (``unit="item"``) the noise is ``DLap(e^{−ε})`` on the classes
    ``t ≥ 1`` and class 0's quantiles are those of the sum of ``n`` draws (exact law by
    convolution). They do not depend on the data (only the projection's small shift does).

    Examples
    --------
    >>> from dpfreq.profile import plan_profile
    >>> plan = plan_profile(domain_size=2_000_000, max_count=50, epsilon=1.0, unit="item")
    >>> plan.method, plan.layout, plan.half_width
    ('direct', 'class 0 derived', 3.0)
    """
    par = check_profile_parameters(domain_size, max_count, epsilon, unit, confidence, method)
    blank = ProfilePlan(domain_size=par.domain_size, max_count=par.max_count,
                        epsilon=par.epsilon, unit=par.unit, method=par.method,
                        confidence=par.confidence, why=par.why, half_width=None,
                        band_half_width=None, l1_error=None, l1_bound=2.0, vacuous=True,
                        relation=RELATIONS[par.unit])
    options = {"selection_epsilon": selection_epsilon, "selection": selection,
               "capping_epsilon": capping_epsilon}
    if any(x is not None for x in (group, max_groups_per_item, groups, delta)):
        out = _plan_grouped(blank, group, max_groups_per_item, groups, delta, options)
    else:
        check_ungrouped(**options)
        out = _plan(blank)
    return with_budget_share(out, accountant, epsilon=par.epsilon, delta=delta or 0.0,
                             unit=par.unit)
