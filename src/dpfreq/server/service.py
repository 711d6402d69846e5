"""Database operations of the collection service other than report ingest: studies, tokens,
enrolment, and the reads behind estimates, exports and the dashboard."""

from __future__ import annotations

import contextlib
import hmac
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from dpfreq.errors import DataError
from dpfreq.longitudinal import device_bundle

from . import storage
from .auth import Principal, hash_token, new_token, token_id
from .ingest import Enrolment
from .protocol import StudyProtocol, params_from_json
from .tokens import TokenLifecycle

__all__ = ["CACHE_LIMIT", "REJECTION_REASONS", "Service", "StudyRecord"]

CACHE_LIMIT = 1 << 20  # cached tokens and device orders (each a few hundred bytes)
# Longest a token revoked by another process keeps working here: every process reads the
# revocation log about once a second (check_revocations); should that stop, cached tokens are
# trusted for this long only.
TOKEN_CACHE_SECONDS = 5.0

REJECTION_REASONS = ("closed", "conflict", "future", "interval", "malformed", "order",
                     "param_id", "rate_limited", "wrong_device")


class StudyRecord:
    """A stored study: its protocol, calendar and public minimum of enrolled devices."""

    def __init__(self, row: Any) -> None:
        self.study: str = row.study
        self.title: str = row.title
        self.params_json: str = row.params
        self.min_devices: int = int(row.min_devices)
        self.protocol = StudyProtocol(params=params_from_json(row.params))
        self.param_id: str = row.param_id
        self.closes_at: str | None = row.closes_at
        self.closed: str | None = row.closed
        self.purged: str | None = row.purged
        # the exact integer laws a device of another language samples (docs/protocol.md §1)
        self.bundle: dict[str, Any] = device_bundle(self.protocol.params)

    def public(self) -> dict[str, Any]:
        """What devices and analysts may read: everything about the study is public."""
        p = self.protocol
        return {
            "study": self.study, "title": self.title, "param_id": self.param_id,
            "params": self.params_json, "horizon": p.horizon, "padded_horizon": p.padded,
            "orders": p.orders, "start": p.params.start, "period": p.params.period,
            "epsilon": p.params.epsilon, "max_changes": p.params.max_changes,
            "method": p.params.method,
            "min_devices": self.min_devices, "bundle": self.bundle,
            "closes_at": self.closes_at, "closed": self.closed, "purged": self.purged,
        }

    def accepting(self, now: datetime) -> bool:
        """Whether the study takes reports at ``now`` as far as this record knows (the writer
        decides for good, in its transaction)."""
        return storage.takes_reports(self.closed, self.closes_at, now)


class Service(TokenLifecycle):
    """Reads and small writes on the database, with caches of the immutable rows (studies,
    tokens, device orders); the token lifecycle comes from :class:`TokenLifecycle`."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._lock = threading.Lock()
        self._studies: dict[str, StudyRecord] = {}
        self._tokens: dict[str, tuple[Principal, float]] = {}
        self._orders: dict[tuple[str, int], int] = {}
        self._revocation_mark: int | None = None
        self._fresh_until = 0.0  # cached tokens hold until then without their own age check

    @staticmethod
    def _remember(cache: dict[Any, Any], key: Any, value: Any) -> None:
        """Cache an immutable row; a full cache starts over (the database stays the truth)."""
        if len(cache) >= CACHE_LIMIT:
            cache.clear()
        cache[key] = value

    # -- tokens ---------------------------------------------------------------------------
    def cached_principal(self, token: str) -> Principal | None:
        """The owner of a token if this process checked it less than TOKEN_CACHE_SECONDS ago
        (so a revocation by any process takes effect within that delay), without touching the
        database."""
        got = self._tokens.get(hash_token(token))
        if got is None:
            return None
        who, seen = got
        now = time.monotonic()
        if (now > self._fresh_until and now - seen > TOKEN_CACHE_SECONDS) or (
                who.expires is not None and who.expires <= time.time()):
            return None
        return who

    def check_revocations(self) -> None:
        """Read the revocation log: drop every cached token when any process revoked one since
        the last read; cached tokens then hold for TOKEN_CACHE_SECONDS more."""
        started = time.monotonic()
        with self.engine.connect() as conn:
            mark = conn.execute(sa.select(sa.func.max(storage.revocations.c.id))).scalar()
        mark = int(mark or 0)
        if mark != self._revocation_mark:
            self._forget()
            self._revocation_mark = mark
        self._fresh_until = started + TOKEN_CACHE_SECONDS

    def principal(self, token: str) -> Principal | None:
        """The owner of a valid token (known, not revoked, not expired), or None."""
        return self.cached_principal(token) or self.principals([token])[0]

    def principals(self, tokens: list[str]) -> list[Principal | None]:
        """:meth:`principal` of many tokens, read in one query, and cached. A device token
        comes with its device's order, so a process that did not enrol the device needs this
        one read before the device's upload."""
        hashes = [hash_token(token) for token in tokens]
        t, d = storage.tokens, storage.devices
        query = sa.select(t.c.hash, t.c.role, t.c.study, t.c.device, t.c.expires, t.c.revoked,
                          d.c.order).select_from(t.outerjoin(
                              d, sa.and_(d.c.study == t.c.study, d.c.device == t.c.device))
                          ).where(t.c.hash.in_(sorted(set(hashes))))
        with self.engine.connect() as conn:
            rows = {row.hash: row for row in conn.execute(query)}
        now, seen = time.time(), time.monotonic()
        found: dict[str, Principal] = {}
        with self._lock:
            for h, row in rows.items():
                if row.revoked is not None or (row.expires is not None and row.expires <= now):
                    continue
                device = None if row.device is None else int(row.device)
                found[h] = Principal(row.role, row.study, device, token_id(h), row.expires, h)
                self._remember(self._tokens, h, (found[h], seen))
                if device is not None and row.order is not None:
                    self._remember(self._orders, (row.study, device), int(row.order))
        return [found.get(h) for h in hashes]

    def _forget(self) -> None:
        with self._lock:
            self._tokens.clear()

    def enrolment_refusal(self, study: str, secret: str | None) -> str | None:
        """Why ``study`` enrols no device with ``secret`` now, read from the database in one
        query: ``"secret"`` (the study has an enrolment secret and this is not it),
        ``"closed"`` (closed, expired or unknown), or None (it may enrol)."""
        s = storage.studies
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(s.c.enrol_hash, s.c.closed, s.c.closes_at)
                               .where(s.c.study == study)).first()
        if row is None:
            return "closed"
        if row.enrol_hash is not None and (
                secret is None or not hmac.compare_digest(row.enrol_hash, hash_token(secret))):
            return "secret"
        if not storage.takes_reports(row.closed, row.closes_at, datetime.now(UTC)):
            return "closed"
        return None

    def reported_devices(self, study: str) -> int:
        """Devices of ``study`` with at least one stored report (the count kept when the raw
        reports were deleted under the retention policy)."""
        u, s = storage.uploads, storage.studies
        with self.snapshot() as conn:
            kept = conn.execute(sa.select(s.c.reported_devices).where(s.c.study == study))
            frozen = kept.scalar()
            if frozen is not None:
                return int(frozen)
            return int(conn.execute(sa.select(sa.func.count(sa.distinct(u.c.device)))
                                    .where(u.c.study == study)).scalar() or 0)

    # -- studies ----------------------------------------------------------------------------
    def create_study(self, study: str, title: str, protocol: StudyProtocol,
                     min_devices: int, enrol_secret: str | None = None,
                     closes_at: str | None = None) -> StudyRecord:
        """Store a study with zeroed running sums (and the hash of its enrolment secret, if
        any, and its expiry, an ISO timestamp in UTC); DataError if the id exists."""
        p = protocol.params
        row = {"study": study, "title": title, "params": p.to_json(), "param_id": p.param_id,
               "protocol_version": int(p.version), "horizon": protocol.horizon,
               "padded": protocol.padded, "start": str(p.start),
               "period_seconds": protocol.period_seconds, "min_devices": min_devices,
               "created": storage.timestamp(),
               "enrol_hash": None if enrol_secret is None else hash_token(enrol_secret),
               "closes_at": closes_at}
        try:
            with self.engine.begin() as conn:
                conn.execute(storage.studies.insert().values(**row))
                conn.execute(storage.sums.insert(), [
                    {"study": study, "order": h, "interval": j, "total": 0, "reports": 0}
                    for h, j in protocol.slots()])
                conn.execute(storage.enrolled.insert(), [
                    {"study": study, "order": h, "devices": 0} for h in range(protocol.orders)])
                conn.execute(storage.rejections.insert(), [
                    {"study": study, "reason": r, "reports": 0} for r in REJECTION_REASONS])
        except IntegrityError:
            raise DataError("a study with this id already exists.") from None
        return self.study(study)  # type: ignore[return-value]

    def study(self, study: str) -> StudyRecord | None:
        """A study by id (cached: its parameters never change; its close and retention state
        may be stale here, and the writer reads them again in its transaction)."""
        found = self._studies.get(study)
        if found is not None:
            return found
        s = storage.studies
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(s).where(s.c.study == study)).first()
        if row is None:
            return None
        found = StudyRecord(row)
        with self._lock:
            self._studies[study] = found
        return found

    def close_study(self, study: str) -> StudyRecord | None:
        """Close a study (no report is stored after this transaction commits; closing a closed
        study changes nothing); its fresh record, or None if there is no such study."""
        s = storage.studies
        with self.engine.begin() as conn:
            conn.execute(s.update().where(s.c.study == study, s.c.closed.is_(None))
                         .values(closed=storage.timestamp()))
        return self.refresh_study(study)

    def purge_raw_reports(self, closed_days: float, now: datetime | None = None) -> list[str]:
        """Delete the raw reports of every study that stopped taking reports (closed, or
        expired) at least ``closed_days`` days before ``now``; the ids of the studies purged.

        The estimates stay exact: they are computed from the running sums, which are kept, and
        no report can arrive any more to be counted twice (an open study keeps its raw reports:
        they are what recognises a retried or conflicting report). The number of devices that
        reported is kept with the study (for the public minimum); the raw-report export is gone
        (410), the enrolment export stays.
        """
        now = datetime.now(UTC) if now is None else now
        s, u = storage.studies, storage.uploads
        purged = []
        with self.engine.begin() as conn:
            rows = conn.execute(sa.select(s.c.study, s.c.closed, s.c.closes_at)
                                .where(s.c.purged.is_(None))).all()
            for study, closed, closes_at in rows:
                ends = [datetime.fromisoformat(t) for t in (closed, closes_at) if t is not None]
                if not ends or (now - min(ends)).total_seconds() < closed_days * 86400:
                    continue
                n = conn.execute(sa.select(sa.func.count(sa.distinct(u.c.device)))
                                 .where(u.c.study == study)).scalar() or 0
                conn.execute(s.update().where(s.c.study == study)
                             .values(purged=storage.timestamp(), reported_devices=int(n)))
                conn.execute(u.delete().where(u.c.study == study))
                purged.append(study)
        for study in purged:
            self.refresh_study(study)
        return purged

    def refresh_study(self, study: str) -> StudyRecord | None:
        """A study read again from the database (its close and retention state change)."""
        with self._lock:
            self._studies.pop(study, None)
        return self.study(study)

    def cached_study(self, study: str) -> StudyRecord | None:
        """A study already read by this process, without touching the database."""
        return self._studies.get(study)

    def list_studies(self) -> list[str]:
        """Ids of every study."""
        s = storage.studies
        with self.engine.connect() as conn:
            return [r[0] for r in conn.execute(sa.select(s.c.study).order_by(s.c.study))]

    # -- devices ----------------------------------------------------------------------------
    def enrolment(self, record: StudyRecord, order: int) -> tuple[Enrolment, str]:
        """A new device's enrolment (for the writer's next group commit) and its token."""
        token = new_token()
        return Enrolment(record.study, order, hash_token(token), storage.timestamp()), token

    def enrolled_device(self, study: str, device: int, order: int, token: str) -> None:
        """Remember a device the writer enrolled (its order and token)."""
        with self._lock:
            self._remember(self._orders, (study, device), order)
            h = hash_token(token)
            self._remember(self._tokens, h, (Principal("device", study, device, token_id(h),
                                                       hash=h), time.monotonic()))

    def cached_order(self, study: str, device: int) -> int | None:
        """A device's order if this process has seen it, without touching the database."""
        return self._orders.get((study, device))

    def device_order(self, study: str, device: int) -> int | None:
        """The order a device enrolled with (cached)."""
        key = (study, device)
        found = self._orders.get(key)
        if found is not None:
            return found
        d = storage.devices
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(d.c.order).where(d.c.study == study,
                                                          d.c.device == device)).first()
        if row is None:
            return None
        with self._lock:
            self._remember(self._orders, key, int(row[0]))
        return int(row[0])

    def device_slots(self, study: str, device: int) -> list[tuple[int, int]]:
        """The stored ``(interval, bit)`` reports of one device, in increasing interval."""
        u = storage.uploads
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(u.c.intervals, u.c.bits).where(
                u.c.study == study, u.c.device == device)).all()
        return sorted(slot for js, bs in rows for slot in storage.unpack(js, bs))

    # -- reads for estimates and the dashboard ----------------------------------------------
    @contextlib.contextmanager
    def snapshot(self) -> Iterator[Connection]:
        """A connection whose reads all see one committed state of the database, and that no
        writer blocks: on SQLite a deferred read transaction (WAL mode: readers never wait for
        the writer, and the writer never waits for them); on PostgreSQL a read-only
        REPEATABLE READ transaction."""
        with self.engine.connect() as conn:
            if conn.dialect.name != "sqlite":
                snap = conn.execution_options(isolation_level="REPEATABLE READ",
                                              postgresql_readonly=True)
                with snap.begin():
                    yield snap
                return
            # the driver's own BEGIN (SQLAlchemy's pysqlite begins nothing before a SELECT, so
            # each statement would read its own state)
            snap = conn.execution_options(isolation_level="AUTOCOMMIT")
            driver = snap.connection.driver_connection
            assert driver is not None
            driver.execute("BEGIN DEFERRED")
            try:
                yield snap
            finally:
                driver.execute("ROLLBACK")

    def running_sums(self, record: StudyRecord, conn: Connection | None = None,
                     ) -> tuple[Any, dict[tuple[int, int], tuple[int, int]]]:
        """Enrolled devices per order and the running sums, read in one snapshot (``conn``'s,
        when given)."""
        if conn is None:
            with self.snapshot() as snap:
                return self.running_sums(record, snap)
        e, s = storage.enrolled, storage.sums
        enrolled = np.zeros(record.protocol.orders, dtype=np.int64)
        for order, n in conn.execute(sa.select(e.c.order, e.c.devices)
                                     .where(e.c.study == record.study)):
            enrolled[int(order)] = int(n)
        totals = {(int(h), int(j)): (int(t), int(c)) for h, j, t, c in conn.execute(
            sa.select(s.c.order, s.c.interval, s.c.total, s.c.reports)
            .where(s.c.study == record.study, s.c.reports > 0))}
        return enrolled, totals

    def rejection_counts(self, study: str, conn: Connection | None = None) -> dict[str, int]:
        """Rejected reports per reason (in ``conn``'s snapshot, when given)."""
        if conn is None:
            with self.snapshot() as snap:
                return self.rejection_counts(study, snap)
        j = storage.rejections
        return {r: int(n) for r, n in conn.execute(
            sa.select(j.c.reason, j.c.reports).where(j.c.study == study)
            .order_by(j.c.reason))}

    def ping(self) -> None:
        """Raise if the database does not answer."""
        with self.engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
