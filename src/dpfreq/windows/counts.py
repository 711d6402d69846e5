"""Public API: :func:`release_window_counts` (spec ``time_windows.md``, issue 5).

Reach (distinct items) and k+ reach (items seen at least k times) of an event log over
cumulative windows ``[1, t]``, rolling windows of a public width ``W`` and arbitrary windows
``[t1, t2]``, at event or item level, in one private release.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import check_choice, check_delta, check_epsilon, check_int, message
from dpfreq.budget import Accountant
from dpfreq.engines import Engine, get_engine
from dpfreq.engines._common import reduce_events
from dpfreq.engines.base import ItemReduction, TimeBuckets
from dpfreq.errors import DataError, ParameterError
from dpfreq.noise import epsilon_to_fraction
from dpfreq.rng import RNGLike, resolve_rng
from dpfreq.windows._log import _array_log, _range_error
from dpfreq.windows.lazy_noise import GAUSSIAN_SCHEME, LAPLACE_SCHEME
from dpfreq.windows.result import WindowCountsRelease
from dpfreq.windows.strategy import STRATEGIES, Structure, build_structure
from dpfreq.windows.summaries import SummarySpec, WindowReducer, WindowSummaries, summary_specs

__all__ = ["parse_period", "release_window_counts"]

_FUNC = "release_window_counts"
IntArray = NDArray[np.int64]

_UNITS_US = {"us": 1, "ms": 1_000, "s": 1_000_000, "min": 60_000_000, "m": 60_000_000,
             "h": 3_600_000_000, "d": 86_400_000_000, "w": 604_800_000_000}


def parse_period(period: Any, func: str = _FUNC) -> int:
    """A period length in microseconds from ``"1d"``, ``"6h"``, ``"30min"``, ``"1w"``,
    a :class:`datetime.timedelta` or a ``numpy.timedelta64``."""
    us: int | None = None
    if isinstance(period, str):
        m = re.fullmatch(r"\s*(\d+)\s*(us|ms|s|min|m|h|d|w)\s*", period)
        if m:
            us = int(m.group(1)) * _UNITS_US[m.group(2)]
    elif isinstance(period, _dt.timedelta):
        us = (period.days * 86_400 + period.seconds) * 1_000_000 + period.microseconds
    elif isinstance(period, np.timedelta64):
        us = int(period.astype("timedelta64[us]").astype(np.int64))
    if us is None or us <= 0:
        raise ParameterError(message("period", func, "a positive duration such as '1d', '6h', "
                                     "'30min' or a timedelta", period))
    return us


def _to_us(value: Any, param: str) -> int:
    try:
        if isinstance(value, _dt.datetime) and value.tzinfo is not None:
            value = value.astimezone(_dt.UTC).replace(tzinfo=None)
        out = np.datetime64(value, "us")
    except (TypeError, ValueError) as exc:
        raise ParameterError(message(param, _FUNC, "a date or timestamp", value)) from exc
    if np.isnat(out):
        raise ParameterError(message(param, _FUNC, "a date or timestamp", value))
    return int(out.astype(np.int64))


@dataclass
class _Axis:
    horizon: int
    start_us: int | None = None
    period_us: int | None = None

    def buckets(self) -> TimeBuckets:
        return TimeBuckets(self.horizon, self.start_us, self.period_us)

    def public(self) -> dict[str, Any]:
        if self.start_us is None:
            return {"kind": "integer", "horizon": self.horizon}
        start = str(np.datetime64(self.start_us, "us"))
        return {"kind": "timestamp", "horizon": self.horizon, "start": start,
                "period_us": self.period_us}


def _time_axis(horizon: Any, start: Any, end: Any, period: Any) -> _Axis:
    if horizon is not None:
        if start is not None or end is not None or period is not None:
            raise ParameterError(message("horizon", _FUNC, "given alone, or replaced by "
                                         "start/end/period", horizon))
        return _Axis(check_int(horizon, "horizon", _FUNC, minimum=1))
    if start is None or end is None or period is None:
        raise ParameterError(message("horizon", _FUNC, "an integer >= 1, or start, end and "
                                     "period all given (public time range)", horizon))
    s, e, p = _to_us(start, "start"), _to_us(end, "end"), parse_period(period)
    if e < s:
        raise ParameterError(message("end", _FUNC, f"at or after start {start!r}", end))
    return _Axis((e - s) // p + 1, s, p)


def _parse_windows(windows: Any, horizon: int) -> tuple[Any, ...]:
    items = [windows] if isinstance(windows, str | int | np.integer) else list(windows)
    if not items:
        raise ParameterError(message("windows", _FUNC, "a non-empty list of 'cumulative', "
                                     "'all' and window widths", windows))
    out: list[Any] = []
    for w in items:
        if isinstance(w, str):
            check_choice(w, "windows", _FUNC, ("cumulative", "all"))
        else:
            w = check_int(w, "windows", _FUNC, minimum=1, maximum=horizon)
        if w not in out:
            out.append(w)
    return tuple(sorted(out, key=lambda v: (isinstance(v, str), str(v))))


def _parse_k(k_values: Any) -> tuple[int, ...]:
    ks = [k_values] if isinstance(k_values, int | np.integer) else list(k_values)
    if not ks:
        raise ParameterError(message("k_values", _FUNC, "a non-empty list of integers >= 1",
                                     k_values))
    return tuple(sorted({check_int(k, "k_values", _FUNC, minimum=1) for k in ks}))


def _summarize(source: Any, item: Any, time: Any, engine: str | Engine | Any, axis: _Axis,
               out_of_range: str, specs: tuple[SummarySpec, ...]
               ) -> tuple[WindowSummaries, int, str]:
    """The log's summaries, the number of events dropped, and the source kind.

    Engine sources are reduced by the engine (:meth:`Engine.reduce_items`: on Spark, per
    partition on the executors; only the summed summaries reach this process); arrays by the
    same numpy code in this process.
    """
    reducer = WindowReducer(axis.horizon, specs)
    drop = out_of_range == "drop"
    if engine is None and isinstance(source, Mapping | tuple | list):
        codes, raw = _array_log(source, item, time, axis)
        red = reduce_events(codes, raw, buckets=axis.buckets(), reducer=reducer,
                            drop_out_of_range=drop)
        kind = "arrays"
    else:
        if item is None or time is None:
            raise ParameterError(message("item/time", _FUNC,
                                         "column names for a file or SQL source", (item, time)))
        eng = get_engine(engine, source)
        red = eng.reduce_items(source, item=item, time=time, buckets=axis.buckets(),
                               reducer=reducer, drop_out_of_range=drop)
        kind = eng.name
    return _from_reduction(red, axis, out_of_range, specs), red.n_out_of_range, kind


def _from_reduction(red: ItemReduction, axis: _Axis, out_of_range: str,
                    specs: tuple[SummarySpec, ...]) -> WindowSummaries:
    if red.n_out_of_range and out_of_range == "error":
        raise _range_error(red.n_out_of_range, red.first_out_of_range, axis.horizon)
    return WindowSummaries(axis.horizon, specs, red.slots, red.keys, red.weights)


@dataclass
class _State:
    """Private state of a release: secret key, exact summaries of the log (never the log
    itself), exact oracles built from them, attached structures."""

    key: bytes
    summaries: WindowSummaries
    horizon: int
    build_args: dict[str, Any]
    structures: dict[tuple[str, int], Structure] = field(default_factory=dict)
    oracles: dict[tuple[str, int], Any] = field(default_factory=dict)
    observed_singleton: bool = False

    def n_family(self, s: Structure) -> int:
        t = self.horizon
        return t * (t + 1) // 2 if s.family == "all" else t

    def can_answer(self, s: Structure, t1: IntArray, t2: IntArray) -> NDArray[np.bool_]:
        if s.family == "cumulative":
            return t1 == 1
        if s.family == "fixed":
            return t1 == np.maximum(1, t2 - int(s.width or 1) + 1)
        return np.ones(t1.shape, dtype=np.bool_)

    def exact(self, s: Structure, t1: IntArray, t2: IntArray) -> IntArray:
        if s.family == "cumulative":
            counts = self.oracles[("cumulative", s.k)]  # items with k-th occurrence <= t
            return np.asarray(counts[t2], dtype=np.int64)
        if s.family == "fixed":
            return self.oracles[(f"fixed{s.width}", s.k)].exact(t2)
        dom = self.oracles[("all", s.k)]
        if s.strategy == "compressed":
            g = s.group_size
            t1 = (-(-t1 // g) - 1) * g + 1
            t2 = np.minimum(self.horizon, -(-t2 // g) * g)
        return dom.count(t1 - 1, t2)


def _label(family: str, width: int | None) -> str:
    return f"fixed(W={width})" if family == "fixed" else family


def _candidates(family: str, level: str, singleton: bool) -> list[str]:
    out = []
    for s in STRATEGIES[family]:
        if level == "item" and s in ("single", "tree2d"):
            continue  # unbounded per-item point count at item level (spec §3.3, §3.4)
        if s == "compressed" and not (level == "item" and singleton):
            continue
        out.append(s)
    return out


def _best_group_size(k: int, horizon: int, eps: Fraction, delta: float,
                     rho: float | None = None, noise_kind: str = "laplace") -> tuple[int, float]:
    best = (1, float("inf"))
    sizes = np.unique(np.concatenate((np.arange(1, min(horizon, 64) + 1),
                                      np.geomspace(1, horizon, 60).astype(np.int64))))
    for g in sizes:
        s = build_structure("all", "compressed", k, horizon, "item", eps, delta,
                            group_size=int(g), rho=rho, noise_kind=noise_kind)
        mse = s.mean_mse()
        if mse < best[1]:
            best = (int(g), mse)
    return best


def zcdp_rho(epsilon: float, delta: float) -> float:
    """The largest ρ with ``ρ + 2√(ρ ln(1/δ)) <= ε`` (ρ-zCDP ⇒ (ε, δ)-DP, Bun–Steinke 2016)."""
    log_term = math.log(1.0 / delta)
    return (math.sqrt(log_term + epsilon) - math.sqrt(log_term)) ** 2


def _choose(families: tuple[Any, ...], ks: tuple[int, ...], horizon: int, level: str,
            eps_s: Fraction, delta_s: float, strategy: Any, singleton: bool,
            rho_s: float | None = None
            ) -> tuple[dict[tuple[str, int], Structure], dict[str, Any]]:
    chosen: dict[tuple[str, int], Structure] = {}
    record: dict[str, Any] = {}
    kinds = ("laplace",) if rho_s is None else ("laplace", "gaussian")
    for w in families:
        family = "fixed" if not isinstance(w, str) else w
        width = None if isinstance(w, str) else int(w)
        label = _label(family, width)
        cands = _candidates(family, level, singleton)
        forced = None
        if strategy != "auto":
            forced = strategy.get(w, strategy.get(label)) if isinstance(strategy, Mapping) \
                else strategy
            if forced is not None and forced != "auto":
                check_choice(forced, f"strategy for {label}", _FUNC, cands)
            else:
                forced = None
        for k in ks:
            preds: dict[str, float] = {}
            structs: dict[str, Structure] = {}
            for c in cands if forced is None else [forced]:
                for kind in kinds:
                    g = 1
                    if c == "compressed":
                        g, _ = _best_group_size(k, horizon, eps_s, delta_s, rho_s, kind)
                    s = build_structure(family, c, k, horizon, level, eps_s, delta_s, width, g,
                                        rho=rho_s, noise_kind=kind)
                    name = c if rho_s is None else f"{c}/{kind}"
                    structs[name] = s
                    preds[name] = float(np.sqrt(s.mean_mse()))
            pick = min(preds, key=lambda c: preds[c])
            chosen[(label, k)] = structs[pick]
            record[f"{label}, k={k}"] = {
                "strategy": structs[pick].strategy, "noise": structs[pick].noise_kind,
                "predicted_rmse": preds, "gamma": str(structs[pick].gamma),
                "detail": structs[pick].detail,
                "chosen_by": "auto (smallest predicted mean squared error, public parameters "
                             "only)" if forced is None else "caller"}
    return chosen, record


def _build_release(summaries: WindowSummaries, *, key: bytes, epsilon: float,
                   delta: float, k_values: list[int], level: str, windows: list[Any],
                   strategy: Any, singleton: bool, horizon: int, axis: dict[str, Any],
                   seeded: bool, n_dropped: int, source_kind: str) -> WindowCountsRelease:
    """Deterministic given the key: used by the release and by :meth:`WindowCountsRelease.load`.

    Structure ``(label, k)`` draws its noise under the name ``(label, k, tree index)``
    (:mod:`dpfreq.windows.lazy_noise`): distinct names, independent sub-keys.
    """
    ks = tuple(int(k) for k in k_values)
    fams = tuple(windows)
    n_struct = len(fams) * len(ks)
    eps_s = epsilon_to_fraction(epsilon) / n_struct
    delta_s = delta / n_struct
    strat = strategy if not isinstance(strategy, Mapping) else {
        (int(k) if str(k).isdigit() else k): v for k, v in strategy.items()}
    chosen, record = _choose(fams, ks, horizon, level, eps_s, delta_s, strat, singleton)
    accounting = ("pure epsilon-DP: basic composition over structures (advanced composition "
                  "over item-level blocks/starts when delta > 0)")
    if delta > 0:
        # alternative plan: zCDP accounting, ρ split equally, discrete Laplace or Gaussian each
        rho = zcdp_rho(epsilon, delta)
        z_chosen, z_record = _choose(fams, ks, horizon, level, eps_s, delta_s, strat, singleton,
                                     rho_s=rho / n_struct)

        def score(ch: dict[tuple[str, int], Structure]) -> float:
            return float(sum(math.log(s.mean_mse()) for s in ch.values()))

        if score(z_chosen) < score(chosen):
            chosen, record = z_chosen, z_record
            accounting = (f"zCDP: rho={rho:.6g} from (epsilon, delta) by "
                          "epsilon = rho + 2 sqrt(rho ln(1/delta)), split equally over "
                          "structures; pure pieces count as epsilon^2/2-zCDP")
    build_args = {"epsilon": epsilon, "delta": delta, "k_values": list(ks), "level": level,
                  "windows": list(fams), "strategy": strategy, "singleton": singleton,
                  "horizon": horizon, "axis": axis, "seeded": seeded, "n_dropped": n_dropped,
                  "source_kind": source_kind}
    state = _State(key=key, summaries=summaries, horizon=horizon, build_args=build_args)
    state.observed_singleton = summaries.singleton
    for (label, k), s in chosen.items():
        s.attach(key, (label, k))
        state.structures[(label, k)] = s
        if s.family == "cumulative":
            state.oracles[("cumulative", k)] = summaries.oracle(SummarySpec("cumulative", k))
        elif s.family == "fixed":
            state.oracles[(f"fixed{s.width}", k)] = summaries.oracle(
                SummarySpec("fixed", k, int(s.width or 1)))
        else:
            state.oracles[("all", k)] = summaries.oracle(SummarySpec("all", k))
    params: dict[str, Any] = {
        "strategies": record, "epsilon_per_structure": str(eps_s),
        "delta_per_structure": delta_s, "n_structures": n_struct,
        "budget_split": "equal split of the budget over every (window family, k) structure",
        "accounting": accounting,
        "neighbouring": "event: add/remove one event" if level == "event" else
                        "item: replace the whole history of one item",
        "noise": "exact discrete Laplace per tree node, a deterministic function of a secret "
                 "key and the node id (lazy noise, never redrawn)",
        "noise_scheme": {"laplace": LAPLACE_SCHEME, "gaussian": GAUSSIAN_SCHEME},
        "singleton_declared": singleton, "source": source_kind,
    }
    rel = WindowCountsRelease(
        value={}, epsilon=epsilon, delta=delta, mechanism="ghazi-kumar-manurangsi-nelson-windows",
        mechanism_params=params, seeded=seeded, error=_placeholder_error(), horizon=horizon,
        unit=level, level=level, k_values=ks, windows=fams, time_axis=axis, _state=state)
    value: dict[str, Any] = {}
    err: dict[str, Any] = {}
    for w in fams:
        if w == "all":
            continue
        label = _label("fixed" if not isinstance(w, str) else w,
                       None if isinstance(w, str) else int(w))
        value[label], err[label] = {}, {}
        for k in ks:
            a = rel.cumulative_curve(k) if w == "cumulative" else rel.fixed_curve(k, width=w)
            value[label][f"k={k}"] = np.asarray(a.estimate)
            err[label][f"k={k}"] = {"sd": np.asarray(a.sd),
                                    "ci_half_width": np.asarray(a.ci_high) - np.asarray(a.estimate),
                                    "simultaneous_half_width": np.asarray(a.simultaneous_high)
                                    - np.asarray(a.estimate)}
    from dpfreq.release import ErrorStatement

    error = ErrorStatement(
        kind="ci", confidence=0.95, value=err,
        description="95% confidence half-widths of every released curve value: per query, and "
                    "simultaneous over the family's T values (union bound); derived from the "
                    "exact discrete-Laplace noise by a Chernoff bound. Arbitrary windows: "
                    "see WindowCountsRelease.window(...).")
    object.__setattr__(rel, "value", value)
    object.__setattr__(rel, "error", error)
    return rel


def _placeholder_error() -> Any:
    from dpfreq.release import ErrorStatement

    return ErrorStatement(kind="sd", confidence=None, value=None, description="")


def release_window_counts(
    source: Any,
    *,
    item: str | None = None,
    time: str | None = None,
    horizon: int | None = None,
    start: Any = None,
    end: Any = None,
    period: Any = None,
    epsilon: float,
    delta: float = 0.0,
    k_values: Sequence[int] | int,
    level: str = "event",
    windows: Sequence[Any] | str | int = ("cumulative",),
    strategy: str | Mapping[Any, str] = "auto",
    singleton: bool = False,
    out_of_range: str = "error",
    engine: str | Engine | Any = None,
    rng: RNGLike = None,
    accountant: Accountant | None = None,
) -> WindowCountsRelease:
    """Release reach and k+ reach over cumulative, rolling and arbitrary time windows.

    Implements spec ``time_windows.md`` §3.1 (cumulative), §3.2–3.3 (fixed windows: blocks or a
    single instance), §3.4 (arbitrary windows, event level, included form, 2d tree with lazy
    noise), §3.5 (arbitrary windows, item level, one cumulative tree per start), §3.6 (time
    compression, item level, declared singleton logs), §3.7 (exactly-k via ``exactly``).

    Parameters
    ----------
    source : mapping, (items, times) pair, path, SQL or relation
        The event log: one row per event (item, time). Mappings and pairs of arrays are read
        directly; files, SQL and relations go through ``dpfreq.engines``.
    item, time : str
        Column names (required for mappings and engine sources).
    horizon : int
        Public number of periods ``T``; times must be integers in ``1..T``. Or give
    start, end, period :
        A public time range ``[start, end]`` cut into periods of public length ``period``
        (``"1d"``, ``"6h"``, ``"30min"``, timedelta); period ``g`` covers
        ``[start + (g−1)·period, start + g·period)`` and ``T = ⌊(end−start)/period⌋ + 1``.
    epsilon : float
        Total ε for the whole release (all families, all k). No default.
    delta : float, default 0
        δ > 0 gives an (ε, δ)-DP release: the better (smaller predicted error) of pure-ε
        accounting with advanced composition over item-level blocks / starts, and zCDP
        accounting with discrete Laplace or discrete Gaussian node noise (see Notes).
    k_values : int or sequence of int
        The k of ``f≥k`` to release (``1`` = reach).
    level : {"event", "item"}
        Unit of privacy.
    windows : sequence
        Query families: ``"cumulative"``, ``"all"`` (every ``[t1, t2]``) and integer widths
        ``W`` (rolling windows ``[max(1, t−W+1), t]``), ``1 <= W <= T``.
    strategy : "auto" or mapping
        ``"auto"`` picks, per family and k, the structure with the smallest predicted mean
        squared error from public parameters only (recorded in ``mechanism_params``). A mapping
        ``{family: strategy}`` forces one (see :mod:`dpfreq.windows.strategy`).
    singleton : bool, default False
        Declares (publicly) that the log has at most one event per period. Enables time
        compression for item-level arbitrary windows; a log violating it is a DataError.
    out_of_range : {"error", "drop"}
        What to do with events outside the public range; the number dropped is kept privately
        (``release.n_dropped``), not published.
    engine : str, Engine or SparkSession, optional
        Engine for file/SQL sources: a name (``"memory"``, ``"duckdb"``, ``"spark"``), a
        configured engine instance (e.g. ``get_engine("spark", master="spark://host:7077")``,
        what ``dpfreq reach --engine spark --spark-master URL`` passes) or a SparkSession;
        resolved by :func:`dpfreq.engines.get_engine`. The engine reduces the log to the
        per-(family, k) summaries of :mod:`dpfreq.windows.summaries`
        (:meth:`~dpfreq.engines.base.Engine.reduce_items`); on Spark this runs per partition
        on the executors and only the summaries reach the driver, never the event log.
    rng : None, int or numpy.random.Generator
        None: secure randomness (production). Seeds are for tests only (``seeded=True``).
    accountant : Accountant, optional
        Charged ``(epsilon, delta)`` before any noise is drawn.

    Returns
    -------
    WindowCountsRelease

    Privacy
    -------
    Unit of privacy: one event (``level="event"``: neighbours differ by adding or removing one
    occurrence of one item at one period) or one item (``level="item"``: the whole occurrence
    history of one item may be replaced). The whole release (every answer to every window,
    however many are queried later) is (ε, δ)-DP: each (family, k) structure gets ε/m (basic
    composition over m structures); inside a structure the node noise is calibrated to the
    ℓ1 sensitivity ``Δ_joint · (nodes per point)`` with Δ the multiset symmetric difference of
    the point sets (spec §2.2, §3.8); node noise is fixed per node (lazy, keyed).
    Data-dependent facts that are not private (the number of events dropped as out of range,
    whether the log is singleton) are kept in the release's private state only
    (``release.n_dropped``, ``release.observed_singleton``), never in ``to_dict``.

    Raises
    ------
    ParameterError, DataError
        Invalid parameters or data (unknown level, bad ε/δ, negative k, W > T, missing
        columns, non-integer times, times outside the range, ...).

    Notes
    -----
    * Strategies per family (chosen by ``strategy="auto"`` from the closed-form mean squared
      error, public parameters only): cumulative ``tree`` | ``per_query``; rolling windows
      ``blocks`` | ``single`` (event level) | ``per_query``; arbitrary windows ``tree2d``
      (event level) | ``per_start`` | ``per_query`` | ``compressed`` (item level, declared
      singleton). ``per_query`` is the composition baseline (independent noise per window,
      calibrated to the number of windows one unit can change).
    * The cumulative and per-start trees are post-processed by the least-squares consistency
      pass (Hay et al.) when their domain has at most 1024 leaves; their answers are then real
      numbers with an exact variance and a Chernoff interval for weighted noise sums.
    * With ``delta > 0`` two accounting plans are compared and the better one is used: pure ε
      (basic composition; advanced composition over item-level blocks/starts), or zCDP
      (``ρ`` from (ε, δ), split equally; each structure uses discrete Laplace or the exact
      discrete Gaussian, whichever predicts less error). ``mechanism_params["accounting"]``
      says which.
    * Answers with ``exactly`` need ``k`` and ``k+1`` in ``k_values``.
    """
    eps = check_epsilon(epsilon, "epsilon", _FUNC)
    dlt = check_delta(delta, "delta", _FUNC)
    lvl = check_choice(level, "level", _FUNC, ("event", "item"))
    ks = _parse_k(k_values)
    check_choice(out_of_range, "out_of_range", _FUNC, ("error", "drop"))
    if not isinstance(singleton, bool):
        raise ParameterError(message("singleton", _FUNC, "True or False", singleton))
    if not (strategy == "auto" or isinstance(strategy, Mapping)):
        raise ParameterError(message("strategy", _FUNC, "'auto' or a mapping {family: "
                                     "strategy}", strategy))
    axis = _time_axis(horizon, start, end, period)
    fams = _parse_windows(windows, axis.horizon)
    summaries, n_dropped, kind = _summarize(source, item, time, engine, axis, out_of_range,
                                            summary_specs(fams, ks))
    if singleton and not summaries.singleton:
        raise DataError(message("singleton", _FUNC, "True only for logs with at most one event "
                                "per period", "a log with several events in one period"))
    if accountant is not None:
        accountant.spend(eps, dlt, label=_FUNC)
    res = resolve_rng(rng, _FUNC)
    key = res.generator.bytes(32)
    return _build_release(summaries, key=key, epsilon=eps, delta=dlt, k_values=list(ks),
                          level=lvl, windows=list(fams), strategy=strategy, singleton=singleton,
                          horizon=axis.horizon, axis=axis.public(), seeded=res.seeded,
                          n_dropped=n_dropped, source_kind=kind)
