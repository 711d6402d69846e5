"""Cross-origin requests (``dpfreq serve --cors-origin``): the CORS policy on every response.

A browser hides from the page every answer of another origin that lacks
``Access-Control-Allow-Origin``: a device whose upload was stored but whose answer is hidden
sees the service as unreachable and retries for ever. The service answers some requests ahead
of FastAPI's middleware (report uploads, :mod:`dpfreq.server.upload`; bodies over the size
limit, :class:`dpfreq.server.limits.BodyLimit`) and its last-resort 500 from Starlette's
outermost layer, so a CORS middleware inside FastAPI's stack misses them. :class:`Cors` is
therefore the outermost layer of the application: it answers preflight requests itself and
adds the headers to every other response, whichever layer produced it, errors included.

The policy: an allowed ``Origin`` (one of the configured origins, or any with ``*``) gets
``Access-Control-Allow-Origin`` with that origin and ``Access-Control-Expose-Headers``
(``Retry-After``, which a device needs to wait as long as the service asks; ``X-Request-Id``;
``Content-Disposition``); every response says ``Vary: Origin``. A preflight (``OPTIONS`` with
``Access-Control-Request-Method``) from an allowed origin is answered 204 with the methods
``GET, POST, DELETE`` and the request headers ``Authorization, Content-Type, X-Request-Id``
(cached by the browser for 10 minutes); from another origin, 403 with a one-line error.
No credentials mode: tokens travel in the ``Authorization`` header, never in cookies.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["Cors"]

_ALLOW_METHODS = "GET, POST, DELETE"
_ALLOW_HEADERS = "Authorization, Content-Type, X-Request-Id"
_EXPOSE_HEADERS = "Retry-After, X-Request-Id, Content-Disposition"
_MAX_AGE = b"600"


def _header(scope: Any, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value)
    return None


class Cors:
    """ASGI wrapper applying the CORS policy (see the module notes) to ``app``.

    Parameters
    ----------
    app : ASGI application
    origins : tuple of str
        Allowed origins (``scheme://host[:port]``, as browsers send them); ``*`` allows any.
    """

    def __init__(self, app: Any, origins: tuple[str, ...]) -> None:
        self.app = app
        self.any = "*" in origins
        self.origins = frozenset(o.rstrip("/").encode("latin-1") for o in origins if o != "*")

    def allowed(self, origin: bytes) -> bool:
        """Whether ``origin`` may read the service's answers."""
        return self.any or origin in self.origins

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        origin = _header(scope, b"origin")
        if origin is None:  # not a cross-origin browser request: nothing to add but Vary
            await self.app(scope, receive, _vary(send, []))
            return
        allowed = self.allowed(origin)
        if scope["method"] == "OPTIONS" and _header(
                scope, b"access-control-request-method") is not None:
            await self._preflight(send, origin, allowed)
            return
        extra = [(b"access-control-allow-origin", origin),
                 (b"access-control-expose-headers", _EXPOSE_HEADERS.encode())] if allowed else []
        await self.app(scope, receive, _vary(send, extra))

    async def _preflight(self, send: Any, origin: bytes, allowed: bool) -> None:
        if allowed:
            headers = [(b"access-control-allow-origin", origin),
                       (b"access-control-allow-methods", _ALLOW_METHODS.encode()),
                       (b"access-control-allow-headers", _ALLOW_HEADERS.encode()),
                       (b"access-control-max-age", _MAX_AGE), (b"vary", b"Origin"),
                       (b"content-length", b"0")]
            await send({"type": "http.response.start", "status": 204, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
        body = json.dumps({"error": "this origin is not allowed by the service's CORS "
                                    "policy (dpfreq serve --cors-origin)."}).encode()
        await send({"type": "http.response.start", "status": 403, "headers": [
            (b"content-type", b"application/json"), (b"vary", b"Origin"),
            (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


def _vary(send: Any, extra: list[tuple[bytes, bytes]]) -> Any:
    """``send`` adding ``Vary: Origin`` and ``extra`` to the response's headers."""

    async def wrapped(message: Any) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", ()), (b"vary", b"Origin"), *extra]
        await send(message)

    return wrapped
