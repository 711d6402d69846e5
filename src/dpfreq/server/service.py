"""Database operations of the collection service other than report ingest: studies, tokens,
enrolment, and the reads behind estimates, exports and the dashboard."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from dpfreq.errors import DataError

from . import storage
from .auth import Principal, hash_token, new_token
from .ingest import Enrolment
from .protocol import StudyProtocol, params_from_json

__all__ = ["CACHE_LIMIT", "REJECTION_REASONS", "Service", "StudyRecord"]

CACHE_LIMIT = 1 << 20  # cached tokens and device orders (each a few hundred bytes)

REJECTION_REASONS = ("conflict", "future", "interval", "malformed", "order", "param_id",
                     "rate_limited", "wrong_device")


def _now() -> str:
    return datetime.now(UTC).isoformat()


class StudyRecord:
    """A stored study: its protocol, calendar and public minimum of enrolled devices."""

    def __init__(self, row: Any) -> None:
        self.study: str = row.study
        self.title: str = row.title
        self.params_json: str = row.params
        self.min_devices: int = int(row.min_devices)
        self.protocol = StudyProtocol(params=params_from_json(row.params))
        self.param_id: str = row.param_id

    def public(self) -> dict[str, Any]:
        """What devices and analysts may read: everything about the study is public."""
        p = self.protocol
        return {
            "study": self.study, "title": self.title, "param_id": self.param_id,
            "params": self.params_json, "horizon": p.horizon, "padded_horizon": p.padded,
            "orders": p.orders, "start": p.params.start, "period": p.params.period,
            "epsilon": p.params.epsilon, "max_changes": p.params.max_changes,
            "randomizer": p.params.randomizer,
            "min_devices": self.min_devices,
        }


class Service:
    """Reads and small writes on the database, with caches of the immutable rows (studies,
    tokens, device orders)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._lock = threading.Lock()
        self._studies: dict[str, StudyRecord] = {}
        self._tokens: dict[str, Principal] = {}
        self._orders: dict[tuple[str, int], int] = {}

    @staticmethod
    def _remember(cache: dict[Any, Any], key: Any, value: Any) -> None:
        """Cache an immutable row; a full cache starts over (the database stays the truth)."""
        if len(cache) >= CACHE_LIMIT:
            cache.clear()
        cache[key] = value

    # -- tokens -----------------------------------------------------------------------------
    def register_token(self, token: str, principal: Principal) -> None:
        """Store a token's hash with its role (no-op when already stored)."""
        h = hash_token(token)
        t = storage.tokens
        with self.engine.begin() as conn:
            if conn.execute(sa.select(t.c.hash).where(t.c.hash == h)).first() is None:
                conn.execute(t.insert().values(hash=h, role=principal.role, study=principal.study,
                                               device=principal.device, created=_now()))

    def cached_principal(self, token: str) -> Principal | None:
        """The owner of a token if this process has seen it, without touching the database."""
        return self._tokens.get(hash_token(token))

    def principal(self, token: str) -> Principal | None:
        """The owner of a token, or None."""
        h = hash_token(token)
        found = self._tokens.get(h)
        if found is not None:
            return found
        t = storage.tokens
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(t.c.role, t.c.study, t.c.device)
                               .where(t.c.hash == h)).first()
        if row is None:
            return None
        found = Principal(row.role, row.study, None if row.device is None else int(row.device))
        with self._lock:
            self._remember(self._tokens, h, found)
        return found

    def new_analyst_token(self, study: str) -> str:
        """A new analyst token for a study."""
        token = new_token()
        self.register_token(token, Principal("analyst", study))
        return token

    # -- studies ----------------------------------------------------------------------------
    def create_study(self, study: str, title: str, protocol: StudyProtocol,
                     min_devices: int) -> StudyRecord:
        """Store a study with zeroed running sums; DataError if the id exists."""
        p = protocol.params
        row = {"study": study, "title": title, "params": p.to_json(), "param_id": p.param_id,
               "protocol_version": int(p.version), "horizon": protocol.horizon,
               "padded": protocol.padded, "start": str(p.start),
               "period_seconds": protocol.period_seconds, "min_devices": min_devices,
               "created": _now()}
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
        """A study by id (cached; studies are immutable)."""
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
            self._remember(self._tokens, hash_token(token), Principal("device", study, device))

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

    # -- reads for estimates and the dashboard ----------------------------------------------
    def running_sums(self, record: StudyRecord) -> tuple[Any, dict[tuple[int, int],
                                                                    tuple[int, int]]]:
        """Enrolled devices per order and the running sums, read in one transaction."""
        e, s = storage.enrolled, storage.sums
        with self.engine.connect() as conn, conn.begin():
            enrolled = np.zeros(record.protocol.orders, dtype=np.int64)
            for order, n in conn.execute(sa.select(e.c.order, e.c.devices)
                                         .where(e.c.study == record.study)):
                enrolled[int(order)] = int(n)
            totals = {(int(h), int(j)): (int(t), int(c)) for h, j, t, c in conn.execute(
                sa.select(s.c.order, s.c.interval, s.c.total, s.c.reports)
                .where(s.c.study == record.study, s.c.reports > 0))}
        return enrolled, totals

    def rejection_counts(self, study: str) -> dict[str, int]:
        """Rejected reports per reason."""
        j = storage.rejections
        with self.engine.connect() as conn:
            return {r: int(n) for r, n in conn.execute(
                sa.select(j.c.reason, j.c.reports).where(j.c.study == study)
                .order_by(j.c.reason))}

    def ping(self) -> None:
        """Raise if the database does not answer."""
        with self.engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
