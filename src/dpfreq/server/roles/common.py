"""What the worker and aggregator services share: tokens and roles, the audit log, bodies,
measurement rows, and the routes every service has (liveness, readiness, metrics, audit,
token rotation and revocation).

Roles of bearer tokens here: ``admin`` (the service's operator: creates measurements and
issues tokens), ``party`` (one party of one measurement, at a worker: uploads its share),
``peer`` (the other worker, at a worker), ``worker`` (one worker, at the aggregator: sends its
outputs) and ``analyst`` (reads a measurement's result, at the aggregator). Tokens are stored
as SHA-256 hashes (:mod:`dpfreq.server.auth`); every use of an admin, peer, worker or analyst
token and every share upload is a line of the audit log, committed before the answer.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import sqlalchemy as sa
from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from dpfreq.crossparty.shuffle import ShuffleParams
from dpfreq.errors import DataError

from .. import storage
from ..auth import Principal, parse_bearer
from ..service import Service
from . import tables

__all__ = ["BINARY_BODY", "Created", "MeasurementRow", "ParamsBody", "Refused", "TokenIssued",
           "audit",
           "authorize", "common_router", "create_measurement", "create_row", "issue",
           "load_measurement", "measurement_or_404", "read_body", "update_row"]

log = logging.getLogger("dpfreq.server")


#: The OpenAPI description of a binary frame body (a party's share, a worker's output).
BINARY_BODY = {"requestBody": {"required": True, "content": {"application/octet-stream": {
    "schema": {"type": "string", "format": "binary"}}}}}


class ParamsBody(BaseModel):
    """A request that creates a measurement: its sealed public parameters (a role's request
    adds its own fields)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    params: str = Field(max_length=1 << 20, description="The sealed public parameters "
                        "(ShuffleParams.to_json()).")


class TokenIssued(BaseModel):
    """A new bearer token (shown once) and its public id."""

    token: str
    id: str


class Created(BaseModel):
    """A measurement as this service holds it."""

    model_config = ConfigDict(extra="allow")

    measurement: str
    param_id: str
    role: str
    state: str


class Refused(Exception):
    """A request a role refuses: HTTP status and one-line reason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


def _service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


def audit(request: Request, who: Principal, action: str, measurement: str | None) -> None:
    """Write a line of the audit log (in its own transaction, before the answer)."""
    with _service(request).engine.begin() as conn:
        conn.execute(storage.audit.insert().values(
            at=storage.timestamp(), token=who.id or "-", role=who.role, study=measurement,
            action=action[:80]))


async def authorize(request: Request, roles: tuple[str, ...], measurement: str | None,
                    *, record: bool = True) -> Principal:
    """The caller's principal, or 401/403; writes the audit line (``record``)."""
    token = parse_bearer(request.headers.get("authorization"))
    if token is None:
        raise HTTPException(401, "missing bearer token.", headers={"WWW-Authenticate": "Bearer"})
    who = await run_in_threadpool(_service(request).principal, token)
    if who is None:
        raise HTTPException(401, "unknown bearer token.", headers={"WWW-Authenticate": "Bearer"})
    if who.role not in roles:
        raise HTTPException(403, f"this endpoint needs the role {' or '.join(roles)}.")
    if who.role != "admin" and measurement is not None and who.study != measurement:
        raise HTTPException(403, "this token belongs to another measurement.")
    if record:
        await run_in_threadpool(audit, request, who, f"{request.method} {request.url.path}",
                                measurement)
    return who


async def issue(request: Request, principal: Principal, issuer: Principal) -> TokenIssued:
    """A new token for ``principal``, issued by ``issuer`` (audited)."""
    token, issued = await run_in_threadpool(_service(request).new_token, principal, None, issuer)
    await run_in_threadpool(audit, request, issued, f"issued by {issuer.id}", principal.study)
    return TokenIssued(token=token, id=issued.id)


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 past ``limit`` bytes (streamed: never read whole)."""
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > limit):
        raise HTTPException(413, f"request body larger than {limit} bytes.")
    chunks, seen = [], 0
    async for chunk in request.stream():
        seen += len(chunk)
        if seen > limit:
            raise HTTPException(413, f"request body larger than {limit} bytes.")
        chunks.append(chunk)
    return b"".join(chunks)


class MeasurementRow:
    """A stored measurement: its row and parsed parameters."""

    def __init__(self, row: Any) -> None:
        self.row = row
        self.measurement: str = row.measurement
        self.params = ShuffleParams.from_json(row.params, label="the stored parameters")
        self.state: str = row.state

    def json(self, column: str) -> Any:
        """A JSON column (None when null)."""
        value = getattr(self.row, column)
        return None if value is None else json.loads(value)

    def public(self) -> dict[str, Any]:
        """What any token of the measurement may read: parameters, state, plan."""
        return {"measurement": self.measurement, "param_id": self.row.param_id,
                "role": self.row.role, "state": self.state, "params": self.row.params,
                "plan": self.json("plan")}


def load_measurement(engine: sa.engine.Engine, measurement: str, role: str
                     ) -> MeasurementRow | None:
    """The measurement's row for this role, or None."""
    m = tables.measurements
    with engine.connect() as conn:
        row = conn.execute(sa.select(m).where(m.c.measurement == measurement,
                                              m.c.role == role)).first()
    return None if row is None else MeasurementRow(row)


async def measurement_or_404(request: Request, name: str, role: str) -> MeasurementRow:
    """The measurement of this role, or 404."""
    row = await run_in_threadpool(load_measurement, _service(request).engine, name, role)
    if row is None:
        raise HTTPException(404, "no such measurement.")
    return row


async def create_measurement(request: Request, params: str, role: str,
                             topology: dict[str, Any] | None) -> Created:
    """Create (or find the identical) measurement for the admin's request: 409 for a
    different one under an existing id, 400 for parameters that do not read."""
    await authorize(request, ("admin",), None)
    try:
        row = await run_in_threadpool(create_row, _service(request).engine, params, role,
                                      topology)
    except DataError as exc:
        raise HTTPException(409 if "exists" in str(exc) else 400, str(exc)) from None
    return Created(**{k: v for k, v in row.public().items() if k != "plan"})


def update_row(conn: Any, measurement: str, **values: Any) -> None:
    """Update a measurement's row in the open transaction (``updated`` stamped)."""
    m = tables.measurements
    conn.execute(m.update().where(m.c.measurement == measurement)
                 .values(updated=storage.timestamp(), **values))


def create_row(engine: sa.engine.Engine, params_text: str, role: str,
               topology: dict[str, Any] | None) -> MeasurementRow:
    """Store a new measurement; an identical request is answered with the stored row, a
    different one for an existing id is a DataError."""
    params = ShuffleParams.from_json(params_text, label="params")
    m = tables.measurements
    topo = None if topology is None else json.dumps(topology, sort_keys=True)
    with engine.begin() as conn:
        row = conn.execute(sa.select(m).where(m.c.measurement == params.measurement)).first()
        if row is not None:
            if row.role != role or row.param_id != params.param_id or row.topology != topo:
                raise DataError("a measurement with this id exists with other parameters.")
            return MeasurementRow(row)
        now = storage.timestamp()
        conn.execute(m.insert().values(measurement=params.measurement, role=role,
                                       params=params.to_json(), param_id=params.param_id,
                                       topology=topo, state="collecting", created=now,
                                       updated=now))
    found = load_measurement(engine, params.measurement, role)
    assert found is not None
    return found


common_router = APIRouter()


@common_router.get("/livez", tags=["operations"])
async def livez() -> dict[str, str]:
    """Liveness: the process answers."""
    return {"status": "ok"}


@common_router.get("/readyz", tags=["operations"])
async def readyz(request: Request) -> dict[str, str]:
    """Readiness: the database answers and the background driver runs."""
    driver = getattr(request.app.state, "driver", None)
    if driver is not None and driver.done():
        raise HTTPException(503, "the background driver stopped.")
    try:
        await run_in_threadpool(_service(request).ping)
    except Exception as exc:
        raise HTTPException(503, "database unavailable.") from exc
    return {"status": "ok", "role": request.app.state.config.role}


@common_router.get("/metrics", tags=["operations"])
async def metrics(request: Request) -> Response:
    """Prometheus text exposition."""
    body, ctype = request.app.state.metrics.render()
    return Response(body, media_type=ctype)


@common_router.get("/v1/audit", tags=["admin"])
async def audit_log(request: Request, limit: int = 100) -> dict[str, Any]:
    """The newest lines of the audit log (admin)."""
    await authorize(request, ("admin",), None)
    if not 1 <= limit <= 1000:
        raise HTTPException(422, "limit must be in 1..1000.")
    return {"audit": await run_in_threadpool(_service(request).audit_log, None, limit)}


@common_router.post("/v1/tokens/rotate", status_code=201, tags=["admin"])
async def rotate(request: Request) -> TokenIssued:
    """Replace the caller's token by a new one with the same role and measurement."""
    who = await authorize(request, ("admin", "party", "peer", "worker", "analyst"), None)
    try:
        token, new = await run_in_threadpool(_service(request).rotate, who)
    except DataError:
        raise HTTPException(401, "this token was revoked.",
                            headers={"WWW-Authenticate": "Bearer"}) from None
    return TokenIssued(token=token, id=new.id)


@common_router.delete("/v1/tokens/{token_id}", tags=["admin"])
async def revoke(request: Request, token_id: str) -> dict[str, Any]:
    """Revoke a token by its 16-hex-digit id (admin)."""
    await authorize(request, ("admin",), None)
    if len(token_id) != 16 or any(c not in "0123456789abcdef" for c in token_id):
        raise HTTPException(400, "token_id must be a token's full id, 16 lower-case hex "
                                 f"digits; got {token_id[:40]!r}.")
    revoked = await run_in_threadpool(_service(request).revoke, token_id, None)
    if not revoked:
        raise HTTPException(404, "no such active token.")
    return {"revoked": revoked}
