"""One-line JSON errors for every failure, and counting of rejected reports."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError
from starlette.exceptions import HTTPException

from dpfreq.errors import DPFreqError

from .upload import count_rejection as _count

__all__ = ["count_rejection", "install_handlers"]

log = logging.getLogger("dpfreq.server")


def _one_line(text: Any) -> str:
    return " ".join(str(text).split())[:500]


def install_handlers(app: FastAPI) -> None:
    """Map HTTP errors, malformed bodies (422), library errors (400) and anything unexpected
    (500, logged) to ``{"error": "<one line>"}``."""
    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        headers = dict(getattr(exc, "headers", None) or {})
        if exc.status_code == 503:
            headers.setdefault("Retry-After", "1")
        return JSONResponse({"error": _one_line(exc.detail)}, status_code=exc.status_code,
                            headers=headers or None)

    @app.exception_handler(DBAPIError)
    async def storage_error(request: Request, exc: DBAPIError) -> JSONResponse:
        log.warning("storage error", extra={"error": _one_line(type(exc.orig).__name__)})
        return JSONResponse({"error": "storage unavailable; retry later."}, status_code=503,
                            headers={"Retry-After": "1"})

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        first = errors[0] if errors else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "body"
        msg = f"invalid request: {where}: {first.get('msg', 'malformed')}"
        study = request.path_params.get("study")
        if study and request.method == "POST" and request.url.path.endswith("/reports"):
            await count_rejection(request, study, "malformed", 1)
        return JSONResponse({"error": _one_line(msg)}, status_code=422)

    @app.exception_handler(DPFreqError)
    async def library_error(request: Request, exc: DPFreqError) -> JSONResponse:
        return JSONResponse({"error": _one_line(exc)}, status_code=400)

    @app.exception_handler(Exception)
    async def internal(request: Request, exc: Exception) -> JSONResponse:
        log.error("internal error", extra={"error": _one_line(repr(exc))})
        return JSONResponse({"error": "internal error"}, status_code=500)


async def count_rejection(request: Request, study: str, reason: str, reports: int) -> None:
    """Count rejected reports in the metrics and (for a known study) in the database, with the
    writer's next group commit."""
    await _count(request.app.state, study, reason, reports)
