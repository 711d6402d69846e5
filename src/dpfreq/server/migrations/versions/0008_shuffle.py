"""The shuffle roles' tables: measurements, party shares, worker outputs.

A service started with ``--role worker`` or ``--role aggregator`` keeps its measurements in
``shuffle_measurements`` (parameters, topology, plan, draws, acknowledgements, result), a
worker the parties' shares in ``shuffle_shares`` (one per party and measurement), the
aggregator the workers' outputs in ``shuffle_outputs`` (one per entity and position). The
collection service leaves them empty. See :mod:`dpfreq.server.roles.tables`.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-10
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "shuffle_measurements",
        sa.Column("measurement", sa.String(64), primary_key=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("params", sa.Text, nullable=False),
        sa.Column("param_id", sa.String(64), nullable=False),
        sa.Column("topology", sa.Text, nullable=True),
        sa.Column("plan", sa.Text, nullable=True),
        sa.Column("draws", sa.Text, nullable=True),
        sa.Column("peer_draws", sa.Text, nullable=True),
        sa.Column("sent", sa.Text, nullable=True),
        sa.Column("result", sa.Text, nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("created", sa.String(40), nullable=False),
        sa.Column("updated", sa.String(40), nullable=False),
    )
    op.create_table(
        "shuffle_shares",
        sa.Column("measurement", sa.String(64), primary_key=True),
        sa.Column("party", sa.Integer, primary_key=True),
        sa.Column("share_id", sa.String(32), nullable=False),
        sa.Column("form", sa.String(8), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("payload", sa.LargeBinary, nullable=False),
        sa.Column("received", sa.String(40), nullable=False),
    )
    op.create_table(
        "shuffle_outputs",
        sa.Column("measurement", sa.String(64), primary_key=True),
        sa.Column("entity", sa.Integer, primary_key=True),
        sa.Column("position", sa.Integer, primary_key=True),
        sa.Column("plan", sa.Text, nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("payload", sa.LargeBinary, nullable=False),
        sa.Column("received", sa.String(40), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("shuffle_outputs")
    op.drop_table("shuffle_shares")
    op.drop_table("shuffle_measurements")
