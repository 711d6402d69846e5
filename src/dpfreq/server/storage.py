"""Storage of the collection service: one SQLAlchemy Core code path for SQLite and PostgreSQL.

Why SQLAlchemy Core (and not an ORM or two hand-written drivers): the service issues a handful
of statements (bulk inserts, keyed updates of running sums, small selects); Core writes each once
and renders it for both dialects, pools connections, and Alembic (its migration tool) reads the
same table definitions.

Durability: SQLite runs in WAL mode with ``synchronous=FULL``, so a committed transaction is on
disk before the commit returns, and the service acknowledges a batch only after its commit.
PostgreSQL commits are durable under its defaults (``fsync=on``, ``synchronous_commit=on``).

Tables
------
``studies``         one row per study: protocol parameters (JSON), period length, start, minimum
                    number of enrolled devices before estimates are served; when it stops
                    taking reports (expiry, or closed by its manager) and when its raw
                    reports were deleted under the retention policy.
``tokens``          SHA-256 hashes of bearer tokens with their role (admin, manager, analyst,
                    device), study, expiry (Unix time) and revocation time; an admin token
                    also its lineage (the id of the start's admin token it descends from).
``audit``           one row per use of an admin, manager or analyst token and per token
                    lifecycle event (issued, rotated, revoked): who (hash prefix), what, when.
``revocations``     one row per token revocation (processes poll it to drop cached tokens).
``devices``         enrolled devices of a study with their order.
``uploads``         one row per stored upload of a device: the reports of that upload that
                    were new, packed (see :func:`pack`), keyed by (study, device, smallest
                    interval in the row). A slot (study, device, interval) is in at most one
                    row, so that smallest interval was never stored before and the key is
                    unique. (``devices``, ``uploads`` and ``sums`` are ``WITHOUT ROWID`` on
                    SQLite.)
``sums``            running per-(order, interval) sums of ``2·bit − 1`` and report counts,
                    updated in the same transaction as the reports they count.
``enrolled``        running number of enrolled devices per order.
``rejections``      running count of rejected reports per reason (for the dashboard).
"""

from __future__ import annotations

import struct
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import sqlalchemy as sa
from numpy.typing import NDArray
from sqlalchemy.engine import Connection, Engine

from dpfreq.artifacts import create_private

__all__ = [
    "METADATA",
    "REPORT_COLUMNS",
    "UploadRow",
    "audit",
    "devices",
    "enrolled",
    "insert_uploads",
    "make_engine",
    "normalize_url",
    "pack",
    "rejections",
    "report_columns",
    "revocations",
    "studies",
    "sums",
    "takes_reports",
    "timestamp",
    "tokens",
    "unpack",
    "upgrade",
    "uploads",
]

METADATA = sa.MetaData()

_Columns = tuple[tuple[str, Any], ...]


def _study_table(name: str, keys: _Columns, values: _Columns, *,
                 rowid: bool = True) -> sa.Table:
    """A table keyed by ``study`` and then by ``keys``, with the non-null columns ``values``
    (on SQLite without a rowid when ``rowid`` is false: stored once, in key order)."""
    return sa.Table(
        name,
        METADATA,
        sa.Column("study", sa.String(64), primary_key=True),
        *(sa.Column(col, kind, primary_key=True) for col, kind in keys),
        *(sa.Column(col, kind, nullable=False) for col, kind in values),
        sqlite_with_rowid=rowid,
    )


studies = _study_table("studies", (), (
    ("title", sa.String(200)),
    ("params", sa.Text),
    ("param_id", sa.String(64)),
    ("protocol_version", sa.Integer),
    ("horizon", sa.Integer),
    ("padded", sa.Integer),
    ("start", sa.String(40)),
    ("period_seconds", sa.BigInteger),
    ("min_devices", sa.Integer),
    ("created", sa.String(40)),
))
studies.append_column(sa.Column("enrol_hash", sa.String(64), nullable=True))
studies.append_column(sa.Column("closes_at", sa.String(40), nullable=True))  # expiry (ISO, UTC)
studies.append_column(sa.Column("closed", sa.String(40), nullable=True))  # closed by a manager
studies.append_column(sa.Column("purged", sa.String(40), nullable=True))  # raw reports deleted
studies.append_column(sa.Column("reported_devices", sa.BigInteger, nullable=True))  # then

tokens = sa.Table(
    "tokens",
    METADATA,
    sa.Column("hash", sa.String(64), primary_key=True),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("study", sa.String(64), nullable=True),
    sa.Column("device", sa.BigInteger, nullable=True),
    sa.Column("created", sa.String(40), nullable=False),
    sa.Column("expires", sa.Float, nullable=True),
    sa.Column("revoked", sa.String(40), nullable=True),
    sa.Column("label", sa.String(40), nullable=True),
    sa.Column("lineage", sa.String(16), nullable=True),
)

audit = sa.Table(
    "audit",
    METADATA,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("at", sa.String(40), nullable=False),
    sa.Column("token", sa.String(16), nullable=False),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("study", sa.String(64), nullable=True),
    sa.Column("action", sa.String(80), nullable=False),
)

# One row per revocation (of any token): server processes poll its largest id to drop their
# cached tokens when another process revoked one.
revocations = sa.Table(
    "revocations",
    METADATA,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("at", sa.String(40), nullable=False),
)

# The tables the writer touches per report are keyed lookups only: no rowid on SQLite.
devices = _study_table("devices", (("device", sa.BigInteger),),
                       (("order", sa.Integer), ("created", sa.String(40))), rowid=False)
uploads = _study_table("uploads", (("device", sa.BigInteger), ("first", sa.Integer)),
                       (("order", sa.Integer), ("reports", sa.Integer),
                        ("intervals", sa.LargeBinary), ("bits", sa.LargeBinary)), rowid=False)
sums = _study_table("sums", (("order", sa.Integer), ("interval", sa.Integer)),
                    (("total", sa.BigInteger), ("reports", sa.BigInteger)), rowid=False)
enrolled = _study_table("enrolled", (("order", sa.Integer),), (("devices", sa.BigInteger),))
rejections = _study_table("rejections", (("reason", sa.String(40)),),
                          (("reports", sa.BigInteger),))


def timestamp() -> str:
    """The current instant as the ISO text the tables store (UTC)."""
    return datetime.now(UTC).isoformat()


def takes_reports(closed: str | None, closes_at: str | None, now: datetime) -> bool:
    """Whether a study row with these ``closed`` and ``closes_at`` timestamps (ISO text) takes
    reports and enrolments at ``now``: not closed, and not at or past its expiry."""
    return closed is None and (closes_at is None or now < datetime.fromisoformat(closes_at))


def normalize_url(db: str) -> str:
    """SQLAlchemy URL for ``--db``: a path means SQLite; ``postgresql://`` uses psycopg 3."""
    if db.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + db.split("://", 1)[1]
    if "://" in db:
        return db
    return "sqlite:///" + str(Path(db).expanduser().resolve())


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cur = dbapi_connection.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=FULL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def make_engine(db: str, *, pool_size: int = 8) -> Engine:
    """An engine for ``db`` (a SQLite path or a database URL) with the durability settings."""
    url = normalize_url(db)
    if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
        create_private(url[len("sqlite:///"):])  # it holds the reports and token hashes: 0600
    if url.startswith("sqlite"):
        engine = sa.create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        sa.event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    # psycopg prepares a statement on the server after 5 runs, and PostgreSQL may then keep a
    # generic plan made while the table of stored reports was small: a sequential scan for the
    # writer's read of stored slots, 250 ms per group at 10^5 rows (measured in bench_server.py).
    # Plans made per execution follow the table as it grows.
    return sa.create_engine(url, pool_size=pool_size, max_overflow=pool_size, pool_pre_ping=True,
                            connect_args={"prepare_threshold": None})


def pack(rows: list[tuple[int, int]]) -> tuple[int, int, bytes, bytes]:
    """``(first, count, intervals, bits)`` of an upload row holding the reports ``rows``
    (``(interval, bit)``, distinct intervals, at least one).

    The format of the ``uploads`` table: ``intervals`` is the reports' intervals in increasing
    order, each a little-endian unsigned 32-bit integer (4 bytes per report; intervals are at
    most the study's padded horizon, below 2^17); ``bits`` is one byte per report, 0 or 1, in
    the same order; ``first`` is the smallest interval and ``count`` the number of reports.
    """
    rows = sorted(rows)
    n = len(rows)
    intervals = struct.pack(f"<{n}I", *[j for j, _ in rows])
    return rows[0][0], n, intervals, bytes([b for _, b in rows])


def unpack(intervals: bytes, bits: bytes) -> list[tuple[int, int]]:
    """The ``(interval, bit)`` reports of an upload row (the inverse of :func:`pack`)."""
    n = len(bits)
    return list(zip(struct.unpack(f"<{n}I", intervals), bits, strict=True))


UPLOAD_COLUMNS = ("study", "device", "first", "order", "reports", "intervals", "bits")
_SQLITE_INSERT = ('INSERT INTO uploads (study, device, "first", "order", reports, intervals, '
                  "bits) VALUES (?, ?, ?, ?, ?, ?, ?)")
#: An upload row: ``(study, device, first, order, count, intervals, bits)`` (see :func:`pack`).
UploadRow = tuple[str, int, int, int, int, bytes, bytes]


def insert_uploads(conn: Connection, rows: list[UploadRow]) -> None:
    """Insert upload rows in the open transaction.

    The one statement that is not written once for both dialects: on PostgreSQL the rows go
    through ``COPY ... FROM STDIN`` on the same connection and transaction (psycopg's
    ``executemany`` sends one INSERT per row); on SQLite the DB-API cursor's ``executemany``
    binds the row tuples in C; other dialects run the Core ``INSERT``. A duplicate key raises
    :class:`sqlalchemy.exc.IntegrityError` on both, and the caller's transaction rolls back.
    """
    if not rows:
        return
    if conn.dialect.name == "sqlite":
        # the DB-API cursor of the transaction's connection: sqlite3's executemany binds the
        # tuples in C (SQLAlchemy's executemany builds and compiles a parameter dict per row)
        cur = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            cur.executemany(_SQLITE_INSERT, rows)
        except conn.dialect.dbapi.IntegrityError as exc:  # type: ignore[union-attr]
            raise sa.exc.IntegrityError(_SQLITE_INSERT, None, exc) from exc
        finally:
            cur.close()
        return
    if conn.dialect.name != "postgresql":
        conn.execute(uploads.insert(), [dict(zip(UPLOAD_COLUMNS, row, strict=True))
                                        for row in rows])
        return
    dbapi, driver = conn.dialect.dbapi, conn.connection.driver_connection
    # An open PostgreSQL connection has both (narrows the Optional types for mypy).
    assert dbapi is not None
    assert driver is not None
    columns = ", ".join(f'"{c}"' for c in UPLOAD_COLUMNS)
    sql = f"COPY uploads ({columns}) FROM STDIN"
    # COPY's text form written as one block: psycopg's write_row adapts each value through
    # its dumpers; the integers need no escaping, the study ids are escaped once each, and a
    # bytea is its hex form (``\\x...``: COPY turns the doubled backslash into one).
    text = {s: _copy_text(s) for s in {row[0] for row in rows}}
    data = "".join([f"{text[s]}\t{d}\t{f}\t{o}\t{n}\t\\\\x{js.hex()}\t\\\\x{bs.hex()}\n"
                    for s, d, f, o, n, js, bs in rows])
    try:
        with driver.cursor() as cur, cur.copy(sql) as copy:
            copy.write(data.encode())
    except dbapi.IntegrityError as exc:
        raise sa.exc.IntegrityError(sql, None, exc) from exc


REPORT_COLUMNS = ("device", "order", "interval", "bit")


def report_columns(conn: Connection, study: str) -> dict[str, NDArray[np.int64]]:
    """Every stored report of ``study`` as the columns :data:`REPORT_COLUMNS`, sorted by device
    and interval: the upload rows unpacked with numpy (one buffer per row, no object per
    report)."""
    u = uploads
    rows = conn.execute(sa.select(u.c.device, u.c.order, u.c.intervals, u.c.bits)
                        .where(u.c.study == study)).all()
    counts = np.array([len(bits) for *_, bits in rows], dtype=np.int64)
    interval = np.concatenate([np.frombuffer(bytes(js), dtype="<u4") for _, _, js, _ in rows]
                              or [np.zeros(0, dtype="<u4")]).astype(np.int64)
    bit = np.frombuffer(b"".join(bytes(bs) for *_, bs in rows), dtype=np.uint8).astype(np.int64)
    device = np.repeat(np.array([int(r[0]) for r in rows], dtype=np.int64), counts)
    order = np.repeat(np.array([int(r[1]) for r in rows], dtype=np.int64), counts)
    by = np.lexsort((interval, device))
    return {"device": device[by], "order": order[by], "interval": interval[by], "bit": bit[by]}


_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _copy_text(value: str) -> str:
    """``value`` as a field of COPY's text format (backslash, tab and line ends escaped)."""
    return value.translate(_COPY_ESCAPES)


def upgrade(engine: Engine) -> None:
    """Apply the shipped Alembic migrations up to the newest (idempotent; run on start)."""
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(__file__).with_name("migrations")))
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":  # several servers starting at once migrate once
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(7175525)"))
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")
