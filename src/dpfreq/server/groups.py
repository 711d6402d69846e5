"""A thread that serves its queue in groups, and the settling of the groups' futures.

The service's writer (:class:`dpfreq.server.ingest.Ingestor`) and its token checks
(:class:`dpfreq.server.lookups.TokenChecks`) both let request handlers queue work and wait on
a future, while ONE thread takes everything waiting and does it with one database round trip
(or transaction) for the whole group.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections import defaultdict
from typing import Any

__all__ = ["GroupThread", "settle_all"]

_STOP = object()


class GroupThread:
    """A daemon thread that hands the items waiting on its queue, at most ``max_items`` at a
    time, to :meth:`handle`; :meth:`stop` lets it handle every item queued before it."""

    def __init__(self, name: str, max_items: int) -> None:
        self.max_items = max_items
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()  # put in C
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def stop(self) -> None:
        """Handle every item already queued, then stop the thread."""
        self._queue.put(_STOP)
        self._thread.join()

    def ready(self) -> bool:
        """Whether the thread runs."""
        return self._thread.is_alive()

    def pending(self) -> int:
        """Items waiting (approximate, for the metrics)."""
        return self._queue.qsize()

    def put(self, item: Any) -> None:
        """Queue an item for the next group."""
        self._queue.put(item)

    def handle(self, items: list[Any]) -> None:
        """Do one group of items (in the thread)."""
        raise NotImplementedError

    def finish(self) -> None:
        """Called in the thread after its last group."""

    def _run(self) -> None:
        stopping = False
        while not stopping:
            items = [self._queue.get()]
            while len(items) < self.max_items:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            if any(it is _STOP for it in items):
                stopping = True
                items = [it for it in items if it is not _STOP]
                while True:  # drain what arrived before the stop
                    try:
                        items.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
            if items:
                self.handle(items)
        self.finish()


def _settle(future: Any, outcome: Any, value: Any) -> None:
    """Fail ``future`` with ``outcome`` when it is an exception, else resolve it to ``value``
    (an asyncio future whose request was cancelled is left alone)."""
    if future.done():
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(value)


def _settle_many(items: list[tuple[Any, Any, Any]]) -> None:
    for future, outcome, value in items:
        _settle(future, outcome, value)


def settle_all(items: list[tuple[Any, Any, Any]]) -> None:
    """Resolve ``(future, outcome, value)`` of a group (see :func:`_settle`): thread futures at
    once, asyncio futures in one callback per event loop (one wake-up of each loop per group,
    not one per request)."""
    loops: dict[Any, list[tuple[Any, Any, Any]]] = defaultdict(list)
    for item in items:
        if isinstance(item[0], asyncio.Future):
            loops[item[0].get_loop()].append(item)
        else:
            _settle(*item)
    for loop, pending in loops.items():
        with contextlib.suppress(RuntimeError):  # a loop already closed has no one waiting
            loop.call_soon_threadsafe(_settle_many, pending)
