"""The writer's group commit against rows stored by another process (both backends)."""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa

from dpfreq.server import ingest_sql, storage
from dpfreq.server.ingest import Batch, Conflict, Ingestor


@pytest.fixture
def engine(db_url: str) -> Any:
    eng = storage.make_engine(db_url)
    storage.upgrade(eng)
    with eng.begin() as conn:
        conn.execute(storage.sums.insert(), [
            {"study": "s", "order": 0, "interval": j, "total": 0, "reports": 0}
            for j in range(1, 5)])
    yield eng
    eng.dispose()


def stored(eng: Any) -> list[tuple[int, int, int]]:
    """Every stored report ``(device, interval, bit)``, the upload rows unpacked (a slot
    stored twice would appear twice)."""
    u = storage.uploads
    with eng.connect() as conn:
        return sorted((int(d), j, b) for d, js, bs in conn.execute(
            sa.select(u.c.device, u.c.intervals, u.c.bits)) for j, b in storage.unpack(js, bs))


def sums(eng: Any) -> dict[int, tuple[int, int]]:
    s = storage.sums
    with eng.connect() as conn:
        return {int(j): (int(t), int(n)) for j, t, n in conn.execute(
            sa.select(s.c.interval, s.c.total, s.c.reports))}


def upload(study: str, device: int, rows: list[tuple[int, int]]) -> storage.UploadRow:
    first, n, intervals, bits = storage.pack(rows)
    return (study, device, first, 0, n, intervals, bits)


def test_duplicate_key_is_an_integrity_error(engine: Any) -> None:
    row = upload("s", 7, [(1, 1)])
    with engine.begin() as conn:
        storage.insert_uploads(conn, [row])
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:
        storage.insert_uploads(conn, [upload("s", 7, [(2, 0)]), row])
    assert stored(engine) == [(7, 1, 1)]  # the failed transaction stored nothing


@pytest.mark.parametrize("other_bit", [1, 0])
def test_two_writers_on_one_database_decide_a_device_in_turn(db_url: str, engine: Any,
                                                             monkeypatch: Any,
                                                             other_bit: int) -> None:
    """Two writers (two engines, as two server processes) get overlapping uploads of one
    device. Writer A holds its transaction open after reading the device's stored slots; B's
    group must wait (PostgreSQL: the device's advisory lock; SQLite: BEGIN IMMEDIATE), then
    read A's committed row: an overlap with the same bit is stored once, another bit is a
    conflict that stores nothing. Without the wait, B would decide on the stale read and
    store slots 2 and 3 a second time (in a row keyed by interval 2, which meets no key)."""
    other_engine = storage.make_engine(db_url)
    writer_b = Ingestor(other_engine)
    writer_b.start()
    real = ingest_sql.store
    seen: dict[str, Any] = {}

    def holding(conn: Any, rows: list[Any], deltas: list[Any]) -> None:
        if conn.engine is engine and "b" not in seen:
            seen["b"] = writer_b.submit(Batch("s", 7, 0, [(2, other_bit), (3, 0), (4, 1)]))
            with contextlib.suppress(TimeoutError):
                seen["b"].result(timeout=1.0)
            seen["b_done_while_a_open"] = seen["b"].done()
        real(conn, rows, deltas)

    monkeypatch.setattr(ingest_sql, "store", holding)
    writer_a = Ingestor(engine)
    writer_a.start()
    first = writer_a.submit(Batch("s", 7, 0, [(1, 1), (2, 1), (3, 0)]))
    writer_a.stop()
    assert first.result() == 3
    assert seen["b_done_while_a_open"] is False  # B waited for A's commit
    late = seen["b"]
    writer_b.stop()
    other_engine.dispose()
    if other_bit == 1:  # the same bit: slots 2 and 3 stored once; slot 4 in B's own row
        assert late.result() == 3  # every report of the batch is acknowledged
        assert stored(engine) == [(7, 1, 1), (7, 2, 1), (7, 3, 0), (7, 4, 1)]
        assert sums(engine) == {1: (1, 1), 2: (1, 1), 3: (-1, 1), 4: (1, 1)}
    else:  # another bit: a conflict, nothing of B's batch stored
        with pytest.raises(Conflict):
            late.result()
        assert stored(engine) == [(7, 1, 1), (7, 2, 1), (7, 3, 0)]
        assert sums(engine) == {1: (1, 1), 2: (1, 1), 3: (-1, 1), 4: (0, 0)}


def test_one_group_decides_a_devices_batches_in_order(engine: Any) -> None:
    """Batches queued before the writer starts form one group: a device's second batch meets
    the first one's rows (an overlap with the same bit is stored once, another bit is a
    conflict that stores nothing), and the sums count every stored report once."""
    writer = Ingestor(engine)
    first = writer.submit(Batch("s", 7, 0, [(1, 1), (2, 0)]))
    again = writer.submit(Batch("s", 7, 0, [(2, 0), (3, 1)]))
    clash = writer.submit(Batch("s", 7, 0, [(3, 0), (4, 1)]))
    other = writer.submit(Batch("s", 8, 0, [(1, 0), (2, 0)]))
    writer.start()
    writer.stop()
    assert (first.result(), again.result(), other.result()) == (2, 2, 2)
    with pytest.raises(Conflict):
        clash.result()
    assert stored(engine) == [(7, 1, 1), (7, 2, 0), (7, 3, 1), (8, 1, 0), (8, 2, 0)]
    assert sums(engine) == {1: (0, 2), 2: (-2, 2), 3: (1, 1), 4: (0, 0)}


def test_copy_text_escapes_a_study_id(engine: Any) -> None:
    """The rows' text form keeps a study id with a tab, a backslash or a line end intact."""
    odd = "a\tb\\c\nd"
    with engine.begin() as conn:
        storage.insert_uploads(conn, [upload(odd, 7, [(1, 1)]), upload("s", 7, [(1, 0)])])
    u = storage.uploads
    with engine.connect() as conn:
        rows = sorted((s, int(d), bytes(b)) for s, d, b in conn.execute(
            sa.select(u.c.study, u.c.device, u.c.bits)))
    assert rows == [(odd, 7, b"\x01"), ("s", 7, b"\x00")]


def test_two_writers_racing_overlapping_uploads_store_each_slot_once(db_url: str,
                                                                     engine: Any) -> None:
    """Two writers (two engines) each get one of two overlapping uploads of every device, in
    small groups, and run at once. Whatever the interleaving: no slot is stored twice, a
    device whose uploads agree on the overlap has both acknowledged and the union stored, a
    device whose uploads disagree on one slot has exactly one acknowledged (the other is a
    conflict) and only its reports stored, and the sums count the stored reports."""
    with engine.begin() as conn:
        conn.execute(storage.sums.insert(), [
            {"study": "s", "order": 0, "interval": j, "total": 0, "reports": 0}
            for j in range(5, 13)])
    rng = np.random.default_rng(20261128)
    other_engine = storage.make_engine(db_url)
    writers = [Ingestor(engine, max_group=2), Ingestor(other_engine, max_group=2)]
    cases = []
    for device in range(1, 41):
        bits = rng.integers(0, 2, size=13)
        a = [(j, int(bits[j])) for j in range(1, 9)]
        b = [(j, int(bits[j])) for j in range(5, 13)]
        clash = device % 2 == 0
        if clash:  # the uploads disagree on slot 6
            b[1] = (6, 1 - b[1][1])
        cases.append((device, a, b, clash, Batch("s", device, 0, a), Batch("s", device, 0, b)))
    for case in cases:  # A takes the devices in increasing order
        writers[0].submit(case[4])
    for case in reversed(cases):  # B in decreasing order: they meet on some devices
        writers[1].submit(case[5])
    for w in writers:
        w.start()
    for w in writers:
        w.stop()
    other_engine.dispose()
    rows = stored(engine)
    assert len({(d, j) for d, j, _ in rows}) == len(rows)  # no slot stored twice
    by_device: dict[int, dict[int, int]] = {}
    for d, j, bit in rows:
        by_device.setdefault(d, {})[j] = bit
    for device, a, b, clash, ba, bb in cases:
        fa, fb = ba.future, bb.future
        if not clash:
            assert (fa.result(), fb.result()) == (8, 8)
            assert by_device[device] == dict(a) | dict(b)
            continue
        assert (fa.exception() is None) != (fb.exception() is None)
        won, lost = (a, fb) if fa.exception() is None else (b, fa)
        assert isinstance(lost.exception(), Conflict)
        assert by_device[device] == dict(won)
    expect = dict.fromkeys(range(1, 13), (0, 0))
    for _, j, bit in rows:
        t, n = expect[j]
        expect[j] = (t + 2 * bit - 1, n + 1)
    assert sums(engine) == expect
