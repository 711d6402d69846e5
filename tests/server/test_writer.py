"""The writer in its own process: the same outcomes as the writer thread, no acknowledgment
without its commit, restarted when it dies, and gone when its server dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest
import sqlalchemy as sa

from conftest import bearer, create_study, enrol, make_client, stored
from dpfreq.server import storage
from dpfreq.server.ingest import Batch, Closed, Conflict, Enrolment
from dpfreq.server.writer import ProcessIngestor, ShardedIngestor, WriterUnavailable


@pytest.fixture
def engine(db_url: str) -> Any:
    eng = storage.make_engine(db_url)
    storage.upgrade(eng)
    with eng.begin() as conn:
        conn.execute(storage.studies.insert(), [
            {"study": s, "title": s, "params": "{}", "param_id": "p", "protocol_version": 1,
             "horizon": 4, "padded": 4, "start": "2026-01-01T00:00:00+00:00",
             "period_seconds": 1, "min_devices": 0, "created": "2026-01-01T00:00:00+00:00",
             "closed": "2026-01-02T00:00:00+00:00" if s == "shut" else None}
            for s in ("s", "shut")])
        conn.execute(storage.enrolled.insert(), [{"study": "s", "order": 0, "devices": 0}])
        conn.execute(storage.sums.insert(), [
            {"study": "s", "order": 0, "interval": j, "total": 0, "reports": 0}
            for j in range(1, 5)])
    yield eng
    eng.dispose()


def _gone(pid: int, seconds: float) -> bool:
    """Whether process ``pid`` has exited within ``seconds`` (Linux's /proc)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as fh:  # an exited child not yet reaped is "Z"
                if fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    return True
        except FileNotFoundError:
            return True
        try:  # our own child: reap it, or it stays a zombie that os.kill still finds
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return True
        except ChildProcessError:
            pass
        time.sleep(0.05)
    return False


def test_the_writer_process_decides_as_the_thread(engine: Any) -> None:
    """Stored, overlap, conflict, closed study and enrolment, committed by the child."""
    commits: list[int] = []
    writer = ProcessIngestor(engine, on_commit=lambda _b, n, _o: commits.append(n))
    first = writer.submit(Batch("s", 7, 0, [(1, 1), (2, 0)]))
    again = writer.submit(Batch("s", 7, 0, [(2, 0), (3, 1)]))
    clash = writer.submit(Batch("s", 7, 0, [(3, 0), (4, 1)]))
    shut = writer.submit(Batch("shut", 7, 0, [(1, 1)]))
    device = writer.enrol(Enrolment("s", 0, "h" * 64, "2026-01-01T00:00:00+00:00"))
    writer.reject("s", "malformed", 1)
    writer.start()
    assert writer.ready()
    child = writer.child_pid
    writer.stop()
    assert (first.result(), again.result()) == (2, 2)  # every report acknowledged
    assert sum(commits) == 3  # three stored anew
    with pytest.raises(Conflict):
        clash.result()
    with pytest.raises(Closed):
        shut.result()
    assert 0 < device.result() < 1 << 53
    r, s = storage.reports, storage.sums
    with engine.connect() as conn:
        rows = sorted(tuple(x) for x in conn.execute(sa.select(r.c.device, r.c.interval, r.c.bit)))
        sums = dict(conn.execute(sa.select(s.c.interval, s.c.total)).all())
        enrolled = conn.execute(sa.select(storage.enrolled.c.devices)).scalar_one()
    assert rows == [(7, 1, 1), (7, 2, 0), (7, 3, 1)]
    assert sums == {1: 1, 2: -1, 3: 1, 4: 0}
    assert enrolled == 1
    assert child is not None
    assert _gone(child, 10)  # stop ends the child
    assert not writer.ready()


def test_a_dead_writer_acknowledges_nothing_and_is_restarted(sqlite_url: str) -> None:
    """A group the child did not answer fails (503 with Retry-After), /readyz is 503 while no
    writer runs, and the next group starts a new child that stores it."""
    with make_client(sqlite_url, writer_process=True) as c:
        writer = c.app.state.ingestor
        assert isinstance(writer, ProcessIngestor)
        params = create_study(c)
        device, token = enrol(c, params, 0)
        body = {"reports": [{"device": device, "order": 0, "interval": 1, "bit": 1,
                             "param_id": params.param_id}]}
        first = writer.child_pid
        os.kill(first, signal.SIGKILL)
        assert _gone(first, 10)
        deadline = time.monotonic() + 10
        while (ready := c.get("/readyz")).status_code == 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.status_code == 503
        assert ready.headers["Retry-After"] == "1"
        res = c.post("/v1/studies/s1/reports", json=body, headers=bearer(token))
        assert res.status_code == 200  # a new child stored it
        assert writer.child_pid not in (None, first)
        assert c.get("/readyz").status_code == 200
        assert stored(c) == (1, 1)


def test_a_group_the_child_does_not_answer_is_not_acknowledged(engine: Any,
                                                              monkeypatch: Any) -> None:
    """The child exits before answering: the batch fails with WriterUnavailable."""
    writer = ProcessIngestor(engine)
    writer.start()
    child = writer.child_pid
    assert child is not None
    os.kill(child, signal.SIGSTOP)  # it cannot answer; the pipe stays open until it dies
    future = writer.submit(Batch("s", 9, 0, [(1, 1)]))
    time.sleep(0.2)
    os.kill(child, signal.SIGKILL)
    with pytest.raises(WriterUnavailable):
        future.result(timeout=30)
    writer.stop()


def test_the_writer_dies_with_its_server(sqlite_url: str, tmp_path: Any) -> None:
    """``kill -9`` of the server process: its writer reads the end of its pipe and exits."""
    script = textwrap.dedent(f"""
        import sys, time
        from dpfreq.server import storage
        from dpfreq.server.writer import ProcessIngestor
        engine = storage.make_engine({sqlite_url!r})
        storage.upgrade(engine)
        writer = ProcessIngestor(engine)
        writer.start()
        print(writer.child_pid, flush=True)
        time.sleep(600)
    """)
    with subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                          text=True) as server:
        try:
            assert server.stdout is not None
            child = int(server.stdout.readline())
            os.kill(server.pid, signal.SIGKILL)
            server.wait(10)
            assert _gone(child, 10)
        finally:
            if server.poll() is None:
                server.kill()


def test_two_writers_split_the_devices(engine: Any) -> None:
    """Each device's batches go through one writer (decided in order); enrolments through
    the first; both commit into the same sums."""
    writer = ShardedIngestor(engine, writers=2)
    first = [writer.submit(Batch("s", d, 0, [(1, 1), (2, d % 2)])) for d in (7, 8)]
    again = writer.submit(Batch("s", 8, 0, [(2, 0), (3, 1)]))
    clash = writer.submit(Batch("s", 7, 0, [(2, 0)]))
    device = writer.enrol(Enrolment("s", 0, "h" * 64, "2026-01-01T00:00:00+00:00"))
    writer.start()
    assert writer.ready()
    writer.stop()
    assert [f.result() for f in first] == [2, 2]
    assert again.result() == 2
    with pytest.raises(Conflict):
        clash.result()
    assert device.result() > 0
    assert writer.pending() == 0
    r, s = storage.reports, storage.sums
    with engine.connect() as conn:
        rows = sorted(tuple(x) for x in conn.execute(sa.select(r.c.device, r.c.interval, r.c.bit)))
        sums = dict(conn.execute(sa.select(s.c.interval, s.c.total)).all())
    assert rows == [(7, 1, 1), (7, 2, 1), (8, 1, 1), (8, 2, 0), (8, 3, 1)]
    assert sums == {1: 2, 2: 0, 3: 1, 4: 0}
