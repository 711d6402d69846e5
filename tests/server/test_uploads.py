"""Uploads stored as packed rows: the format, one row per upload, and migration 0006 both
ways on data (both backends)."""

from __future__ import annotations

import itertools
import struct
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from conftest import bearer, create_study, enrol
from dpfreq.server import storage


@pytest.mark.parametrize("rows", [
    [(1, 1)],
    [(0, 0)],
    [(2**32 - 1, 1), (0, 0)],  # the format's edges (intervals are far smaller)
    [(65536, 0), (1, 1), (3, 0), (2, 1)],
    [(j, j % 2) for j in range(1, 65)],
])
def test_pack_round_trip(rows: list[tuple[int, int]]) -> None:
    first, count, intervals, bits = storage.pack(rows)
    assert first == min(j for j, _ in rows)
    assert count == len(rows) == len(bits)
    assert len(intervals) == 4 * count
    assert storage.unpack(intervals, bits) == sorted(rows)


def test_pack_format_is_little_endian_uint32_and_a_byte_per_bit() -> None:
    first, count, intervals, bits = storage.pack([(258, 0), (1, 1)])
    assert (first, count) == (1, 2)
    assert intervals == b"\x01\x00\x00\x00\x02\x01\x00\x00"
    assert bits == b"\x01\x00"


def test_pack_every_subset_of_a_small_domain() -> None:
    """Exhaustive over the 2^4 − 1 non-empty interval sets of {1..4} and all their bits."""
    for n in range(1, 5):
        for js in itertools.combinations(range(1, 5), n):
            for bs in itertools.product((0, 1), repeat=n):
                rows = list(zip(js, bs, strict=True))
                assert storage.unpack(*storage.pack(rows)[2:]) == rows


def test_an_upload_is_one_row_and_a_retry_adds_none(client: Any) -> None:
    params = create_study(client)
    device, token = enrol(client, params, 0)
    reps = [{"device": device, "order": 0, "interval": j, "bit": j % 2,
             "param_id": params.param_id} for j in range(1, 33)]
    for body in (reps[:20], reps[:20], reps):  # a retry, then an overlapping upload
        r = client.post("/v1/studies/s1/reports", json={"reports": body},
                        headers=bearer(token))
        assert r.status_code == 200, r.text
    u = storage.uploads
    with client.app.state.service.engine.connect() as conn:
        rows = conn.execute(sa.select(u.c.first, u.c.reports).order_by(u.c.first)).all()
        assert rows == [(1, 20), (21, 12)]
        assert report_rows(conn, "s1") == [(device, 0, j, j % 2) for j in range(1, 33)]


def report_rows(conn: Any, study: str) -> list[tuple[int, ...]]:
    """The stored reports of ``study`` as ``(device, order, interval, bit)`` rows."""
    cols = storage.report_columns(conn, study)
    return list(zip(*(cols[c].tolist() for c in storage.REPORT_COLUMNS), strict=True))


def _alembic(conn: Any) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(storage.__file__).with_name("migrations")))
    cfg.attributes["connection"] = conn
    return cfg


def test_migration_0006_packs_and_unpacks_the_reports(db_url: str) -> None:
    from alembic import command

    reports = [("s", 7, 3, 1, 1), ("s", 7, 1, 1, 0), ("s", 7, 2, 1, 1), ("s", 9, 5, 0, 0),
               ("t", 7, 4, 2, 1)]
    engine = storage.make_engine(db_url)
    with engine.begin() as conn:
        command.upgrade(_alembic(conn), "0005")
        conn.execute(sa.text('INSERT INTO reports (study, device, "interval", "order", bit) '
                             "VALUES (:s, :d, :j, :o, :b)"),
                     [dict(zip("sdjob", r, strict=True)) for r in reports])
    with engine.begin() as conn:
        command.upgrade(_alembic(conn), "0006")
    u = storage.uploads
    with engine.connect() as conn:
        rows = conn.execute(sa.select(u.c.study, u.c.device, u.c.first, u.c.order, u.c.reports,
                                      u.c.intervals, u.c.bits).order_by(u.c.study, u.c.device)
                            ).all()
        assert [tuple(r[:5]) for r in rows] == [("s", 7, 1, 1, 3), ("s", 9, 5, 0, 1),
                                                ("t", 7, 4, 2, 1)]
        assert bytes(rows[0][5]) == struct.pack("<3I", 1, 2, 3)
        assert bytes(rows[0][6]) == b"\x00\x01\x01"
        assert report_rows(conn, "s") == [(7, 1, 1, 0), (7, 1, 2, 1), (7, 1, 3, 1),
                                                  (9, 0, 5, 0)]
        assert "reports" not in sa.inspect(conn).get_table_names()
    with engine.begin() as conn:
        command.downgrade(_alembic(conn), "0005")
    with engine.connect() as conn:
        back = conn.execute(sa.text('SELECT study, device, "interval", "order", bit '
                                    "FROM reports")).all()
        assert sorted(tuple(r) for r in back) == sorted(reports)
        assert "uploads" not in sa.inspect(conn).get_table_names()
        if conn.dialect.name == "sqlite":  # as 0005 left it
            with pytest.raises(sa.exc.OperationalError, match="rowid"):
                conn.execute(sa.text("SELECT rowid FROM reports"))
    engine.dispose()
