"""Group commit of report batches: one writer thread, one transaction for many batches.

Request handlers validate a batch against the study and the device's enrolment, then hand it to
the :class:`Ingestor` and wait. The writer thread takes every batch waiting (up to
``max_group``), and in **one** transaction reads the slots those devices already stored (their
upload rows, unpacked), decides each batch (all new or identical → stored; any slot stored with
another bit → conflict, nothing of that batch written), inserts the batch's new reports as ONE
packed upload row (:func:`dpfreq.server.storage.pack`), adds their ``2·bit − 1`` and counts to
the running per-(order, interval) sums, and commits. A batch for a study that is closed or past
its expiry at that transaction is refused (:class:`Closed`), whatever the handler saw. Only
after the commit returns does any handler answer, so an acknowledged batch is durable
(SQLite ``synchronous=FULL``, PostgreSQL's defaults), and a crash before the commit loses only
unacknowledged batches, which the device re-sends (idempotently).

On PostgreSQL the writer's connection is in autocommit mode and sends its own ``BEGIN`` and
``COMMIT`` through psycopg's pipeline mode. A group of batches alone, one per device, is first
tried as **new reports** in ONE round trip (:func:`dpfreq.server.ingest_sql.pg_store_new`):
``BEGIN``, the devices' locks, the studies' state, the sums lock, one statement that inserts
the batches' rows and adds their sums only if every study takes reports and no stored upload
row of a device spans an interval range that meets its batch's, and ``COMMIT``. When that
statement wrote nothing (a study closed or expired, or a possible overlap: a re-sent upload),
the group is decided on its stored slots in four round trips: ``BEGIN`` with the devices'
locks, the studies' state and the stored slots, the two of ``COPY``, and the sums with
``COMMIT``. Groups with enrolments or rejections, and groups with two batches of one device,
go that way directly.

One writer serializes the writes of this process, which is what SQLite allows anyway, and it
turns one fsync per batch into one per group.

**Several writers on one database** (``--workers``, or several servers). A slot is stored at
most once, yet nothing in the schema says so: an upload row is keyed by its smallest interval,
and two overlapping uploads of one device decided by two processes on the same stale read
would store different rows holding the same slot. So a writer decides a device only while no
other writer can commit a row of that device, and reads its stored slots after that holds:

* PostgreSQL: the group's first statement takes a transaction-scoped advisory lock per device
  (a 64-bit hash of study and device), all in increasing key order (so writers never wait in a
  cycle), and holds them until its ``COMMIT`` or rollback. The stored-slot read is a later
  statement of the same transaction; under READ COMMITTED it sees every transaction that
  committed before it started, and PostgreSQL releases a transaction's locks only after its
  commit is visible, so a writer that waited for a device's lock reads the rows of the writer
  it waited for. Two devices whose keys collide only wait for each other. A group holds at
  most ``max_group`` locks, in PostgreSQL's shared lock table (``max_locks_per_transaction``
  × ``max_connections`` entries, 6,400 by default). The running sums are updated under one
  more advisory lock, taken just before their ``UPDATE`` and held to the ``COMMIT``: that
  ``UPDATE`` locks its rows in its join's order, so two writers could otherwise each hold a
  sums row the other waits for.
* SQLite: the transaction starts with ``BEGIN IMMEDIATE``, which takes the database's single
  write lock before anything is read. (The writer's connection is in the driver's autocommit
  mode so that this ``BEGIN`` is its own: the driver would begin a deferred transaction at
  the first write, after the reads.)

The new-reports statement runs after the same locks, in one snapshot for its check and its
writes: a stored row that meets no batch's interval range holds none of its slots, so every
report of the group is new, exactly what the decision on the stored slots would find.

Under either lock the decision sees every stored slot of its devices, so the new reports of a
stored batch are slots never stored before: their smallest interval is the key of a new row,
which meets no other row's key. A key collision (:class:`IntegrityError`) therefore means a
writer that did not take the locks; the group is then rolled back and decided again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections import defaultdict
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from . import ingest_sql as sql
from . import storage
from .groups import GroupThread, settle_all

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
    """Rejected reports of a study, counted by reason with the next group."""

    study: str
    reason: str
    reports: int
    future: Future = field(default_factory=Future)


@dataclass
class _Audit:
    """One line of the audit log (the row's columns), written with the next group."""

    row: dict[str, Any]
    future: Future = field(default_factory=Future)


@dataclass
class Enrolment:
    """A device to enrol: its future resolves to the new device id."""

    study: str
    order: int
    token_hash: str
    created: str
    future: Future = field(default_factory=Future)


class Ingestor(GroupThread):
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
        super().__init__("dpfreq-ingest", max_group)
        self.engine = engine
        self.on_commit = on_commit
        self._conn: Connection | None = None

    def submit(self, batch: Batch) -> Future | asyncio.Future:
        """Queue a batch; its future (a thread future, or the asyncio future it was made with,
        resolved on its loop) resolves to the number of reports, or raises Conflict."""
        self.put(batch)
        return batch.future

    def enrol(self, item: Enrolment) -> Future:
        """Queue an enrolment (device row, token hash, enrolled count) for the next group."""
        self.put(item)
        return item.future

    def reject(self, study: str, reason: str, reports: int) -> Future:
        """Count rejected reports of a study by reason (committed with the next group)."""
        item = _Rejection(study, reason, max(1, reports))
        self.put(item)
        return item.future

    def audit(self, row: dict[str, Any]) -> Future:
        """Queue a line of the audit log (``at, token, role, study, action``) for the next
        group: the service writes nothing but through this thread, so a line never waits for
        the database's write lock behind the writer (on SQLite a second writing connection
        waited, in SQLite's busy handler, seconds under load)."""
        item = _Audit(row)
        self.put(item)
        return item.future

    def handle(self, items: list[Any]) -> None:
        """Commit one group (see :meth:`_commit_group`)."""
        self._commit_group(items)

    def finish(self) -> None:
        """Close the writer's connection when the thread stops."""
        self._release()

    def _connection(self) -> Connection:
        """The writer's own connection, held between groups: no pool check-out (and, on
        PostgreSQL, no liveness ping) per group. Dropped after a failed group, so the next one
        starts from a fresh connection."""
        if self._conn is None:
            conn = self.engine.connect()
            if conn.dialect.name in ("postgresql", "sqlite"):  # it sends its own BEGIN
                conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            self._conn = conn
        return self._conn

    def _release(self) -> None:
        """Close the writer's connection (the next group opens another)."""
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None

    def _commit_group(self, items: list[Any]) -> None:
        """Commit ``items`` (batches, enrolments, rejections) in one transaction and settle
        their futures (what the thread does with each group it takes from the queue)."""
        batches = [it for it in items if isinstance(it, Batch)]
        rejections = [it for it in items if isinstance(it, _Rejection)]
        enrolments = [it for it in items if isinstance(it, Enrolment)]
        audits = [it for it in items if isinstance(it, _Audit)]
        outcomes: dict[int, Any] = {}
        others = len(rejections) + len(enrolments) + len(audits)
        for attempt in range(3):
            try:
                conn = self._connection()
                with conn.begin():
                    new = self._store_new(conn, batches, others)
                    outcomes = new if new is not None else self._write(
                        conn, batches, rejections, enrolments, [a.row for a in audits])
                break
            except IntegrityError:
                log.warning("ingest: a row was stored concurrently; deciding the group again")
                if attempt == 2:
                    outcomes = {id(b): RuntimeError("concurrent writers")
                                for b in [*batches, *enrolments, *audits]}
            except Exception as exc:  # the database failed: nothing of the group is acknowledged
                self._release()
                log.error("ingest: transaction failed: %s", " ".join(str(exc).split())[:300])
                outcomes = {id(b): exc for b in [*batches, *enrolments, *audits]}
                break
        stored = 0
        settled: list[tuple[Any, Any, Any]] = [(rj.future, None, None) for rj in rejections]
        settled += [(a.future, outcomes.get(id(a)), None) for a in audits]
        settled += [(en.future, outcomes[id(en)], outcomes[id(en)]) for en in enrolments]
        for b in batches:
            out = outcomes[id(b)]
            settled.append((b.future, out, len(b.rows)))
            if not isinstance(out, BaseException):
                stored += out
        settle_all(settled)
        if self.on_commit is not None:
            self.on_commit(batches, stored, outcomes)

    @staticmethod
    def _store_new(conn: Connection, batches: list[Batch], others: int) -> dict[int, Any] | None:
        """On PostgreSQL, try to store a group of batches alone, one per device, as all new
        (:func:`dpfreq.server.ingest_sql.pg_store_new`: one round trip, committed); the
        outcomes, or None when the group must be decided on its stored slots (:meth:`_write`:
        a device with a stored row that may overlap, or a study that takes no more reports)."""
        if (conn.dialect.name != "postgresql" or others or not batches
                or not all(b.rows for b in batches)
                or len({(b.study, b.device) for b in batches}) < len(batches)):
            return None
        rows: list[tuple[storage.UploadRow, int]] = []
        slots: dict[tuple[str, int], tuple[list[int], list[int]]] = defaultdict(
            lambda: ([], []))
        for b in batches:
            first, count, intervals, bits = storage.pack(b.rows)
            every, ones = slots[(b.study, b.order)]
            every.extend([j for j, _ in b.rows])
            ones.extend([j for j, bit in b.rows if bit])
            rows.append(((b.study, b.device, first, b.order, count, intervals, bits),
                         max(j for j, _ in b.rows)))
        if not sql.pg_store_new(conn, rows, sql.sum_deltas(slots)):
            return None
        return {id(b): len(b.rows) for b in batches}

    @staticmethod
    def _write(conn: Connection, batches: list[Batch], rejections: list[_Rejection],
               enrolments: list[Enrolment], audits: list[dict[str, Any]]) -> dict[int, Any]:
        by_study: dict[str, set[int]] = defaultdict(set)
        for b in batches:
            by_study[b.study].add(b.device)
        if conn.dialect.name == "postgresql":
            closed, existing = sql.pg_begin_and_read(conn, by_study)
        else:
            if conn.dialect.name == "sqlite":
                sql.sqlite_begin(conn)
            closed, existing = sql.closed_studies(conn, sorted(by_study)), {}
            for study, devs in by_study.items():
                if study not in closed:
                    existing.update(sql.stored_slots(conn, study, devs))
        outcomes = _enrol(conn, enrolments)
        inserts: list[storage.UploadRow] = []
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
            outcomes[id(b)] = len(new)
            if not new:
                continue
            first, count, intervals, bits = storage.pack(new)
            inserts.append((study, device, first, order, count, intervals, bits))
            every, ones = slots[(study, order)]
            every.extend([j for j, _ in new])
            ones.extend([j for j, bit in new if bit])
        if rejected:
            sql.add_rejections(conn, rejected)
        if audits:
            conn.execute(storage.audit.insert(), audits)
        sql.store(conn, inserts, sql.sum_deltas(slots))
        return outcomes


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
