"""The writer's group commit against rows stored by another process (both backends)."""

from __future__ import annotations

import contextlib
import secrets
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa

from dpfreq.server import ingest_sql, storage
from dpfreq.server.ingest import Batch, Conflict, Ingestor


def _database(url: str, intervals: int) -> Any:
    """An upgraded database on ``url`` with the sums rows of study ``s``, order 0."""
    eng = storage.make_engine(url)
    storage.upgrade(eng)
    with eng.begin() as conn:
        conn.execute(storage.sums.insert(), [
            {"study": "s", "order": 0, "interval": j, "total": 0, "reports": 0}
            for j in range(1, intervals + 1)])
    return eng


@pytest.fixture
def engine(db_url: str) -> Any:
    eng = _database(db_url, 4)
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
    store slots 2 and 3 a second time (in a row keyed by interval 2, which meets no key).
    PostgreSQL's one-round-trip path for new reports is turned off here, so that A can be
    held between its read and its insert (that path is tested below)."""
    monkeypatch.setattr(Ingestor, "_store_new", staticmethod(lambda *args: None))
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


@pytest.fixture
def pg_engine(postgres: Any) -> Any:
    eng = _database(postgres.create_database("t_" + secrets.token_hex(6)), 8)
    yield eng
    eng.dispose()


def test_new_reports_path_waits_for_a_device_held_by_another_writer(pg_engine: Any) -> None:
    """PostgreSQL, the one-round-trip path: another writer's open transaction holds device
    7's lock and has inserted (not committed) a row of slots 1-3. The writer's group for
    device 7 must wait, then see that row: its batch overlaps it, so it is decided on the
    stored slots (slot 4 new, slots 2 and 3 already stored with the same bits)."""
    writer = Ingestor(pg_engine)
    writer.start()
    with pg_engine.connect() as other:
        other.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"),
                      {"k": ingest_sql.device_lock_key("s", 7)})
        storage.insert_uploads(other, [upload("s", 7, [(1, 1), (2, 1), (3, 0)])])
        ingest_sql.add_sums(other, [(("s", 0, 1), [1, 1]), (("s", 0, 2), [1, 1]),
                                    (("s", 0, 3), [-1, 1])])
        late = writer.submit(Batch("s", 7, 0, [(2, 1), (3, 0), (4, 1)]))
        with contextlib.suppress(TimeoutError):
            late.result(timeout=1.0)
        assert not late.done()  # it waits for the other writer's commit
        other.commit()
    assert late.result(timeout=30) == 3
    fresh = writer.submit(Batch("s", 8, 0, [(5, 0)]))
    assert fresh.result(timeout=30) == 1
    writer.stop()
    assert stored(pg_engine) == [(7, 1, 1), (7, 2, 1), (7, 3, 0), (7, 4, 1), (8, 5, 0)]
    assert sums(pg_engine) == {1: (1, 1), 2: (1, 1), 3: (-1, 1), 4: (1, 1), 5: (-1, 1),
                               6: (0, 0), 7: (0, 0), 8: (0, 0)}


def _new_rows(batches: list[tuple[int, list[tuple[int, int]]]]) -> tuple[list[Any], list[Any]]:
    """The arguments of ``pg_store_new`` for batches ``(device, rows)`` of study s, order 0."""
    rows = [(upload("s", d, r), max(j for j, _ in r)) for d, r in batches]
    every = [j for _, r in batches for j, _ in r]
    ones = [j for _, r in batches for j, b in r if b]
    return rows, ingest_sql.sum_deltas({("s", 0): (every, ones)})


@pytest.mark.parametrize(("stored_rows", "batch", "new"), [
    ([(3, 1), (5, 0)], [(6, 1), (7, 1)], True),  # after the stored row's range
    ([(3, 1), (5, 0)], [(1, 1), (2, 0)], True),  # before it
    ([(3, 1), (5, 0)], [(4, 1)], False),  # inside its range, on no stored slot
    ([(3, 1), (5, 0)], [(5, 0), (6, 1)], False),  # on a stored slot
])
def test_new_reports_path_stores_only_batches_beside_the_stored_rows(
        pg_engine: Any, stored_rows: list[tuple[int, int]], batch: list[tuple[int, int]],
        new: bool) -> None:
    """The one-round-trip path stores a group (rows and sums, committed) only when no stored
    row of its devices spans a range that meets a batch's; otherwise it stores nothing of
    the group (not even the other device's batch) and says so."""
    with pg_engine.begin() as conn:
        storage.insert_uploads(conn, [upload("s", 7, stored_rows)])
    rows, deltas = _new_rows([(7, batch), (8, [(8, 1)])])
    with pg_engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        assert ingest_sql.pg_store_new(conn, rows, deltas) is new
    added = [(7, j, b) for j, b in batch] + [(8, 8, 1)] if new else []
    assert stored(pg_engine) == sorted([(7, j, b) for j, b in stored_rows] + added)
    expect = dict.fromkeys(range(1, 9), (0, 0))
    for _, j, b in added:
        expect[j] = (expect[j][0] + 2 * b - 1, expect[j][1] + 1)
    assert sums(pg_engine) == expect


@pytest.mark.parametrize(("closed", "closes_at", "new"), [
    (None, None, True),
    (None, "2999-01-01T00:00:00+00:00", True),
    (None, "2020-01-01T00:00:00+00:00", False),  # expired
    ("2020-01-01T00:00:00+00:00", None, False),  # closed by its manager
])
def test_new_reports_path_leaves_a_closed_study_to_the_decision(
        pg_engine: Any, closed: str | None, closes_at: str | None, new: bool) -> None:
    """A study that takes no more reports stores nothing on the one-round-trip path (the
    writer's decision then refuses its batches)."""
    with pg_engine.begin() as conn:
        conn.execute(storage.studies.insert().values(
            study="s", title="t", params="{}", param_id="p", protocol_version=1, horizon=8,
            padded=8, start="2020-01-01", period_seconds=86400, min_devices=1,
            created="2020-01-01T00:00:00+00:00", closed=closed, closes_at=closes_at))
    rows, deltas = _new_rows([(7, [(1, 1)])])
    with pg_engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        assert ingest_sql.pg_store_new(conn, rows, deltas) is new
    assert stored(pg_engine) == ([(7, 1, 1)] if new else [])


def test_new_reports_path_keeps_an_odd_study_id_and_the_bytes(pg_engine: Any) -> None:
    """The arrays go as text literals: a study id with quotes, a backslash, a comma or braces,
    and the packed bytes, arrive intact."""
    odd = 'a"b\\c,{d}'
    with pg_engine.begin() as conn:
        conn.execute(storage.sums.insert(), [
            {"study": odd, "order": 0, "interval": j, "total": 0, "reports": 0}
            for j in (1, 300)])
    row = upload(odd, 2**52, [(1, 1), (300, 0)])
    deltas = [((odd, 0, 1), [1, 1]), ((odd, 0, 300), [-1, 1])]
    with pg_engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        assert ingest_sql.pg_store_new(conn, [(row, 300)], deltas)
    u, s = storage.uploads, storage.sums
    with pg_engine.connect() as conn:
        got = conn.execute(sa.select(u.c.study, u.c.device, u.c.intervals, u.c.bits)).one()
        assert (got[0], got[1], bytes(got[2]), bytes(got[3])) == (odd, 2**52, row[5], row[6])
        assert dict(conn.execute(sa.select(s.c.interval, s.c.total)
                                 .where(s.c.study == odd)).all()) == {1: 1, 300: -1}
