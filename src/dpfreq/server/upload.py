"""The report upload, ``POST /v1/studies/{study}/reports``: the service's hot path.

One upload is: check the device's bearer token (before anything is read of the body), read the
body, decode and validate every report, check each against the study and the device's
enrolment, and hand the batch to the group-commit writer (:mod:`dpfreq.server.ingest`); the
answer goes out only once the writer's transaction has committed.

Two choices keep this path cheap, without dropping any check:

* the batch is decoded and validated in one pass by msgspec, straight from the bytes into
  slotted structs, with the same rules as the :class:`~dpfreq.server.models.ReportBatch` model
  that the OpenAPI document shows (types without coercion, bounds, no unknown field, 1 to
  ``MAX_BATCH`` reports; the tests hold the two to the same answers). pydantic took four times
  as long on a batch of 64 reports, a tenth of the server's CPU time in
  ``benchmarks/bench_server.py``;
* :class:`UploadRoute` answers the route as plain ASGI, ahead of the application's whole
  middleware stack and of FastAPI's routing and dependency machinery (which cost the server
  more CPU per upload than the upload's own work), doing inline what the service's middleware
  does (body limit, request id, metrics, log line). The FastAPI route of the same path stays
  for the OpenAPI document and runs the same :func:`ingest_upload`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import msgspec
from sqlalchemy.exc import DBAPIError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from .auth import Principal, parse_bearer
from .ingest import Batch, Closed, Conflict
from .limits import too_large
from .lookups import owner
from .models import MAX_BATCH
from .observe import Metrics, request_id
from .protocol import utc_now
from .service import Service, StudyRecord

__all__ = ["ROUTE", "UploadRoute", "decode_batch", "device_principal", "ingest_upload",
           "known_study"]

ROUTE = "/v1/studies/{study}/reports"
_PATH = re.compile(r"^/v1/studies/([^/]+)/reports$")


class _Report(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """One report in wire form (the rules of :class:`dpfreq.server.models.Report`); untracked
    by the garbage collector (it holds only numbers and a string: no cycle)."""

    device: Annotated[int, msgspec.Meta(ge=0, lt=1 << 62)]
    order: Annotated[int, msgspec.Meta(ge=0, le=62)]
    interval: Annotated[int, msgspec.Meta(ge=1, lt=1 << 31)]
    bit: Annotated[int, msgspec.Meta(ge=0, le=1)]
    param_id: Annotated[str, msgspec.Meta(max_length=64)]


class _Batch(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    reports: Annotated[list[_Report], msgspec.Meta(min_length=1, max_length=MAX_BATCH)]


log = logging.getLogger("dpfreq.server")

_DECODER = msgspec.json.Decoder(_Batch)
_CLOSED = "the study is closed or has expired; it takes no more reports (nothing was stored)."
_WHERE = re.compile(r" - at `\$\.?([^`]*)`$")


class Malformed(Exception):
    """The body is not a valid report batch (a 422)."""


def decode_batch(body: bytes) -> list[_Report]:
    """The reports of a batch body, or :class:`Malformed` with a one-line reason naming where
    (``reports[3].bit: Expected `int`, got `bool```)."""
    try:
        return _DECODER.decode(body).reports
    except msgspec.DecodeError as exc:
        text = " ".join(str(exc).split())
        m = _WHERE.search(text)
        where = m.group(1) if m and m.group(1) else "body"
        raise Malformed(f"invalid request: {where}: {_WHERE.sub('', text)}"[:500]) from None


class _Refusal(Exception):
    def __init__(self, reason: str, status: int, message: str) -> None:
        super().__init__(message)
        self.reason, self.status, self.message = reason, status, message


_CALENDARS: dict[int, tuple[Any, int, int]] = {}


def current_period(protocol: Any) -> int:
    """``protocol.current_period(now)`` in integer nanoseconds, from the protocol's start and
    period length computed once per protocol object (parsing them took a tenth of the CPU
    time of an upload)."""
    hit = _CALENDARS.get(id(protocol))
    if hit is None or hit[0] is not protocol:
        if len(_CALENDARS) > 4096:
            _CALENDARS.clear()
        start = protocol.start
        epoch = (start - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
        hit = (protocol, epoch * 1000, protocol.period_seconds * 10**9)
        _CALENDARS[id(protocol)] = hit
    elapsed = time.time_ns() - hit[1]
    return 0 if elapsed < 0 else elapsed // hit[2] + 1


def check_reports(record: StudyRecord, device: int, order: int, reports: list[Any],
                  current: int) -> list[tuple[int, int]]:
    """Validate every report against the study and the enrolment (``current``: the period
    running now); the distinct slots ``(interval, bit)`` in interval order."""
    p = record.protocol
    limit, param_id = p.padded >> order, record.param_id
    # interval j of order h is due from period j·2^h on, the padding past the horizon from
    # the last period on: before the end, j is due when j <= current >> h
    due = limit if p.horizon <= current else min(limit, current >> order)
    slots: dict[int, int] = {}
    for rep in reports:
        if (rep.device != device or rep.param_id != param_id or rep.order != order
                or rep.interval > due):
            raise _refusal(rep, device, param_id, order, limit)
        if slots.setdefault(rep.interval, rep.bit) != rep.bit:
            raise _Refusal("conflict", 409, "two reports of the batch for one interval disagree.")
    return sorted(slots.items())


def _refusal(rep: Any, device: int, param_id: str, order: int, limit: int) -> _Refusal:
    """Why ``rep`` is refused (the first rule it breaks, in the order of the checks)."""
    if rep.device != device:
        return _Refusal("wrong_device", 403, "a device may post only its own reports.")
    if rep.param_id != param_id:
        return _Refusal("param_id", 400, "param_id does not match the study's parameters.")
    if rep.order != order:
        return _Refusal("order", 400, "report order differs from the device's enrolled order.")
    if rep.interval > limit:
        return _Refusal("interval", 400, f"interval out of range 1..{limit} for this order.")
    return _Refusal("future", 400, "report for a period that has not started yet.")


async def count_rejection(state: Any, study: str, reason: str, reports: int) -> None:
    """Count rejected reports in the metrics and (for a known study) in the database, with the
    writer's next group commit."""
    state.metrics.rejected.labels(reason).inc(max(1, reports))
    ingestor = getattr(state, "ingestor", None)
    service = getattr(state, "service", None)
    if ingestor is not None and service is not None and service.cached_study(study) is not None:
        await asyncio.wrap_future(ingestor.reject(study, reason, reports))


async def known_study(service: Service, study: str) -> StudyRecord:
    """The study's record, or 404 "no such study"."""
    record = service.cached_study(study) or await run_in_threadpool(service.study, study)
    if record is None:
        raise HTTPException(404, "no such study.")
    return record


async def device_principal(state: Any, authorization: str | None, study: str) -> Principal:
    """The device whose bearer token ``authorization`` carries, enrolled in ``study``; else
    401 (no or unknown token), 404 (no such study) or 403 (another role, study or none)."""
    return await _device(state, authorization, study)


async def _device(state: Any, authorization: str | None, study: str) -> Principal:
    token = parse_bearer(authorization)
    if token is None:
        raise HTTPException(401, "missing bearer token.", headers={"WWW-Authenticate": "Bearer"})
    who = await owner(state, token)
    if who is None:
        raise HTTPException(401, "unknown bearer token.", headers={"WWW-Authenticate": "Bearer"})
    if who.role != "device":
        raise HTTPException(403, "this endpoint needs the role device.")
    if who.study != study:
        await known_study(state.service, study)
        raise HTTPException(403, "this token belongs to another study.")
    if who.device is None:
        raise HTTPException(403, "this token names no device.")
    return who


async def ingest_upload(state: Any, study: str, authorization: str | None,
                        read_body: Callable[[], Awaitable[bytes]]) -> int:
    """Store one uploaded batch (see the route's description in :mod:`dpfreq.server.routes`);
    the number of reports acknowledged, or an :class:`HTTPException` (422 as
    :class:`Malformed`)."""
    service: Service = state.service
    who = await _device(state, authorization, study)
    record = await known_study(service, study)
    device = who.device
    assert device is not None  # _device refuses a device token without a device
    try:
        reports = decode_batch(await read_body())
    except Malformed:
        await count_rejection(state, study, "malformed", 1)
        raise
    try:
        state.limiter.check((study, device))
    except HTTPException:
        await count_rejection(state, study, "rate_limited", len(reports))
        raise
    if not record.accepting(utc_now()):
        await count_rejection(state, study, "closed", len(reports))
        raise HTTPException(410, _CLOSED)
    order = service.cached_order(study, device)
    if order is None:
        order = await run_in_threadpool(service.device_order, study, device)
    if order is None:
        raise HTTPException(403, "this device is not enrolled in the study.")
    try:
        rows = check_reports(record, device, order, reports, current_period(record.protocol))
    except _Refusal as refusal:
        await count_rejection(state, study, refusal.reason, len(reports))
        raise HTTPException(refusal.status, refusal.message) from None
    future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    state.ingestor.submit(Batch(study, device, order, rows, future))
    try:
        await future
    except Conflict:
        raise HTTPException(409, "a report of this batch conflicts with a stored report; "
                                 "nothing of the batch was stored.") from None
    except Closed:
        raise HTTPException(410, _CLOSED) from None
    except Exception as exc:
        raise HTTPException(503, "storage failed; nothing of the batch was acknowledged, "
                                 "retry later.") from exc
    return len(reports)


class _Route:
    path = ROUTE  # what the metrics and logs label the request with


class _TooLarge(Exception):
    pass


class UploadRoute:
    """The ASGI application of ``POST /v1/studies/{study}/reports`` alone (see the module
    notes), with what the service's middleware does for every other route done inline: the
    body limit (413 from ``Content-Length``, or while the body streams), the request id, the
    metrics and the log line.

    Parameters
    ----------
    metrics : Metrics
        The service's metrics.
    max_bytes : int
        Largest request body accepted.
    """

    def __init__(self, metrics: Metrics, max_bytes: int) -> None:
        self.metrics = metrics
        self.max_bytes = max_bytes

    @staticmethod
    def study(scope: Any) -> str | None:
        """The study of an upload request, or None for any other request."""
        if scope["type"] == "http" and scope["method"] == "POST":
            match = _PATH.match(scope["path"])
            if match is not None:
                return match.group(1)
        return None

    async def __call__(self, scope: Any, receive: Any, send: Any, study: str) -> None:
        t0 = time.perf_counter()
        rid = request_id(scope)
        scope["route"] = _Route
        status = 500
        self.metrics.in_flight.inc()
        try:
            status, body, headers = await self._answer(scope, receive, study)
            raw = [(b"content-type", b"application/json"),
                   (b"content-length", b"%d" % len(body))]
            raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
            raw.append((b"x-request-id", rid.encode()))
            await send({"type": "http.response.start", "status": status, "headers": raw})
            await send({"type": "http.response.body", "body": body})
        finally:
            self.metrics.in_flight.dec()
            self.metrics.record("POST", ROUTE, status, t0, rid)

    async def _answer(self, scope: Any, receive: Any,
                      study: str) -> tuple[int, bytes, dict[str, str]]:
        """The status, body and extra headers of the answer."""
        auth = None
        for key, value in scope["headers"]:
            if key == b"authorization":
                auth = value.decode("latin-1")
            elif key == b"content-length" and not _fits(value, self.max_bytes):
                return 413, too_large(self.max_bytes), {}
        limit = self.max_bytes

        async def read_body() -> bytes:
            chunks, seen = [], 0
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    break
                chunk = message.get("body", b"")
                seen += len(chunk)
                if seen > limit:
                    raise _TooLarge
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
            return b"".join(chunks)

        headers: dict[str, str] = {}
        try:
            stored = await ingest_upload(scope["app"].state, study, auth, read_body)
            return 200, b'{"stored":%d}' % stored, headers
        except HTTPException as exc:
            status, headers, body = exc.status_code, dict(exc.headers or {}), _error(exc.detail)
        except Malformed as exc:
            status, body = 422, _error(str(exc))
        except _TooLarge:
            return 413, too_large(limit), headers
        except DBAPIError:
            status, body = 503, _error("storage unavailable; retry later.")
        except Exception as exc:  # the answer FastAPI's last-resort handler would give
            log.error("internal error", extra={"error": _error(repr(exc)).decode()})
            return 500, _error("internal error"), headers
        if status == 503:
            headers.setdefault("Retry-After", "1")
        return status, body, headers


def _fits(length: bytes, max_bytes: int) -> bool:
    try:
        return int(length) <= max_bytes
    except ValueError:
        return False


def _error(detail: Any) -> bytes:
    return json.dumps({"error": " ".join(str(detail).split())[:500]}).encode()
