"""HTTP endpoints of a worker (``dpfreq serve --role worker``).

=======================================  ========  =============================================
route                                    token     what
=======================================  ========  =============================================
``POST /v1/measurements``                admin     take part in a measurement: sealed
                                                   parameters, this worker's position, the
                                                   other worker's and the aggregator's URLs and
                                                   the tokens to present to them
``GET /v1/measurements/{m}``             admin,    parameters, state, plan, the parties whose
                                         party,    share this worker holds
                                         peer
``POST /v1/measurements/{m}/party-       admin     a token for one party (``{"party": name}``)
tokens``
``POST /v1/measurements/{m}/peer-        admin     a token for the other worker
tokens``
``PUT /v1/measurements/{m}/share``       party     the party's share (a frame,
                                                   :mod:`dpfreq.crossparty.shuffle.party`):
                                                   200 stored (also for an identical retry),
                                                   409 another share of that party is held,
                                                   410 past the deadline or the plan, 422
                                                   malformed, 413 too large
``GET /v1/measurements/{m}/peer/         peer      ``{"shares": {party: share id}}``
manifest``
``POST /v1/measurements/{m}/peer/        peer      at worker 1: take no share from now on,
freeze``                                           answer the shares held
``POST /v1/measurements/{m}/peer/plan``  peer      worker 0's plan and public draws; answered
                                                   with this worker's public draws
=======================================  ========  =============================================
"""

from __future__ import annotations

import re
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from dpfreq.crossparty.shuffle.party import read_party_share
from dpfreq.crossparty.shuffle.shares import MAX_HEADER
from dpfreq.errors import DataError

from ..auth import Principal
from .common import (
    BINARY_BODY,
    Created,
    MeasurementRow,
    ParamsBody,
    Refused,
    TokenIssued,
    authorize,
    create_measurement,
    issue,
    measurement_or_404,
    read_body,
)
from .worker_state import accept_plan, freeze, manifest, store_share

__all__ = ["WorkerCreate", "router"]

router = APIRouter()
_PEER_URL = r"^https?://[^\s]{1,500}$"


class WorkerCreate(ParamsBody):
    """A worker's part in a measurement."""

    position: Literal[0, 1] = Field(description="0: the worker that fixes the plan; 1: the "
                                                "other.")
    peer_url: str = Field(pattern=_PEER_URL, description="The other worker's base URL.")
    peer_token: str = Field(min_length=1, max_length=512, description="The token the other "
                            "worker issued for this one (role peer).")
    aggregator_url: str = Field(pattern=_PEER_URL, description="The aggregator's base URL.")
    aggregator_token: str = Field(min_length=1, max_length=512, description="The token the "
                                  "aggregator issued for this worker (role worker).")


class PartyTokenRequest(BaseModel):
    """The party a token is for."""

    model_config = ConfigDict(extra="forbid", strict=True)

    party: str = Field(min_length=1, max_length=200)


async def _measurement(request: Request, name: str) -> MeasurementRow:
    return await measurement_or_404(request, name, "worker")


@router.post("/v1/measurements", status_code=201, tags=["admin"])
async def create(request: Request, body: WorkerCreate) -> Created:
    """Take part in a measurement as worker ``position`` (admin); an identical request again
    is answered the same, a different one for the same measurement is a 409."""
    return await create_measurement(request, body.params, "worker",
                                    body.model_dump(exclude={"params"}))


@router.get("/v1/measurements/{measurement}", tags=["parties"])
async def status(request: Request, measurement: str) -> dict[str, Any]:
    """Parameters, state, plan and which parties' shares this worker holds."""
    await authorize(request, ("admin", "party", "peer"), measurement, record=False)
    row = await _measurement(request, measurement)
    held = await run_in_threadpool(manifest, request.app.state.service.engine, measurement,
                                   row.params)
    return {**row.public(), "position": row.json("topology")["position"],
            "uploaded": sorted(held)}


@router.post("/v1/measurements/{measurement}/party-tokens", status_code=201, tags=["admin"])
async def party_token(request: Request, measurement: str,
                      body: PartyTokenRequest) -> TokenIssued:
    """A token for one of the measurement's parties (admin)."""
    who = await authorize(request, ("admin",), measurement)
    row = await _measurement(request, measurement)
    if body.party not in row.params.parties:
        raise HTTPException(400, "party must be one of the measurement's parties; got "
                                 f"{body.party[:60]!r}.")
    return await issue(request, Principal("party", measurement,
                                          row.params.party_index(body.party)), who)


@router.post("/v1/measurements/{measurement}/peer-tokens", status_code=201, tags=["admin"])
async def peer_token(request: Request, measurement: str) -> TokenIssued:
    """A token for the other worker of the measurement (admin); it may be issued before this
    worker takes part in the measurement (each worker's creation names the token the other
    issued)."""
    who = await authorize(request, ("admin",), measurement)
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,63}", measurement):
        raise HTTPException(400, "measurement must be a measurement id.")
    return await issue(request, Principal("peer", measurement), who)


def share_limit(row: MeasurementRow) -> int:
    """Largest share body: a vector of ``R`` words and a header."""
    return 4 * row.params.registers + MAX_HEADER + 1024


@router.put("/v1/measurements/{measurement}/share", tags=["parties"],
            openapi_extra=BINARY_BODY)
async def upload_share(request: Request, measurement: str) -> JSONResponse:
    """Store the calling party's share (a frame; see the module docstring)."""
    who = await authorize(request, ("party",), measurement)
    row = await _measurement(request, measurement)
    data = await read_body(request, share_limit(row))
    metrics = request.app.state.metrics
    assert who.device is not None
    party = row.params.parties[who.device]
    try:
        frame = read_party_share(data, row.params, party=party, label="the share")
        new = await run_in_threadpool(store_share, request.app.state.service.engine,
                                      measurement, who.device, frame)
    except DataError as exc:
        metrics.shares_refused.labels("malformed").inc()
        return JSONResponse({"error": str(exc)}, status_code=422)
    except Refused as exc:
        metrics.shares_refused.labels("duplicate" if exc.status == 409 else "late").inc()
        return JSONResponse({"error": str(exc)}, status_code=exc.status)
    if new:
        metrics.shares_stored.inc()
    return JSONResponse({"stored": True, "share_id": frame.header["share_id"], "new": new})


@router.get("/v1/measurements/{measurement}/peer/manifest", tags=["workers"])
async def peer_manifest(request: Request, measurement: str) -> dict[str, Any]:
    """The shares this worker holds, ``{"shares": {party: share id}, "state": ...}`` (peer)."""
    await authorize(request, ("peer",), measurement)
    row = await _measurement(request, measurement)
    held = await run_in_threadpool(manifest, request.app.state.service.engine, measurement,
                                   row.params)
    return {"shares": held, "state": row.state}


@router.post("/v1/measurements/{measurement}/peer/freeze", tags=["workers"])
async def peer_freeze(request: Request, measurement: str) -> dict[str, Any]:
    """Worker 0 is about to fix the plan (peer; at worker 1): take no share from now on and
    answer ``{"shares": {party: share id}}``, every share acknowledged so far."""
    await authorize(request, ("peer",), measurement)
    row = await _measurement(request, measurement)
    if row.json("topology")["position"] != 1:
        raise HTTPException(409, "only worker 1 is frozen; worker 0 fixes the plan.")
    held = await run_in_threadpool(freeze, request.app.state.service.engine, measurement)
    return {"shares": held}


@router.post("/v1/measurements/{measurement}/peer/plan", tags=["workers"])
async def peer_plan(request: Request, measurement: str) -> JSONResponse:
    """Worker 0's plan and public draws (peer; at worker 1): stored with this worker's own
    draws in one transaction, answered with its public draws (the same for a retry)."""
    await authorize(request, ("peer",), measurement)
    row = await _measurement(request, measurement)
    if row.json("topology")["position"] != 1:
        raise HTTPException(409, "only worker 1 takes a plan; worker 0 fixes it.")
    try:
        body = await request.json()
        draws = await run_in_threadpool(accept_plan, request.app.state.service.engine,
                                        measurement, body["plan"], body["draws"])
    except (ValueError, KeyError, TypeError):
        raise HTTPException(422, "the plan message must be JSON with plan and draws.") from None
    except Refused as exc:
        raise HTTPException(exc.status, str(exc)) from None
    return JSONResponse({"draws": draws})
