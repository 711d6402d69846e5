"""The longitudinal release: per-period counts with intervals, a table and a plot."""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq import _validate
from dpfreq.errors import ParameterError
from dpfreq.release import Release

__all__ = ["LongitudinalEstimate", "error_widths", "parse_period", "period_dates"]

_PERIOD = re.compile(r"^\s*(\d{1,6})\s*(min|h|d|w)\s*$")
_UNIT_SECONDS = {"min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_period(period: Any) -> _dt.timedelta:
    """A period length such as ``"1d"``, ``"7d"``, ``"1w"``, ``"6h"``, ``"15min"``."""
    m = _PERIOD.match(period) if isinstance(period, str) else None
    if m is None or int(m.group(1)) == 0:
        raise ParameterError(_validate.message(
            "period", "a length such as '1d', '7d', '1w', '6h' or '15min'", period))
    return _dt.timedelta(seconds=int(m.group(1)) * _UNIT_SECONDS[m.group(2)])


def period_dates(start: str, period: str, count: int) -> NDArray[Any]:
    """Start of periods ``1..count``: dates (``datetime64[D]``) for whole-day periods and a date
    ``start``, else timestamps (``datetime64[s]``)."""
    step = parse_period(period)
    if "T" not in start and " " not in start and step.seconds == 0:
        base = np.datetime64(start, "D")
        return base + np.arange(count) * np.timedelta64(step.days, "D")
    base_s = np.datetime64(start, "s")
    return base_s + np.arange(count) * np.timedelta64(int(step.total_seconds()), "s")


@dataclass(frozen=True, kw_only=True, repr=False)
class LongitudinalEstimate(Release):
    """Per-period counts ``f̂_t`` of devices in state 1, from locally private reports.

    Attributes
    ----------
    value : numpy.ndarray
        ``f̂_t`` for t = 1..horizon, **clamped to** ``[0, devices]`` (a count cannot be outside;
        clamping is post-processing, it only moves an estimate towards the truth's range but
        makes it biased near the ends). The unbiased estimate is ``unclamped``. NaN (``null``
        in JSON) for a period that is not :attr:`available` yet: it has no estimate.
    unclamped : numpy.ndarray
        ``f̂_t`` before clamping (unbiased under full participation; NaN where ``value`` is).
    sd : numpy.ndarray
        Per-period standard deviation ``√(n(log d+1)·Σ_{h∈C(t)} c_h^{−2})`` of ``unclamped``:
        the exact sd at ``f_t = 0``, its maximum over ``f_t ∈ [0, n]`` (data-independent).
    error : ErrorStatement
        ``kind="interval"``: per-period intervals ``lower``/``upper`` holding each with
        probability ``≥ confidence`` (Hoeffding's or Bernstein's inequality over devices),
        and a band ``band_lower``/``band_upper`` holding for all periods at once with
        probability ``≥ confidence`` (plus a union bound over the periods); both clamped to
        ``[0, n]`` (NaN for a period without an estimate; ``value``, the half-widths, are
        public and stated for every period).
    devices : int
        Number of devices ``n`` (enrolled, or in the reports file).
    horizon : int
        Number of periods.
    start, period : str or None
        Time axis of the parameters (date of period 1, period length), when given.
    truth, exact_sd : numpy.ndarray or None
        Filled only by :func:`~dpfreq.longitudinal.simulate_longitudinal`.

    Privacy
    -------
    Unit: one device's whole sequence ``X[1..d]``; neighbouring: any two sequences with at most
    ``k`` changes each (device level). Every device's transcript is ε-local-DP with ε =
    ``epsilon`` (the randomizer's exact certificate is in ``mechanism_params``); the estimate is
    post-processing and spends no further budget.

    Examples
    --------
    >>> from dpfreq.longitudinal import simulate_longitudinal
    >>> rel = simulate_longitudinal(devices=1000, horizon=7, max_changes=2, epsilon=2.0,
    ...                             method="auto", start="2026-01-05", period="1d", rng=1)
    >>> list(rel.table())
    ['period', 'date', 'estimate', 'lower', 'upper', 'band_lower', 'band_upper', 'sd', 'truth']
    >>> str(rel.dates[-1])
    '2026-01-11'
    >>> bool(((rel.error.lower <= rel.value) & (rel.value <= rel.error.upper)).all())
    True
    """

    unclamped: NDArray[np.float64]
    sd: NDArray[np.float64]
    devices: int
    horizon: int
    start: str | None = None
    period: str | None = None
    truth: NDArray[np.int64] | None = None
    exact_sd: NDArray[np.float64] | None = None

    def _summary(self) -> list[tuple[str, str]]:
        axis = f", from {self.start} every {self.period}" if self.start and self.period else ""
        waiting = int(np.sum(~self.available))
        later = f", {waiting} not ended (no estimate yet)" if waiting else ""
        return [("periods", f"{self.horizon} periods of {self.devices:,} devices{axis}{later}")]

    @property
    def available(self) -> NDArray[np.bool_]:
        """Per period, whether it has an estimate: every interval of its dyadic decomposition
        has reports (at an order with enrolled devices). A period that has not ended, or whose
        reports are not collected yet, has none: NaN in the arrays, ``null`` in JSON."""
        return ~np.isnan(np.asarray(self.unclamped, dtype=np.float64))

    def to_dict(self) -> dict[str, Any]:
        """As :meth:`Release.to_dict`, with ``null`` (not a number, not 0) for the estimate
        and the interval ends of every period that is not :attr:`available`."""
        out = super().to_dict()
        waiting = ~self.available
        if waiting.any():
            err = out["error"]
            for where, key in ((out, "value"), (out, "unclamped"), (err, "lower"),
                               (err, "upper"), (err, "band_lower"), (err, "band_upper")):
                where[key] = [None if w else v for v, w in zip(where[key], waiting.tolist(),
                                                                strict=True)]
        return out

    @property
    def errors(self) -> NDArray[np.float64] | None:
        """``f̂ − f`` (of the clamped estimate) when the truth is known."""
        return None if self.truth is None else np.asarray(self.value) - self.truth

    @property
    def dates(self) -> NDArray[Any] | None:
        """Start of each period when the parameters carry a time axis, else None."""
        if self.start is None or self.period is None:
            return None
        return period_dates(self.start, self.period, self.horizon)

    def table(self) -> dict[str, Any]:
        """Columns ``period`` (1..horizon), ``date`` (with a time axis), ``estimate``, ``lower``,
        ``upper``, ``band_lower``, ``band_upper``, ``sd`` (and ``truth`` in simulations)."""
        out: dict[str, Any] = {"period": np.arange(1, self.horizon + 1)}
        dates = self.dates
        if dates is not None:
            out["date"] = dates
        out.update(estimate=np.asarray(self.value), lower=self.error.lower,
                   upper=self.error.upper, band_lower=self.error.band_lower,
                   band_upper=self.error.band_upper, sd=self.sd)
        if self.truth is not None:
            out["truth"] = self.truth
        return out

    def plot(self, ax: Any = None) -> Any:
        """Estimates with their per-period intervals (and the truth when known)."""
        from dpfreq.plotting import legend, new_axes, plot_band, privacy_title

        ax = new_axes(ax)
        dates = self.dates
        x = np.arange(1, self.horizon + 1) if dates is None else dates
        plot_band(ax, x, np.asarray(self.value), self.error.lower, self.error.upper,
                  label="estimate", band_label=f"{self.error.confidence:.0%} interval")
        if self.truth is not None:
            ax.plot(x, self.truth, label="truth")
        ax.set_xlabel("period t" if dates is None else f"period start (every {self.period})")
        ax.set_ylabel(f"devices in state 1 (of {self.devices:,})")
        ax.set_title(privacy_title("Longitudinal counts (local DP)", epsilon=self.epsilon,
                                   delta=self.delta, unit=self.unit,
                                   confidence=self.error.confidence))
        legend(ax, fontsize="small")
        return ax


def _half_width(n: int, bound: NDArray[np.float64], var: NDArray[np.float64],
                log_term: float) -> NDArray[np.float64]:
    """Half-width ``a`` with ``Pr[|f̂_t − f_t| ≥ a] ≤ 2e^{−log_term}`` for a sum of ``n``
    independent terms in ``[−bound, bound]`` with total variance ``≤ var``: the smaller of
    Hoeffding's ``bound·√(2n·log_term)`` and Bernstein's ``b·log_term/3 + √((b·log_term/3)²
    + 2·var·log_term)`` with ``b = bound + 1`` (a term minus its mean, a mean in [0, 1])."""
    hoeffding = bound * np.sqrt(2 * n * log_term)
    lin = (bound + 1) * log_term / 3
    bernstein = lin + np.sqrt(lin**2 + 2 * var * log_term)
    return np.minimum(hoeffding, bernstein)


def error_widths(devices: int, padded_horizon: int, horizon: int, c_gaps: NDArray[Any],
                 confidence: float) -> tuple[NDArray[np.float64], NDArray[np.float64],
                                             NDArray[np.float64]]:
    """Per period ``t = 1..horizon``: the interval half-width, the simultaneous band's
    half-width and the variance at ``f_t = 0`` (see :func:`make_estimate`), from public
    parameters only: the number of devices, the padded horizon, the gap of every order and the
    confidence."""
    d, n = padded_horizon, devices
    lg1 = d.bit_length()
    gaps = np.broadcast_to(np.asarray(c_gaps, dtype=np.float64), (lg1,))
    t = np.arange(1, horizon + 1)
    inv2 = np.zeros(horizon)
    worst = np.full(horizon, np.inf)
    for h in range(lg1):
        on = ((t >> h) & 1).astype(bool)
        inv2 += on / gaps[h] ** 2
        worst[on] = np.minimum(worst[on], gaps[h])
    var0 = n * lg1 * inv2
    beta = 1.0 - confidence
    half = _half_width(n, lg1 / worst, var0, np.log(2 / beta))
    band = _half_width(n, lg1 / worst, var0, np.log(2 * horizon / beta))
    return half, band, var0
