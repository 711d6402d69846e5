"""An estimate from the per-(order, interval) sums of the longitudinal protocol: the values,
the error statement its public parameters give (:func:`~dpfreq.longitudinal.result.
error_widths`) and, when it is vacuous, the smallest ε whose plan is not
(:meth:`~dpfreq.longitudinal.LongitudinalPlan.useful_epsilon`)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.release import ErrorStatement

from .plan import plan_longitudinal
from .result import LongitudinalEstimate, error_widths

__all__ = ["available_periods", "make_estimate"]


def _needed(horizon: int, k: int, method: str, devices: int, epsilon: float,
            confidence: float, per_order_sparsity: bool) -> str:
    """Text naming the smallest ε at which the same statement is not vacuous
    (:meth:`~dpfreq.longitudinal.LongitudinalPlan.useful_epsilon` of the plan with the same
    public parameters and the best randomizer: ``auto``, or Erlingsson et al.'s)."""
    which = "erlingsson" if method == "erlingsson" else "auto"
    eps = plan_longitudinal(horizon=horizon, max_changes=k, epsilon=epsilon, method=which,
                            devices=devices, confidence=confidence,
                            per_order_sparsity=per_order_sparsity).useful_epsilon()
    if eps is None:
        return "no epsilon up to 1000 would make them narrower; more devices are needed"
    return (f"epsilon >= {eps:g} would make them narrower at one period at least, whatever "
            "the data (plan_longitudinal with the same devices, change budget and confidence, "
            f"method {which})")


def available_periods(reported: NDArray[np.bool_], padded_horizon: int,
                      horizon: int) -> NDArray[np.bool_]:
    """Per period ``t = 1..horizon``: whether every interval ``(h, j)`` of ``C(t)`` is
    ``reported`` (flat per-(order, interval) flags, as the sums are kept)."""
    from .dyadic import offsets

    d = padded_horizon
    off = offsets(d)
    t = np.arange(1, horizon + 1)
    out = np.ones(horizon, dtype=bool)
    for h in range(d.bit_length()):
        on = ((t >> h) & 1).astype(bool)
        out[on] &= reported[off[h] + (t[on] >> h) - 1]
    return out


def make_estimate(sums: NDArray[Any], *, padded_horizon: int, horizon: int, devices: int,
                  c_gaps: NDArray[Any], epsilon: float, confidence: float, mechanism: str,
                  mechanism_params: dict[str, Any], seeded: bool, max_changes: int,
                  method: str, start: str | None = None, period: str | None = None,
                  truth: NDArray[Any] | None = None,
                  reported: NDArray[np.bool_] | None = None) -> LongitudinalEstimate:
    """Wrap per-(h, j) sums into a :class:`LongitudinalEstimate`.

    ``reported`` (flat per-(h, j), as ``sums``; None: all) says which intervals have their
    reports in: a period with an interval of ``C(t)`` that has not is not estimated (NaN).

    Per period t, ``f̂_t = Σ_u Z_u`` over devices with independent ``Z_u`` of mean
    ``X_u[t]``, ``|Z_u| ≤ (log d+1)/min_{h∈C(t)} c_h`` and ``Σ_u Var Z_u ≤ n(log d+1)
    Σ_{h∈C(t)} c_h^{−2}`` (``sd²``, the variance at ``f_t = 0``), so Hoeffding's and Bernstein's
    inequalities each bound ``|f̂_t − f_t|`` with probability ``≥ 1 − β`` (``β = 1 −
    confidence``) and the smaller half-width is used (:func:`_half_width`); with
    ``ln(2·horizon/β)`` instead of ``ln(2/β)`` the band holds for all periods at once.
    """
    from .dyadic import estimate_from_sums

    d, n = padded_horizon, devices
    lg1 = d.bit_length()
    gaps = np.broadcast_to(np.asarray(c_gaps, dtype=np.float64), (lg1,)).copy()
    raw = estimate_from_sums(sums, d, lg1 / gaps)[:horizon]
    ready = (np.ones(horizon, dtype=bool) if reported is None
             else available_periods(np.asarray(reported, dtype=bool), d, horizon))
    raw = np.where(ready, raw, np.nan)
    half, band, var0 = error_widths(n, d, horizon, gaps, confidence)
    value = np.clip(raw, 0, n)
    lower, upper = np.clip(raw - half, 0, n), np.clip(raw + half, 0, n)
    vacuous = bool(ready.any() and np.all(((lower == 0) & (upper == n))[ready]))
    text = (f"Per-period intervals (each with probability >= {confidence:g}, Hoeffding or "
            "Bernstein over devices) and a band for all periods at once (union bound over "
            "periods), clamped to [0, devices].")
    if not ready.all():
        text += (f" {int(np.sum(~ready))} of {horizon} periods have no estimate yet (NaN; null "
                 "in JSON): an interval of their decomposition has no report (the period has "
                 "not ended, or its reports are not collected).")
    if vacuous and n > 0:
        needed = _needed(horizon, max_changes, method, n, epsilon, confidence,
                         bool(mechanism_params.get("per_order_sparsity", False)))
        text += f" They are no narrower than [0, devices] (vacuous): {needed}."
    one = bool(np.all(gaps == gaps[0]))
    gap_params: dict[str, Any] = {"c_gap": float(gaps[0])} if one else {
        "c_gap": float(gaps[0]), "c_gap_per_order": gaps.tolist()}
    return LongitudinalEstimate(
        value=value, unclamped=raw, epsilon=epsilon, unit="device", mechanism=mechanism,
        mechanism_params={**mechanism_params, **gap_params, "padded_horizon": d,
                          "clamped_to": [0, n]},
        seeded=seeded,
        error=ErrorStatement(kind="interval", confidence=confidence, value=half,
                             description=text, lower=lower, upper=upper,
                             band_lower=np.clip(raw - band, 0, n),
                             band_upper=np.clip(raw + band, 0, n), vacuous=vacuous),
        sd=np.sqrt(var0), devices=n, horizon=horizon, start=start, period=period,
        truth=None if truth is None else np.asarray(truth, dtype=np.int64)[:horizon],
        exact_sd=None if truth is None else np.sqrt(
            np.maximum(var0 - np.asarray(truth)[:horizon], 0.0)),
    )
