"""One row per stored upload: the ``uploads`` table replaces ``reports``.

A row holds the reports of one upload of a device that were new when it was stored, packed:
``intervals`` the increasing intervals as little-endian unsigned 32-bit integers, ``bits`` one
byte (0 or 1) per report in the same order, ``reports`` their number, ``first`` the smallest
interval, and the device's ``order``. The key is ``(study, device, first)``: a slot is stored
at most once, so the smallest interval of a row is in no other row of the device. On
PostgreSQL a group of 50 uploads then writes 50 rows instead of 3,200 (``COPY`` about nine
tenths cheaper); on SQLite the table is ``WITHOUT ROWID`` like the others (0005).

The upgrade moves each device's stored reports into one row; the downgrade unpacks every row
into one report row per slot again.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-28
"""

import struct
from collections.abc import Iterator
from itertools import groupby
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_CHUNK = 1000  # rows per insert while moving
# The packed format is written out here rather than taken from dpfreq.server.storage.pack: a
# migration keeps what it wrote at its revision, whatever the live code later becomes.


def _reports_table() -> None:
    op.create_table(
        "reports",
        sa.Column("study", sa.String(64), primary_key=True),
        sa.Column("device", sa.BigInteger, primary_key=True),
        sa.Column("interval", sa.Integer, primary_key=True),
        sa.Column("order", sa.Integer, nullable=False),
        sa.Column("bit", sa.SmallInteger, nullable=False),
        sqlite_with_rowid=False,  # as 0005 (PostgreSQL ignores it)
    )


def _chunks(rows: Iterator[Any]) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == _CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def upgrade() -> None:
    uploads = op.create_table(
        "uploads",
        sa.Column("study", sa.String(64), primary_key=True),
        sa.Column("device", sa.BigInteger, primary_key=True),
        sa.Column("first", sa.Integer, primary_key=True),
        sa.Column("order", sa.Integer, nullable=False),
        sa.Column("reports", sa.Integer, nullable=False),
        sa.Column("intervals", sa.LargeBinary, nullable=False),
        sa.Column("bits", sa.LargeBinary, nullable=False),
        sqlite_with_rowid=False,  # as 0005 (PostgreSQL ignores it)
    )
    reports = sa.table("reports", sa.column("study"), sa.column("device"),
                       sa.column("interval"), sa.column("order"), sa.column("bit"))
    conn = op.get_bind()
    # Streamed in key order (a server-side cursor on PostgreSQL), so a large table is moved
    # one chunk of devices at a time rather than read into memory whole.
    rows = conn.execute(
        sa.select(reports.c.study, reports.c.device, reports.c.order, reports.c.interval,
                  reports.c.bit)
        .order_by(reports.c.study, reports.c.device, reports.c.interval)
        .execution_options(stream_results=True, yield_per=_CHUNK * 64))

    def packed() -> Iterator[dict[str, Any]]:
        for (study, device, order), group in groupby(rows, key=lambda r: tuple(r[:3])):
            slots = [(int(r[3]), int(r[4])) for r in group]
            yield {"study": study, "device": int(device), "first": slots[0][0],
                   "order": int(order), "reports": len(slots),
                   "intervals": struct.pack(f"<{len(slots)}I", *[j for j, _ in slots]),
                   "bits": bytes([b for _, b in slots])}

    for chunk in _chunks(packed()):
        conn.execute(uploads.insert(), chunk)
    op.drop_table("reports")


def downgrade() -> None:
    conn = op.get_bind()
    _reports_table()
    reports = sa.table("reports", sa.column("study"), sa.column("device"),
                       sa.column("interval"), sa.column("order"), sa.column("bit"))
    uploads = sa.table("uploads", sa.column("study"), sa.column("device"), sa.column("order"),
                       sa.column("intervals"), sa.column("bits"))
    rows = conn.execute(
        sa.select(uploads.c.study, uploads.c.device, uploads.c.order, uploads.c.intervals,
                  uploads.c.bits).execution_options(stream_results=True, yield_per=_CHUNK))

    def unpacked() -> Iterator[dict[str, Any]]:
        for study, device, order, intervals, bits in rows:
            js = struct.unpack(f"<{len(bits)}I", intervals)
            for j, b in zip(js, bits, strict=True):
                yield {"study": study, "device": int(device), "interval": j,
                       "order": int(order), "bit": b}

    for chunk in _chunks(unpacked()):
        conn.execute(reports.insert(), chunk)
    op.drop_table("uploads")
