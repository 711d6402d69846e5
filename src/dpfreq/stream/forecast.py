"""A stream's accuracy before it is created: what it would publish, from public parameters alone.

:func:`plan_reach_stream` takes the public parameters of :meth:`ReachStream.create
<dpfreq.stream.ReachStream.create>` (no data, no budget spent, nothing random), makes the same
plan (:func:`~dpfreq.stream.auto.plan_stream`: the counter, its node law and why) and returns
the per-period error of the answers the stream would publish: the exact standard deviation of
each period's noise, its certified per-answer half-width and the band's (the same functions the
stream's releases use, :mod:`dpfreq.stream.publish`), and, for a horizon ``T``, the half-width
of **re-releasing** the cumulative count every period at ``1/T`` of each structure's budget,
which is what a user without a stream does: ε/T each, or with δ > 0 ρ/T each (the T releases
compose in zCDP), whichever is narrower, whatever the stream itself uses.
The factorization's intervals also carry a floating-point allowance computed from the noisy
measurement (about ``10⁻¹²`` of the answers' magnitude), which a plan cannot know and leaves
out.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._epsilon_search import round_up3, smallest_epsilon
from dpfreq._validate import check_choice, check_positive_float, message
from dpfreq.errors import ParameterError, public_errors
from dpfreq.release import RELATIONS
from dpfreq.stream.auto import structure_budgets
from dpfreq.stream.capping import capping_counter
from dpfreq.stream.mechanisms import Budget
from dpfreq.stream.mechanisms.counter import Part, sum_halfwidth
from dpfreq.stream.mechanisms.intervals import SimpleLayout
from dpfreq.stream.mechanisms.law import calibrate
from dpfreq.stream.params import StreamParams, check_params
from dpfreq.stream.publish import halfwidths

__all__ = ["StreamForecast", "plan_reach_stream"]

#: what :meth:`StreamForecast.epsilon_for` can target
MEASURES = ("half_width", "band_half_width", "rmse")

#: periods an unbounded stream's forecast reports
UNBOUNDED_PERIODS = (1, 7, 30, 90, 365, 1000, 3650)

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class StreamForecast:
    """The predicted error of a stream's published answers (public parameters only).

    Every group and every k of a stream use the same counter and node law, so one curve of
    errors describes every answer.

    Attributes
    ----------
    method, why, accounting : str
        The counter the stream would use, why ``auto`` chose it, and how (ε, δ) is composed.
    horizon : int or None
        ``T``, or None for a stream without a horizon.
    unit : str
        The unit of privacy; ``relation`` its neighbouring relation in words.
    epsilon, delta : float
        The whole stream's budget, charged once at creation.
    k_values : tuple of int
        The k of the k+ reach curves.
    n_groups : int or None
        The number of public groups (None: ungrouped).
    max_groups_per_item : int or None
        ``m`` at ``unit="item"`` with groups.
    confidence : float
        The level of the intervals and of the band.
    periods : numpy.ndarray of int
        The periods forecast: ``1 … T``, or :data:`UNBOUNDED_PERIODS` without a horizon.
    sd : numpy.ndarray of float
        The exact standard deviation of an answer's noise at each period.
    half_width, band_half_width : numpy.ndarray of float
        The certified per-answer half-width at each period, and the band's (every answer of
        every period, group and k at once).
    rerelease_half_width, rerelease_sd : float or None
        Re-releasing the cumulative count every period at ``1/T`` of each structure's budget:
        its per-answer half-width and standard deviation (None without a horizon).

    Examples
    --------
    >>> f = plan_reach_stream(horizon=365, k_values=[1], unit="item", epsilon=1.0, delta=0.0,
    ...                       method="auto")
    >>> f.method, round(f.rmse, 1), bool(f.rerelease_sd > 40 * f.rmse)
    ('tree', 11.9, True)
    """

    method: str
    why: str
    accounting: str
    horizon: int | None
    unit: str
    relation: str
    epsilon: float
    delta: float
    k_values: tuple[int, ...]
    n_groups: int | None
    max_groups_per_item: int | None
    confidence: float
    periods: NDArray[np.int64]
    sd: FloatArray
    half_width: FloatArray
    band_half_width: FloatArray
    rerelease_half_width: float | None
    rerelease_sd: float | None
    _params: StreamParams | None = field(default=None, repr=False, compare=False)

    @property
    def rmse(self) -> float:
        """The root mean squared error of the answers over :attr:`periods` (what ``auto``
        compares for a horizon)."""
        return float(np.sqrt(np.mean(self.sd ** 2)))

    def measure(self, measure: str) -> float:
        """The forecast's worst ``"half_width"`` or ``"band_half_width"`` over its periods, or
        its ``"rmse"`` (with a horizon)."""
        check_choice(measure, "measure", MEASURES)
        if measure == "rmse":
            if self.horizon is None:
                raise ParameterError(message("measure", "'half_width' or 'band_half_width' "
                                             "for a stream without a horizon (its RMSE "
                                             "grows without end)", measure))
            return self.rmse
        return float(np.max(getattr(self, measure)))

    @public_errors("StreamForecast.epsilon_for")
    def epsilon_for(self, target: float, *, measure: str = "half_width") -> float:
        """The smallest ε (3 significant digits, rounded up) whose forecast meets ``target``,
        every other parameter as planned (``auto`` may choose another counter there).

        Parameters
        ----------
        target : float
            The largest acceptable value of ``measure``, in items.
        measure : {"half_width", "band_half_width", "rmse"}, keyword-only
            The largest per-answer half-width over the periods (default), the largest band
            half-width, or the RMSE over ``1 … T`` (with a horizon only).

        Raises
        ------
        ParameterError
            If the target is not a finite number > 0, the measure is unknown, or no ε up to
            1000 meets the target.
        """
        target = check_positive_float(target, "target")
        self.measure(measure)  # checks the measure before any search

        params = self._params
        assert params is not None  # made by plan_reach_stream

        def value(eps: float) -> float:  # a ParameterError: no counter calibrates at ε
            return _forecast(dataclasses.replace(params, epsilon=eps, capping_epsilon=None)
                             ).measure(measure)

        cap = params.capping_epsilon
        if cap is None:
            return smallest_epsilon(value, target, planned=self.epsilon, what=measure)
        # the reach counters' smallest ε, plus the fixed share that measures the cap
        found = smallest_epsilon(value, target, planned=params.counters_epsilon, what=measure)
        out = round_up3(found + cap)
        while dataclasses.replace(params, epsilon=out).counters_epsilon < found:
            out = round_up3(out, 1)
        return out

    def lines(self, rows: int = 8) -> list[str]:
        """The forecast as printed by ``dpfreq plan stream`` (at most ``rows`` periods, the
        first and the last among them)."""
        conf = self.confidence
        where = (f"over T={self.horizon} periods" if self.horizon is not None
                 else "without a horizon")
        grouped = "" if self.n_groups is None else (
            f"; {self.n_groups} groups" + (f" (an item counts in at most "
                                           f"{self.max_groups_per_item})"
                                           if self.max_groups_per_item else ""))
        out = [f"# plan: reach stream {where}, epsilon={self.epsilon:g}, delta={self.delta:g}, "
               f"unit {self.unit} ({self.relation}); k {','.join(map(str, self.k_values))}"
               f"{grouped}; {self.accounting}",
               f"# method {self.method}: {self.why}",
               f"# every group and k: the same error; ± = {conf:.0%} per-answer interval "
               f"(certified), band = every answer of every period, group and k at once"]
        par = self._params
        if par is not None and par.capping_epsilon is not None:
            out.insert(1, f"# capping_epsilon={par.capping_epsilon:g} of epsilon measures the "
                          "pairs the cap dropped; the reach counters (and the re-release "
                          f"baseline) spend {par.counters_epsilon:g}")
        shown = _shown(self.periods.size, max(2, int(rows)))
        table = [("period", "sd", "±", "band ±")] + [
            (str(self.periods[i]), f"{self.sd[i]:.3g}", f"{self.half_width[i]:.0f}",
             f"{self.band_half_width[i]:.0f}") for i in shown]
        width = [max(len(r[c]) for r in table) for c in range(4)]
        out += ["  ".join(cell.rjust(w) for cell, w in zip(r, width, strict=True))
                for r in table]
        if self.horizon is None:
            out.append("# no horizon: re-releasing every period has no fixed share of the "
                       "budget to compare with")
            return out
        out.append(f"# RMSE over periods 1..{self.horizon}: {self.rmse:.3g}")
        if self.rerelease_half_width is None or self.rerelease_sd is None:
            out.append(f"# re-releasing every period at 1/{self.horizon} of the budget cannot "
                       "be calibrated (the share is too small)")
        else:
            out.append(f"# re-releasing the cumulative count every period at 1/{self.horizon} "
                       f"of the budget instead: ±{self.rerelease_half_width:.0f} per answer, "
                       f"sd {self.rerelease_sd:.3g}" + (
                           f", {self.rerelease_sd / self.rmse:.3g}× the stream's RMSE"
                           if self.rmse > 0 else ""))
        return out

    def to_dict(self) -> dict[str, Any]:
        """The forecast, JSON-ready."""
        return {"method": self.method, "why": self.why, "accounting": self.accounting,
                "horizon": self.horizon, "unit": self.unit, "relation": self.relation,
                "epsilon": self.epsilon, "delta": self.delta, "k_values": list(self.k_values),
                "n_groups": self.n_groups, "max_groups_per_item": self.max_groups_per_item,
                "confidence": self.confidence, "periods": self.periods.tolist(),
                "sd": self.sd.tolist(), "half_width": self.half_width.tolist(),
                "band_half_width": self.band_half_width.tolist(),
                "rmse": self.rmse if self.horizon is not None else None,
                "rerelease_half_width": self.rerelease_half_width,
                "rerelease_sd": self.rerelease_sd,
                "capping_epsilon": None if self._params is None else
                self._params.capping_epsilon}


def _shown(n: int, rows: int) -> list[int]:
    """Indices of at most ``rows`` periods spread from the first to the last."""
    if n <= rows:
        return list(range(n))
    return sorted({round(i * (n - 1) / (rows - 1)) for i in range(rows)})


def _rerelease(par: StreamParams, beta: float) -> tuple[float, float] | None:
    """``(half-width, sd)`` of one period's cumulative count released alone at ``1/T`` of a
    structure's budget, in the better of the accountings the budget allows (pure ε/T each, or
    with δ > 0 ρ/T each: T releases compose in zCDP), whichever the stream itself uses, and
    the better of the node laws."""
    best: tuple[float, float] | None = None
    assert par.horizon is not None
    l1, l2 = SimpleLayout(1).sensitivity(par.unit)
    for b, _ in structure_budgets(par.counters_epsilon, par.delta, len(par.k_values),
                                  par.max_groups_per_item):
        share = Budget(b.epsilon / par.horizon,
                       None if b.rho is None else b.rho / par.horizon)
        for kind in share.kinds():
            law = calibrate(share, kind, l1, l2)
            if law is None:
                continue
            half = sum_halfwidth([Part(law, 1)], beta)
            if best is None or half < best[0]:
                best = (half, math.sqrt(law.variance))
    return best


@public_errors("plan_reach_stream")
def plan_reach_stream(*, horizon: int | None, k_values: Any, unit: str, epsilon: float,
                      delta: float, method: str, group: Any = None, groups: Any = None,
                      max_groups_per_item: Any = None, confidence: float = 0.95,
                      capping_epsilon: Any = None) -> StreamForecast:
    """Predict the error of a reach stream before creating it (no data, no budget spent).

    Takes the public parameters of :meth:`dpfreq.stream.ReachStream.create` that fix its
    accuracy and makes the plan the stream would make; nothing is charged and nothing random
    runs, so planning is free. The stream would be ``(epsilon, delta)``-DP at ``unit`` for its
    whole life (its privacy guarantee is the created stream's, see its docstring).

    Parameters
    ----------
    horizon : int or None
        ``T``, the number of periods, or None for a stream without a horizon.
    k_values : sequence of int
        The k of the k+ reach curves.
    unit : {"event", "item", "item_replace"}
        The unit of privacy (no default).
    epsilon, delta : float
        The whole stream's budget.
    method : str
        ``"auto"`` or a counter (as ``create``).
    group : str or None
        The group column (with ``groups``, as ``create``; its name changes nothing here).
    groups : sequence of str, path or None
        The public group names or a file of them, one per line (their number sets the band).
    max_groups_per_item : int or None
        ``m`` with groups at ``unit="item"`` (required there, as in ``create``).
    confidence : float
        The level of the intervals and the band.
    capping_epsilon : float or None
        The share of ``epsilon`` that would measure what the cap dropped (as ``create``):
        the reach counters are planned at ``epsilon − capping_epsilon``.

    Returns
    -------
    StreamForecast
        The per-period standard deviations, interval and band half-widths, and (with a
        horizon) the re-release baseline.

    Examples
    --------
    >>> f = plan_reach_stream(horizon=30, k_values=[1], unit="item", epsilon=1.0, delta=0.0,
    ...                       method="auto")
    >>> f.method, f.periods.size, bool(f.rerelease_sd > 7 * f.rmse)
    ('simple', 30, True)
    """
    # the checks of create; the item and time columns play no part in the accuracy
    par = check_params(item="item", time="time", horizon=horizon, start=None,
                       period=None, k_values=k_values, unit=unit, epsilon=epsilon,
                       delta=delta, method=method, group=group, groups=groups,
                       max_groups_per_item=max_groups_per_item, late="error",
                       confidence=confidence, engine="memory",
                       capping_epsilon=capping_epsilon)
    if par.capping_epsilon is not None:  # refused as create refuses it (too small to calibrate)
        capping_counter(par)
    return _forecast(par)


def _forecast(par: StreamParams) -> StreamForecast:
    """The forecast of checked public parameters (the plan ``create`` would make)."""
    plan = par.plan()
    beta = 1.0 - par.confidence
    counter = plan.counter
    n_struct = par.n_groups * len(par.k_values)
    if par.horizon is not None:
        periods = np.arange(1, par.horizon + 1, dtype=np.int64)
        half = halfwidths(counter, par.horizon, beta)
        band = halfwidths(counter, par.horizon, beta, band=n_struct)
    else:
        periods = np.array(UNBOUNDED_PERIODS, dtype=np.int64)
        half = np.array([halfwidths(counter, int(t), beta, first=int(t))[0] for t in periods])
        band = np.array([halfwidths(counter, int(t), beta, band=n_struct, first=int(t))[0]
                         for t in periods])
    sd = np.sqrt([counter.variance(int(t)) for t in periods])
    rr = None if par.horizon is None else _rerelease(par, beta)
    return StreamForecast(
        method=plan.method, why=str(plan.record["why"]), accounting=plan.accounting,
        horizon=par.horizon, unit=par.unit, relation=RELATIONS[par.unit],
        epsilon=par.epsilon, delta=par.delta, k_values=tuple(par.k_values),
        n_groups=None if par.groups is None else len(par.groups),
        max_groups_per_item=par.max_groups_per_item, confidence=par.confidence,
        periods=periods, sd=np.asarray(sd, dtype=np.float64), half_width=half,
        band_half_width=band, rerelease_half_width=None if rr is None else rr[0],
        rerelease_sd=None if rr is None else rr[1], _params=par)
