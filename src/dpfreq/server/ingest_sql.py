"""The SQL of the group-commit writer (:mod:`dpfreq.server.ingest`): the locks and reads of a
group's stored slots and studies' state, the inserts of its uploads and the updates of the
running sums.

Both dialects run statements of constant text on the DB-API cursor of the writer's transaction
where SQLAlchemy would compile a statement, and a dict of parameters, per group; on PostgreSQL
the locks and reads, and the sums with the ``COMMIT``, go in one round trip each (psycopg's
pipeline mode).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from . import storage

__all__ = ["Slots", "add_rejections", "add_sums", "closed_studies", "device_lock_key",
           "pg_begin_and_read", "pg_errors", "pg_store_new", "sqlite_begin", "store",
           "stored_slots", "sum_deltas"]

# The writer's statements, built once (building a statement costs more than running it).
_u, _s = storage.uploads, storage.sums
_STORED = sa.select(_u.c.device, _u.c.intervals, _u.c.bits).where(
    _u.c.study == sa.bindparam("study"),
    _u.c.device.in_(sa.bindparam("devices", expanding=True)))
_STATE = sa.select(storage.studies.c.study, storage.studies.c.closed,
                   storage.studies.c.closes_at).where(
    storage.studies.c.study.in_(sa.bindparam("studies", expanding=True)))
_ADD_SUMS = (
    _s.update()
    .where(_s.c.study == sa.bindparam("k_study"), _s.c.order == sa.bindparam("k_order"),
           _s.c.interval == sa.bindparam("k_interval"))
    .values(total=_s.c.total + sa.bindparam("d_total"),
            reports=_s.c.reports + sa.bindparam("d_reports")))



Slots = dict[tuple[str, int], dict[int, int]]


def stored_slots(conn: Connection, study: str, devices: set[int]) -> Slots:
    """The stored slots of ``devices`` of ``study``, interval -> bit per (study, device); a
    device without any (its first upload, the common case) is decided without a lookup per
    report."""
    out: Slots = {}
    for dev, intervals, bits in conn.execute(_STORED, {"study": study,
                                                        "devices": sorted(devices)}):
        out.setdefault((study, int(dev)), {}).update(storage.unpack(intervals, bits))
    return out


def sqlite_begin(conn: Connection) -> None:
    """On SQLite, open the writer's transaction with ``BEGIN IMMEDIATE``: it takes the
    database's write lock before the stored slots are read, so another process cannot commit
    a slot between this read and this commit (the writer's connection is in the driver's
    autocommit mode, which sends no ``BEGIN`` of its own)."""
    cur = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        cur.execute("BEGIN IMMEDIATE")
    finally:
        cur.close()


def device_lock_key(study: str, device: int) -> int:
    """The 64-bit advisory-lock key of a device of a study (BLAKE2b of both: the same in every
    process; two devices that share a key only wait for each other)."""
    digest = hashlib.blake2b(f"{study}\x00{device}".encode(), digest_size=8,
                             person=b"dpfreq-upload").digest()
    return int.from_bytes(digest, "little", signed=True)


# One writer at a time updates the running sums, until its COMMIT: the UPDATE ... FROM unnest
# locks its rows in the join's order, not the array's, so two writers updating overlapping
# sums rows could each wait for the other (a deadlock PostgreSQL would break by failing one).
_SUMS_KEY = int.from_bytes(hashlib.blake2b(b"sums", digest_size=8,
                                           person=b"dpfreq-upload").digest(), "little", signed=True)
_PG_SUMS_LOCK = f"SELECT pg_advisory_xact_lock({_SUMS_KEY})"
_PG_STATE = ("SELECT study, closed, closes_at FROM studies WHERE study = ANY(%s::varchar[]) "
             "ORDER BY study FOR SHARE")
# The arrays are cast: psycopg sends a list of small ints as smallint[], and the stored-slot
# read then took five times as long (measured on the writer alone).
_PG_STORED = ("SELECT device, intervals, bits FROM uploads "
              "WHERE study = %s AND device = ANY(%s::bigint[])")
# unnest returns the keys in the array's order, and the locks are taken in that order.
_PG_LOCK = "SELECT count(pg_advisory_xact_lock(k)) FROM unnest(%s::bigint[]) AS k"


def pg_begin_and_read(conn: Connection, by_study: dict[str, set[int]]) -> tuple[set[str], Slots]:
    """On PostgreSQL, in ONE round trip (psycopg's pipeline mode): ``BEGIN``, a transaction
    advisory lock per device of the group (in increasing key order, so two writers never wait
    for each other in a cycle), the studies' state (locked against a concurrent close until
    the commit, as :func:`closed_studies`), and the stored slots of the group's devices (as
    :func:`stored_slots`). The reads run after the locks are granted, and under READ
    COMMITTED each statement sees every transaction that committed before it started."""
    driver = conn.connection.driver_connection
    assert driver is not None
    cursors = []
    keys = sorted({device_lock_key(study, d) for study, devs in by_study.items() for d in devs})
    try:
        with pg_errors(), driver.pipeline():
            driver.execute("BEGIN")
            if by_study:
                cursors = [driver.execute(_PG_LOCK, (keys,)),
                           driver.execute(_PG_STATE, (sorted(by_study),))]
                cursors += [driver.execute(_PG_STORED, (study, sorted(devs)))
                            for study, devs in sorted(by_study.items())]
        if not cursors:
            return set(), {}
        closed = _shut(cursors[1].fetchall())
        existing: Slots = {}
        for study, cur in zip(sorted(by_study), cursors[2:], strict=True):
            for dev, intervals, bits in cur.fetchall():
                existing.setdefault((study, int(dev)), {}).update(
                    storage.unpack(intervals, bits))
        return closed, existing
    finally:
        for cur in cursors:
            cur.close()


# The last interval of a stored upload row: the little-endian uint32 at the end of its
# ``intervals`` (the packed format of :func:`dpfreq.server.storage.pack`).
_LAST = " + ".join(f"get_byte(u.intervals, length(u.intervals) - {4 - i})::bigint * {256 ** i}"
                   for i in range(4))
# A group whose batches cannot meet a stored slot, in ONE statement: ``go`` is true when no
# study of the group is closed or past its expiry and no stored upload row of a batch's
# device spans an interval range that meets the batch's [lo, hi]; then every report of every
# batch is new, the batches' rows are inserted and the sums updated. Otherwise nothing is
# written (the statement's snapshot is one for all its parts: the check does not see the
# insert). Two batches of one device in a group never come here.
_PG_FAST = (
    "WITH b AS (SELECT * FROM unnest(%s::varchar[], %s::bigint[], %s::integer[], "
    "%s::integer[], %s::integer[], %s::integer[], %s::bytea[], %s::bytea[]) "
    "AS b (study, device, lo, hi, o, n, js, bs)), "
    "ok AS (SELECT NOT EXISTS (SELECT 1 FROM studies s WHERE s.study IN (SELECT study FROM b) "
    "AND (s.closed IS NOT NULL OR s.closes_at::timestamptz <= %s)) "
    "AND NOT EXISTS (SELECT 1 FROM b JOIN uploads u ON u.study = b.study AND u.device = b.device "
    f'WHERE u."first" <= b.hi AND {_LAST} >= b.lo) AS go), '
    'ins AS (INSERT INTO uploads (study, device, "first", "order", reports, intervals, bits) '
    "SELECT study, device, lo, o, n, js, bs FROM b WHERE (SELECT go FROM ok) RETURNING 1), "
    "upd AS (UPDATE sums SET total = sums.total + v.t, reports = sums.reports + v.c "
    "FROM unnest(%s::varchar[], %s::integer[], %s::integer[], %s::bigint[], %s::bigint[]) "
    'AS v (study, o, j, t, c) WHERE sums.study = v.study AND sums."order" = v.o '
    'AND sums."interval" = v.j AND (SELECT go FROM ok) RETURNING 1) '
    "SELECT (SELECT go FROM ok), (SELECT count(*) FROM ins)")


def pg_store_new(conn: Connection, rows: list[tuple[storage.UploadRow, int]],
                 sums: list[tuple[tuple[str, int, int], list[int]]]) -> bool:
    """On PostgreSQL, store a group whose reports are all new in ONE round trip, or nothing.

    ``rows`` are the batches' upload rows, each with its last interval, at most one per
    (study, device); ``sums`` their deltas (:func:`sum_deltas`). In one pipeline: ``BEGIN``,
    the devices' advisory locks and the studies' state as in :func:`pg_begin_and_read`, the
    sums lock, :data:`_PG_FAST`, ``COMMIT``. True when it stored everything (committed); False
    when a study no longer takes reports or a stored row of a device meets a batch's interval
    range: then nothing was stored, and the group is decided on its stored slots instead.
    """
    driver = conn.connection.driver_connection
    assert driver is not None
    keys = sorted({device_lock_key(row[0], row[1]) for row, _ in rows})
    studies = sorted({row[0] for row, _ in rows})
    cols = list(zip(*[(s, d, f, last, o, n, js, bs) for (s, d, f, o, n, js, bs), last in rows],
                    strict=True))
    kinds = (str, int, int, int, int, int, bytes, bytes)
    params = [*(_array(c, k) for c, k in zip(cols, kinds, strict=True)), datetime.now(UTC),
              *_sum_arrays(sums)]
    with pg_errors(), driver.pipeline():
        driver.execute("BEGIN")
        locks = [driver.execute(_PG_LOCK, (keys,)), driver.execute(_PG_STATE, (studies,)),
                 driver.execute(_PG_SUMS_LOCK)]
        cur = driver.execute(_PG_FAST, params)
        driver.execute("COMMIT")
    for other in locks:
        other.close()
    with contextlib.closing(cur):
        got = cur.fetchone()
    return bool(got is not None and got[0])


@contextlib.contextmanager
def pg_errors() -> Iterator[None]:
    """psycopg's integrity errors as SQLAlchemy's (the writer decides the group again)."""
    import psycopg

    try:
        yield
    except psycopg.IntegrityError as exc:
        raise sa.exc.IntegrityError("pipeline", None, exc) from exc


def store(conn: Connection, rows: list[storage.UploadRow],
          sums: list[tuple[tuple[str, int, int], list[int]]]) -> None:
    """Insert the group's upload rows and add its sum deltas in the open transaction.

    On PostgreSQL this also COMMITs: the rows go by COPY, then the sums' UPDATE and the COMMIT
    in ONE round trip (psycopg's pipeline mode); an error skips the COMMIT and is raised before
    any batch is acknowledged. (On its own, an ``INSERT ... SELECT FROM unnest(arrays)`` of
    the upload rows in that pipeline, two round trips fewer, was no faster; what gained was a
    group of new uploads in one round trip, :func:`pg_store_new`:
    ``benchmarks/notes/server-log.md``.)
    """
    storage.insert_uploads(conn, rows)
    if conn.dialect.name != "postgresql":
        add_sums(conn, sums)
        return
    driver = conn.connection.driver_connection
    assert driver is not None
    with pg_errors(), driver.pipeline():
        if sums:
            driver.execute(_PG_SUMS_LOCK)
            driver.execute(_PG_ADD_SUMS, _sum_arrays(sums))
        driver.execute("COMMIT")


def sum_deltas(slots: dict[tuple[str, int], tuple[list[int], list[int]]]
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


def _sum_arrays(rows: list[tuple[tuple[str, int, int], list[int]]]) -> list[str]:
    """The five arrays of :data:`_PG_ADD_SUMS` (study, order, interval, total, count), as
    array literals (:func:`_array`)."""
    keys, deltas = zip(*rows, strict=True)
    studies, *ints = (*zip(*keys, strict=True), *zip(*deltas, strict=True))
    return [_array(studies, str), *(_array(col, int) for col in ints)]


def _array(values: Any, kind: type) -> str:
    """A PostgreSQL array literal of ``values`` (``int``, ``str`` or ``bytes``), sent as one
    text parameter and cast by the statement: psycopg adapts a list element by element in
    Python, which was a third of the writer's time on the interpreter lock (profiled in the
    benchmark)."""
    if kind is int:
        return "{" + ",".join(map(str, values)) + "}"
    if kind is bytes:  # bytea's hex input form, its backslash escaped inside the quotes
        return "{" + ",".join([f'"\\\\x{v.hex()}"' for v in values]) + "}"
    return "{" + ",".join(['"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
                           for v in values]) + "}"


def add_sums(conn: Connection, rows: list[tuple[tuple[str, int, int], list[int]]]) -> None:
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


def closed_studies(conn: Connection, studies: list[str]) -> set[str]:
    """The studies among ``studies`` that take no more reports, read in the writer's
    transaction (PostgreSQL reads and locks them in :func:`pg_begin_and_read`)."""
    return _shut(conn.execute(_STATE, {"studies": studies})) if studies else set()


def _shut(rows: Any) -> set[str]:
    """The studies of ``(study, closed, closes_at)`` rows that are closed or past expiry."""
    now = datetime.now(UTC)
    return {study for study, closed, closes_at in rows
            if not storage.takes_reports(closed, closes_at, now)}


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
