"""The service's OpenAPI document: FastAPI's, completed with what the handlers do beyond their
signatures — the bearer security scheme, every error status each route answers (one error
schema, matching the ``{"error": "..."}`` bodies), ``Retry-After`` on 429 and 503, the report
batch schema with resolvable references, and ``/metrics`` as Prometheus text."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from .models import ReportBatch

__all__ = ["install_openapi"]

_ERROR = {"type": "object", "required": ["error"], "additionalProperties": False,
          "properties": {"error": {"type": "string", "description": "One line."}}}

_REASONS = {400: "Request refused by a rule of the study or the protocol",
            401: "Missing, unknown, revoked or expired bearer token",
            403: "The token's role or study does not allow this",
            404: "No such study or token", 409: "Conflicts with stored data",
            410: "The study is closed or has expired, or its raw reports were deleted under "
                 "the retention policy; nothing was stored",
            413: "Request body too large", 422: "Malformed request",
            429: "Rate limited; retry after Retry-After seconds",
            503: "Storage unavailable; nothing was stored; retry after Retry-After seconds"}

_DB = {503}
_AUTH = {401, 403}
_BODY = {413, 422}
# Statuses each operation answers besides its success (the 503 of a database failure on all
# that read or write the database).
_STATUSES: dict[tuple[str, str], set[int]] = {
    ("post", "/v1/studies/{study}/reports"): {400, 404, 409, 410, 429} | _AUTH | _BODY | _DB,
    ("post", "/v1/studies/{study}/close"): {404} | _AUTH | _DB,
    ("get", "/livez"): set(),
    ("get", "/readyz"): _DB,
    ("get", "/metrics"): set(),
    ("post", "/v1/studies"): {400, 409} | _AUTH | _BODY | _DB,
    ("get", "/v1/studies"): _AUTH | _DB,
    ("get", "/v1/studies/{study}"): {404} | _DB,
    ("post", "/v1/studies/{study}/analyst-tokens"): {404} | _AUTH | _BODY | _DB,
    ("post", "/v1/studies/{study}/manager-tokens"): {404} | _AUTH | _BODY | _DB,
    ("post", "/v1/admin-tokens"): _AUTH | _BODY | _DB,
    ("post", "/v1/tokens/rotate"): {401, 413} | _DB,
    ("delete", "/v1/tokens/{token_id}"): {400, 404, 422} | _AUTH | _DB,
    ("get", "/v1/audit"): {422} | _AUTH | _DB,
    ("post", "/v1/studies/{study}/devices"): {400, 401, 404, 410, 429} | _BODY | _DB,
    ("get", "/v1/studies/{study}/estimates"): {404, 422} | _AUTH | _DB,
    ("get", "/v1/studies/{study}/summary"): {404, 422} | _AUTH | _DB,
    ("get", "/v1/studies/{study}/exports/{table}"): {404, 410} | _AUTH | _DB,
    ("get", "/studies/{study}/dashboard"): {404} | _DB,
}
_PUBLIC = {"/livez", "/readyz", "/metrics", "/v1/studies/{study}", "/studies/{study}/dashboard"}
_OPTIONAL_AUTH = {"/v1/studies/{study}/devices"}  # the enrolment secret, unless open


def _complete(doc: dict[str, Any]) -> dict[str, Any]:
    components = doc.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    schemas["Error"] = _ERROR
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    components["securitySchemes"] = {"bearer": {
        "type": "http", "scheme": "bearer",
        "description": "A token of role admin, manager, analyst or device (or a study's "
                       "enrolment secret, to enrol)."}}
    batch = ReportBatch.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas.update(batch.pop("$defs", {}))
    schemas["ReportBatch"] = batch
    retry = {"Retry-After": {"description": "Seconds to wait before retrying.", "required": True,
                             "schema": {"type": "integer", "minimum": 1}}}
    for path, item in doc.get("paths", {}).items():
        for method, op in item.items():
            statuses = _STATUSES.get((method, path), {401, 403, 404, 422, 503})
            responses = op.setdefault("responses", {})
            responses.pop("422", None)
            for status in sorted(statuses):
                entry: dict[str, Any] = {"description": _REASONS[status], "content": {
                    "application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
                if status in (429, 503):
                    entry["headers"] = retry
                responses[str(status)] = entry
            if path in _PUBLIC:
                op["security"] = []
            elif path in _OPTIONAL_AUTH:
                op["security"] = [{"bearer": []}, {}]
            else:
                op["security"] = [{"bearer": []}]
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
            if path.endswith("/reports") and method == "post":
                body["schema"] = {"$ref": "#/components/schemas/ReportBatch"}
    metrics = doc["paths"]["/metrics"]["get"]["responses"]["200"]
    metrics["content"] = {"text/plain": {"schema": {"type": "string"}}}
    return doc


def install_openapi(app: FastAPI) -> None:
    """Serve the completed document at ``/openapi.json`` (built once, on first request)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = _complete(get_openapi(
                title=app.title, version=app.version, summary=app.summary, routes=app.routes))
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
