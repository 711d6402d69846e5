"""Progress bars of the command line: tqdm on stderr, behind :mod:`dpfreq.progress`.

The library reports long loops through :mod:`dpfreq.progress`, which is silent by default; the
``dpfreq`` command installs :func:`tqdm_reporter` for the duration of a command unless
``--quiet`` is given or stderr is not a terminal (pipes, CI logs, CliRunner), so scripted output
never contains bar fragments. tqdm is used because it is one small pure-Python package with no
dependencies of its own (rich would bring pygments and markdown-it-py) and handles unknown
totals (a counter with a rate) as well as known ones (a bar with an ETA). A task of unknown
total is refreshed twice a second, so a single long call wrapped in
``dpfreq.progress.task(description)`` shows its elapsed time.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dpfreq.progress import ProgressTask, Reporter

__all__ = ["progress_wanted", "tqdm_reporter"]


def progress_wanted(quiet: bool, stream: Any = None) -> bool:
    """Whether to draw bars: not ``--quiet`` and the stream (default stderr) is a terminal."""
    target = sys.stderr if stream is None else stream
    isatty = getattr(target, "isatty", None)
    return not quiet and callable(isatty) and bool(isatty())


def _tick(bar: Any, stop: threading.Event) -> None:
    while not stop.wait(0.5):
        bar.refresh()


class _TqdmTask:
    def __init__(self, bar: Any) -> None:
        self._bar = bar

    def advance(self, n: float = 1) -> None:
        self._bar.update(n)


def tqdm_reporter(stream: Any = None) -> Reporter:
    """A :class:`dpfreq.progress.Reporter` drawing tqdm bars on ``stream`` (default stderr)."""
    from tqdm import tqdm

    @contextmanager
    def report(description: str, total: float | None, unit: str) -> Iterator[ProgressTask]:
        bar = tqdm(total=total, desc=description or None, unit=unit, leave=False,
                   file=sys.stderr if stream is None else stream, dynamic_ncols=True,
                   unit_scale=True, mininterval=0.25,
                   bar_format=None if total is not None else "{desc}: {n_fmt} {unit} [{elapsed}]")
        stop = threading.Event()
        ticker = None
        if total is None:  # one long call (a query, a Spark job): keep the elapsed time moving
            ticker = threading.Thread(target=_tick, args=(bar, stop), daemon=True)
            ticker.start()
        try:
            yield _TqdmTask(bar)
        finally:
            stop.set()
            if ticker is not None:
                ticker.join()
            bar.close()

    return report
