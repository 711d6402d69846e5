"""Progress reports from long loops, shown only when a front end asks for them.

Library code wraps long loops in :func:`track` (an iterable), :func:`chunks` (for
``range(0, total, size)`` loops over chunks) or :func:`task` (a counter it advances; with an
unknown total it shows the elapsed time of one long call). They cost nothing and print
nothing unless a front end installed a reporter with :func:`reporting` — the command line
does, drawing a bar on stderr when stderr is a terminal and ``--quiet`` is not given. The
library itself never imports a progress-bar package.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from typing import Any, Protocol, TypeVar

__all__ = ["ProgressTask", "Reporter", "chunks", "reporting", "task", "track"]

T = TypeVar("T")


class ProgressTask(Protocol):
    """A running task: ``advance(n)`` after each ``n`` units of work."""

    def advance(self, n: float = 1) -> None: ...


class Reporter(Protocol):
    """A front end's factory of progress tasks: a context manager per task."""

    def __call__(self, description: str, total: float | None,
                 unit: str) -> Any: ...  # a context manager yielding a ProgressTask


class _Silent:
    def advance(self, n: float = 1) -> None:
        return None


_SILENT = _Silent()
_reporter: ContextVar[Reporter | None] = ContextVar("dpfreq_progress_reporter", default=None)


@contextmanager
def reporting(reporter: Reporter | None) -> Iterator[None]:
    """Within the block, :func:`task` and :func:`track` report to ``reporter`` (None: silent).

    Examples
    --------
    >>> from contextlib import contextmanager
    >>> seen = []
    >>> class Task:
    ...     def advance(self, n=1):
    ...         seen.append(n)
    >>> @contextmanager
    ... def reporter(description, total, unit):
    ...     seen.append((description, total))
    ...     yield Task()
    >>> with reporting(reporter):
    ...     total = sum(track(range(3), description="sum"))
    >>> seen
    [('sum', 3), 1, 1, 1]
    """
    token = _reporter.set(reporter)
    try:
        yield
    finally:
        # A block left without its exit (a CLI context never closed) is closed later by the
        # garbage collector, in whatever context runs then: the value it set lives only in
        # its own context, so there is nothing to restore here.
        with suppress(ValueError):
            _reporter.reset(token)


@contextmanager
def task(description: str, total: float | None = None, *,
         unit: str = "it") -> Iterator[ProgressTask]:
    """A progress task of ``total`` units (None: unknown); silent unless a reporter is set.

    Examples
    --------
    >>> with task("reading", 100, unit="rows") as progress_task:
    ...     progress_task.advance(100)
    """
    reporter = _reporter.get()
    if reporter is None:
        yield _SILENT
        return
    with reporter(description, total, unit) as handle:
        yield handle


def track(iterable: Iterable[T], *, total: float | None = None, description: str = "",
          unit: str = "it") -> Iterator[T]:
    """Iterate over ``iterable``, advancing a progress task by one per item.

    ``total`` defaults to ``len(iterable)`` when it has one.

    Examples
    --------
    >>> list(track(["a", "b"], description="files"))
    ['a', 'b']
    """
    if _reporter.get() is None:
        yield from iterable
        return
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)  # type: ignore[arg-type]
    with task(description, total, unit=unit) as handle:
        for item in iterable:
            yield item
            handle.advance(1)


def chunks(total: int, size: int, *, description: str = "",
           unit: str = "items") -> Iterator[int]:
    """The start of each chunk of ``size`` in ``range(total)``, reporting ``total`` units.

    A drop-in for ``range(0, total, size)`` in a chunked loop: the task advances by the
    length of each chunk once its body has run, so a bar shows items (not chunks) done.

    Examples
    --------
    >>> [start for start in chunks(10, 4, description="noise")]
    [0, 4, 8]
    """
    if _reporter.get() is None:
        yield from range(0, total, size)
        return
    with task(description, total, unit=unit) as handle:
        for start in range(0, total, size):
            yield start
            handle.advance(min(size, total - start))
