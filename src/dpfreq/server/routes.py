"""HTTP endpoints of the collection service (see :mod:`dpfreq.server.app`)."""

from __future__ import annotations

import asyncio
import html
import logging
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, JSONResponse
from starlette.exceptions import HTTPException

from dpfreq.errors import DataError, ParameterError

from .auth import Principal, new_token, parse_bearer
from .exports import (
    EXPORT_FORMATS,
    RAW_EXPORTS,
    estimate_payload,
    raw_export,
    render_export,
    summary_payload,
)
from .lookups import owner
from .models import (
    Enrolment,
    EnrolRequest,
    Stored,
    StudyCreate,
    TokenOut,
    TokenRequest,
)
from .protocol import StudyProtocol, build_params
from .service import Service, StudyRecord
from .tokens import audit_row
from .upload import Malformed, device_principal, ingest_upload, known_study

__all__ = ["STATIC", "router"]

STATIC = Path(__file__).with_name("static")

router = APIRouter()
log = logging.getLogger("dpfreq.server")


def _service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


async def _principal(request: Request, roles: tuple[str, ...], study: str | None) -> Principal:
    token = parse_bearer(request.headers.get("authorization"))
    if token is None:
        raise HTTPException(401, "missing bearer token.", headers={"WWW-Authenticate": "Bearer"})
    service = _service(request)
    who = await owner(request.app.state, token)
    if who is None:
        raise HTTPException(401, "unknown bearer token.", headers={"WWW-Authenticate": "Bearer"})
    if who.role not in roles:
        raise HTTPException(403, f"this endpoint needs the role {' or '.join(roles)}.")
    if who.role != "admin" and study is not None and who.study != study:
        await known_study(service, study)
        raise HTTPException(403, "this token belongs to another study.")
    if who.role != "device":  # device uploads are counted in the metrics, not audited one by one
        # a read of the audit log waits for its own line: every line queued before it, those
        # of reads included, is then committed
        await _audit(request, who, f"{request.method} {request.url.path}",
                     wait=request.method != "GET" or request.url.path == "/v1/audit")
    request.state.principal = who
    return who


async def _audit(request: Request, who: Principal, action: str, *, wait: bool = True) -> None:
    """Write a line of the audit log with the writer's next group commit; wait for the commit
    unless ``wait`` is false (reads: an analyst's poll is answered without waiting for the
    writer, and its line is committed with the writer's next group, milliseconds later)."""
    future = request.app.state.ingestor.audit(audit_row(who, action))
    if wait:
        await asyncio.wrap_future(future)


def _needs(*roles: str) -> Any:
    """A dependency that authenticates the caller before FastAPI validates the body."""

    async def check(request: Request) -> Principal:
        return await _principal(request, roles, request.path_params.get("study"))

    return Depends(check)


async def _study(request: Request, study: str) -> StudyRecord:
    service = _service(request)
    record = service.cached_study(study) or await run_in_threadpool(service.study, study)
    if record is None:
        raise HTTPException(404, "no such study.")
    return record


# Report uploads come first: Starlette tries the routes in order. The service answers this
# route in upload.UploadRoute before FastAPI's routing; this declaration gives the OpenAPI
# document (the body is described as ReportBatch, see openapi.py) and runs the same code.
_BATCH_DOC = {"requestBody": {"required": True, "content": {"application/json": {}}}}


@router.post("/v1/studies/{study}/reports", tags=["devices"], response_model=Stored,
             openapi_extra=_BATCH_DOC)
async def upload(request: Request, study: str) -> Response:
    """Store a batch of the device's own reports (a ``ReportBatch``), all or nothing.

    Every report must carry the device's id, the study's ``param_id`` and the enrolled order,
    an interval in range and already due: interval ``j`` of order ``h`` is due from period
    ``j·2^h`` on (intervals past the horizon, the padding of the dyadic decomposition, from the
    last period on). A batch whose slots are all new or stored with the
    same bit is stored (an identical retry gets the same answer); a slot stored with another bit
    is a 409 and nothing of the batch is stored.
    """
    try:
        stored = await ingest_upload(request.app.state, study,
                                     request.headers.get("authorization"), request.body)
    except Malformed as exc:
        return JSONResponse({"error": str(exc)}, status_code=422)
    return JSONResponse({"stored": stored})


@router.get("/v1/studies/{study}/reports", tags=["devices"])
async def stored_reports(request: Request, study: str) -> dict[str, Any]:
    """The calling device's stored reports, ``{"device": id, "slots": [[interval, bit], ...]}``
    in increasing interval (device token; rate limited like uploads).

    A device reads them before its first upload after a (re)start: a device restored from an
    older copy of its state and fed other inputs would otherwise send a second, different bit
    for a slot the service holds, and two bits for one slot reveal that its inputs changed
    (docs/protocol.md §7). The clients withhold such reports. A study whose raw reports
    were deleted under the retention policy answer no slot (the study takes no reports then).
    """
    state = request.app.state
    who = await device_principal(state, request.headers.get("authorization"), study)
    assert who.device is not None  # device_principal refuses a device token without a device
    await known_study(_service(request), study)
    state.limiter.check((study, who.device))
    slots = await run_in_threadpool(_service(request).device_slots, study, who.device)
    return {"device": who.device, "slots": [[j, bit] for j, bit in slots]}


@router.get("/livez", tags=["operations"])
async def livez() -> dict[str, str]:
    """Liveness: the process answers (no database access; restart the process when this
    fails)."""
    return {"status": "ok"}


@router.get("/readyz", tags=["operations"])
async def readyz(request: Request) -> dict[str, str]:
    """Readiness: the database answers, and the writer and the token checks run (send
    traffic elsewhere while this is a 503)."""
    if not request.app.state.ingestor.ready():
        raise HTTPException(503, "the writer is not running.")
    if not request.app.state.tokens.ready():
        raise HTTPException(503, "the token checks are not running.")
    try:
        await run_in_threadpool(_service(request).ping)
    except Exception as exc:
        raise HTTPException(503, "database unavailable.") from exc
    return {"status": "ok"}


@router.get("/metrics", tags=["operations"])
async def metrics(request: Request) -> Response:
    """Prometheus text exposition."""
    body, ctype = request.app.state.metrics.render()
    return Response(body, media_type=ctype)


@router.post("/v1/studies", status_code=201, tags=["admin"], dependencies=[_needs("admin")])
async def create_study(request: Request, body: StudyCreate) -> dict[str, Any]:
    """Create a study (admin): versioned protocol parameters, calendar, public minimum. A study
    with ``enrolment="secret"`` answers with its ``enrolment_secret`` (shown once): devices
    enrol with it as their bearer token."""
    if body.max_changes > body.horizon:
        raise HTTPException(400, "max_changes of the study must be at most its horizon "
                                 f"({body.horizon}): one change per period at most; got "
                                 f"{body.max_changes}.")
    _utc_timestamp(body.start, "start")
    closes_at = None if body.closes_at is None else _utc_timestamp(body.closes_at, "closes_at")
    try:
        params = build_params(horizon=body.horizon, max_changes=body.max_changes,
                              epsilon=body.epsilon, method=body.method, start=body.start,
                              period=body.period, per_order_sparsity=body.per_order_sparsity)
    except ParameterError as exc:  # named as the study's field, not the library's function
        raise HTTPException(400, str(exc).replace(" of make_params ", " of the study ")) from None
    protocol = StudyProtocol(params=params)
    secret = new_token() if body.enrolment == "secret" else None
    try:
        record = await run_in_threadpool(_service(request).create_study, body.study, body.title,
                                         protocol, body.min_devices, secret, closes_at)
    except DataError as exc:
        raise HTTPException(409, str(exc)) from None
    out = record.public()
    if secret is not None:
        out["enrolment_secret"] = secret
    return out


def _utc_timestamp(text: str, field: str) -> str:
    """An ISO date (midnight UTC) or timestamp (UTC unless it has an offset) as an ISO
    timestamp in UTC; 400 naming the study's ``field`` otherwise."""
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return when.astimezone(UTC).isoformat()
    except (ValueError, OverflowError):
        raise HTTPException(400, f"{field} of the study must be an ISO date (midnight UTC) or "
                                 "timestamp (UTC unless it has an offset); got "
                                 f"{text!r}.") from None


@router.post("/v1/studies/{study}/close", tags=["admin"],
             dependencies=[_needs("admin", "manager")])
async def close_study(request: Request, study: str) -> dict[str, Any]:
    """Close the study (admin or its manager): from this moment on every report upload and
    enrolment is refused with 410, in every server process; estimates, summaries and exports
    stay readable. Closing a closed study changes nothing. Answers the study."""
    await _study(request, study)
    record = await run_in_threadpool(_service(request).close_study, study)
    if record is None:
        raise HTTPException(404, "no such study.")
    return record.public()


@router.get("/v1/studies", tags=["admin"], dependencies=[_needs("admin")])
async def list_studies(request: Request) -> dict[str, list[str]]:
    """Ids of every study (admin)."""
    return {"studies": await run_in_threadpool(_service(request).list_studies)}


@router.get("/v1/studies/{study}", tags=["devices"])
async def get_study(request: Request, study: str) -> dict[str, Any]:
    """The study's public parameters (what a device needs to run the protocol)."""
    return (await _study(request, study)).public()


def _token_out(token: str, who: Principal) -> TokenOut:
    return TokenOut(token=token, id=who.id, expires=who.expires)


async def _issue(request: Request, who: Principal, body: TokenRequest | None) -> TokenOut:
    """A new token for ``who``, issued by the caller (the audit log names both)."""
    ttl = None if body is None else body.ttl_seconds
    issuer: Principal = request.state.principal
    token, issued = await run_in_threadpool(_service(request).new_token, who, ttl, issuer)
    await _audit(request, issued, f"issued by {issuer.id}")
    return _token_out(token, issued)


@router.post("/v1/studies/{study}/analyst-tokens", status_code=201, tags=["admin"],
             dependencies=[_needs("admin", "manager")])
async def new_analyst(request: Request, study: str,
                      body: TokenRequest | None = None) -> TokenOut:
    """A new analyst token for the study (admin or the study's manager), optionally expiring;
    shown once, stored as its hash."""
    await _study(request, study)
    return await _issue(request, Principal("analyst", study), body)


@router.post("/v1/studies/{study}/manager-tokens", status_code=201, tags=["admin"],
             dependencies=[_needs("admin")])
async def new_manager(request: Request, study: str,
                      body: TokenRequest | None = None) -> TokenOut:
    """A new manager token for the study (admin): it issues and revokes the study's analyst
    and device tokens, reads the study and its audit log."""
    await _study(request, study)
    return await _issue(request, Principal("manager", study), body)


@router.post("/v1/admin-tokens", status_code=201, tags=["admin"], dependencies=[_needs("admin")])
async def new_admin(request: Request, body: TokenRequest | None = None) -> TokenOut:
    """A new admin token (admin), optionally expiring."""
    return await _issue(request, Principal("admin"), body)


@router.post("/v1/tokens/rotate", status_code=201, tags=["admin"])
async def rotate(request: Request) -> TokenOut:
    """Replace the caller's token (any role) by a new one with the same role, study, device,
    remaining lifetime and (admin) lineage; the old token stops working at once."""
    who = await _principal(request, ("admin", "manager", "analyst", "device"), None)
    try:
        token, new = await run_in_threadpool(_service(request).rotate, who)
    except DataError:
        raise HTTPException(401, "this token was revoked.",
                            headers={"WWW-Authenticate": "Bearer"}) from None
    await _audit(request, new, f"rotated from {who.id}")
    return _token_out(token, new)


@router.delete("/v1/tokens/{token_id}", tags=["admin"])
async def revoke(request: Request, token_id: str) -> dict[str, list[dict[str, Any]]]:
    """Revoke a token by its full id, the 16 hex digits ``id`` returned when it was issued
    (admin: any token; manager: its study's analyst and device tokens). Answers what was
    revoked: ``{"revoked": [{"id", "role", "study", "device", "expires", "revoked"}]}``."""
    who = await _principal(request, ("admin", "manager"), None)
    if len(token_id) != 16 or any(c not in "0123456789abcdef" for c in token_id):
        raise HTTPException(400, "token_id must be a token's full id, 16 lower-case hex "
                                 f"digits; got {token_id[:40]!r}.")
    study = None if who.role == "admin" else who.study
    revoked = await run_in_threadpool(_service(request).revoke, token_id, study)
    if not revoked:
        raise HTTPException(404, "no such active token.")
    for gone in revoked:
        await _audit(request, who, f"revoked {gone['id']}")
    return {"revoked": revoked}


@router.get("/v1/audit", tags=["admin"])
async def audit_log(request: Request, study: str | None = Query(None, max_length=64),
                    limit: int = Query(100, ge=1, le=1000)) -> dict[str, Any]:
    """The newest lines of the audit log of token use (admin: all or one study; manager: its
    study)."""
    who = await _principal(request, ("admin", "manager"), None)
    if who.role == "manager":
        study = who.study
    return {"audit": await run_in_threadpool(_service(request).audit_log, study, limit)}


@router.post("/v1/studies/{study}/devices", status_code=201, tags=["devices"])
async def enrol(request: Request, study: str, body: EnrolRequest) -> Enrolment:
    """Enrol a device: it sends the parameter id it runs and its order; it receives a random
    device id and its device token (shown once). A study with an enrolment secret needs it as
    the bearer token; enrolments are rate limited per client address."""
    record = await _study(request, study)
    secret = parse_bearer(request.headers.get("authorization"))
    refusal = await run_in_threadpool(_service(request).enrolment_refusal, study, secret)
    if refusal == "secret":
        raise HTTPException(401, "this study needs its enrolment secret as the bearer token.",
                            headers={"WWW-Authenticate": "Bearer"})
    if refusal == "closed":
        raise HTTPException(410, "the study is closed or has expired; it enrols no more "
                                 "devices.")
    client = request.client.host if request.client else "-"
    request.app.state.enrol_limiter.check((study, client))
    if body.param_id != record.param_id:
        raise HTTPException(400, "param_id does not match the study's parameters.")
    version = record.protocol.params.version
    if body.protocol_version is not None and body.protocol_version != version:
        fix = ("the device's client is outdated: update it" if body.protocol_version < version
               else "the device runs a newer protocol than this server")
        raise HTTPException(400, f"protocol_version must be {version}, the supported protocol "
                                 f"version ({fix}); got {body.protocol_version}.")
    if body.order >= record.protocol.orders:
        raise HTTPException(400, f"order must be in 0..{record.protocol.orders - 1}.")
    service = _service(request)
    item, token = service.enrolment(record, body.order)
    try:
        device = await asyncio.wrap_future(request.app.state.ingestor.enrol(item))
    except Exception as exc:
        raise HTTPException(503, "storage failed; the device was not enrolled, retry later.") \
            from exc
    service.enrolled_device(record.study, device, body.order, token)
    request.app.state.metrics.enrolled.inc()
    return Enrolment(device=device, token=token, order=body.order)


async def _readable_study(request: Request, study: str) -> StudyRecord:
    await _principal(request, ("admin", "manager", "analyst"), study)
    return await _study(request, study)


_reads: dict[tuple[Any, ...], tuple[float, Any]] = {}
_refreshing: dict[tuple[Any, ...], asyncio.Task[None]] = {}


async def _cached(request: Request, key: tuple[Any, ...], compute: Any, *args: Any) -> Any:
    """``compute(*args)`` in the thread pool, reused for ``read_cache_seconds``: analysts
    polling a large study cost the writer one read of the running sums per period, however many
    poll. Past that age the value is still answered at once while one refresh runs in the
    background (stale while revalidate): a poll never waits for the database or the
    computation, except the first of a study (nothing to answer yet) and with
    ``read_cache_seconds = 0`` (every read computes)."""
    ttl = request.app.state.config.read_cache_seconds
    hit = _reads.get(key)
    if hit is not None and ttl > 0:
        if time.monotonic() - hit[0] >= ttl and key not in _refreshing:
            _refreshing[key] = asyncio.create_task(_refresh(key, compute, args, True))
        return hit[1]
    return await _refresh(key, compute, args)


async def _refresh(key: tuple[Any, ...], compute: Any, args: tuple[Any, ...],
                   background: bool = False) -> Any:
    """Compute and remember a cached read (a background refresh's failure is logged; the
    next read tries again)."""
    started = time.monotonic()
    try:
        value = await run_in_threadpool(compute, *args)
    except Exception as exc:
        if not background:
            raise
        log.warning("read refresh failed", extra={"error": type(exc).__name__})
        return None
    finally:
        if background:
            _refreshing.pop(key, None)
    if len(_reads) > 4096:
        _reads.clear()
    _reads[key] = (started, value)
    return value


async def _withheld(request: Request, record: StudyRecord) -> bool:
    """Whether fewer than the study's minimum of devices have reported (once a study has
    reached it, it stays reached: reports are never deleted while a study is open)."""
    service = _service(request)
    key = (id(service), "reported", record.study)
    hit = _reads.get(key)
    if hit is not None and hit[1] >= record.min_devices:
        return False
    n = await _cached(request, key, service.reported_devices, record.study)
    return bool(n < record.min_devices)


@router.get("/v1/studies/{study}/estimates", tags=["analysts"])
async def estimates(
    request: Request, study: str,
    confidence: float = Query(0.95, gt=0.0, lt=1.0),
    format: str = Query("json", pattern="^(" + "|".join(EXPORT_FORMATS) + ")$"),
) -> Response:
    """Per-period estimates f̂_t with the simultaneous confidence band (analyst or admin),
    as JSON, CSV or Parquet. Withheld (403) until the study's public minimum number of devices
    have reported."""
    record = await _readable_study(request, study)
    payload = None
    if not await _withheld(request, record):
        payload = await _cached(request, (id(_service(request)), "estimate", study, confidence),
                                estimate_payload, _service(request), record, confidence)
    if payload is None:
        raise HTTPException(403, "estimates are withheld until at least "
                                 f"{record.min_devices} devices have reported.")
    return render_export(payload, format)


@router.get("/v1/studies/{study}/exports/{table}", tags=["analysts"], responses={200: {
    "content": {"application/vnd.apache.parquet": {}},
    "description": "The raw table as Parquet."}})
async def export_raw(request: Request, study: str, table: str) -> Response:
    """The raw reports (``table=reports``: device, order, interval, bit, param_id) or the
    enrolment (``table=enrolment``: device, order) as Parquet (analyst or admin), for
    re-aggregating offline with ``dpfreq longitudinal aggregate``. Withheld (403) like the
    estimates until the study's public minimum number of devices have reported."""
    record = await _readable_study(request, study)
    if table not in RAW_EXPORTS:
        raise HTTPException(404, f"no such export; one of {', '.join(RAW_EXPORTS)}.")
    if table == "reports":
        fresh = await run_in_threadpool(_service(request).refresh_study, study)
        if fresh is not None and fresh.purged is not None:
            raise HTTPException(410, "the raw reports of this study were deleted under the "
                                     f"retention policy on {fresh.purged}.")
    if await _withheld(request, record):
        raise HTTPException(403, "exports are withheld until at least "
                                 f"{record.min_devices} devices have reported.")
    return await run_in_threadpool(raw_export, _service(request), record, table)


@router.get("/v1/studies/{study}/summary", tags=["analysts"])
async def summary(request: Request, study: str,
                  confidence: float = Query(0.95, gt=0.0, lt=1.0)) -> JSONResponse:
    """What the dashboard shows: devices per order, reports per period, rejections by reason
    and the estimate (null while withheld)."""
    record = await _readable_study(request, study)
    payload = await _cached(request, (id(_service(request)), "summary", study, confidence),
                            summary_payload, _service(request), record, confidence)
    if await _withheld(request, record):
        payload = {**payload, "estimate": None}
    return JSONResponse(payload)


@router.get("/studies/{study}/dashboard", response_class=HTMLResponse, tags=["analysts"])
async def dashboard(request: Request, study: str) -> HTMLResponse:
    """The study's dashboard page. It holds no data: its script reads the analyst token from
    the URL fragment (``#token=...``, never sent to the server in the URL) and fetches the
    summary with it."""
    record = await _study(request, study)
    page = (STATIC / "dashboard.html").read_text(encoding="utf-8")
    page = page.replace("{{study}}", html.escape(record.study)).replace(
        "{{title}}", html.escape(record.title or record.study))
    return HTMLResponse(page, headers={"Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:")})
