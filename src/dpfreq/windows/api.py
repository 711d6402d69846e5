"""Public API: :func:`release_window_counts`.

Reach (distinct items) and k+ reach (items seen at least k times) of an event log over
cumulative windows ``[1, t]``, rolling windows of a public width ``W`` and arbitrary windows
``[t1, t2]``, with one item or one event as the unit of privacy, in one private release.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dpfreq._validate import check_choice, message
from dpfreq.accounting.losses import zcdp_loss
from dpfreq.budget import BudgetAccountant, check_accountant
from dpfreq.engines import Engine, SummaryRequest
from dpfreq.errors import DataError, public_errors
from dpfreq.grouped.checks import check_ungrouped
from dpfreq.pipeline import Charge, Reading, run_release
from dpfreq.rng import ResolvedRNG, RNGLike
from dpfreq.windows.data.events import engine_source, range_error, summarizing_engine
from dpfreq.windows.data.summaries import WindowSummaries, summary_specs
from dpfreq.windows.grouped.release import release_grouped_window_counts
from dpfreq.windows.params import (
    TimeAxis,
    WindowBuild,
    WindowParams,
    check_window_params,
    parse_period,
)
from dpfreq.windows.result import WindowCountsRelease
from dpfreq.windows.state import attach_state
from dpfreq.windows.structures.chooser import Plan, make_plan

__all__ = ["parse_period", "release_window_counts"]

_FUNC = "release_window_counts"


def _summarize(source: Any, item: Any, time: Any, engine: str | Engine | Any, axis: TimeAxis,
               out_of_range: str, windows: tuple[Any, ...], ks: tuple[int, ...]
               ) -> tuple[WindowSummaries, int, str]:
    """The log's summaries, the number of events dropped, and the source kind.

    Every source goes through an engine (:meth:`~dpfreq.engines.Summarizing.summaries`: one
    query where the data lives — numpy for in-memory columns, SQL on DuckDB and Spark; only the
    summed summaries reach this process).
    """
    specs = summary_specs(windows, ks)
    src, item, time = engine_source(source, item, time, axis)
    eng = summarizing_engine(engine, src)
    red = eng.summaries(src, SummaryRequest(item, time, axis.buckets(), specs,
                                            drop_out_of_range=out_of_range == "drop"))
    if red.n_out_of_range and out_of_range == "error":
        raise range_error(axis, time)
    summaries = WindowSummaries(axis.horizon, specs, *red.entries(0))
    return summaries, red.n_out_of_range, eng.name


@dataclass(frozen=True)
class _Log:
    """The checked summaries of the event log, the events dropped and the engine."""

    summaries: WindowSummaries
    n_dropped: int
    source_kind: str


@dataclass(frozen=True)
class _Keyed:
    """The log's summaries with the release's secret noise key and its build parameters."""

    summaries: WindowSummaries
    key: bytes
    build: WindowBuild


@dataclass(frozen=True)
class _WindowSteps:
    """The pipeline steps (:mod:`dpfreq.pipeline`) of one ungrouped window release."""

    par: WindowParams
    source: Any
    item: Any
    time: Any
    engine: Any
    out_of_range: str

    def plan(self) -> Plan:
        return make_plan(self.par.plan_request())

    def charge(self, plan: Plan) -> Charge:
        return Charge(self.par.epsilon, self.par.delta, self.par.unit, _FUNC,
                      loss=zcdp_loss([s.rho for s in plan.structures.values()]))

    def read(self, plan: Plan) -> Reading[_Log]:
        par = self.par
        summaries, n_dropped, kind = _summarize(self.source, self.item, self.time, self.engine,
                                                par.axis, self.out_of_range, par.windows,
                                                par.k_values)
        if par.singleton and not summaries.singleton:
            raise DataError(message("singleton", "True only for logs with at most one "
                                    "event per period", "a log with several events in one "
                                    "period"))
        return Reading(_Log(summaries, int(n_dropped), kind), source=kind)

    def draw(self, plan: Plan, data: _Log, rng: ResolvedRNG) -> _Keyed:
        """The secret key of the node noise (the noise itself is a function of it)."""
        build = WindowBuild.of(self.par, epsilon=self.par.epsilon, delta=self.par.delta,
                               seeded=rng.seeded, n_dropped=data.n_dropped,
                               source_kind=data.source_kind)
        return _Keyed(data.summaries, rng.generator.bytes(32), build)

    def build(self, plan: Plan, noisy: _Keyed) -> WindowCountsRelease:
        state = attach_state(noisy.summaries, key=noisy.key, build=noisy.build, plan=plan)
        return WindowCountsRelease.from_state(state)


@public_errors("release_window_counts")
def release_window_counts(
    source: Any,
    *,
    item: str | None = None,
    time: str | None = None,
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
    out_of_range: str = "error",
    confidence: float = 0.95,
    engine: str | Engine | Any = None,
    rng: RNGLike = None,
    accountant: BudgetAccountant | None = None,
    group: str | None = None,
    max_groups_per_item: int | str | None = None,
    groups: Any = None,
    selection_epsilon: float | str = "auto",
    selection: str = "auto",
    capping_epsilon: float | None = None,
) -> Any:
    """Release reach and k+ reach over cumulative, rolling and arbitrary time windows.

    The mechanisms of Ghazi, Kumar, Manurangsi and Nelson (2023), "Private counting of
    distinct and k-occurring items in time windows" (ITCS): cumulative windows by one dyadic
    tree; rolling windows by two trees per block (or one instance at event level); arbitrary
    windows by a 2d dyadic tree with lazy noise (event level) or one cumulative tree per start
    (item level, optionally on groups of periods for declared singleton logs); exactly-k
    counts as differences (:meth:`WindowCountsRelease.exactly`).

    Parameters
    ----------
    source : mapping, (items, times) pair, path, SQL, relation or DataFrame
        The event log: one row per event (item, time). In-memory columns go through the memory
        engine; files, SQL and relations through ``dpfreq.engines``.
    item, time : str
        Column names (required except for an ``(items, times)`` pair).
    horizon : int
        Public number of periods ``T``; times must be integers in ``1..T``. Or give
    start, end, period :
        A public time range ``[start, end]`` cut into periods of public length ``period``
        (``"1d"``, ``"6h"``, ``"30min"``, timedelta); period ``g`` covers
        ``[start + (g−1)·period, start + g·period)``. ``end`` is inclusive: a date-only
        ``end`` means through the end of that day, a timestamp up to and including it;
        ``T`` is the number of periods needed to cover ``[start, end]``.
    time_unit : {"s", "ms", "us", "ns"}, optional
        With ``start``/``end``/``period``: the time column holds integer epochs in this unit
        (an instant, converted to a UTC timestamp before bucketing). Without it an integer
        column is integer periods (``horizon``); a timestamp column with it is a DataError.
    timezone : str, default "UTC"
        IANA zone of the period boundaries (with ``start``/``end``/``period``): each event's
        instant is converted to its wall-clock time in this zone before bucketing, so daily
        periods start at local midnight (a daylight-saving day has 23 or 25 hours). A naive
        ``start``/``end`` is a wall-clock time in the zone; a naive timestamp column is read
        as UTC instants, as without a zone. Stated in ``mechanism_params["axis"]``.
    epsilon : float
        Total ε for the whole release (all families, all k). No default.
    delta : float, default 0
        δ > 0 gives an (ε, δ)-DP release: the better (smaller predicted error) of pure-ε
        accounting with advanced composition over item-level blocks / starts, and zCDP
        accounting with discrete Laplace or discrete Gaussian node noise (see Notes).
    unit : {"event", "item", "item_replace"}
        Unit of privacy. Required: there is no default. ``"event"``: add or remove one event;
        ``"item"``: add or remove one item with all its events; ``"item_replace"``: replace
        one item's events by any others (calibrated at twice the ``"item"`` sensitivity).
    k_values : int or sequence of int
        The k of ``f≥k`` to release (``1`` = reach).
    windows : sequence
        Query families: ``"cumulative"``, ``"total"`` (the one window ``[1, T]``, answered as
        one query with its structure's whole budget), ``"all"`` (every ``[t1, t2]``) and
        integer widths ``W`` (rolling windows ``[max(1, t−W+1), t]``), ``1 <= W <= T``.
        Required: there is no default family (each costs its share of ε).
    method : "auto" or mapping
        ``"auto"`` picks, per family and k, the structure with the smallest predicted mean
        squared error from public parameters only (recorded in ``mechanism_params``). A mapping
        ``{family: method}`` forces one (see :mod:`dpfreq.windows.structures.base`).
    singleton : bool, default False
        Declares (publicly) that the log has at most one event per period. Enables time
        compression for item-level arbitrary windows; a log violating it is a DataError.
    out_of_range : {"error", "drop"}
        What to do with events outside the public range; the number dropped is kept privately
        (``release.n_dropped``), not published.
    confidence : float, default 0.95
        Confidence of the intervals in ``release.error``.
    engine : str, Engine or SparkSession, optional
        Where the log is reduced (:func:`dpfreq.engines.get_engine`): the engine reduces it to
        the per-(family, k) summaries of :mod:`dpfreq.windows.data.summaries`; on Spark this runs
        per partition on the executors and only the summaries reach the driver.
    rng : None, int or numpy.random.Generator
        None: secure randomness (production). Seeds are for tests only (``seeded=True``).
    accountant : Accountant or Ledger, optional
        Checked for ``(epsilon, delta)`` before the source is read (an unaffordable call reads
        nothing), charged after every check (parameters, plan, memory, data) has passed and
        before any noise is drawn: a refused call spends nothing.
    group, max_groups_per_item, groups : optional
        A grouped release (:mod:`dpfreq.windows.grouped.release`): the group column, the
        public bound
        ``m`` on the groups one item may touch (required at ``unit="item"``, refused at
        ``unit="event"``, where one event is in one group) and the public list of groups (or
        a file of one name per line); returns a
        :class:`~dpfreq.windows.grouped.result.GroupedWindowRelease` of one window release per
        group, spent once: ``(ε/m, δ/m)`` per group at ``"item"``, ``(ε, δ)`` at ``"event"``,
        or, with δ > 0, ρ/m-zCDP per group when that predicts less error. Without ``groups``
        and with ``delta`` in (0, 1e-3]: the data's groups are chosen by private partition
        selection with ``selection_epsilon`` of ε and a share of δ, and released with the
        rest (:func:`~dpfreq.windows.grouped.release.window_budget`).
    selection_epsilon : float or "auto", default "auto"
        With ``group=`` and no ``groups``: the ε of the private partition selection, in
        (0, ``epsilon``); ``"auto"`` chooses the share from public parameters only (the one
        minimising the items a group needs to be found plus twice its predicted RMSE; the
        release states the choice and why in ``mechanism_params["split"]``).
    selection : {"auto", "truncated_geometric", "set_union"}, default "auto"
        With ``group=`` and no ``groups``: the partition selection's mechanism — the truncated
        geometric on each group's item count, or the weighted set union, in which an item
        with ``s`` kept groups gives each a ``1/s`` share of its weight (better when items
        hold fewer than ``m`` groups); ``"auto"`` chooses from public parameters and says why
        (:func:`~dpfreq.grouped.selection.plan_partition_selection`,
        ``mechanism_params["selection"]["why"]``).
    capping_epsilon : float or None, default None
        With ``group=`` at ``unit="item"``: None (not measured), or the share of ``epsilon``,
        in (0, ``epsilon``), that measures the fraction of (item, group) pairs the cap
        ``max_groups_per_item`` dropped (``rel.dropped_fraction``, with its interval;
        :mod:`dpfreq.grouped.dropped`); the release spends the rest (basic composition).
        Refused at ``unit="event"`` (nothing is capped). Required with
        ``max_groups_per_item="auto"``: ``m`` is then chosen in 1..16 from a noisy histogram
        of groups per item measured with this share, to minimise the predicted bias + noise
        (:mod:`dpfreq.grouped.bound_choice`; ``mechanism_params["bound_choice"]`` states
        ``m``, this ε and why), and the dropped fraction is post-processing of it.

    Returns
    -------
    WindowCountsRelease
        Or a ``GroupedWindowRelease`` with ``group=``.

    Privacy
    -------
    Unit of privacy: one event (``unit="event"``: neighbours differ by adding or removing one
    occurrence of one item at one period), one item (``unit="item"``: neighbours differ by
    adding or removing one item with its whole occurrence history) or one item's history
    (``unit="item_replace"``: it is replaced by any other; cumulative structures at their exact
    sensitivity, the others at twice their ``item`` sensitivity).
    ``mechanism_params["relation"]`` states it. The whole release (every answer to every window,
    however many are queried later) is (ε, δ)-DP: each (family, k) structure gets ε/m (basic
    composition over m structures); inside a structure the node noise is calibrated to the ℓ1
    sensitivity ``Δ · (nodes per point)`` with Δ the multiset symmetric difference of the
    point sets; node noise is fixed per node (lazy, keyed, independent sub-keys per tree).
    Data-dependent facts that are not private (events dropped as out of range, whether the log
    is singleton) are kept in the release's private state only, never in ``to_dict``.
    With ``group=``: the Privacy paragraph of
    :func:`dpfreq.windows.grouped.release.release_grouped_window_counts` (each item bounded to ``m``
    groups at ``"item"``; parallel composition over groups at ``"event"``).

    Raises
    ------
    ParameterError, DataError
        Invalid parameters or data (missing unit, bad ε/δ, k < 1, W > T, a forced method
        not admissible, missing columns, non-integer times, times outside the range, a
        horizon too large for memory, ...). Nothing is charged then.

    Notes
    -----
    * Methods per family (chosen by ``method="auto"`` from the closed-form mean squared
      error, public parameters only): cumulative ``simple`` | ``tree`` (layered ``B``-ary,
      ``B`` and the root level chosen for ``T``) | ``per_query``; rolling windows
      ``blocks`` | ``single`` (event level) | ``per_query``; arbitrary windows ``tree2d``
      (event level) | ``per_start`` | ``per_query`` | ``compressed`` (item level, declared
      singleton). ``per_query`` is the composition baseline.
    * Cumulative trees are answered by least squares over all their blocks when
      ``T · blocks <= 2^18``; per-start trees by the consistency pass (Hay et al. 2010) when
      their domain has at most 1024 leaves. ``mechanism_params["methods"][...]["why"]``
      states the chosen structure's predicted RMSE against the next best.
    * With ``delta > 0`` two accounting plans are compared and the better one is used: pure ε
      (basic composition; advanced composition over item-level blocks/starts), or zCDP
      (``ρ`` from (ε, δ), split equally; each structure uses discrete Laplace or the exact
      discrete Gaussian, whichever predicts less error). ``mechanism_params["accounting"]``
      says which.

    Examples
    --------
    >>> rel = release_window_counts(([1, 1, 2], [1, 2, 2]), horizon=2, epsilon=1.0,
    ...                             unit="event", k_values=[1], rng=0, windows=["cumulative"])
    >>> rel.value["cumulative"][1].shape
    (2,)
    """
    acct = check_accountant(accountant)
    check_choice(out_of_range, "out_of_range", ("error", "drop"))
    par = check_window_params(horizon=horizon, start=start, end=end, period=period,
                              time_unit=time_unit, timezone=timezone, epsilon=epsilon,
                              delta=delta, unit=unit, k_values=k_values,
                              windows=windows, method=method, singleton=singleton,
                              confidence=confidence)
    if group is not None or max_groups_per_item is not None or groups is not None:
        return release_grouped_window_counts(
            source, par=par, item=item, time=time, group=group, groups=groups,
            max_groups_per_item=max_groups_per_item, out_of_range=out_of_range, engine=engine,
            rng=rng, accountant=acct, selection_epsilon=selection_epsilon,
            selection=selection, capping_epsilon=capping_epsilon)
    check_ungrouped(selection_epsilon=selection_epsilon, selection=selection,
                    capping_epsilon=capping_epsilon)
    steps = _WindowSteps(par=par, source=source, item=item, time=time, engine=engine,
                         out_of_range=out_of_range)
    return run_release(steps, accountant=acct, rng=rng)
