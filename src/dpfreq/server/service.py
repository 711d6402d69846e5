"""Database operations of the collection service other than report ingest: studies, tokens,
enrolment, and the reads behind estimates, exports and the dashboard."""

from __future__ import annotations

import contextlib
import hmac
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
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

__all__ = ["CACHE_LIMIT", "REJECTION_REASONS", "Service", "StartToken", "StudyRecord",
           "audit_row"]

CACHE_LIMIT = 1 << 20  # cached tokens and device orders (each a few hundred bytes)
# Longest a token revoked by another process keeps working here: every process reads the
# revocation log about once a second (check_revocations); should that stop, cached tokens are
# trusted for this long only.
TOKEN_CACHE_SECONDS = 5.0

REJECTION_REASONS = ("closed", "conflict", "future", "interval", "malformed", "order",
                     "param_id", "rate_limited", "wrong_device")


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _log_revocation(conn: Any) -> None:
    """Note a revocation in the open transaction (other processes drop their cached tokens)."""
    conn.execute(storage.revocations.insert().values(at=_now()))


@dataclass(frozen=True)
class StartToken:
    """What a start did with its configured admin token (:meth:`Service.bootstrap_admin`).

    ``state`` is ``"registered"`` (a new token), ``"active"`` (registered by an earlier start
    and still valid), ``"revoked"`` (revoked at ``revoked_at``: never registered again) or
    ``"not-admin"`` (the token is another role's); ``replaced`` lists the ids of the admin
    tokens of other lineages revoked by this start.
    """

    id: str
    state: str
    revoked_at: str | None
    replaced: list[str]


def audit_row(who: Principal, action: str) -> dict[str, Any]:
    """A line of the audit log of token use: time, token id, role, study, action (the service
    writes it with the writer's next group commit, :meth:`dpfreq.server.ingest.Ingestor.audit`)."""
    return {"at": _now(), "token": who.id or "-", "role": who.role, "study": who.study,
            "action": action[:80]}


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


class Service:
    """Reads and small writes on the database, with caches of the immutable rows (studies,
    tokens, device orders)."""

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
    def register_token(self, token: str, principal: Principal, *, ttl: float | None = None,
                       label: str | None = None, lineage: str | None = None) -> Principal:
        """Store a new token's hash with its role; its principal. A hash already stored (a
        token registered before, revoked or not) is never registered again: DataError."""
        h = hash_token(token)
        expires = None if ttl is None else time.time() + ttl
        t = storage.tokens
        try:
            with self.engine.begin() as conn:
                conn.execute(t.insert().values(hash=h, role=principal.role, study=principal.study,
                                               device=principal.device, created=_now(),
                                               expires=expires, label=label, lineage=lineage))
        except IntegrityError:
            raise DataError("this token was registered before; a token is never registered "
                            "twice.") from None
        return replace(principal, id=token_id(h), expires=expires, hash=h)

    def bootstrap_admin(self, token: str) -> StartToken:
        """Register the admin token a start is configured with, and retire the admin tokens
        of earlier starts.

        Every admin token belongs to the *lineage* of the start token it descends from (by
        rotation, or issued by an admin token of the lineage). A start keeps the configured
        token's lineage and revokes every other admin token: a start with a new token revokes
        the previous start's token, its rotations and the admin tokens they issued; a restart
        with the same token keeps them. A configured token that was revoked (rotated, or
        revoked by id) is never registered again: the start then has no admin token of its own.
        Revocations and a refused token are written to the audit log; the returned
        :class:`StartToken` says what happened (the application logs it).
        """
        h = hash_token(token)
        tid = token_id(h)
        t, now = storage.tokens, _now()
        with self.engine.begin() as conn:
            row = conn.execute(sa.select(t.c.role, t.c.revoked, t.c.lineage)
                               .where(t.c.hash == h)).first()
            replaced: list[str] = []
            if row is None or row.role == "admin":
                lineage = tid if row is None else (row.lineage or tid)
                stale = sa.and_(t.c.role == "admin", t.c.revoked.is_(None), t.c.hash != h,
                                sa.or_(t.c.lineage.is_(None), t.c.lineage != lineage))
                replaced = sorted(token_id(x) for x in conn.execute(
                    sa.select(t.c.hash).where(stale)).scalars())
                if replaced:
                    conn.execute(t.update().where(stale).values(revoked=now))
                    _log_revocation(conn)
                    conn.execute(storage.audit.insert(), [
                        {"at": now, "token": old, "role": "admin", "study": None,
                         "action": f"revoked at start: replaced by admin token {tid}"}
                        for old in replaced])
            if row is None:
                conn.execute(t.insert().values(hash=h, role="admin", created=now,
                                               label="bootstrap", lineage=tid))
                outcome = StartToken(tid, "registered", None, replaced)
            elif row.role != "admin":
                outcome = StartToken(tid, "not-admin", None, replaced)
            else:
                outcome = StartToken(tid, "active" if row.revoked is None else "revoked",
                                    row.revoked, replaced)
            if outcome.state in ("revoked", "not-admin"):
                conn.execute(storage.audit.insert().values(
                    at=now, token=tid, role="admin", study=None,
                    action=f"start: configured admin token refused ({outcome.state})"))
        self._forget()
        return outcome

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

    def new_token(self, principal: Principal, ttl: float | None,
                  issuer: Principal) -> tuple[str, Principal]:
        """A new token for ``principal`` (role and study) with an optional lifetime, issued by
        ``issuer`` (a new admin token joins the issuer's lineage)."""
        lineage = None
        if principal.role == "admin":
            t = storage.tokens
            with self.engine.connect() as conn:
                lineage = conn.execute(sa.select(t.c.lineage).where(t.c.hash == issuer.hash)
                                       ).scalar()
        token = new_token()
        return token, self.register_token(token, principal, ttl=ttl, lineage=lineage)

    def rotate(self, who: Principal) -> tuple[str, Principal]:
        """A new token with the caller's role, study, device, lifetime and lineage; the
        caller's token is revoked in the same transaction (DataError if it was revoked
        meanwhile: a token is rotated once)."""
        token = new_token()
        h = hash_token(token)
        t = storage.tokens
        ttl = None if who.expires is None else max(1.0, who.expires - time.time())
        expires = None if ttl is None else time.time() + ttl
        with self.engine.begin() as conn:
            lineage = conn.execute(sa.select(t.c.lineage).where(t.c.hash == who.hash)).scalar()
            n = conn.execute(t.update().where(t.c.hash == who.hash, t.c.revoked.is_(None))
                             .values(revoked=_now())).rowcount
            if n != 1:
                raise DataError("this token was revoked.")
            _log_revocation(conn)
            conn.execute(t.insert().values(hash=h, role=who.role, study=who.study,
                                           device=who.device, created=_now(), expires=expires,
                                           lineage=lineage))
        self._forget()
        return token, replace(who, id=token_id(h), expires=expires, hash=h)

    def revoke(self, tid: str, study: str | None) -> list[dict[str, Any]]:
        """Revoke the active token whose public id is ``tid`` (16 hex digits; only analyst and
        device tokens of ``study`` when given); what was revoked (id, role, study, device,
        expiry, time of revocation), empty when no such token is active."""
        t = storage.tokens
        cond = [t.c.hash.startswith(tid, autoescape=True), t.c.revoked.is_(None)]
        if study is not None:
            cond.append(t.c.study == study)
            cond.append(t.c.role.in_(("analyst", "device")))
        now = _now()
        with self.engine.begin() as conn:
            rows = conn.execute(sa.select(t.c.hash, t.c.role, t.c.study, t.c.device, t.c.expires)
                                .where(*cond)).all()
            if rows:
                conn.execute(t.update().where(t.c.hash.in_([r.hash for r in rows]),
                                              t.c.revoked.is_(None)).values(revoked=now))
                _log_revocation(conn)
        self._forget()
        return [{"id": token_id(r.hash), "role": r.role, "study": r.study,
                 "device": None if r.device is None else int(r.device), "expires": r.expires,
                 "revoked": now} for r in rows]

    def _forget(self) -> None:
        with self._lock:
            self._tokens.clear()

    def audit_log(self, study: str | None, limit: int) -> list[dict[str, Any]]:
        """The newest ``limit`` audit lines (of one study when given), newest first."""
        a = storage.audit
        q = sa.select(a.c.at, a.c.token, a.c.role, a.c.study, a.c.action)
        if study is not None:
            q = q.where(a.c.study == study)
        with self.engine.connect() as conn:
            rows = conn.execute(q.order_by(a.c.id.desc()).limit(limit)).all()
        return [dict(r._mapping) for r in rows]

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
               "created": _now(),
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
                         .values(closed=_now()))
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
                             .values(purged=_now(), reported_devices=int(n)))
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
        return Enrolment(record.study, order, hash_token(token), _now()), token

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
