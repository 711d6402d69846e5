"""Token checks this process has not cached: one thread, many tokens per query.

A process checks a token against the database the first time it sees it (then caches it, see
:meth:`dpfreq.server.service.Service.cached_principal`). With several worker processes, or after
a restart, most devices' first upload to a process is such a check. Run one by one in the thread
pool, each check is a pool check-out and a round trip made by its own thread, and under load
those threads queue for Python's interpreter lock between every step: at 50 concurrent devices a
check took longer than the upload it guards. Here request handlers queue their tokens and ONE
thread reads every token waiting in one query (:meth:`~dpfreq.server.service.Service.principals`),
like the writer's group commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
from collections import defaultdict
from typing import Any

from .auth import Principal
from .service import Service

__all__ = ["TokenChecks", "owner"]

log = logging.getLogger("dpfreq.server")

_STOP = object()


class TokenChecks:
    """The checking thread (see the module docstring).

    Parameters
    ----------
    service : Service
    max_batch : int
        Most tokens read in one query.
    """

    def __init__(self, service: Service, *, max_batch: int = 256) -> None:
        self.service = service
        self.max_batch = max_batch
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="dpfreq-tokens", daemon=True)

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def stop(self) -> None:
        """Answer every token already queued, then stop the thread."""
        self._queue.put(_STOP)
        self._thread.join()

    def ready(self) -> bool:
        """Whether the thread runs."""
        return self._thread.is_alive()

    def check(self, token: str) -> asyncio.Future[Principal | None]:
        """The owner of ``token`` (None when unknown, revoked or expired), resolved on the
        running event loop once the thread has read it."""
        future: asyncio.Future[Principal | None] = asyncio.get_running_loop().create_future()
        self._queue.put((token, future))
        return future

    def _run(self) -> None:
        stopping = False
        while not stopping:
            items = [self._queue.get()]
            while len(items) < self.max_batch:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stopping = any(it is _STOP for it in items)
            work = [it for it in items if it is not _STOP]
            if work:
                self._answer(work)

    def _answer(self, work: list[tuple[str, asyncio.Future[Principal | None]]]) -> None:
        outcome: list[Principal | None] | BaseException
        try:
            outcome = self.service.principals([token for token, _ in work])
        except Exception as exc:  # the database failed: each request answers 503 itself
            log.error("tokens: check failed: %s", " ".join(str(exc).split())[:300])
            outcome = exc
        loops: dict[Any, list[tuple[asyncio.Future[Any], Any]]] = defaultdict(list)
        for i, (_, future) in enumerate(work):
            loops[future.get_loop()].append(
                (future, outcome if isinstance(outcome, BaseException) else outcome[i]))
        for loop, pending in loops.items():  # one wake-up of each event loop per query
            with contextlib.suppress(RuntimeError):  # a closed loop has no one waiting
                loop.call_soon_threadsafe(_resolve, pending)


def _resolve(pending: list[tuple[asyncio.Future[Any], Any]]) -> None:
    for future, value in pending:
        if future.done():  # the request was cancelled
            continue
        if isinstance(value, BaseException):
            future.set_exception(value)
        else:
            future.set_result(value)


async def owner(state: Any, token: str) -> Principal | None:
    """The owner of ``token``: from this process's cache, else through the app's
    :class:`TokenChecks`."""
    service: Service = state.service
    cached = service.cached_principal(token)
    if cached is not None:
        return cached
    checks: TokenChecks = state.tokens
    return await checks.check(token)
