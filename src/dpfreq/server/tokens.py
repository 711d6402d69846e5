"""The lifecycle of bearer tokens in the database: registration, the lineage of the admin token
a start is configured with, issue, rotation, revocation by id, and the audit log (see
docs/service.md, "Security")."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from dpfreq.errors import DataError

from . import storage
from .auth import Principal, hash_token, new_token, token_id

__all__ = ["StartToken", "TokenLifecycle", "audit_row", "log_revocation"]


def log_revocation(conn: Any) -> None:
    """Note a revocation in the open transaction (other processes drop their cached tokens)."""
    conn.execute(storage.revocations.insert().values(at=storage.timestamp()))


@dataclass(frozen=True)
class StartToken:
    """What a start did with its configured admin token (:meth:`TokenLifecycle.bootstrap_admin`).

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
    return {"at": storage.timestamp(), "token": who.id or "-", "role": who.role, "study": who.study,
            "action": action[:80]}


class TokenLifecycle:
    """The token operations of :class:`dpfreq.server.service.Service` (which provides the
    engine and the cache of checked tokens that every change here empties)."""

    engine: Engine

    def _forget(self) -> None:
        """Drop every cached token (the service's)."""
        raise NotImplementedError

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
                                               device=principal.device, created=storage.timestamp(),
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
        t, now = storage.tokens, storage.timestamp()
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
                    log_revocation(conn)
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
                             .values(revoked=storage.timestamp())).rowcount
            if n != 1:
                raise DataError("this token was revoked.")
            log_revocation(conn)
            conn.execute(t.insert().values(hash=h, role=who.role, study=who.study,
                                           device=who.device, created=storage.timestamp(),
                                           expires=expires, lineage=lineage))
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
        now = storage.timestamp()
        with self.engine.begin() as conn:
            rows = conn.execute(sa.select(t.c.hash, t.c.role, t.c.study, t.c.device, t.c.expires)
                                .where(*cond)).all()
            if rows:
                conn.execute(t.update().where(t.c.hash.in_([r.hash for r in rows]),
                                              t.c.revoked.is_(None)).values(revoked=now))
                log_revocation(conn)
        self._forget()
        return [{"id": token_id(r.hash), "role": r.role, "study": r.study,
                 "device": None if r.device is None else int(r.device), "expires": r.expires,
                 "revoked": now} for r in rows]

    def audit_log(self, study: str | None, limit: int) -> list[dict[str, Any]]:
        """The newest ``limit`` audit lines (of one study when given), newest first."""
        a = storage.audit
        q = sa.select(a.c.at, a.c.token, a.c.role, a.c.study, a.c.action)
        if study is not None:
            q = q.where(a.c.study == study)
        with self.engine.connect() as conn:
            rows = conn.execute(q.order_by(a.c.id.desc()).limit(limit)).all()
        return [dict(r._mapping) for r in rows]

