"""The group-commit writer in a process of its own (``ServerConfig(writer_process=True)``).

A server process runs on one core under Python's global interpreter lock: with the writer as a
thread of it, the writer's Python work per group (deciding the batches, formatting the ``COPY``
rows or the ``executemany`` tuples, the sums) took the lock from the event loop that answers the
uploads, for about as long as the HTTP handling and decoding of those uploads (measured in
``benchmarks/bench_server.py``). :class:`ProcessIngestor` keeps the :class:`Ingestor`'s queue
and group thread in the server, but the thread only hands each group to a child process
(:func:`main`) over a pipe, as compact msgpack, and waits for its outcomes; the child runs
:meth:`Ingestor.commit_group` on its own connection, so the database work runs beside the event
loop instead of taking turns with it.

What does not change: a batch is acknowledged only after the child's commit has returned (the
child answers a group only then); a group the child did not answer (it died, or the pipe broke)
is not acknowledged at all (503 with ``Retry-After``; the device re-sends, idempotently), the
child is reaped and the next group starts a new one, and :meth:`ProcessIngestor.ready` is false
while none runs (``/readyz`` answers 503). The child ends with its server: it reads its groups
from a pipe that only the server holds open, so the server's death, even by ``kill -9``, is an
end of file there; a group the child was committing then is committed but was not acknowledged,
which the devices' re-sends meet as identical reports. Each server process (``--workers N``)
runs its own child; on SQLite the children take turns for the database's write lock, as the
writer threads did. On PostgreSQL a server runs two (:class:`ShardedIngestor`): one group
commits while the other's rows are sent, the devices split between them by id, so that a
device's batches are still decided in the order it sent them; the running sums are updated in
key order by both, so their row locks are taken in one order.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import struct
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

import msgspec
from sqlalchemy.engine import Engine

from . import storage
from .ingest import Batch, Closed, Conflict, Enrolment, Ingestor, Rejection, settle_all

__all__ = ["ProcessIngestor", "ShardedIngestor", "WriterUnavailable", "main"]

log = logging.getLogger("dpfreq.server")

_LENGTH = struct.Struct("<I")
_ENCODE = msgspec.msgpack.Encoder().encode
_DECODE = msgspec.msgpack.Decoder().decode
_BATCH, _ENROL, _REJECT = 0, 1, 2
_OK, _CONFLICT, _CLOSED, _FAILED = 0, 1, 2, 3
# The child's program (not ``-m``: the package imports this module before runpy would run it).
_CHILD = "from dpfreq.server.writer import main; main()"


class WriterUnavailable(Exception):
    """The writer process died or could not start: nothing of the group was acknowledged."""


def _send(stream: IO[bytes], payload: bytes) -> None:
    stream.write(_LENGTH.pack(len(payload)) + payload)
    stream.flush()


def _receive(stream: IO[bytes]) -> bytes | None:
    """The next message, or None at the end of the stream (the other side is gone)."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        return None
    (size,) = _LENGTH.unpack(head)
    body = stream.read(size)
    return body if len(body) == size else None


def _wire(item: Any) -> tuple[Any, ...]:
    """An item of the group as plain values (a batch's rows stay ``(interval, bit)`` pairs)."""
    if isinstance(item, Batch):
        return (_BATCH, item.study, item.device, item.order, item.rows)
    if isinstance(item, Enrolment):
        return (_ENROL, item.study, item.order, item.token_hash, item.created)
    return (_REJECT, item.study, item.reason, item.reports)


def _unwire(data: list[Any]) -> Any:
    kind = data[0]
    if kind == _BATCH:
        return Batch(data[1], data[2], data[3], [(j, bit) for j, bit in data[4]])
    if kind == _ENROL:
        return Enrolment(data[1], data[2], data[3], data[4])
    return Rejection(data[1], data[2], data[3])


def _outcome(out: Any) -> tuple[Any, ...]:
    """An outcome of :meth:`Ingestor.commit_group` in the child as plain values: the reports
    a batch stored, an enrolled device's id, or why it failed."""
    if not isinstance(out, BaseException):
        return (_OK, out)
    exc = out
    if isinstance(exc, Conflict):
        return (_CONFLICT,)
    if isinstance(exc, Closed):
        return (_CLOSED,)
    return (_FAILED, " ".join(f"{type(exc).__name__}: {exc}".split())[:300])


def _result(data: list[Any]) -> Any:
    """The outcome of :func:`_outcome` in the server: a value or the exception to raise."""
    kind = data[0]
    if kind == _OK:
        return data[1]
    if kind == _CONFLICT:
        return Conflict("a report of this batch conflicts with a stored one")
    if kind == _CLOSED:
        return Closed("the study is closed; it takes no more reports")
    return WriterUnavailable(f"the writer's transaction failed: {data[1]}")


class ProcessIngestor(Ingestor):
    """An :class:`Ingestor` whose groups are committed by a child process (module notes).

    Parameters
    ----------
    engine : sqlalchemy.engine.Engine
        The server's engine: the child connects to the same database (its URL, password
        included, goes to the child through the pipe, not its command line).
    max_group : int
        Most batches committed in one transaction.
    on_commit : callable or None
        Called with ``(batches, reports, outcomes)`` after each group the child answered.
    """

    def __init__(self, engine: Engine, *, max_group: int = 512, on_commit: Any = None) -> None:
        super().__init__(engine, max_group=max_group, on_commit=on_commit)
        self._child: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the writer process (waiting until it is connected), then the group thread."""
        self._spawn()
        super().start()

    @property
    def child_pid(self) -> int | None:
        """The writer process's id (None while none runs)."""
        child = self._child
        return None if child is None else child.pid

    def ready(self) -> bool:
        """Whether a writer process runs."""
        child = self._child
        return child is not None and child.poll() is None and super().ready()

    def commit_group(self, items: list[Any]) -> None:
        """Have the child commit ``items`` in one transaction; settle their futures with its
        outcomes, or every one with :class:`WriterUnavailable` when it did not answer."""
        try:
            child = self._running()
            assert child.stdin is not None
            assert child.stdout is not None
            _send(child.stdin, _ENCODE([_wire(it) for it in items]))
            reply = _receive(child.stdout)
            if reply is None:
                raise WriterUnavailable("the writer process exited")
            outcomes = [_result(o) for o in _DECODE(reply)]
            if len(outcomes) != len(items):
                raise WriterUnavailable("the writer process answered another group")
        except Exception as exc:
            log.error("ingest: writer process failed: %s", " ".join(str(exc).split())[:300])
            self.release()
            outcomes = [WriterUnavailable("the writer process is unavailable")] * len(items)
        # a batch's future resolves to its reports (all acknowledged), its outcome counts those
        # stored anew (the metrics)
        settled = [(it.future, out, len(it.rows) if isinstance(it, Batch) else out)
                   for it, out in zip(items, outcomes, strict=True)]
        settle_all(settled)
        if self.on_commit is not None:
            batches = [it for it in items if isinstance(it, Batch)]
            stored = sum(out for it, out in zip(items, outcomes, strict=True)
                         if isinstance(it, Batch) and not isinstance(out, BaseException))
            self.on_commit(batches, stored, {id(it): out for it, out in zip(items, outcomes,
                                                                             strict=True)})

    def release(self) -> None:
        """End the writer process: close its pipe (it finishes the group it holds and exits),
        kill it if it has not exited within 10 s, and reap it."""
        child, self._child = self._child, None
        if child is None:
            return
        with contextlib.suppress(OSError):
            assert child.stdin is not None
            child.stdin.close()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()

    def _running(self) -> subprocess.Popen[bytes]:
        """The writer process, started anew if the last one exited."""
        if self._child is not None and self._child.poll() is not None:
            log.error("ingest: the writer process exited (status %s); starting another",
                      self._child.returncode)
            self.release()
        if self._child is None:
            self._spawn()
        assert self._child is not None
        return self._child

    def _spawn(self) -> None:
        """Start a writer process and wait for it to be connected to the database."""
        env = dict(os.environ)
        # The child imports the dpfreq this server runs, wherever it was imported from.
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        child = subprocess.Popen([sys.executable, "-c", _CHILD],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self._child = child
        assert child.stdin is not None
        assert child.stdout is not None
        level = logging.getLevelName(log.getEffectiveLevel()).lower()
        try:
            _send(child.stdin, _ENCODE(
                {"db": self.engine.url.render_as_string(hide_password=False), "log": level}))
            hello = _receive(child.stdout)
        except OSError:
            hello = None
        if hello is None:
            self.release()
            raise WriterUnavailable("the writer process did not start")


def main() -> None:
    """The writer process: commit each group read from stdin, answer its outcomes on stdout,
    exit at the end of stdin (its server stopped or died)."""
    # The server's signals (Ctrl-C or SIGTERM to the process group) are the server's to act
    # on: it drains the queue through this process, then closes the pipe.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    source, answers = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # the pipe carries answers only
    hello = _receive(source)
    if hello is None:
        return
    config = _DECODE(hello)
    from .observe import configure_logging

    configure_logging(config["log"])
    engine = storage.make_engine(config["db"])
    outcomes: dict[int, Any] = {}
    writer = Ingestor(engine, on_commit=lambda _b, _n, out: outcomes.update(out))
    try:
        _send(answers, _ENCODE("ready"))
        while (group := _receive(source)) is not None:
            items = [_unwire(data) for data in _DECODE(group)]
            outcomes.clear()
            writer.commit_group(items)
            _send(answers, _ENCODE([_outcome(outcomes.get(id(it))) for it in items]))
    except BrokenPipeError:  # the server is gone: nobody waits for the answer
        pass
    finally:
        writer.release()
        engine.dispose()


if __name__ == "__main__":
    main()


class ShardedIngestor:
    """Several :class:`ProcessIngestor` committing side by side (PostgreSQL), a device's
    batches always through the same one (so they are decided in the order they came);
    enrolments and rejections go through the first.

    Parameters
    ----------
    engine : sqlalchemy.engine.Engine
    writers : int
        Number of writer processes.
    max_group : int
        Most batches committed in one transaction, per writer.
    on_commit : callable or None
        As :class:`ProcessIngestor`'s, called by each writer's group thread.
    """

    def __init__(self, engine: Engine, *, writers: int = 2, max_group: int = 512,
                 on_commit: Any = None) -> None:
        self.shards = [ProcessIngestor(engine, max_group=max_group, on_commit=on_commit)
                       for _ in range(writers)]

    def start(self) -> None:
        """Start every writer."""
        for shard in self.shards:
            shard.start()

    def stop(self) -> None:
        """Finish every batch already submitted, then stop every writer."""
        for shard in self.shards:
            shard.stop()

    def ready(self) -> bool:
        """Whether every writer process runs."""
        return all(shard.ready() for shard in self.shards)

    def pending(self) -> int:
        """Items waiting for the writers (approximate, for the metrics)."""
        return sum(shard.pending() for shard in self.shards)

    def submit(self, batch: Batch) -> Any:
        """Queue a batch with the writer of its device (see :meth:`Ingestor.submit`)."""
        return self.shards[batch.device % len(self.shards)].submit(batch)

    def enrol(self, item: Enrolment) -> Any:
        """Queue an enrolment (see :meth:`Ingestor.enrol`)."""
        return self.shards[0].enrol(item)

    def reject(self, study: str, reason: str, reports: int) -> Any:
        """Count rejected reports (see :meth:`Ingestor.reject`)."""
        return self.shards[0].reject(study, reason, reports)
