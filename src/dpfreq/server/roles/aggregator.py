"""HTTP endpoints of the aggregator (``dpfreq serve --role aggregator``).

=========================================  ========  ===========================================
route                                      token     what
=========================================  ========  ===========================================
``POST /v1/measurements``                  admin     aggregate a measurement (sealed
                                                     parameters)
``GET /v1/measurements/{m}``               admin,    parameters, state, the outputs received
                                           analyst,
                                           worker
``POST /v1/measurements/{m}/worker-        admin     a token for worker ``{"position": 0|1}``
tokens``
``POST /v1/measurements/{m}/analyst-       admin     a token that reads the result
tokens``
``PUT /v1/measurements/{m}/outputs/{e}``   worker    one output of the worker (a frame,
                                                     :mod:`dpfreq.crossparty.shuffle.aggregate`)
                                                     for entity ``e``: 200 stored (also an
                                                     identical retry), 409 another one is held
                                                     or the plans differ, 422 malformed
``POST /v1/measurements/{m}/empty-plan``   worker    no party uploaded to both workers: nothing
                                                     will be released (the result says so)
``GET /v1/measurements/{m}/result``        admin,    the release (JSON of
                                           analyst   :class:`~dpfreq.crossparty.shuffle.
                                                     ShuffleRelease`, with its noisy
                                                     histograms), 409 while outputs are
                                                     missing, 422 when the outputs did not
                                                     reconstruct (nothing released)
=========================================  ========  ===========================================

What reaches this service from the workers is the output frames alone: permuted words whose
sums are the registers' values and the dummies', with the public plan. It keeps the noisy
histograms and what it computes from them.
"""

from __future__ import annotations

from typing import Any, Literal

import sqlalchemy as sa
from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException

from dpfreq.crossparty.shuffle import Plan, dummy_law
from dpfreq.crossparty.shuffle.aggregate import read_output
from dpfreq.crossparty.shuffle.shares import MAX_HEADER
from dpfreq.errors import DataError

from ..auth import Principal
from . import tables
from .aggregator_state import fail_empty, result_payload, store_output, try_release
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

__all__ = ["AggregatorCreate", "router"]

router = APIRouter()


class AggregatorCreate(ParamsBody):
    """A measurement to aggregate."""


class WorkerTokenRequest(BaseModel):
    """The worker a token is for."""

    model_config = ConfigDict(extra="forbid", strict=True)

    position: Literal[0, 1]


async def _measurement(request: Request, name: str) -> MeasurementRow:
    return await measurement_or_404(request, name, "aggregator")


@router.post("/v1/measurements", status_code=201, tags=["admin"])
async def create(request: Request, body: AggregatorCreate) -> Created:
    """Aggregate a measurement (admin); an identical request again is answered the same."""
    return await create_measurement(request, body.params, "aggregator", None)


def _received(engine: Any, measurement: str) -> list[list[int]]:
    o = tables.outputs
    with engine.connect() as conn:
        return [[int(e), int(p)] for e, p in conn.execute(
            sa.select(o.c.entity, o.c.position).where(o.c.measurement == measurement)
            .order_by(o.c.entity, o.c.position))]


@router.get("/v1/measurements/{measurement}", tags=["analysts"])
async def status(request: Request, measurement: str) -> dict[str, Any]:
    """Parameters, state and the ``[entity, position]`` of every output received."""
    await authorize(request, ("admin", "analyst", "worker"), measurement, record=False)
    row = await _measurement(request, measurement)
    received = await run_in_threadpool(_received, request.app.state.service.engine, measurement)
    return {**row.public(), "received": received}


@router.post("/v1/measurements/{measurement}/worker-tokens", status_code=201, tags=["admin"])
async def worker_token(request: Request, measurement: str,
                       body: WorkerTokenRequest) -> TokenIssued:
    """A token for worker ``position`` of the measurement (admin)."""
    who = await authorize(request, ("admin",), measurement)
    await _measurement(request, measurement)
    return await issue(request, Principal("worker", measurement, body.position), who)


@router.post("/v1/measurements/{measurement}/analyst-tokens", status_code=201,
             tags=["admin"])
async def analyst_token(request: Request, measurement: str) -> TokenIssued:
    """A token that reads the measurement's result (admin)."""
    who = await authorize(request, ("admin",), measurement)
    await _measurement(request, measurement)
    return await issue(request, Principal("analyst", measurement), who)


def output_limit(row: MeasurementRow) -> int:
    """Largest output body: ``R`` words and at most ``2s`` dummies per value and worker."""
    params = row.params
    values = len(params.parties) * params.max_frequency + 1
    return 4 * (params.registers + 4 * dummy_law(params).shift * values) + MAX_HEADER + 1024


@router.put("/v1/measurements/{measurement}/outputs/{entity}", tags=["workers"],
            openapi_extra=BINARY_BODY)
async def upload_output(request: Request, measurement: str, entity: int) -> JSONResponse:
    """Store one of the calling worker's outputs (see the module docstring)."""
    who = await authorize(request, ("worker",), measurement)
    row = await _measurement(request, measurement)
    data = await read_body(request, output_limit(row))
    engine = request.app.state.service.engine
    try:
        frame = read_output(data, row.params)
        if frame.header["position"] != who.device or frame.header["entity"] != entity:
            raise DataError("the worker output is refused: its position or entity is not the "
                            "sender's or the URL's.")
        new = await run_in_threadpool(store_output, engine, measurement, frame)
    except DataError as exc:
        return JSONResponse({"error": str(exc)}, status_code=422)
    except Refused as exc:
        return JSONResponse({"error": str(exc)}, status_code=exc.status)
    state = await run_in_threadpool(try_release, engine, measurement)
    if state == "released" and new:
        request.app.state.metrics.releases.inc()
    return JSONResponse({"stored": True, "new": new, "state": state or "collecting"})


@router.post("/v1/measurements/{measurement}/empty-plan", tags=["workers"])
async def empty_plan(request: Request, measurement: str) -> JSONResponse:
    """A worker's notice that no party uploaded to both workers by the deadline (worker):
    nothing will be released, and the result says why."""
    await authorize(request, ("worker",), measurement)
    row = await _measurement(request, measurement)
    try:
        plan = Plan.from_dict((await request.json())["plan"], row.params)
    except (ValueError, KeyError, TypeError, DataError):
        raise HTTPException(422, "the notice must be JSON with the worker's plan.") from None
    if plan.entities:
        raise HTTPException(409, "this plan measures parties: send its outputs instead.")
    await run_in_threadpool(fail_empty, request.app.state.service.engine, measurement, plan)
    return JSONResponse({"state": "failed"})


@router.get("/v1/measurements/{measurement}/result", tags=["analysts"])
async def result(request: Request, measurement: str) -> JSONResponse:
    """The release (admin, analyst); 409 while outputs are missing, 422 when nothing was
    released (the outputs did not reconstruct)."""
    await authorize(request, ("admin", "analyst"), measurement)
    engine = request.app.state.service.engine
    await run_in_threadpool(try_release, engine, measurement)
    row = await _measurement(request, measurement)
    if row.state == "collecting":
        missing = await run_in_threadpool(_received, engine, measurement)
        raise HTTPException(409, "not released yet: waiting for the workers' outputs (received "
                                 f"[entity, worker] {missing}).")
    payload = result_payload(row)
    return JSONResponse(payload, status_code=200 if row.state == "released" else 422)
