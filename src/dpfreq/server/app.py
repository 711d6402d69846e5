"""The collection service's ASGI application (``dpfreq serve``).

Why FastAPI on Starlette, served by uvicorn: the request and response bodies are declared once as
pydantic models, which gives the OpenAPI document (``/openapi.json``) for free and validates every
body (a malformed batch is a 422 with nothing stored); report uploads, the hot path, are answered
ahead of FastAPI by :class:`~dpfreq.server.upload.UploadRoute` (msgspec decodes their batches
with the model's rules once the device's token is checked); Starlette's ``TestClient`` drives the
whole application in-process in the tests; uvicorn is the reference ASGI server (with uvloop and
httptools when installed), with a graceful shutdown (on SIGTERM it stops accepting connections
and lets in-flight requests finish) that the service relies on to finish the batches it has
accepted.

Errors are always one line of JSON, ``{"error": "..."}``, with a 4xx status for anything the
client sent (401 no or unknown token, 403 wrong role, study or device, 404 unknown study, 409 a
slot already stored with another bit, 413 too large, 422 malformed body, 429 rate limited) and
503 when the database failed (nothing of the request is then acknowledged).
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from dpfreq import __version__

from . import storage
from .cors import Cors
from .errors import install_handlers
from .ingest import Ingestor
from .limits import BodyLimit, RateLimiter
from .lookups import TokenChecks
from .observe import Metrics, ObserveMiddleware
from .openapi import install_openapi
from .routes import STATIC, router
from .service import Service
from .tokens import StartToken
from .upload import UploadRoute

__all__ = ["ServerConfig", "create_app", "log_bootstrap", "worker_app"]

log = logging.getLogger("dpfreq.server")


@dataclass(frozen=True)
class ServerConfig:
    """Settings of one service instance.

    Parameters
    ----------
    db : str
        SQLite path (default storage) or ``postgresql://user@host:port/db``.
    admin_token : str or None
        Registered (as its hash) on start; None registers no admin token.
    max_body_bytes : int
        Largest request body accepted (413 above).
    rate : float
        Requests per second allowed per device token (0 disables the limit).
    burst : int
        Burst size of the per-device rate limit.
    enrol_rate : float
        Enrolments per second allowed per (study, client address) (0 disables the limit).
    enrol_burst : int
        Burst size of the enrolment rate limit.
    read_cache_seconds : float
        Summaries and estimates are recomputed at most this often per study and process (0:
        on every request), so analysts polling a large study do not starve ingest.
    cors_origins : tuple of str
        Origins allowed by CORS (``*``: any); empty (default) sends no CORS headers at all.
        The policy applies to every response of every route, errors included
        (:mod:`dpfreq.server.cors`).
    max_group : int
        Most report batches committed in one transaction.
    freeze_gc : bool
        Move every object alive once the service has started out of the garbage collector's
        reach (:func:`gc.freeze`), so a full collection under load scans only what requests
        created since (a full scan of the ~10^5 start-up objects pauses every request for tens
        of milliseconds). For a process that runs only the service (``dpfreq serve`` sets it);
        off by default, as it would also exempt a host application's objects.
    workers : int
        Server processes sharing the rate limits above (``dpfreq serve --workers``): each
        process allows ``rate/workers`` and ``burst//workers`` of each, so that one key gets
        at most the limit in total; the 429 answers state the limits as configured.
    listen_url : str or None
        The address the service listens on (``dpfreq serve`` sets it once its socket is
        bound), named in its start-up log line.
    role : {"collector", "worker", "aggregator"}
        What the process serves: the collection service (:func:`create_app`), or a worker
        or the aggregator of the cross-party shuffle
        (:func:`dpfreq.server.roles.create_role_app`).
    """

    db: str
    admin_token: str | None = None
    max_body_bytes: int = 1 << 20
    rate: float = 20.0
    burst: int = 40
    enrol_rate: float = 1.0
    enrol_burst: int = 20
    read_cache_seconds: float = 1.0
    cors_origins: tuple[str, ...] = field(default_factory=tuple)
    max_group: int = 512
    freeze_gc: bool = False
    workers: int = 1
    listen_url: str | None = None
    role: str = "collector"


class _ServiceApp(FastAPI):
    """FastAPI, with report uploads answered by :class:`~dpfreq.server.upload.UploadRoute`
    before any middleware, every other request through the service's body limit and
    observation middleware around FastAPI's own stack, and the CORS policy
    (:class:`~dpfreq.server.cors.Cors`, when origins are configured) around all of it."""

    upload: UploadRoute
    front: Any = None
    entry: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self.entry is None:
            origins = self.state.config.cors_origins
            self.entry = Cors(self._dispatch, origins) if origins else self._dispatch
        await self.entry(scope, receive, send)

    async def _dispatch(self, scope: Any, receive: Any, send: Any) -> None:
        scope["app"] = self
        study = UploadRoute.study(scope)
        if study is not None:
            await self.upload(scope, receive, send, study)
            return
        if self.front is None:
            config, inner = self.state.config, super().__call__
            self.front = BodyLimit(ObserveMiddleware(inner, metrics=self.state.metrics),
                                   max_bytes=config.max_body_bytes)
        await self.front(scope, receive, send)


async def _watch_revocations(service: Service) -> None:
    """Read the revocation log about once a second (see Service.check_revocations)."""
    while True:
        try:
            await asyncio.to_thread(service.check_revocations)
        except Exception as exc:  # the database is away: cached tokens expire on their own
            log.warning("revocation log unreadable", extra={"error": type(exc).__name__})
        await asyncio.sleep(1.0)


def create_app(config: ServerConfig) -> FastAPI:
    """The ASGI application of the collection service.

    Parameters
    ----------
    config : ServerConfig
        Storage, admin token and limits.

    Returns
    -------
    fastapi.FastAPI
        On start (ASGI lifespan) it connects to the database, applies the migrations, registers
        the admin token's hash (revoking the admin token of any earlier start) and starts the
        group-commit writer; on shutdown it drains the writer and closes the connections.

    Examples
    --------
    >>> import uvicorn
    >>> from dpfreq.server import ServerConfig, create_app
    >>> app = create_app(ServerConfig(db="collect.db", admin_token="..."))
    >>> uvicorn.run(app, host="127.0.0.1", port=8000)  # doctest: +SKIP
    """
    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        service = await open_service(config)
        engine = service.engine
        ingestor, tokens = _start_threads(service, config, metrics)
        app.state.service = service
        app.state.ingestor = ingestor
        app.state.tokens = tokens
        if config.freeze_gc:
            gc.collect()
            gc.freeze()
        if config.listen_url:
            log.info(f"service started, listening on {config.listen_url}",
                     extra={"backend": engine.dialect.name, "url": config.listen_url})
        else:
            log.info("service started", extra={"backend": engine.dialect.name})
        watch = asyncio.create_task(_watch_revocations(service))
        try:
            yield
        finally:
            watch.cancel()
            await asyncio.to_thread(tokens.stop)
            await asyncio.to_thread(ingestor.stop)
            engine.dispose()
            log.info("service stopped")

    app = _ServiceApp(
        title="dpfreq collection service",
        summary="FutureRand longitudinal reports from devices; estimates with confidence bands.",
        version=__version__,
        lifespan=lifespan,
        # The service has its own metrics and JSON logs; FastAPI's OpenTelemetry hooks would
        # look for a configured provider on every request (8 % of the CPU of an upload).
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.state.config = config
    app.state.metrics = metrics
    app.upload = UploadRoute(metrics, config.max_body_bytes)
    app.state.limiter = RateLimiter(config.rate, config.burst, workers=config.workers,
                                    what="requests per device", options="--rate, --burst")
    app.state.enrol_limiter = RateLimiter(
        config.enrol_rate, config.enrol_burst, workers=config.workers,
        what="enrolments per study and client address", options="--enrol-rate, --enrol-burst")
    app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    install_handlers(app)
    install_openapi(app)
    return app


async def open_service(config: Any) -> Service:
    """The first steps of every start (the collection service's and a shuffle role's): connect
    to ``config.db``, apply the migrations and register ``config.admin_token`` (logged by
    :func:`log_bootstrap`)."""
    engine = storage.make_engine(config.db)
    await asyncio.to_thread(storage.upgrade, engine)
    service = Service(engine)
    if config.admin_token:
        log_bootstrap(await asyncio.to_thread(service.bootstrap_admin, config.admin_token))
    return service


def log_bootstrap(outcome: StartToken) -> None:
    """Log what a start did with its admin token: the admin tokens of earlier starts it
    revoked (a warning, with their ids), and a configured token it refused (an error: the
    service then has no admin token of its own)."""
    if outcome.replaced:
        log.warning("admin tokens of an earlier start revoked: a start with another admin "
                    "token replaces them", extra={"revoked": outcome.replaced,
                                                  "admin": outcome.id})
    if outcome.state == "revoked":
        log.error("the configured admin token was revoked and is never registered again: this "
                  "start has no admin token; put a new token in the admin token file (or "
                  "DPFREQ_ADMIN_TOKEN) and restart", extra={"admin": outcome.id,
                                                            "revoked_at": outcome.revoked_at})
    elif outcome.state == "not-admin":
        log.error("the configured admin token belongs to another role and is not registered: "
                  "this start has no admin token", extra={"admin": outcome.id})


def _start_threads(service: Service, config: ServerConfig, metrics: Metrics
                   ) -> tuple[Ingestor, TokenChecks]:
    """Start the group-commit writer (its commits counted in ``metrics``) and the token
    checks of ``service``."""

    def committed(batches: list[Any], stored: int, outcomes: dict[int, Any]) -> None:
        metrics.commits.inc()
        metrics.stored.inc(stored)
        metrics.queue.set(ingestor.pending())

    ingestor = Ingestor(service.engine, max_group=config.max_group, on_commit=committed)
    ingestor.start()
    tokens = TokenChecks(service)
    tokens.start()
    return ingestor, tokens


def worker_app(config: ServerConfig, log_level: str) -> FastAPI:
    """The application of one worker process of ``dpfreq serve --workers N`` (called in the
    new process: its logs are JSON lines too)."""
    from .observe import configure_logging

    configure_logging(log_level)
    return create_app(config)
