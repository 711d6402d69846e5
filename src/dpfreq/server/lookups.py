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
import logging
from typing import Any

from .auth import Principal
from .groups import GroupThread, settle_all
from .service import Service

__all__ = ["TokenChecks", "owner"]

log = logging.getLogger("dpfreq.server")


class TokenChecks(GroupThread):
    """The checking thread (see the module docstring).

    Parameters
    ----------
    service : Service
    max_batch : int
        Most tokens read in one query.
    """

    def __init__(self, service: Service, *, max_batch: int = 256) -> None:
        super().__init__("dpfreq-tokens", max_batch)
        self.service = service

    def check(self, token: str) -> asyncio.Future[Principal | None]:
        """The owner of ``token`` (None when unknown, revoked or expired), resolved on the
        running event loop once the thread has read it."""
        future: asyncio.Future[Principal | None] = asyncio.get_running_loop().create_future()
        self.put((token, future))
        return future

    def handle(self, items: list[tuple[str, asyncio.Future[Principal | None]]]) -> None:
        """Read every queued token in one query and resolve their futures."""
        outcome: list[Principal | None] | BaseException
        try:
            outcome = self.service.principals([token for token, _ in items])
        except Exception as exc:  # the database failed: each request answers 503 itself
            log.error("tokens: check failed: %s", " ".join(str(exc).split())[:300])
            outcome = exc
        settle_all([(future, outcome, None if isinstance(outcome, BaseException)
                     else outcome[i]) for i, (_, future) in enumerate(items)])


async def owner(state: Any, token: str) -> Principal | None:
    """The owner of ``token``: from this process's cache, else through the app's
    :class:`TokenChecks`."""
    service: Service = state.service
    cached = service.cached_principal(token)
    if cached is not None:
        return cached
    checks: TokenChecks = state.tokens
    return await checks.check(token)
