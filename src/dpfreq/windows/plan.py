"""Accuracy of a window release before it is made, from public parameters alone.

:func:`plan_window_counts` runs the same structure choice as
:func:`~dpfreq.windows.release_window_counts`
(:func:`dpfreq.windows.structures.chooser.make_plan`, which reads no data) and evaluates, for
every released (window family, k), the per-answer interval
half-width the release will print: the noise of an answer is a signed sum of node noises with
a law fixed by the public parameters, so its variance and its tail bound are known before any
noise is drawn. :meth:`WindowCountsPlan.epsilon_for` inverts the prediction into the ε needed
for a target half-width. Planning spends no privacy budget.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._display import PlanSummary
from dpfreq._epsilon_search import round_up3, step3
from dpfreq._validate import (
    EPSILON_MAX,
    EPSILON_MIN,
    check_int,
    check_positive_float,
    message,
)
from dpfreq.accounting.losses import zcdp_loss
from dpfreq.accounting.plans import BudgetShare, with_budget_share
from dpfreq.errors import ParameterError, public_errors
from dpfreq.windows.params import PlanRequest, check_window_params
from dpfreq.windows.state import band_share, route
from dpfreq.windows.structures.chooser import family_label, make_plan
from dpfreq.windows.structures.protocol import WindowStructure

__all__ = ["USEFUL_FRACTION", "WindowCountsPlan", "plan_window_counts"]

#: a half-width at or below this fraction of ``scale`` is called useful (±10 % of the reach)
USEFUL_FRACTION = 0.1
_WORST_CHUNK = 8  # windows whose exact half-width is computed per step of _route_worst

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


def _label(w: Any) -> str:
    return family_label("rolling" if not isinstance(w, str) else w,
                        None if isinstance(w, str) else int(w))


def _route_halfwidth(structs: list[WindowStructure], t1: IntArray, t2: IntArray, beta: float,
                     *, exact: bool = True, band: bool = True
                     ) -> tuple[FloatArray, FloatArray]:
    """Per-answer and band half-widths of windows ``[t1, t2]`` as the release answers them.

    Each window goes to the structure with the smallest ``variance + bias²`` among those that
    can answer it (the release's routing); the half-width is that structure's tail bound at
    ``β`` plus its bias bound, the band's from its ``band_halfwidth`` at the structure's share
    of ``β`` (:func:`~dpfreq.windows.state.band_share`; ``band=False``: the band is not
    computed, NaN).
    """
    best = route(structs, t1, t2)
    beta_band = band_share(beta, best)
    half = np.full(t1.size, np.inf)
    band_half = np.full(t1.size, np.inf if band else np.nan)
    for idx, s in enumerate(structs):
        sel = np.flatnonzero(best == idx)
        if not sel.size:
            continue
        a, b = t1[sel], t2[sel]
        half[sel] = s.halfwidth(a, b, beta, exact=exact) + s.bias_bound()
        if band:
            band_half[sel] = s.band_halfwidth(a, b, beta_band, exact=exact) + s.bias_bound()
    return half, band_half


def _route_worst(structs: list[WindowStructure], t1: IntArray, t2: IntArray, beta: float
                 ) -> float:
    """The largest exact per-answer half-width of windows ``[t1, t2]`` (as
    :func:`_route_halfwidth` routes them), computing exact laws only where needed.

    The tail bounds are cheap and never below the exact half-widths, so the windows are taken in
    decreasing order of their bound, a few at a time, until the next bound is at most the
    largest exact half-width found: no later window can exceed it. Same value as
    ``_route_halfwidth(...)[0].max()``.
    """
    bound = _route_halfwidth(structs, t1, t2, beta, exact=False, band=False)[0]
    order = np.argsort(-bound, kind="stable")
    worst = -math.inf
    for start in range(0, order.size, _WORST_CHUNK):
        if bound[order[start]] <= worst:
            break
        idx = order[start:start + _WORST_CHUNK]
        half = _route_halfwidth(structs, t1[idx], t2[idx], beta, band=False)[0]
        worst = max(worst, float(half.max()))
    return worst


@dataclass(frozen=True)
class _Inputs:
    """What ``epsilon_for`` re-plans with: the plan's parameters and the confidence."""

    request: PlanRequest
    confidence: float


def _predict(inp: _Inputs, epsilon: float, only: tuple[str, int] | None = None, *,
             exact: bool = True) -> tuple[Any, dict[str, dict[int, Any]]]:
    """The calibrated plan and, per (family label, k), ``(curve half-widths or None, worst
    half-width, worst band half-width)``; ``only`` restricts the evaluation to one pair and,
    for the curve families, to its worst per-answer half-width (curve None, band NaN);
    ``exact=False`` uses the (larger, cheap) tail bounds instead of exact quantiles."""
    plan = make_plan(dataclasses.replace(inp.request, epsilon=epsilon))
    with np.errstate(divide="ignore"):  # a Chernoff grid point at λ → γ gives log(0) = −inf
        return plan, _evaluate(plan, inp, only, exact)


def _evaluate(plan: Any, inp: _Inputs, only: tuple[str, int] | None, exact: bool = True
              ) -> dict[str, dict[int, Any]]:
    beta = 1.0 - inp.confidence
    req = inp.request
    ts = np.arange(1, req.horizon + 1, dtype=np.int64)
    out: dict[str, dict[int, Any]] = {}
    for w in req.windows:
        label = _label(w)
        out[label] = {}
        for k in req.k_values:
            if only is not None and only != (label, k):
                continue
            structs = [s for (_, kk), s in plan.structures.items() if kk == k]
            if w == "all":
                own = plan.structures[(label, k)]
                t1, t2 = own.worst_windows()
                half, band = _route_halfwidth([own], t1, t2, beta, exact=exact,
                                              band=only is None)
                out[label][k] = (None, float(half.max()), float(band.max()))
                continue
            t2 = ts[-1:] if w == "total" else ts  # the whole period: one window
            if w in ("cumulative", "total"):
                t1 = np.ones_like(t2)
            else:
                t1 = np.maximum(1, ts - int(w) + 1)
                structs = [s for s in structs if s.family != "rolling" or s.width == w]
            if only is not None and exact:
                out[label][k] = (None, _route_worst(structs, t1, t2, beta),
                                 math.nan)
                continue
            half, band = _route_halfwidth(structs, t1, t2, beta, exact=exact,
                                          band=only is None)
            half.flags.writeable = False  # held by a frozen plan
            out[label][k] = (half, float(half.max()), float(band.max()))
    return out


@dataclass(frozen=True, repr=False)
class WindowCountsPlan(PlanSummary):
    """Predicted accuracy of a window release (all from public parameters).

    Attributes
    ----------
    horizon, epsilon, delta, unit, k_values, windows, confidence, singleton
        The parameters planned for (``windows`` checked and sorted as the release sorts them).
    scale : int or None
        The public reference reach the vacuity rule compares with (see :attr:`vacuous`).
    accounting : str
        How the budget is accounted (pure ε or zCDP), as the release will record it.
    methods : dict
        ``"label, k=K"`` → the structure the release would choose (``"tree"``, ...).
    halfwidth : dict
        ``halfwidth[label][k]``: for ``"cumulative"`` and ``"rolling(W=…)"``, an array over
        ``t = 1..T`` of the per-answer interval half-width (in items) the release will state
        at ``confidence``; equal to ``release.error.value[label][k]``.
    max_halfwidth : dict
        ``max_halfwidth[label][k]``: the largest per-answer half-width of the family; for
        ``"all"``, of the worst window answered by the all-windows structure (a window another
        released family answers with less variance gets that family's interval instead).
    band_halfwidth : dict
        ``band_halfwidth[label][k]``: the largest half-width of the simultaneous band (all
        answers of the family at once; ``band_halfwidth`` of
        :class:`~dpfreq.windows.structures.protocol.WindowStructure`).
        For consistent trees it is calibrated by simulation: the plan's public simulation
        predicts the release's, which draws under its secret key (within about 1 %).
    budget : BudgetShare or None
        With ``accountant=``: what the release would take from it under its rule, and how
        many such releases still fit (:meth:`dpfreq.budget.Accountant.share`).
    vacuous : dict
        ``vacuous[label][k]``: True when ``2 · max_halfwidth >= scale``, i.e. the interval is
        at least as wide as the trivial range ``[0, scale]`` a user who declares ``scale``
        already knows; None when no ``scale`` was given (not judged).

    Examples
    --------
    >>> from dpfreq.windows import plan_window_counts
    >>> plan = plan_window_counts(horizon=90, epsilon=0.01, unit="item", k_values=[1],
    ...                           scale=2_000, windows=["cumulative"])
    >>> plan.vacuous["cumulative"][1], plan.halfwidth["cumulative"][1].shape
    (True, (90,))
    >>> plan.lines()[0].endswith("epsilon >= 0.0806 would give ±10% of it")
    True
    """

    horizon: int
    epsilon: float
    delta: float
    unit: str
    k_values: tuple[int, ...]
    windows: tuple[Any, ...]
    confidence: float
    singleton: bool
    scale: int | None
    accounting: str
    methods: dict[str, str]
    halfwidth: dict[str, dict[int, FloatArray]]
    max_halfwidth: dict[str, dict[int, float]]
    band_halfwidth: dict[str, dict[int, float]]
    vacuous: dict[str, dict[int, bool | None]]
    _inputs: _Inputs = field(repr=False, compare=False)
    privacy_loss: Any = field(default=None, repr=False, compare=False)
    budget: BudgetShare | None = None

    def to_dict(self) -> dict[str, Any]:
        """The plan as a JSON-ready dictionary (arrays as lists, k as strings)."""
        def nest(d: Mapping[str, Mapping[int, Any]]) -> dict[str, dict[str, Any]]:
            return {lab: {str(k): (v.tolist() if isinstance(v, np.ndarray) else v)
                          for k, v in per_k.items()} for lab, per_k in d.items()}

        return {"horizon": self.horizon, "epsilon": self.epsilon, "delta": self.delta,
                "unit": self.unit, "k_values": list(self.k_values),
                "windows": list(self.windows), "confidence": self.confidence,
                "singleton": self.singleton, "scale": self.scale,
                "accounting": self.accounting, "methods": dict(self.methods),
                "halfwidth": nest(self.halfwidth), "max_halfwidth": nest(self.max_halfwidth),
                "band_halfwidth": nest(self.band_halfwidth), "vacuous": nest(self.vacuous),
                "budget": None if self.budget is None else self.budget.to_dict()}

    def _key(self, family: Any, k: Any) -> tuple[str, int]:
        labels = [_label(w) for w in self.windows]
        label = family if family in labels else (
            _label(family) if isinstance(family, str | int) and not isinstance(family, bool)
            else None)
        if label not in labels:
            raise ParameterError(message("family", f"one of the planned families "
                                         f"{labels}", family))
        kk = check_int(k, "k", minimum=1)
        if kk not in self.k_values:
            raise ParameterError(message("k", f"one of the planned k_values "
                                         f"{list(self.k_values)}", k))
        return str(label), kk

    @public_errors("WindowCountsPlan.epsilon_for")
    def epsilon_for(self, target: float, *, family: Any = "cumulative", k: int = 1) -> float:
        """The smallest total ε (3 significant digits, rounded up) at which the largest
        per-answer half-width of ``family`` and ``k`` is at most ``target`` items.

        Parameters
        ----------
        target : float
            The largest acceptable per-answer half-width, in items.
        family : keyword-only
            A planned window family (``"cumulative"``, ``"total"``, ``"all"``, a width ``W`` or
            its label ``"rolling(W=7)"``); default ``"cumulative"``.
        k : int, keyword-only
            A planned ``k`` (default 1).

        Every other parameter stays as planned (the budget is still split over every planned
        family and k). Bisection over ε on the (cheap, never smaller) tail bounds, then a walk
        on the grid of 3-significant-digit values with the exact half-widths of
        :func:`plan_window_counts`, starting from the 1/ε extrapolation; a budget too small to
        calibrate counts as unbounded.

        Raises
        ------
        ParameterError
            If the target is not a number > 0, the family or k was not planned, or the target
            is not met even at ε = 1000.
        """
        t = check_positive_float(target, "target")
        key = self._key(family, k)

        def value(eps: float, exact: bool = True) -> float:
            try:
                pred = _predict(self._inputs, eps, key, exact=exact)[1]
                return float(pred[key[0]][key[1]][1])
            except ParameterError:  # too small to calibrate any structure
                return math.inf

        # the tail bound is never below the exact half-width: when it meets the target at
        # ε = EPSILON_MAX, so does the exact one (the usual case; saves one exact evaluation)
        if value(EPSILON_MAX, exact=False) > t and value(EPSILON_MAX) > t:
            raise ParameterError(message("target", "reachable at ε <= "
                                         f"{EPSILON_MAX:g} for {key[0]}, k={key[1]}", t))
        lo, hi = self._bracket(value, t)
        if lo == hi:
            return EPSILON_MIN
        # the tail bounds are never below the exact half-widths, so the ε they need is an upper
        # end of the answer; they are cheap, so bisect on them first
        for _ in range(24):  # 24 halvings of a log-range <= 21: < 2e-6 relative
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if value(math.exp(mid), exact=False) > t else (lo, mid)
        eps_hi = math.exp(hi)
        # half-widths scale close to 1/ε: start the exact search at that guess, on the grid of
        # 3 significant digits, and step to the smallest grid value that meets the target
        guess = min(eps_hi, max(EPSILON_MIN, eps_hi * value(eps_hi) / t))
        cand = round_up3(guess)
        for _ in range(12):
            if value(cand) > t:
                cand = round_up3(cand * (1 + 1e-9) + step3(cand))
                continue
            below = float(f"{cand - step3(cand * (1 - 1e-9)):.3g}")
            if below < EPSILON_MIN or value(below) > t:
                return min(cand, EPSILON_MAX)
            cand = below
        return round_up3(eps_hi)

    def _bracket(self, value: Any, t: float) -> tuple[float, float]:
        """Log-ε interval with the target missed at its lower end and met at its upper end
        (exact half-widths); equal ends when even ε = EPSILON_MIN meets the target."""
        if value(self.epsilon) > t:  # bracket around the planned ε first
            return math.log(self.epsilon), math.log(EPSILON_MAX)
        if value(EPSILON_MIN) <= t:
            return 0.0, 0.0
        return math.log(EPSILON_MIN), math.log(self.epsilon)

    @public_errors("WindowCountsPlan.useful_epsilon")
    def useful_epsilon(self, *, family: Any = "cumulative", k: int = 1) -> float | None:
        """The ε at which the family's half-width falls to :data:`USEFUL_FRACTION` · ``scale``
        (None if beyond ε = 1000). Needs ``scale``."""
        if self.scale is None:
            raise ParameterError(message("scale", "given to plan_window_counts (the "
                                         "public reach the half-width is compared with)", None))
        try:
            return self.epsilon_for(USEFUL_FRACTION * self.scale, family=family, k=k)
        except ParameterError:
            return None

    def lines(self) -> list[str]:
        """One line per (family, k): the largest half-width, the band, the structure, and —
        when vacuous — the one-line warning naming the ε that would make it useful."""
        out = []
        conf = f"{self.confidence:g}"
        for label, per_k in self.max_halfwidth.items():
            for k, h in per_k.items():
                line = (f"{label}, k={k}: per-answer ±{h:,.0f} items (largest), band "
                        f"±{self.band_halfwidth[label][k]:,.0f}, confidence {conf}, "
                        f"method {self.methods[f'{label}, k={k}']}")
                if self.vacuous[label][k]:
                    useful = self.useful_epsilon(family=label, k=k)
                    fix = (f"epsilon >= {useful:g} would give ±{USEFUL_FRACTION:.0%} of it" if
                           useful is not None else f"no epsilon <= {EPSILON_MAX:g} gives "
                           f"±{USEFUL_FRACTION:.0%} of it")
                    line += (f" — VACUOUS: no narrower than the trivial range [0, "
                             f"{self.scale:,}]; {fix}")
                out.append(line)
        return out


@public_errors("plan_window_counts")
def plan_window_counts(
    *,
    horizon: int | None = None,
    start: Any = None,
    end: Any = None,
    period: Any = None,
    time_unit: str | None = None,
    timezone: str = "UTC",
    epsilon: float,
    delta: float = 0.0,
    unit: str,
    k_values: Sequence[int] | int,
    windows: Sequence[Any] | str | int,
    method: str | Mapping[Any, str] = "auto",
    singleton: bool = False,
    confidence: float = 0.95,
    scale: int | None = None,
    group: str | None = None,
    max_groups_per_item: int | str | None = None,
    groups: Any = None,
    selection_epsilon: float | str = "auto",
    selection: str = "auto",
    capping_epsilon: float | None = None,
    accountant: Any = None,
) -> Any:
    """Predict the intervals of :func:`~dpfreq.windows.release_window_counts` before running it.

    Parameters
    ----------
    horizon, start, end, period, time_unit, timezone, epsilon, delta, unit, k_values, windows, \
method, singleton, confidence, group, max_groups_per_item, groups, selection_epsilon, \
selection, capping_epsilon
        As in :func:`~dpfreq.windows.release_window_counts` (the same checks, the same
        structure choice, the same split of the budget).
    scale : int, optional
        A public reference reach in items (e.g. the audience size a user declares). A family
        is flagged vacuous when its interval is at least as wide as ``[0, scale]``; without
        ``scale`` nothing is flagged (there is no public bound on reach otherwise).
    accountant : Accountant or Ledger, optional
        Say (``budget``) how much of its remaining budget the release would take under its
        rule (with the release's own zCDP loss when the plan composes in zCDP) and how many
        such releases still fit; nothing is spent.

    Returns
    -------
    WindowCountsPlan

    Privacy
    -------
    Spends nothing: no data is read, only the public parameters, so planning has no privacy
    cost and needs no accountant.

    Notes
    -----
    The per-answer half-width is exactly the one the release states: the same structures are
    calibrated, each answer is routed to the structure with the smallest exact noise variance,
    and the half-width is that structure's certified quantile of the exact noise law at
    ``1 − confidence`` (the law of a sum of node noises by FFT convolution; for consistent
    tree estimates a grid-rounded convolution with its rounding error bounded), plus the bias
    bound of time compression. It does not depend on the data.

    Examples
    --------
    >>> from dpfreq.windows import plan_window_counts
    >>> plan = plan_window_counts(horizon=30, epsilon=1.0, unit="event", k_values=[1, 3],
    ...                           windows=["cumulative", 7], scale=1000)
    >>> sorted(plan.max_halfwidth)
    ['cumulative', 'rolling(W=7)']
    >>> plan.vacuous["cumulative"][1]
    False
    >>> plan.epsilon_for(plan.max_halfwidth["cumulative"][1] / 2, k=1) > 1.0
    True
    """
    sc = None if scale is None else check_int(scale, "scale", minimum=1)
    par = check_window_params(horizon=horizon, start=start, end=end, period=period,
                              time_unit=time_unit, timezone=timezone, epsilon=epsilon,
                              delta=delta, unit=unit, k_values=k_values,
                              windows=windows, method=method, singleton=singleton,
                              confidence=confidence)
    if capping_epsilon is not None and group is None:
        raise ParameterError(message("capping_epsilon", "None without group= (only a "
                                     "grouped release caps groups per item)", capping_epsilon))
    if group is not None or max_groups_per_item is not None or groups is not None:
        from dpfreq.windows.grouped.plan import plan_grouped_window_counts

        grouped = plan_grouped_window_counts(
            par, group, groups, max_groups_per_item,
            lambda eps, dlt, rho: window_plan(dataclasses.replace(par, epsilon=eps, delta=dlt),
                                              singleton, sc, rho), selection_epsilon,
            selection, capping_epsilon)
        return with_budget_share(grouped, accountant, epsilon=par.epsilon, delta=par.delta,
                                 unit=par.unit)
    out = window_plan(par, singleton, sc)
    return with_budget_share(out, accountant, epsilon=par.epsilon, delta=par.delta,
                             unit=par.unit, loss=out.privacy_loss)


def window_plan(par: Any, singleton: bool, sc: int | None,
                rho: float | None = None) -> WindowCountsPlan:
    """:func:`plan_window_counts` of checked parameters (``rho``: :func:`make_plan`'s)."""
    eps = par.epsilon
    inp = _Inputs(par.plan_request(singleton=singleton, rho=rho), par.confidence)
    plan, pred = _predict(inp, eps)
    halfwidth = {lab: {k: v[0] for k, v in per.items()} for lab, per in pred.items()
                 if lab != "all"}
    maxes = {lab: {k: v[1] for k, v in per.items()} for lab, per in pred.items()}
    vac = {lab: {k: (None if sc is None else bool(2 * h >= sc)) for k, h in per.items()}
           for lab, per in maxes.items()}
    return WindowCountsPlan(
        horizon=par.axis.horizon, epsilon=eps, delta=par.delta, unit=par.unit,
        k_values=par.k_values, windows=par.windows, confidence=par.confidence,
        singleton=singleton, scale=sc,
        accounting=plan.accounting,
        methods={name: rec["method"] for name, rec in plan.record.items()},
        halfwidth=halfwidth, max_halfwidth=maxes,
        band_halfwidth={lab: {k: v[2] for k, v in per.items()} for lab, per in pred.items()},
        vacuous=vac, _inputs=inp,
        privacy_loss=zcdp_loss([s.rho for s in plan.structures.values()]))

