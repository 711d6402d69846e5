"""The ASGI application of a worker or the aggregator (``dpfreq serve --role ...``).

The same stack as the collection service: FastAPI, one database (SQLite or PostgreSQL, the
same migrations), bearer tokens stored as hashes with the admin token of the start
(:meth:`~dpfreq.server.service.Service.bootstrap_admin`), the audit log, Prometheus metrics,
JSON log lines and one-line JSON errors. Binary bodies (a party's share, a worker's output)
are read by their routes under a limit computed from the measurement's parameters; every
other body goes through the service's body limit. A worker runs its background driver
(:mod:`dpfreq.server.roles.worker_driver`) as an asyncio task.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from dpfreq import __version__

from ..errors import install_handlers
from ..limits import BodyLimit
from ..observe import Metrics, ObserveMiddleware
from . import aggregator, worker
from .common import common_router
from .worker_driver import WorkerDriver

__all__ = ["ROLES", "create_role_app", "role_metrics"]

ROLES = ("worker", "aggregator")
log = logging.getLogger("dpfreq.server")
_BINARY = re.compile(r"^/v1/measurements/[^/]+/(share|outputs/[^/]+)$")
#: Seconds between two rounds of a worker's driver.
POLL_SECONDS = 0.2


def role_metrics() -> Metrics:
    """The service's metrics with the shuffle roles' counters added."""
    from prometheus_client import Counter

    metrics = Metrics()
    reg = metrics.registry
    metrics.shares_stored = Counter(  # type: ignore[attr-defined]
        "dpfreq_shuffle_shares_stored", "Party shares stored (new).", registry=reg)
    metrics.shares_refused = Counter(  # type: ignore[attr-defined]
        "dpfreq_shuffle_shares_refused", "Party shares refused by reason.", ["reason"],
        registry=reg)
    metrics.outputs_sent = Counter(  # type: ignore[attr-defined]
        "dpfreq_shuffle_outputs_sent", "Worker outputs acknowledged by the aggregator.",
        registry=reg)
    metrics.releases = Counter(  # type: ignore[attr-defined]
        "dpfreq_shuffle_releases", "Measurements released by the aggregator.", registry=reg)
    return metrics


class _RoleApp(FastAPI):
    """FastAPI behind the observation middleware, with the body limit for every route but
    the binary uploads (which apply their own)."""

    plain: Any = None
    limited: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self.plain is None:
            self.plain = ObserveMiddleware(super().__call__, metrics=self.state.metrics)
            self.limited = BodyLimit(self.plain, max_bytes=self.state.config.max_body_bytes)
        binary = scope["type"] == "http" and _BINARY.match(scope.get("path", ""))
        await (self.plain if binary else self.limited)(scope, receive, send)


async def _drive(driver: WorkerDriver, pause: float, stop: asyncio.Event) -> None:
    """Rounds of the driver until ``stop`` is set (a round in progress is finished: its
    thread holds database connections that must be returned before the engine closes)."""
    while not stop.is_set():
        try:
            await asyncio.to_thread(driver.step)
        except Exception as exc:  # the database is away: the next round tries again
            log.warning("shuffle driver round failed", extra={"error": type(exc).__name__})
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), pause)


def create_role_app(config: Any) -> FastAPI:
    """The application of ``config.role`` (``"worker"`` or ``"aggregator"``).

    Parameters
    ----------
    config : dpfreq.server.ServerConfig
        Storage, admin token, body limit and ``role``.

    Returns
    -------
    fastapi.FastAPI
        On start it applies the migrations, registers the admin token and (worker) starts
        the driver; on shutdown it stops the driver and closes the connections.
    """
    from ..app import open_service

    role = config.role
    metrics = role_metrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        service = await open_service(config)
        engine = service.engine
        app.state.service = service
        driver = WorkerDriver(engine, metrics) if role == "worker" else None
        stop = asyncio.Event()
        app.state.driver = None if driver is None else asyncio.create_task(
            _drive(driver, POLL_SECONDS, stop))
        where = f", listening on {config.listen_url}" if config.listen_url else ""
        log.info(f"{role} started{where}", extra={"backend": engine.dialect.name,
                                                  "role": role})
        try:
            yield
        finally:
            stop.set()
            if app.state.driver is not None:
                await app.state.driver
            if driver is not None:
                driver.close()
            engine.dispose()
            log.info(f"{role} stopped")

    app = _RoleApp(title=f"dpfreq shuffle {role}", version=__version__, lifespan=lifespan,
                   summary=("Cross-party reach and frequency through the two-worker "
                            f"secret-shared shuffle: the {role}."))
    app.state.config = config
    app.state.metrics = metrics
    app.include_router(common_router)
    app.include_router(worker.router if role == "worker" else aggregator.router)
    install_handlers(app)
    return app
