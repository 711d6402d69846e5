"""SQLite: the reports, sums and devices tables without a rowid.

A SQLite table keyed by a composite primary key stores each row twice (in the rowid table and
in the primary key's index); ``WITHOUT ROWID`` stores it once, in the primary key's order. The
writer inserts every report and updates the sums by primary key, so each one then touches one
B-tree instead of two. The tables are rebuilt with their rows; PostgreSQL is unchanged.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_TABLES = {
    "reports": ('study VARCHAR(64) NOT NULL, device BIGINT NOT NULL, "interval" INTEGER NOT NULL, '
                '"order" INTEGER NOT NULL, bit SMALLINT NOT NULL, '
                'PRIMARY KEY (study, device, "interval")'),
    "sums": ('study VARCHAR(64) NOT NULL, "order" INTEGER NOT NULL, "interval" INTEGER NOT NULL, '
             'total BIGINT NOT NULL, reports BIGINT NOT NULL, '
             'PRIMARY KEY (study, "order", "interval")'),
    "devices": ('study VARCHAR(64) NOT NULL, device BIGINT NOT NULL, "order" INTEGER NOT NULL, '
                'created VARCHAR(40) NOT NULL, PRIMARY KEY (study, device)'),
}


def _rebuild(rowid: bool) -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    suffix = "" if rowid else " WITHOUT ROWID"
    for name, columns in _TABLES.items():
        op.execute(sa.text(f"CREATE TABLE {name}_new ({columns}){suffix}"))
        op.execute(sa.text(f"INSERT INTO {name}_new SELECT * FROM {name}"))
        op.execute(sa.text(f"DROP TABLE {name}"))
        op.execute(sa.text(f"ALTER TABLE {name}_new RENAME TO {name}"))


def upgrade() -> None:
    _rebuild(rowid=False)


def downgrade() -> None:
    _rebuild(rowid=True)
