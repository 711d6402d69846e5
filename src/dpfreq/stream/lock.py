"""One writer at a time: an exclusive lock on a stream's state directory.

Two appends of the same stream — two processes racing (a cron line and a manual re-run), or two
:class:`~dpfreq.stream.ReachStream` objects opened before either appended — would both measure
the same next period: the same keyed node noise added to two different event sets, whose
published difference is then the exact difference of their counts, and the second write would
replace the first's state. :func:`state_lock` makes an append the only writer of its directory
(an OS advisory lock on ``STATE/.lock``, through portalocker: shared and exclusive locks on
POSIX and Windows alike, released by the OS if the process dies), and the stream re-reads the
saved manifest under the lock, so the later append sees the earlier one's periods (a re-send
then returns the stored answers). :meth:`~dpfreq.stream.ReachStream.open` reads under the
shared lock, so it never sees a manifest whose per-item file an append is replacing.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import portalocker

from dpfreq.errors import DataError

__all__ = ["LOCK_FILE", "state_lock"]

#: the lock file in a stream's state directory (empty; never read)
LOCK_FILE = ".lock"


@contextlib.contextmanager
def state_lock(directory: Path, *, shared: bool = False) -> Iterator[None]:
    """Hold the lock of ``directory``: exclusive (a writer), or ``shared`` (a reader: many at
    once, none while a writer holds it). Waits for the holders to finish. A reader of a
    directory it cannot write (a read-only copy) reads without the lock; a writer that cannot
    create the lock file is refused in one line."""
    try:
        fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        if shared:
            yield
            return
        raise DataError(f"{directory} cannot be appended to: this process cannot create "
                        f"its lock file {LOCK_FILE} there (a read-only directory?).") from None
    handle = os.fdopen(fd, "r+b")
    try:
        portalocker.lock(handle, portalocker.LockFlags.SHARED if shared
                         else portalocker.LockFlags.EXCLUSIVE)
        try:
            yield
        finally:
            portalocker.unlock(handle)
    finally:
        handle.close()
