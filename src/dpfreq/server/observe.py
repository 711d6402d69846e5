"""Operations: Prometheus metrics and structured (JSON lines) logs."""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import sys
import time
from typing import Any

__all__ = ["JsonFormatter", "Metrics", "ObserveMiddleware", "configure_logging", "request_id"]

log = logging.getLogger("dpfreq.server")


#: Set by ``dpfreq serve --workers N`` (N > 1) for its worker processes: the directory where
#: every worker keeps its metric values (prometheus_client's multiprocess mode), so that
#: ``/metrics``, whichever worker answers it, gives the sums over all of them.
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


class Metrics:
    """The service's counters and latency histogram in their own Prometheus registry.

    In a worker of ``dpfreq serve --workers N`` (the environment names a shared directory,
    :data:`MULTIPROC_ENV`), every value is kept in that directory and :meth:`render` gives
    counters and histograms summed over all the workers (those of workers that exited
    included) and the gauges summed over the live ones; the runtime metrics of a process
    (CPU, memory, garbage collections) are then left out, as no sum of them means anything.
    """

    def __init__(self) -> None:
        from prometheus_client import (
            GC_COLLECTOR,
            PLATFORM_COLLECTOR,
            PROCESS_COLLECTOR,
            CollectorRegistry,
            Counter,
            Gauge,
            Histogram,
        )

        self.registry = CollectorRegistry()
        self.requests = Counter("dpfreq_http_requests", "HTTP requests by route and status.",
                                ["route", "status"], registry=self.registry)
        self.latency = Histogram(
            "dpfreq_http_request_seconds", "Request latency by route.", ["route"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2.5, 10),
            registry=self.registry)
        self.stored = Counter("dpfreq_reports_stored", "Reports stored (new slots).",
                              registry=self.registry)
        self.rejected = Counter("dpfreq_reports_rejected", "Rejected reports by reason.",
                                ["reason"], registry=self.registry)
        self.commits = Counter("dpfreq_ingest_commits", "Group commits of report batches.",
                               registry=self.registry)
        self.enrolled = Counter("dpfreq_devices_enrolled", "Devices enrolled.",
                                registry=self.registry)
        self.queue = Gauge("dpfreq_ingest_queue", "Batches and enrolments waiting for the "
                           "writer's next group commit (after its last commit).",
                           registry=self.registry, multiprocess_mode="livesum")
        self.in_flight = Gauge("dpfreq_http_in_flight", "Requests being served.",
                               registry=self.registry, multiprocess_mode="livesum")
        self._children: dict[tuple[str, int], tuple[Any, Any]] = {}
        self.shared = os.environ.get(MULTIPROC_ENV)
        if self.shared:
            _forget_dead_workers(self.shared)
            return
        # runtime: CPU, memory, open files, garbage collections of this process
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
            self.registry.register(collector)

    def record(self, method: str | None, route: str, status: int, started: float,
               rid: str) -> None:
        """Count and time one finished request (``started``: its ``perf_counter``) and log
        it as one JSON line."""
        dt = time.perf_counter() - started
        children = self._children.get((route, status))
        if children is None:  # labels() looks the child up under a lock: once per pair
            children = (self.requests.labels(route, str(status)), self.latency.labels(route))
            self._children[(route, status)] = children
        children[0].inc()
        children[1].observe(dt)
        if log.isEnabledFor(logging.INFO):
            log.info("request", extra={"method": method, "route": route, "status": status,
                                       "ms": round(dt * 1e3, 3), "request_id": rid})

    def render(self) -> tuple[bytes, str]:
        """The exposition text and its content type."""
        from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
        from prometheus_client.multiprocess import MultiProcessCollector

        if not self.shared:
            return generate_latest(self.registry), CONTENT_TYPE_LATEST
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=self.shared)
        return generate_latest(registry), CONTENT_TYPE_LATEST


def _forget_dead_workers(path: str) -> None:
    """Drop the live gauges of worker processes that no longer run (a worker that died is
    replaced by a new one); their counters stay in the sums."""
    from prometheus_client.multiprocess import mark_process_dead

    for name in os.listdir(path):
        m = re.fullmatch(r"gauge_live\w*?_(\d+)\.db", name)
        if m is None:
            continue
        try:
            os.kill(int(m.group(1)), 0)
        except ProcessLookupError:
            mark_process_dead(int(m.group(1)), path)
        except OSError:  # alive, owned by someone else
            continue


class ObserveMiddleware:
    """ASGI middleware: count and time every request by route and status, and log it (one
    JSON line; no headers, bodies or tokens)."""

    def __init__(self, app: Any, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        status = 500
        rid = request_id(scope)

        async def send_status(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                message["headers"] = [*message.get("headers", ()),
                                      (b"x-request-id", rid.encode())]
            await send(message)

        self.metrics.in_flight.inc()
        try:
            await self.app(scope, receive, send_status)
        finally:
            self.metrics.in_flight.dec()
            route = getattr(scope.get("route"), "path", "unmatched")
            self.metrics.record(scope.get("method"), route, status, t0, rid)


_RID = re.compile(rb"^[A-Za-z0-9._-]{1,64}$")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def request_id(scope: Any) -> str:
    """The client's ``X-Request-Id`` when it is a short plain token, else a fresh one."""
    for key, value in scope.get("headers", ()):
        if key == b"x-request-id" and _RID.match(value):
            return str(value.decode())
    return secrets.token_hex(8)


def _plain(text: str) -> str:
    """One line without terminal colour codes (a traceback keeps only its last line)."""
    lines = [ln for ln in _ANSI.sub("", text).splitlines() if ln.strip()]
    return lines[-1].strip() if len(lines) > 1 else (lines[0] if lines else "")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and any ``extra`` fields."""

    _BASE = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": _plain(record.getMessage()),
        }
        for key, value in vars(record).items():
            if key not in self._BASE and not key.startswith("_") and key != "color_message":
                out[key] = _plain(value) if isinstance(value, str) else value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info).splitlines()[-1]
        return json.dumps(out, default=str)


def configure_logging(level: str = "info") -> dict[str, Any]:
    """Route the service's and uvicorn's logs to stderr as JSON lines; returns the
    ``log_config`` to hand to uvicorn."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    for name in ("dpfreq.server", "uvicorn", "uvicorn.error"):
        lg = logging.getLogger(name)
        lg.handlers = [handler]
        lg.setLevel(level.upper())
        lg.propagate = False
    logging.getLogger("uvicorn.access").disabled = True  # the app logs each request itself
    return {"version": 1, "disable_existing_loggers": False}
