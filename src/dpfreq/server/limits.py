"""Request size limit (ASGI middleware) and the per-device rate limiter."""

from __future__ import annotations

import json
import math
import threading
import time
from typing import Any

from starlette.exceptions import HTTPException

__all__ = ["BodyLimit", "RateLimiter", "too_large"]


class _TooLarge(Exception):
    pass


class BodyLimit:
    """Refuse request bodies over ``max_bytes`` with 413, from ``Content-Length`` or while
    streaming (chunked bodies), before the application reads them."""

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    too_big = int(value) > self.max_bytes
                except ValueError:
                    too_big = True
                if too_big:
                    await self._refuse(send)
                    return
        seen = 0
        started = False

        async def limited_receive() -> Any:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise _TooLarge
            return message

        async def tracking_send(message: Any) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _TooLarge:
            if not started:
                await self._refuse(send)

    async def _refuse(self, send: Any) -> None:
        body = too_large(self.max_bytes)
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


def too_large(max_bytes: int) -> bytes:
    """The body of the 413 answer."""
    return json.dumps({"error": f"request body larger than {max_bytes} bytes."}).encode()


class RateLimiter:
    """Token bucket per key: ``rate`` requests per second with bursts of ``burst``, shared by
    ``workers`` server processes (each allows ``rate/workers`` and ``burst//workers``, so a
    key never gets more than the limit in total, whichever processes its requests reach).

    ``rate <= 0`` disables the limit. ``what`` names what is limited in the 429 answer (for
    instance ``"enrolments per study and client address"``) and ``options`` the
    ``dpfreq serve`` options that set it.
    """

    def __init__(self, rate: float, burst: int, *, workers: int = 1,
                 what: str = "requests per key", options: str = "") -> None:
        self.total_rate, self.total_burst = float(rate), int(burst)
        self.rate = float(rate) / workers
        self.burst = max(1, int(burst) // workers)
        self.what, self.options = what, options
        self._state: dict[Any, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def allow(self, key: Any) -> float:
        """0.0 when the request may go ahead, else the seconds to wait."""
        if self.rate <= 0:
            return 0.0
        now = time.monotonic()
        with self._lock:
            tokens, last = self._state.get(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - last) * self.rate)
            if tokens >= 1.0:
                self._state[key] = (tokens - 1.0, now)
                return 0.0
            self._state[key] = (tokens, now)
            return (1.0 - tokens) / self.rate

    def describe(self) -> str:
        """The limit in words: ``at most 1 enrolments per study and client address per second,
        in bursts of at most 20 (--enrol-rate, --enrol-burst)``."""
        options = f" ({self.options})" if self.options else ""
        return (f"at most {self.total_rate:g} {self.what} per second, in bursts of at most "
                f"{self.total_burst}{options}")

    def check(self, key: Any) -> None:
        """Go ahead, or raise the 429 answer: the limit in words and how long to wait (also
        in ``Retry-After``, whole seconds rounded up)."""
        wait = self.allow(key)
        if wait > 0:
            seconds = max(1, math.ceil(wait))
            raise HTTPException(429, f"rate limit: {self.describe()}; retry in {seconds} s.",
                                headers={"Retry-After": str(seconds)})
