"""Building a stream's releases from its saved measurements (post-processing only).

Every field of a :class:`~dpfreq.stream.result.StreamRelease` is computed here from the noisy
measurements and public parameters (:mod:`dpfreq.stream.publish`): the curves, the intervals
(half-width plus the factorization's floating-point allowance), the band and the statement of
the mechanism; a grouped stream's error statement ends with what its intervals cover (the
capped data at ``unit="item"``: :mod:`dpfreq.grouped.capping`), and with ``capping_epsilon``
each release carries the dropped fraction to date (:mod:`dpfreq.stream.capping`; the latest
release warns when it is large). The curves of all requested periods are computed once and
sliced.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.grouped.capping import capping_statement, with_coverage
from dpfreq.grouped.dropped import warn_if_large
from dpfreq.release import RELATIONS, ErrorStatement
from dpfreq.stream.capping import capping_widths, dropped_fractions
from dpfreq.stream.publish import curve, halfwidths, widths_through
from dpfreq.stream.result import StreamRelease

__all__ = [
    "MEASURED_REMEDY",
    "MECHANISM",
    "STREAM_CHOICE",
    "STREAM_REMEDY",
    "VACUOUS_TEXT",
    "build_releases",
]

MECHANISM = "reach-stream"

#: what a stream's user can do about its cap: ``m`` is fixed when the stream is created, and
#: the stream measures no dropped fraction
STREAM_REMEDY = ("the stream does not estimate how many pairs the cap dropped (a one-off "
                 "grouped release of a past log can); a new stream with a larger "
                 "max_groups_per_item drops fewer")

#: the same, for a stream that measures what its cap dropped (``capping_epsilon``)
MEASURED_REMEDY = ("see the dropped-fraction estimate to date (dropped_fraction); a new stream "
                   "with a larger max_groups_per_item drops fewer")

#: which groups an item keeps in a stream (:mod:`dpfreq.stream.items.update`)
STREAM_CHOICE = ("the first ones it is seen in, for the whole stream; groups first seen in "
                 "the same period ranked by a secret key")

#: the end of a vacuous statement: no public count bounds reach from above, so an interval
#: reaching 0 allows every count that could be true
VACUOUS_TEXT = (" This statement is vacuous: every answer's interval reaches 0 (each estimate "
                "is smaller than its noise, so the release cannot tell these counts from 0; "
                "reach has no public upper bound); a stream with a larger epsilon or fewer "
                "k values would narrow the intervals (plan_reach_stream(...).epsilon_for).")

FloatArray = NDArray[np.float64]


def _nest(par: Any, per_k: list[NDArray[Any]], s: int) -> Any:
    """``{k: curve[:s]}`` or ``{group: {k: curve[:s]}}`` from per-k arrays ``(G, periods)``."""
    if par.groups is None:
        return {k: per_k[j][0, :s] for j, k in enumerate(par.k_values)}
    return {g: {k: per_k[j][i, :s] for j, k in enumerate(par.k_values)}
            for i, g in enumerate(par.groups)}


def _description(conf: float, horizon: int | None) -> str:
    spread = ("1/T of it to every period" if horizon is not None else
              "1/(t(t+1)) of it to period t")
    return (f"per-answer {conf:.0%} interval from the exact noise law of the answer (certified "
            "quantile of the sum of its node noises; sub-Gaussian tail of the factorization, "
            "plus its floating-point allowance; several epochs: the best certified bound of "
            f"the sum); band: {conf:.0%} for every answer of every period, group and k of the "
            f"stream at once (union bound: the miss probability split equally over the "
            f"structures and {spread}); a published answer never changes")


def _remedy(par: Any) -> str:
    return STREAM_REMEDY if par.capping_epsilon is None else MEASURED_REMEDY


def _capping_params(stream: Any) -> dict[str, Any]:
    """What ``mechanism_params`` says of the dropped-fraction measurement (empty without)."""
    par, cap = stream.params, stream.capping
    if cap is None:
        return {}
    return {"capping_epsilon": par.capping_epsilon,
            "counters_epsilon": par.counters_epsilon,
            "capping": f"ε_c = {par.capping_epsilon:g} of ε measures the fraction of (item, "
                       "group) pairs the cap dropped to date (pure ε_c-DP: two online "
                       f"counters, {cap.describe()}, calibrated to one item's increments of "
                       "ℓ1 mass 2M − m over the whole stream); the reach counters spend "
                       f"ε − ε_c = {par.counters_epsilon:g} (basic composition)"}


def _mechanism_params(stream: Any) -> dict[str, Any]:
    par, plan = stream.params, stream.plan
    return {**plan.record, "relation": RELATIONS[par.unit], "k_values": list(par.k_values),
            "horizon": par.horizon, "groups": None if par.groups is None else len(par.groups),
            "max_groups_per_item": par.max_groups_per_item,
            "epsilon_per_structure": str(plan.budget.epsilon),
            "rho_per_structure": plan.budget.rho, "late": par.late,
            "time_axis": "integer periods" if par.start_us is None else {
                "start": str(np.datetime64(par.start_us, "us")),
                "period_us": par.period_us, "timezone": "UTC"},
            "noise": "exact discrete Laplace or discrete Gaussian per row, a deterministic "
                     "function of the stream's secret key and the node id (never redrawn)",
            **({} if par.groups is None else
               {"coverage": capping_statement(par.max_groups_per_item, _remedy(par),
                                              chosen=STREAM_CHOICE)}),
            **_capping_params(stream)}


def build_releases(stream: Any, first: int, last: int, *, confidence: float | None = None
                   ) -> list[StreamRelease]:
    """The releases of periods ``first … last`` (each holding periods ``1 … t``)."""
    par, counter = stream.params, stream.plan.counter
    state = stream.state
    conf = par.confidence if confidence is None else confidence
    beta = 1.0 - conf
    n_struct = par.n_groups * len(par.k_values)
    rows = counter.rows_through(last)
    est, lo, hi, blo, bhi, half = [], [], [], [], [], []
    if conf == par.confidence:  # the stream's own: saved with its state
        h, b = widths_through(counter, state.widths, last, beta, n_struct)
    else:
        h = halfwidths(counter, last, beta)
        b = halfwidths(counter, last, beta, band=n_struct)
    for j in range(len(par.k_values)):
        values, allow = curve(counter, state.noisy[j][:, :rows], last)
        est.append(values)
        lo.append(values - (h + allow))
        hi.append(values + (h + allow))
        blo.append(values - (b + allow))
        bhi.append(values + (b + allow))
        half.append(h + allow)
    params = _mechanism_params(stream)
    dropped = _dropped(stream, first, last, conf)
    out = []
    for t in range(first, last + 1):
        vacuous = all(bool(np.all(low[:, :t] <= 0)) for low in lo)
        err = ErrorStatement(kind="interval", confidence=conf, value=_nest(par, half, t),
                             description=_description(conf, par.horizon)
                             + (VACUOUS_TEXT if vacuous else ""), vacuous=vacuous,
                             lower=_nest(par, lo, t), upper=_nest(par, hi, t),
                             band_lower=_nest(par, blo, t), band_upper=_nest(par, bhi, t))
        if par.groups is not None:  # what the intervals cover: the capped data
            err = with_coverage(err, par.max_groups_per_item, _remedy(par),
                                chosen=STREAM_CHOICE)
        ts = np.arange(1, t + 1)
        out.append(StreamRelease(
            value=_nest(par, est, t), epsilon=par.epsilon, delta=par.delta, unit=par.unit,
            mechanism=MECHANISM, mechanism_params=params, seeded=state.seeded, error=err,
            period=t, periods=par.period_label(ts), k_values=par.k_values, groups=par.groups,
            dropped_fraction=None if dropped is None else dropped[t - first]))
    if dropped is not None:
        warn_if_large(dropped[-1])  # the latest period's, once per call
    return out


def _dropped(stream: Any, first: int, last: int, conf: float) -> list[Any] | None:
    """The dropped fraction of periods ``first … last`` (None when not measured)."""
    par, cap, state = stream.params, stream.capping, stream.state
    if cap is None:
        return None
    widths = capping_widths(cap, state.cap_widths if conf == par.confidence else
                            np.zeros(0), last, 1.0 - conf)
    return dropped_fractions(par, cap, state.cap_noisy, widths, first, last, conf)
