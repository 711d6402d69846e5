"""Plan a longitudinal collection from public parameters: the error statement its estimate will
carry, before any device reports.

:func:`plan_longitudinal` builds the protocol parameters (:func:`make_params`: the randomizer,
its exact gap ``c_gap`` per order) and evaluates the same half-widths the estimate states
(:func:`~dpfreq.longitudinal.result.error_widths`): they depend on the number of devices, the
horizon, the gaps and the confidence only, never on the states the devices report.
:meth:`LongitudinalPlan.epsilon_for` inverts it: the smallest ε meeting a target half-width.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._display import PlanSummary
from dpfreq._epsilon_search import smallest_epsilon
from dpfreq._validate import (
    check_choice,
    check_confidence,
    check_int,
    check_positive_float,
)
from dpfreq.accounting.plans import BudgetShare, with_budget_share
from dpfreq.errors import ParameterError, public_errors
from dpfreq.release import RELATIONS

from .params import make_params
from .result import error_widths

__all__ = ["MEASURES", "LongitudinalPlan", "plan_longitudinal"]

#: what :meth:`LongitudinalPlan.epsilon_for` can bound
MEASURES = ("half_width", "band_half_width")


@dataclass(frozen=True, repr=False)
class LongitudinalPlan(PlanSummary):
    """The error statement a longitudinal estimate will carry, from public parameters only.

    Attributes
    ----------
    horizon, max_changes, epsilon, devices, confidence : int, int, float, int, float
        The parameters planned for (``devices``: the number of devices that report).
    method : str
        The randomizer the devices will run (``"auto"`` resolved, as :func:`make_params`
        resolves it); ``requested_method`` is the one asked for.
    per_order_sparsity : bool
        As in :func:`make_params`.
    c_gap : float
        The exact gap of the sampled law (order 0's with ``per_order_sparsity``).
    halfwidth : numpy.ndarray
        Per period ``t = 1..horizon``, the half-width of the interval the estimate will state
        (in devices, each with probability ``>= confidence``); equal to the estimate's
        ``error.value``.
    band_halfwidth : numpy.ndarray
        Per period, the half-width of the simultaneous band (all periods at once).
    sd : numpy.ndarray
        Per period, the standard deviation of the estimate when no device is in state 1.
    vacuous : bool
        True when every interval is at least as wide as ``[0, devices]``.
    unit, relation : str
        ``"device"`` (one device's whole sequence of states) and the relation in words.
    budget : BudgetShare or None
        With ``accountant=`` (one kept at unit ``"device"``: a device's local budget over
        collections): what this collection would take from it and how many more fit.

    Examples
    --------
    >>> plan = plan_longitudinal(horizon=30, max_changes=4, epsilon=1.0, method="auto",
    ...                          devices=100_000)
    >>> plan.method, plan.halfwidth.shape
    ('threshold', (30,))
    >>> plan.epsilon_for(plan.max_halfwidth / 2) > 1.0
    True
    """

    horizon: int
    max_changes: int
    epsilon: float
    method: str
    devices: int
    confidence: float
    per_order_sparsity: bool
    c_gap: float
    halfwidth: NDArray[np.float64] = field(repr=False)
    band_halfwidth: NDArray[np.float64] = field(repr=False)
    sd: NDArray[np.float64] = field(repr=False)
    vacuous: bool
    unit: str = "device"
    relation: str = RELATIONS["device"]
    requested_method: str = field(default="auto", repr=False)
    budget: BudgetShare | None = None

    @property
    def max_halfwidth(self) -> float:
        """The largest per-period half-width."""
        return float(np.max(self.halfwidth))

    @public_errors("LongitudinalPlan.measure")
    def measure(self, name: str) -> float:
        """The largest per-period value of a measure of :data:`MEASURES`."""
        check_choice(name, "measure", MEASURES)
        values = self.halfwidth if name == "half_width" else self.band_halfwidth
        return float(np.max(values))

    @public_errors("LongitudinalPlan.epsilon_for")
    def epsilon_for(self, target: float, *, measure: str = "half_width") -> float:
        """The smallest ε (3 significant digits, rounded up) whose plan meets ``target``,
        every other parameter as planned.

        Parameters
        ----------
        target : float
            The largest acceptable half-width, in devices, over every period.
        measure : {"half_width", "band_half_width"}, keyword-only
            The per-period interval (default) or the simultaneous band.

        Raises
        ------
        ParameterError
            If the target is not a finite number > 0, the measure is unknown, or no ε up to
            1000 meets the target.
        """
        target = check_positive_float(target, "target")
        check_choice(measure, "measure", MEASURES)

        def value(eps: float) -> float:  # a ParameterError: no certified randomizer at ε
            return _plan(self, eps).measure(measure)

        return smallest_epsilon(value, target, planned=self.epsilon, what=measure)

    @public_errors("LongitudinalPlan.useful_epsilon")
    def useful_epsilon(self) -> float | None:
        """The smallest ε (3 significant digits, rounded up) at which the plan is not
        :attr:`vacuous`: some period's interval narrower than ``[0, devices]`` whatever the
        data (twice its half-width below ``devices``), every other parameter as planned; None
        when no ε up to 1000 gives that.

        Examples
        --------
        >>> plan = plan_longitudinal(horizon=30, max_changes=1, epsilon=0.2, method="auto",
        ...                          devices=1000)
        >>> bool(plan.vacuous), plan.useful_epsilon()
        (True, 0.937)
        """
        def value(eps: float) -> float:  # a ParameterError: no certified randomizer at ε
            return 2 * float(np.min(_plan(self, eps).halfwidth))

        try:
            return smallest_epsilon(value, math.nextafter(self.devices, 0),
                                    planned=self.epsilon)
        except ParameterError:
            return None

    def lines(self) -> list[str]:
        """What the estimate will state, one line per fact."""
        return [f"longitudinal: {self.devices} devices, horizon {self.horizon}, k = "
                f"{self.max_changes}, epsilon={self.epsilon:g} (local, unit {self.unit}), "
                f"method {self.method} (c_gap {self.c_gap:.6g})",
                f"per-period interval ± up to {self.max_halfwidth:.1f} devices and band ± up "
                f"to {float(np.max(self.band_halfwidth)):.1f} (confidence "
                f"{self.confidence:g})" + (f" (vacuous: no better than [0, devices]; "
                                           f"{self._fix()})" if self.vacuous else "")]

    def _fix(self) -> str:
        """What makes a vacuous plan useful: the ε of :meth:`useful_epsilon`, or more devices."""
        eps = self.useful_epsilon()
        if eps is None:
            return "no epsilon up to 1000 helps, more devices are needed"
        return (f"epsilon >= {eps:g} would make some period's interval narrower, whatever the "
                "data")

    def to_dict(self) -> dict[str, Any]:
        """The plan as a JSON-ready dictionary (arrays as lists)."""
        return {"horizon": self.horizon, "max_changes": self.max_changes,
                "epsilon": self.epsilon, "method": self.method, "devices": self.devices,
                "confidence": self.confidence, "per_order_sparsity": self.per_order_sparsity,
                "c_gap": self.c_gap, "halfwidth": self.halfwidth.tolist(),
                "band_halfwidth": self.band_halfwidth.tolist(), "sd": self.sd.tolist(),
                "vacuous": self.vacuous, "unit": self.unit, "relation": self.relation,
                "budget": None if self.budget is None else self.budget.to_dict()}


def _plan(base: LongitudinalPlan, epsilon: float) -> LongitudinalPlan:
    return plan_longitudinal(horizon=base.horizon, max_changes=base.max_changes,
                             epsilon=epsilon, method=base.requested_method,
                             devices=base.devices, confidence=base.confidence,
                             per_order_sparsity=base.per_order_sparsity)


@public_errors("plan_longitudinal")
def plan_longitudinal(*, horizon: int, max_changes: int, epsilon: float, method: str,
                      devices: int, confidence: float = 0.95,
                      per_order_sparsity: bool = False,
                      accountant: Any = None) -> LongitudinalPlan:
    """Predict the error statement of a longitudinal estimate from public parameters.

    Parameters
    ----------
    horizon, max_changes, epsilon : keyword-only
        Number of periods ``d``, change budget ``k`` per device, each device's local ε. No
        defaults.
    method : str, keyword-only
        The randomizer, as in :func:`make_params` (``"auto"`` recommended).
    devices : int, keyword-only
        The number of devices that will report (public, or a planning figure).
    confidence : float, keyword-only
        Confidence of the intervals and of the band (default 0.95).
    per_order_sparsity : bool, keyword-only
        As in :func:`make_params`.
    accountant : Accountant or Ledger, optional
        One kept at unit ``"device"`` (each device's local ε over collections; local reports
        are outside central accounting): say (``budget``) what this collection would take
        from it under its rule and how many more fit. Nothing is spent.

    Returns
    -------
    LongitudinalPlan
        The per-period half-widths the estimate of :func:`simulate_longitudinal`,
        :class:`LongitudinalAggregator` or :func:`aggregate_reports_file` states with the same
        parameters, and :meth:`LongitudinalPlan.epsilon_for`.

    Raises
    ------
    ParameterError
        A parameter out of range (as :func:`make_params` checks them; ``devices`` below 1).

    Notes
    -----
    Uses no data and spends no budget: the half-widths are Hoeffding's or Bernstein's bound
    over devices with the exact gaps of the sampled laws, functions of public values only.

    Examples
    --------
    >>> plan = plan_longitudinal(horizon=8, max_changes=2, epsilon=2.0, method="rr",
    ...                          devices=10_000, confidence=0.9)
    >>> plan.unit, bool(plan.vacuous)
    ('device', False)
    """
    params = make_params(horizon=horizon, max_changes=max_changes, epsilon=epsilon,
                         method=method, per_order_sparsity=per_order_sparsity)
    n = check_int(devices, "devices", minimum=1)
    conf = check_confidence(confidence, "confidence")
    half, band, var0 = error_widths(n, params.padded_horizon, params.horizon,
                                    np.asarray(params.c_gaps), conf)
    plan = LongitudinalPlan(
        horizon=params.horizon, max_changes=params.max_changes, epsilon=params.epsilon,
        method=params.method, devices=n, confidence=conf,
        per_order_sparsity=params.per_order_sparsity, c_gap=params.c_gap, halfwidth=half,
        band_halfwidth=band, sd=np.sqrt(var0), vacuous=bool(np.all(2 * half >= n)),
        requested_method=method)
    return with_budget_share(plan, accountant, epsilon=params.epsilon, delta=0.0,
                             unit="device")
