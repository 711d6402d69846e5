"""Group commit of report batches: one writer thread, one transaction for many batches.

Request handlers validate a batch against the study and the device's enrolment, then hand it to
the :class:`Ingestor` and wait. The writer thread takes every batch waiting (up to
``max_group``), and in **one** transaction reads the slots those devices already stored, decides
each batch (all new or identical → stored; any slot stored with another bit → conflict, nothing
of that batch written), inserts the new reports, adds their ``2·bit − 1`` and counts to the
running per-(order, interval) sums, and commits. A batch for a study that is closed or past
its expiry at that transaction is refused (:class:`Closed`), whatever the handler saw. Only
after the commit returns does any handler answer, so an acknowledged batch is durable
(SQLite ``synchronous=FULL``, PostgreSQL's defaults), and a crash before the commit loses only
unacknowledged batches, which the device re-sends (idempotently).

On PostgreSQL the writer's connection is in autocommit mode and sends its own ``BEGIN`` and
``COMMIT`` through psycopg's pipeline mode, so a group costs four round trips: ``BEGIN`` with
the studies' state and the stored slots, the two of ``COPY``, and the sums with ``COMMIT``.

One writer serializes the writes of this process, which is what SQLite allows anyway, and it
turns one fsync per batch into one per group. Several server processes on one PostgreSQL
database stay correct: the primary key ``(study, device, interval)`` refuses a second copy of a
slot, and a group that meets such a row from another process is rolled back and decided again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import secrets
import threading
from collections import Counter, defaultdict
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from . import storage

__all__ = ["Batch", "Closed", "Conflict", "Enrolment", "Ingestor"]

log = logging.getLogger("dpfreq.server")


class Conflict(Exception):
    """A slot of the batch is already stored with another bit."""


class Closed(Exception):
    """The study was closed, or has expired: it takes no more reports."""


@dataclass
class Batch:
    """Validated reports of one device: ``rows`` are ``(interval, bit)``, distinct intervals."""

    study: str
    device: int
    order: int
    rows: list[tuple[int, int]]
    future: Future | asyncio.Future = field(default_factory=Future)


@dataclass
class _Rejection:
    study: str
    reason: str
    reports: int
    future: Future = field(default_factory=Future)


@dataclass
class Enrolment:
    """A device to enrol: its future resolves to the new device id."""

    study: str
    order: int
    token_hash: str
    created: str
    future: Future = field(default_factory=Future)


_STOP = object()

# The writer's statements, built once (building a statement costs more than running it).
_r, _s = storage.reports, storage.sums
_STORED = sa.select(_r.c.device, _r.c.interval, _r.c.bit).where(
    _r.c.study == sa.bindparam("study"),
    _r.c.device.in_(sa.bindparam("devices", expanding=True)))
_STATE = sa.select(storage.studies.c.study, storage.studies.c.closed,
                   storage.studies.c.closes_at).where(
    storage.studies.c.study.in_(sa.bindparam("studies", expanding=True)))
_ADD_SUMS = (
    _s.update()
    .where(_s.c.study == sa.bindparam("k_study"), _s.c.order == sa.bindparam("k_order"),
           _s.c.interval == sa.bindparam("k_interval"))
    .values(total=_s.c.total + sa.bindparam("d_total"),
            reports=_s.c.reports + sa.bindparam("d_reports")))


class Ingestor:
    """The writer thread (see the module docstring).

    Parameters
    ----------
    engine : sqlalchemy.engine.Engine
    max_group : int
        Most batches committed in one transaction.
    on_commit : callable or None
        Called with ``(batches, reports)`` stored after each commit (metrics).
    """

    def __init__(self, engine: Engine, *, max_group: int = 512, on_commit: Any = None) -> None:
        self.engine = engine
        self.max_group = max_group
        self.on_commit = on_commit
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()  # put in C
        self._conn: Connection | None = None
        self._thread = threading.Thread(target=self._run, name="dpfreq-ingest", daemon=True)

    def start(self) -> None:
        """Start the writer thread."""
        self._thread.start()

    def stop(self) -> None:
        """Finish every batch already submitted, then stop the thread."""
        self._queue.put(_STOP)
        self._thread.join()

    def pending(self) -> int:
        """Items waiting for the writer (approximate, for the metrics)."""
        return self._queue.qsize()

    def submit(self, batch: Batch) -> Future | asyncio.Future:
        """Queue a batch; its future (a thread future, or the asyncio future it was made with,
        resolved on its loop) resolves to the number of reports, or raises Conflict."""
        self._queue.put(batch)
        return batch.future

    def enrol(self, item: Enrolment) -> Future:
        """Queue an enrolment (device row, token hash, enrolled count) for the next group."""
        self._queue.put(item)
        return item.future

    def reject(self, study: str, reason: str, reports: int) -> Future:
        """Count rejected reports of a study by reason (committed with the next group)."""
        item = _Rejection(study, reason, max(1, reports))
        self._queue.put(item)
        return item.future

    def _run(self) -> None:
        stopping = False
        while not stopping:
            items = [self._queue.get()]
            while len(items) < self.max_group:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            if any(it is _STOP for it in items):
                stopping = True
                items = [it for it in items if it is not _STOP]
                while True:  # drain what arrived before the stop
                    try:
                        items.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
            if items:
                self._commit_group(items)
        self._release()

    def _connection(self) -> Connection:
        """The writer's own connection, held between groups: no pool check-out (and, on
        PostgreSQL, no liveness ping) per group. Dropped after a failed group, so the next one
        starts from a fresh connection."""
        if self._conn is None:
            conn = self.engine.connect()
            if conn.dialect.name == "postgresql":  # it sends its own BEGIN and COMMIT
                conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            self._conn = conn
        return self._conn

    def _release(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None

    def _commit_group(self, items: list[Any]) -> None:
        batches = [it for it in items if isinstance(it, Batch)]
        rejections = [it for it in items if isinstance(it, _Rejection)]
        enrolments = [it for it in items if isinstance(it, Enrolment)]
        outcomes: dict[int, Any] = {}
        for attempt in range(3):
            try:
                conn = self._connection()
                with conn.begin():
                    outcomes = self._write(conn, batches, rejections, enrolments)
                break
            except IntegrityError:
                log.warning("ingest: a row was stored concurrently; deciding the group again")
                if attempt == 2:
                    outcomes = {id(b): RuntimeError("concurrent writers")
                                for b in [*batches, *enrolments]}
            except Exception as exc:  # the database failed: nothing of the group is acknowledged
                self._release()
                log.error("ingest: transaction failed: %s", " ".join(str(exc).split())[:300])
                outcomes = {id(b): exc for b in [*batches, *enrolments]}
                break
        stored = 0
        settled: list[tuple[Any, Any, Any]] = [(rj.future, None, None) for rj in rejections]
        settled += [(en.future, outcomes[id(en)], outcomes[id(en)]) for en in enrolments]
        for b in batches:
            out = outcomes[id(b)]
            settled.append((b.future, out, len(b.rows)))
            if not isinstance(out, BaseException):
                stored += out
        _settle_all(settled)
        if self.on_commit is not None:
            self.on_commit(batches, stored, outcomes)

    @staticmethod
    def _write(conn: Connection, batches: list[Batch], rejections: list[_Rejection],
               enrolments: list[Enrolment]) -> dict[int, Any]:
        by_study: dict[str, set[int]] = defaultdict(set)
        for b in batches:
            by_study[b.study].add(b.device)
        if conn.dialect.name == "postgresql":
            closed, existing = _pg_begin_and_read(conn, by_study)
        else:
            closed, existing = _closed_studies(conn, sorted(by_study)), {}
            for study, devs in by_study.items():
                if study not in closed:
                    existing.update(_stored_slots(conn, study, devs))
        outcomes = _enrol(conn, enrolments)
        inserts: list[tuple[str, int, int, int, int]] = []
        # intervals stored per (study, order), all and those with bit 1: counted in C at the end
        slots: dict[tuple[str, int], tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
        rejected: dict[tuple[str, str], int] = defaultdict(int)
        for rj in rejections:
            rejected[(rj.study, rj.reason)] += rj.reports
        for b in batches:
            study, device, order = b.study, b.device, b.order
            if study in closed:
                outcomes[id(b)] = Closed("the study is closed; it takes no more reports")
                rejected[(study, "closed")] += len(b.rows)
                continue
            old = existing.get((study, device))
            new = b.rows
            if old is not None:
                if any(old.get(j, bit) != bit for j, bit in b.rows):
                    outcomes[id(b)] = Conflict("a report of this batch conflicts with a stored one")
                    rejected[(study, "conflict")] += len(b.rows)
                    continue
                new = [(j, bit) for j, bit in b.rows if j not in old]
                old.update(new)
            else:  # a second batch of the device in this group meets these rows
                existing[(study, device)] = dict(new)
            inserts.extend([(study, device, j, order, bit) for j, bit in new])
            every, ones = slots[(study, order)]
            every.extend([j for j, _ in new])
            ones.extend([j for j, bit in new if bit])
            outcomes[id(b)] = len(new)
        if rejected:
            add_rejections(conn, rejected)
        _store(conn, inserts, _sum_deltas(slots))
        return outcomes


Slots = dict[tuple[str, int], dict[int, int]]


def _stored_slots(conn: Connection, study: str, devices: set[int]) -> Slots:
    """The stored slots of ``devices`` of ``study``, interval -> bit per (study, device); a
    device without any (its first upload, the common case) is decided without a lookup per
    report."""
    out: Slots = {}
    for dev, interval, bit in conn.execute(_STORED, {"study": study, "devices": sorted(devices)}):
        out.setdefault((study, int(dev)), {})[int(interval)] = int(bit)
    return out


_PG_STATE = ("SELECT study, closed, closes_at FROM studies WHERE study = ANY(%s::varchar[]) "
             "ORDER BY study FOR SHARE")
# The arrays are cast: psycopg sends a list of small ints as smallint[], and the stored-slot
# read then took five times as long (measured on the writer alone).
_PG_STORED = ('SELECT device, "interval", bit FROM reports '
              "WHERE study = %s AND device = ANY(%s::bigint[])")
def _pg_begin_and_read(conn: Connection, by_study: dict[str, set[int]]) -> tuple[set[str], Slots]:
    """On PostgreSQL, in ONE round trip (psycopg's pipeline mode): ``BEGIN``, the studies'
    state (locked against a concurrent close until the commit, as :func:`_closed_studies`),
    and the stored slots of the group's devices (as :func:`_stored_slots`)."""
    driver = conn.connection.driver_connection
    assert driver is not None
    cursors = []
    try:
        with _pg_errors(), driver.pipeline():
            driver.execute("BEGIN")
            if by_study:
                cursors = [driver.execute(_PG_STATE, (sorted(by_study),))]
                cursors += [driver.execute(_PG_STORED, (study, sorted(devs)))
                            for study, devs in sorted(by_study.items())]
        if not cursors:
            return set(), {}
        closed = _shut(cursors[0].fetchall())
        existing: Slots = {}
        for study, cur in zip(sorted(by_study), cursors[1:], strict=True):
            for dev, interval, bit in cur.fetchall():
                existing.setdefault((study, int(dev)), {})[int(interval)] = int(bit)
        return closed, existing
    finally:
        for cur in cursors:
            cur.close()


@contextlib.contextmanager
def _pg_errors() -> Iterator[None]:
    """psycopg's integrity errors as SQLAlchemy's (the writer decides the group again)."""
    import psycopg

    try:
        yield
    except psycopg.IntegrityError as exc:
        raise sa.exc.IntegrityError("pipeline", None, exc) from exc


def _store(conn: Connection, rows: list[tuple[str, int, int, int, int]],
           sums: list[tuple[tuple[str, int, int], list[int]]]) -> None:
    """Insert the group's new report rows and add its sum deltas in the open transaction.

    On PostgreSQL this also COMMITs: the rows go by COPY (its rows are formatted in C; an
    INSERT from arrays cannot keep up, measured in ``benchmarks/bench_server.py``), then the
    sums' UPDATE and the COMMIT in ONE round trip (psycopg's pipeline mode); an error skips the
    COMMIT and is raised before any batch is acknowledged.
    """
    storage.insert_reports(conn, rows)
    if conn.dialect.name != "postgresql":
        _add_sums(conn, sums)
        return
    driver = conn.connection.driver_connection
    assert driver is not None
    with _pg_errors(), driver.pipeline():
        if sums:
            driver.execute(_PG_ADD_SUMS, _sum_arrays(sums))
        driver.execute("COMMIT")


def _sum_deltas(slots: dict[tuple[str, int], tuple[list[int], list[int]]]
                ) -> list[tuple[tuple[str, int, int], list[int]]]:
    """``((study, order, interval), [Σ(2·bit − 1), count])`` of the stored intervals, sorted
    by key (so concurrent writers update the sums in one order)."""
    out: list[tuple[tuple[str, int, int], list[int]]] = []
    for (study, order), (every, ones) in slots.items():
        count, up = Counter(every), Counter(ones)
        out.extend(((study, order, j), [2 * up[j] - n, n]) for j, n in count.items())
    out.sort()
    return out


_SQLITE_ADD_SUMS = ('UPDATE sums SET total = total + ?, reports = reports + ? '
                    'WHERE study = ? AND "order" = ? AND "interval" = ?')
# One statement of constant text for any number of slots: five array parameters, joined to
# the sums by their primary key.
_PG_ADD_SUMS = ('UPDATE sums SET total = sums.total + v.t, reports = sums.reports + v.c '
                'FROM unnest(%s::varchar[], %s::integer[], %s::integer[], %s::bigint[], '
                '%s::bigint[]) AS v (study, o, j, t, c) '
                'WHERE sums.study = v.study AND sums."order" = v.o AND sums."interval" = v.j')


def _sum_arrays(rows: list[tuple[tuple[str, int, int], list[int]]]) -> list[list[Any]]:
    """The five arrays of :data:`_PG_ADD_SUMS`: study, order, interval, total, count."""
    keys, deltas = zip(*rows, strict=True)
    return [list(col) for col in (*zip(*keys, strict=True), *zip(*deltas, strict=True))]


def _add_sums(conn: Connection, rows: list[tuple[tuple[str, int, int], list[int]]]) -> None:
    """Add ``(total, count)`` deltas to the running sums of ``(study, order, interval)`` slots.

    Both dialects run one statement of constant text on the DB-API cursor of the transaction
    (SQLAlchemy would compile a statement, and a dict of parameters, per group): SQLite one
    UPDATE per slot through executemany (a loop in C over the row tuples, in process);
    PostgreSQL one ``UPDATE ... FROM unnest(arrays)`` for every slot of the group (one round
    trip; the clients' batches touch a hundred slots per group).
    """
    if not rows:
        return
    name = conn.dialect.name
    if name not in ("sqlite", "postgresql"):
        conn.execute(_ADD_SUMS, [
            {"k_study": k[0], "k_order": k[1], "k_interval": k[2], "d_total": v[0],
             "d_reports": v[1]} for k, v in rows])
        return
    cur = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        if name == "sqlite":
            cur.executemany(_SQLITE_ADD_SUMS, [(t, c, *k) for k, (t, c) in rows])
        else:
            cur.execute(_PG_ADD_SUMS, _sum_arrays(rows))
    finally:
        cur.close()


def _closed_studies(conn: Connection, studies: list[str]) -> set[str]:
    """The studies among ``studies`` that take no more reports, read in the writer's
    transaction (PostgreSQL reads and locks them in :func:`_pg_begin_and_read`)."""
    return _shut(conn.execute(_STATE, {"studies": studies})) if studies else set()


def _shut(rows: Any) -> set[str]:
    """The studies of ``(study, closed, closes_at)`` rows that are closed or past expiry."""
    now = datetime.now(UTC)
    return {study for study, closed, closes_at in rows
            if closed is not None or (closes_at is not None
                                      and now >= datetime.fromisoformat(closes_at))}


def _settle(future: Any, outcome: Any, value: Any) -> None:
    """Fail ``future`` with ``outcome`` when it is an exception, else resolve it to ``value``
    (an asyncio future whose request was cancelled is left alone)."""
    if future.done():
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(value)


def _settle_many(items: list[tuple[Any, Any, Any]]) -> None:
    for future, outcome, value in items:
        _settle(future, outcome, value)


def _settle_all(items: list[tuple[Any, Any, Any]]) -> None:
    """Resolve the futures of a committed group: thread futures at once, asyncio futures in
    one callback per event loop (one wake-up of each loop per group, not one per request)."""
    loops: dict[Any, list[tuple[Any, Any, Any]]] = defaultdict(list)
    for item in items:
        if isinstance(item[0], asyncio.Future):
            loops[item[0].get_loop()].append(item)
        else:
            _settle(*item)
    for loop, pending in loops.items():
        with contextlib.suppress(RuntimeError):  # a loop already closed has no one waiting
            loop.call_soon_threadsafe(_settle_many, pending)


def _enrol(conn: Connection, enrolments: list[Enrolment]) -> dict[int, Any]:
    """Insert devices with fresh random ids (below 2^53: exact as JSON numbers), their token
    hashes, and add them to the enrolled counts."""
    if not enrolments:
        return {}
    ids: dict[int, Any] = {}
    taken: set[int] = set()
    for en in enrolments:
        device = secrets.randbits(52) + 1
        while device in taken:
            device = secrets.randbits(52) + 1
        taken.add(device)
        ids[id(en)] = device
    conn.execute(storage.devices.insert(), [
        {"study": en.study, "device": ids[id(en)], "order": en.order, "created": en.created}
        for en in enrolments])
    conn.execute(storage.tokens.insert(), [
        {"hash": en.token_hash, "role": "device", "study": en.study, "device": ids[id(en)],
         "created": en.created} for en in enrolments])
    counts: dict[tuple[str, int], int] = defaultdict(int)
    for en in enrolments:
        counts[(en.study, en.order)] += 1
    e = storage.enrolled
    conn.execute(
        e.update().where(e.c.study == sa.bindparam("k_study"), e.c.order == sa.bindparam("k_order"))
        .values(devices=e.c.devices + sa.bindparam("d_devices")),
        [{"k_study": s, "k_order": o, "d_devices": n} for (s, o), n in sorted(counts.items())])
    return dict(ids)


def add_rejections(conn: Connection, counts: dict[tuple[str, str], int]) -> None:
    """Add rejected-report counts per (study, reason); rows are created on first use."""
    j = storage.rejections
    for (study, reason), n in sorted(counts.items()):
        res = conn.execute(
            j.update().where(j.c.study == study, j.c.reason == reason)
            .values(reports=j.c.reports + n)
        )
        if res.rowcount == 0:
            exists = conn.execute(sa.select(storage.studies.c.study).where(
                storage.studies.c.study == study)).first()
            if exists is not None:
                conn.execute(j.insert().values(study=study, reason=reason, reports=n))
