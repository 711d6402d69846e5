"""The writer's group commit against rows stored by another process (both backends)."""

from __future__ import annotations

from typing import Any

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
    r = storage.reports
    with eng.connect() as conn:
        return sorted(tuple(row) for row in conn.execute(
            sa.select(r.c.device, r.c.interval, r.c.bit)))


def sums(eng: Any) -> dict[int, tuple[int, int]]:
    s = storage.sums
    with eng.connect() as conn:
        return {int(j): (int(t), int(n)) for j, t, n in conn.execute(
            sa.select(s.c.interval, s.c.total, s.c.reports))}


def test_duplicate_slot_is_an_integrity_error(engine: Any) -> None:
    row = ("s", 7, 1, 0, 1)
    with engine.begin() as conn:
        storage.insert_reports(conn, [row])
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:
        storage.insert_reports(conn, [("s", 7, 2, 0, 0), row])
    assert stored(engine) == [(7, 1, 1)]  # the failed transaction stored nothing


@pytest.mark.parametrize("other_bit", [1, 0])
def test_a_slot_stored_concurrently_is_decided_again(engine: Any, monkeypatch: Any,
                                                     other_bit: int) -> None:
    """Another server stores slot (7, 2) after this writer read the stored slots: the insert
    meets the primary key, the group is rolled back and decided again against that row."""
    real = ingest_sql.store
    calls = []

    def racing(conn: Any, rows: list[Any], deltas: list[Any]) -> None:
        if not calls:
            with engine.begin() as other:  # a second process, committed first
                storage.insert_reports(other, [("s", 7, 2, 0, other_bit)])
                other.execute(storage.sums.update().where(storage.sums.c.interval == 2)
                              .values(total=2 * other_bit - 1, reports=1))
        calls.append(len(rows))
        real(conn, rows, deltas)

    monkeypatch.setattr(ingest_sql, "store", racing)
    writer = Ingestor(engine)
    writer.start()
    future = writer.submit(Batch("s", 7, 0, [(1, 1), (2, 1), (3, 0)]))
    writer.stop()
    if other_bit == 1:  # the same bit: stored once; the batch succeeds, inserting two new rows
        assert future.result() == 3  # every report of the batch is acknowledged
        assert calls == [3, 2]
        assert stored(engine) == [(7, 1, 1), (7, 2, 1), (7, 3, 0)]
        assert sums(engine) == {1: (1, 1), 2: (1, 1), 3: (-1, 1), 4: (0, 0)}
    else:  # another bit: a conflict, nothing of the batch stored
        with pytest.raises(Conflict):
            future.result()
        assert calls == [3, 0]
        assert stored(engine) == [(7, 2, 0)]
        assert sums(engine) == {1: (0, 0), 2: (-1, 1), 3: (0, 0), 4: (0, 0)}


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
        storage.insert_reports(conn, [(odd, 7, 1, 0, 1), ("s", 7, 1, 0, 0)])
    r = storage.reports
    with engine.connect() as conn:
        rows = sorted(tuple(x) for x in conn.execute(sa.select(r.c.study, r.c.device, r.c.bit)))
    assert rows == [(odd, 7, 1), ("s", 7, 0)]
