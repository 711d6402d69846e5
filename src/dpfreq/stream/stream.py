"""The reach stream: created once with public parameters and a budget, appended to each period.

:meth:`ReachStream.create` checks every public parameter, plans the counter
(:mod:`dpfreq.stream.auto`), charges the budget **once** (accountant or ledger), and only then
draws the stream's secret key (nothing random runs before the charge). :meth:`ReachStream.append`
takes the events of the next period(s), updates the per-item state where it lives
(:mod:`dpfreq.stream.items`), measures the rows those periods close (:mod:`dpfreq.stream.measure`),
saves the state atomically (:mod:`dpfreq.stream.state`) and returns one release per new period
(:mod:`dpfreq.stream.result`). An append costs no budget: the noise is a deterministic function of
the key, and every answer is post-processing of noisy measurements. :meth:`ReachStream.release`
answers any past period from the saved measurements (free).
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._signing import signing_key
from dpfreq._validate import check_confidence, message
from dpfreq.budget import BudgetAccountant, check_accountant
from dpfreq.errors import DataError, ParameterError, public_errors
from dpfreq.grouped.dropped import capping_bound
from dpfreq.pipeline import BudgetGate, Charge
from dpfreq.release import public_floats, to_jsonable
from dpfreq.rng import RNGLike, derive_key, resolve_rng
from dpfreq.stream.auto import StreamPlan
from dpfreq.stream.capping import (
    capping_counter,
    capping_key,
    capping_widths,
    rebuilt_counter,
)
from dpfreq.stream.items import EventTable, SparkEvents, UpdatePlan, item_store
from dpfreq.stream.items.files import remove_items
from dpfreq.stream.items.reader import EMPTY_PERIOD, AppendSpec
from dpfreq.stream.lock import LOCK_FILE, state_lock
from dpfreq.stream.measure import measure_periods
from dpfreq.stream.params import check_params, period_of
from dpfreq.stream.publish import widths_through
from dpfreq.stream.releases import build_releases
from dpfreq.stream.resend import Resend, compare_periods
from dpfreq.stream.result import StreamRelease
from dpfreq.stream.state import (
    MANIFEST,
    StreamState,
    load_state,
    manifest_of,
    save_state,
    saved_identity,
)

__all__ = ["ReachStream"]

IntArray = NDArray[np.int64]


def _public(record: dict[str, Any]) -> dict[str, Any]:
    """The plan's record as the manifest saves it (JSON types, public floats)."""
    out: dict[str, Any] = json.loads(json.dumps(public_floats(to_jsonable(record)),
                                                sort_keys=True))
    return out


def _fresh_directory(path: Any) -> Path:
    """The state directory: new or empty, in a writable place (checked before the charge;
    created after it is checked)."""
    try:
        p = Path(path)
    except TypeError:
        raise ParameterError(message("path", "a directory path", path)) from None
    if (p / MANIFEST).exists() or (p.exists() and (not p.is_dir() or any(
            q.name != LOCK_FILE for q in p.iterdir()))):
        raise ParameterError(message("path", "a new or empty directory (a stream is "
                                     "created once; open an existing one with "
                                     "ReachStream.open)", str(p)))
    parent = p if p.exists() else next((a for a in p.absolute().parents if a.exists()), None)
    if parent is None or not os.access(parent, os.W_OK | os.X_OK):
        raise ParameterError(message("path", "a directory this process can create and "
                                     "write", str(p)))
    return p


def _checked_plan(path: Path, state: StreamState) -> StreamPlan:
    """The plan of a saved stream, rebuilt from its saved spec (never planned again: a plan
    compares every layout, seconds for a long epoch), refused if its counter is not the one
    that measured it."""
    try:
        plan = state.params.saved_plan(state.plan, state.counter)
        same = _public(plan.counter.record()) == state.plan.get("counter")
    except ValueError:
        same = False
    if not same:  # rows measured by another counter: refuse
        raise DataError(f"{path} is not a valid reach stream for this dpfreq: its counter "
                        "was planned differently (created by another version); open it "
                        "with the version that created it.")
    return plan


def _checked_capping(path: Path, state: StreamState) -> Any:
    """The dropped-fraction counter of a saved stream (None when not measured), rebuilt from
    its saved spec and refused, as :func:`_checked_plan` refuses the reach counter, if it is
    not the one planned at creation (its record, saved then) or does not fit the stream's
    parameters."""
    if state.params.capping_epsilon is None:
        return None
    try:
        counter = rebuilt_counter(state.params, state.cap_counter)
        same = _public(counter.record()) == state.cap_record
    except ValueError:
        same = False
    if same:
        return counter
    raise DataError(f"{path} is not a valid reach stream for this dpfreq: its "
                    "dropped-fraction counter was planned differently (created by another "
                    "version); open it with the version that created it.")


class ReachStream:
    """Cumulative reach and k+ reach released every period, from one budget.

    Create one with :meth:`create`, reopen it with :meth:`open`; :meth:`append` the events of
    each new period and get its release; :meth:`release` answers any past period again.

    Attributes
    ----------
    path : pathlib.Path
        The state directory (holds the secret key and exact counts: protect it).
    params : StreamParams
        The public parameters.
    plan : StreamPlan
        The counter, the per-structure budget and why they were chosen.
    capping : counter or None
        With ``capping_epsilon``: the online counter of the two dropped-fraction sums
        (:mod:`dpfreq.stream.capping`); else None.

    Examples
    --------
    >>> import tempfile
    >>> s = ReachStream.create(tempfile.mkdtemp() + "/reach", item="user", time="day",
    ...                        horizon=30, k_values=[1, 3], unit="item", epsilon=1.0,
    ...                        delta=0.0, method="auto", late="error", rng=0)
    >>> s.plan.method
    'simple'
    >>> rels = s.append({"user": [1, 2, 2], "day": [1, 1, 2]}, through=2)
    >>> [r.period for r in rels], s.last_period
    ([1, 2], 2)
    """

    def __init__(self, path: Path, state: StreamState, plan: StreamPlan,
                 capping: Any = None) -> None:
        self.path, self._state, self.plan = path, state, plan
        self.params, self.capping = state.params, capping

    @property
    def last_period(self) -> int:
        """The last period appended (0 before the first append)."""
        return self._state.last

    @property
    def seeded(self) -> bool:
        """Whether the key came from a seed (reproducible: not for production)."""
        return self._state.seeded

    @classmethod
    @public_errors("ReachStream.create")
    def create(cls, path: Any, *, item: str, time: str, horizon: int | None,
               k_values: Any, unit: str, epsilon: float, delta: float, method: str,
               late: str, start: Any = None, period: Any = None, group: str | None = None,
               groups: Any = None, max_groups_per_item: int | None = None,
               confidence: float = 0.95, engine: str = "duckdb",
               capping_epsilon: float | None = None, rng: RNGLike = None,
               accountant: BudgetAccountant | None = None) -> ReachStream:
        """Create a stream: check, plan, charge the budget once, then draw its secret key.

        Parameters
        ----------
        path : str or pathlib.Path
            A new (or empty) directory for the stream's state.
        item, time : str
            The item and time columns of every append's events.
        horizon : int or None
            ``T``, the number of periods (appends past it are refused), or ``None``: no
            horizon (an unbounded stream; error stated as a function of ``t``). Required.
        k_values : int or sequence of int
            The k of the k+ reach curves (``1`` = reach).
        unit : {"item", "event", "item_replace"}
            Unit of privacy. Required: there is no default.
        epsilon, delta : float
            The budget of the whole stream, every period included. Required (``delta=0``
            for pure ε-DP; ``delta > 0`` adds zCDP accounting and the factorization).
        method : {"auto", "simple", "tree", "smooth", "factorization", "epochs"}
            The online counter; ``"auto"`` picks the smallest predicted error from public
            parameters and says why (``plan.record["why"]``).
        late : {"drop", "error"}
            Events of an already closed period in a later append: dropped (counted privately,
            never merged) or refused.
        start, period : optional
            Timestamps cut into periods of length ``period`` (``"1d"``, ``"6h"``) from
            ``start`` (UTC); both None: the time column holds integer periods ``1, 2, …``.
        group, groups, max_groups_per_item : optional
            A grouped stream: the group column, the public list of groups, and ``m``, the
            groups one item may count in (required at ``unit="item"``, refused at ``"event"``).
        confidence : float, default 0.95
            Confidence of the intervals and of the band.
        engine : {"duckdb", "memory", "spark"}, default "duckdb"
            Where the per-item state lives: Parquet files updated by DuckDB, numpy arrays, or
            Parquet directories updated by Spark SQL (appends then read their events with
            Spark: a Spark DataFrame, a Parquet path, ...; the session is the active one, or
            a new ``local[*]`` one).
        capping_epsilon : float, optional
            A grouped stream with ``max_groups_per_item``: the share ``ε_c`` of ``epsilon``, in
            ``(0, epsilon)``, that measures the fraction of (item, group) pairs the cap
            dropped, released every period with its interval (``rel.dropped_fraction``;
            :mod:`dpfreq.stream.capping`); the reach counters spend ``epsilon − ε_c``.
            Refused at ``unit="event"`` and without ``max_groups_per_item``. Default None:
            not measured (never a share chosen for you).
        rng : None, int or numpy.random.Generator
            None: secure randomness (production). Seeds are for tests only.
        accountant : Accountant or Ledger, optional
            Charged ``(epsilon, delta)`` once, before the key is drawn.

        Returns
        -------
        ReachStream

        Raises
        ------
        ParameterError
            A bad or missing parameter, a forced method that cannot be used, a directory
            that already holds a stream. Nothing is charged then.
        EngineUnavailableError
            ``engine="spark"`` without pyspark (the message is the ``pip install`` to run).
            Nothing is charged then.
        BudgetExceededError
            The accountant cannot afford the stream.

        Privacy
        -------
        Unit of privacy: one item (``unit="item"``: neighbours add or remove one item with all
        its events, in every period), one event (``"event"``: add or remove one event) or one
        item's events replaced (``"item_replace"``). The whole stream — every answer of every
        period, past, present and future, and every query of :meth:`release` — is
        ``(epsilon, delta)``-DP for that relation: the k levels share the budget (basic
        composition, or zCDP with ``delta > 0``), groups compose in parallel (``"event"``) or
        over the at most ``m`` groups an item keeps (``"item"``), each counter's node noise is
        calibrated to its exact sensitivity and fixed per node (a function of the secret key),
        and appends only measure new rows of the same counters. With ``capping_epsilon`` the
        two dropped-fraction counters are pure ``ε_c``-DP (one item adds at most ``2M − m`` to
        their increments; :mod:`dpfreq.stream.capping`) and the reach counters run at
        ``ε − ε_c``: basic composition. The budget is charged here, once.
        """
        func = "ReachStream.create"
        acct = check_accountant(accountant)
        resolved = resolve_rng(rng)
        par = check_params(item=item, time=time, horizon=horizon, start=start, period=period,
                           k_values=k_values, unit=unit, epsilon=epsilon, delta=delta,
                           method=method, group=group, groups=groups,
                           max_groups_per_item=max_groups_per_item, late=late,
                           confidence=confidence, engine=engine,
                           capping_epsilon=capping_epsilon)
        plan = par.plan()
        capping = None if par.capping_epsilon is None else capping_counter(par)[0]
        plan = dataclasses.replace(plan, record=_public(plan.record))  # as saved and reopened
        item_store(par.engine)  # the engine is there (Spark: pyspark installed)
        directory = _fresh_directory(path)
        signing_key()  # a malformed DPFREQ_ARTIFACT_KEY is refused before the charge
        gate = BudgetGate(acct, Charge(par.epsilon, par.delta, par.unit, func))
        gate.check()
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError:  # the writability check cannot see every file system's rules
            raise ParameterError(message("path", "a directory this process can create and "
                                         "write", str(directory))) from None
        with state_lock(directory):  # two creations of one directory: one charge, one key
            _fresh_directory(directory)
            gate.spend(par.engine)
            key = resolved.generator.bytes(32)  # after the charge: nothing random before it
            g, k = par.n_groups, len(par.k_values)
            state = StreamState(params=par, seeded=resolved.seeded, key=key,
                                plan=plan.record, counter=plan.counter.spec(),
                                exact=np.zeros((g, k, 0), dtype=np.int64),
                                noisy=np.zeros((k, g, 0), dtype=np.int64),
                                cap_counter={} if capping is None else capping.spec(),
                                cap_record={} if capping is None else
                                _public(capping.record()))
            save_state(directory, state)
        return cls(directory, state, plan, capping)

    @classmethod
    @public_errors("ReachStream.open")
    def open(cls, path: Any) -> ReachStream:
        """Open a stream saved in ``path`` (checked: kind, version, digest or signature).

        Examples
        --------
        >>> import tempfile
        >>> d = tempfile.mkdtemp() + "/s"
        >>> _ = ReachStream.create(d, item="u", time="t", horizon=3, k_values=1, unit="item",
        ...                        epsilon=1.0, delta=0.0, method="simple", late="drop", rng=1)
        >>> ReachStream.open(d).params.horizon
        3
        """
        p = Path(path)
        manifest_of(p)  # before the lock: no lock file left in a directory that is no stream
        with state_lock(p, shared=True):  # not while an append replaces the per-item file
            state = load_state(p)
        return cls(p, state, _checked_plan(p, state), _checked_capping(p, state))

    def _kept(self) -> bool:
        """Whether items are kept (before, an append's keys may be of either kind: an empty
        first day fixes nothing)."""
        return self._state.items_file is not None and self._state.n_pairs > 0

    def _spec(self, after: int, through: int) -> AppendSpec:
        """What an append reads; integer ids as their decimal text once the kept keys are
        text (:mod:`dpfreq.stream.items.reader`)."""
        par = self.params
        return AppendSpec(item=par.item, time=par.time, group=par.group, groups=par.groups,
                          start_us=par.start_us, period_us=par.period_us, after=after,
                          through=through,
                          text_keys=self._kept() and self._state.key_kind == "text")

    def _update_plan(self, after: int, through: int) -> UpdatePlan:
        par = self.params
        bound_key = derive_key(self._state.key, "stream", "group-bounding").hex()
        return UpdatePlan(k_values=par.k_values, n_groups=par.n_groups,
                          group_names=par.groups, bound=par.max_groups_per_item,
                          bound_key_hex=bound_key, after=after, through=through,
                          seen_bound=None if self.capping is None else
                          capping_bound(int(par.max_groups_per_item or 0)))

    @public_errors("ReachStream.append")
    def append(self, source: Any, *, through: Any) -> list[StreamRelease]:
        """Append the events of the periods after :attr:`last_period` through ``through``.

        Parameters
        ----------
        source : mapping, tuple, path, SQL, DataFrame or DuckDB relation
            The events (item, time[, group] columns) of the new periods (on the Spark
            engine: a Spark DataFrame, a Parquet/CSV path, SQL, a table or a mapping).
        through : int, date or timestamp
            The last period this append closes. A period already appended makes the call a
            re-send (nothing new is closed).

        Returns
        -------
        list of StreamRelease
            One per period closed, preceded by one per closed period the source re-sends
            (from the first one it holds events of; the stored answers, without new noise:
            a cron job re-run over days 5–7 when 5–6 were appended gets 5 and 6 as stored and
            7 appended, in one state write). A closed period counts as re-sent when its events
            are those appended for it (:mod:`dpfreq.stream.resend`).

        Raises
        ------
        DataError
            Events after ``through``; with ``late="error"`` a closed period re-sent with
            other events (named; with ``late="drop"`` its events are dropped and counted,
            never merged) and events before the first period; a source re-sending closed
            periods without an event of the new ones; nulls; wrong types.

        Privacy
        -------
        Spends nothing: the stream's budget was charged at creation and covers every append
        (see :meth:`create`). Whether an append is refused depends on the data and public
        parameters only, never on the noise.
        """
        with state_lock(self.path):  # one writer; the state as saved, not as first opened
            self._reload()
            return self._append(source, period_of(self.params, through))

    def _reload(self) -> None:
        """Adopt the saved state when another writer advanced it since this object read it
        (:mod:`dpfreq.stream.lock`)."""
        if saved_identity(self.path) != (self._state.generation, self._state.key):
            state = load_state(self.path)  # (another key: the directory holds a new stream)
            self.plan, self._state, self.params = (_checked_plan(self.path, state), state,
                                                   state.params)
            self.capping = _checked_capping(self.path, state)

    def _append(self, source: Any, t: int) -> list[StreamRelease]:
        """Append the periods after the saved last period through ``t``, answering the closed
        periods the source re-sends from the state (:mod:`dpfreq.stream.resend`; under the
        lock)."""
        st = self._state
        store = item_store(self.params.engine)
        events = store.read(source, self._spec(min(st.last, t), t))
        try:
            if t <= st.last:  # nothing new: a re-send, answered without a write
                return build_releases(self, self._check_events(events, t).first, t)
            out = self.path / f"items-{st.generation + 1}.{store.suffix}"
            current = self.path / str(st.items_file) if self._kept() else None
            checked: list[Resend] = []  # the store runs the check once, before any write
            res = store.update(events, self._update_plan(st.last, t), current, out,
                               lambda: checked.append(self._check_events(events, t)))
            (resend,) = checked
            digests = tuple(events.periods[p].digest if p in events.periods else EMPTY_PERIOD
                            for p in range(st.last + 1, t + 1))
        finally:
            events.close()
        exact = np.concatenate((st.exact, res.increments), axis=2)
        noisy = measure_periods(self.plan.counter, st.key, self.params.k_values, exact,
                                st.noisy, st.last, t, self.params.groups is not None)
        par = self.params
        widths = widths_through(self.plan.counter, st.widths, t, 1.0 - par.confidence,
                                par.n_groups * len(par.k_values))
        new = st.advanced(generation=st.generation + 1, widths=widths, items_file=res.items_file,
                          **self._capping_measured(res.capping, t),
                          items_digest=res.items_digest, key_kind=res.key_kind, last=t,
                          digests=(*st.digests, *digests), exact=exact, noisy=noisy,
                          counter=self.plan.counter.spec(),  # with the epochs it reached
                          n_late_dropped=st.n_late_dropped + resend.n_late,
                          n_bounded_out=st.n_bounded_out + res.n_bounded_out,
                          n_pairs=res.n_pairs)
        save_state(self.path, new)  # the commit: atomic rename of the manifest
        self._state = new
        if st.items_file is not None:
            remove_items(self.path / st.items_file)
        return build_releases(self, resend.first, t)

    def _capping_measured(self, increments: IntArray | None, t: int) -> dict[str, Any]:
        """The dropped-fraction counters' state after measuring periods through ``t`` (their
        exact increments, noisy rows under their own sub-key, half-widths, spec)."""
        st, cap = self._state, self.capping
        if cap is None:
            return {}
        if increments is None:  # the store did not remember the capped-out pairs
            raise DataError("the item store of this stream did not measure the pairs its cap "
                            "dropped; the append is refused and the stream unchanged.")
        exact = np.concatenate((st.cap_exact, increments[None, :, :]), axis=2)
        noisy = measure_periods(cap, capping_key(st.key), (1, 2), exact, st.cap_noisy,
                                st.last, t, False)
        widths = capping_widths(cap, st.cap_widths, t, 1.0 - self.params.confidence)
        return {"cap_exact": exact, "cap_noisy": noisy, "cap_widths": widths,
                "cap_counter": cap.spec()}

    def _check_events(self, events: EventTable | SparkEvents, t: int) -> Resend:
        """The closed periods the append re-sends (:mod:`dpfreq.stream.resend`); refuses
        events after ``t``, a source that re-sends closed periods but holds no event of the
        new ones it would close (yesterday's file named as today's), and with
        ``late="error"`` a changed closed period (named) and events before the stream's first
        period."""
        if events.n_future:
            raise DataError(message("source", "events of the periods "
                                    "up to through only (append later periods with a later "
                                    "through)", "events after through"))
        last, error = self._state.last, self.params.late == "error"
        resend = compare_periods(events.periods, self._state.digests, events.n_late, t)
        if error and resend.changed:
            raise DataError(message("source", "the events appended for period "
                                    f"{resend.changed[0]} when re-sent (late='error': a "
                                    "closed period is never changed; to drop late events "
                                    "create the stream with late='drop')", "other events"))
        if last < t and resend.first <= last and not any(p > last for p in events.periods):
            raise DataError(message("source", "events of a period it closes too when it "
                                    "re-sends closed periods (a re-run of an appended file "
                                    "names that file's last period as through; a new period "
                                    "without events is appended alone)",
                                    "events of closed periods only"))
        if error and resend.n_late:
            raise DataError(message("source", "events of the stream's periods only "
                                    "(late='error' refuses events before the stream's first "
                                    "period; to drop them create the stream with "
                                    "late='drop')", "late events"))
        return resend

    @public_errors("ReachStream.release")
    def release(self, through: Any = None, *, confidence: float | None = None
                ) -> StreamRelease:
        """The release of a past period (default: the last), from the saved measurements
        (as saved now: appends by other processes since this object was opened included).

        Privacy
        -------
        Post-processing of the noisy measurements: free, any number of times (see
        :meth:`create`).
        """
        with state_lock(self.path, shared=True):  # what other writers appended since
            self._reload()
        if self._state.last == 0:
            raise ParameterError(message("through", "a period already appended (the "
                                         "stream has none yet)", through))
        t = self._state.last if through is None else period_of(self.params, through)
        if t > self._state.last:
            raise ParameterError(message("through", f"a period already appended (<= "
                                         f"{self._state.last})", through))
        conf = None if confidence is None else check_confidence(confidence, "confidence")
        return build_releases(self, t, t, confidence=conf)[0]

    @property
    def state(self) -> StreamState:
        """The private state (secret key, exact increments, noisy measurements)."""
        return self._state
