"""Initial schema: studies, tokens, devices, reports, running sums, enrolment and rejections.

Revision ID: 0001
Revises:
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "studies",
        sa.Column("study", sa.String(64), primary_key=True),
        sa.Column("title", sa.String(200), nullable=False),
        sa.Column("params", sa.Text, nullable=False),
        sa.Column("param_id", sa.String(64), nullable=False),
        sa.Column("protocol_version", sa.Integer, nullable=False),
        sa.Column("horizon", sa.Integer, nullable=False),
        sa.Column("padded", sa.Integer, nullable=False),
        sa.Column("start", sa.String(40), nullable=False),
        sa.Column("period_seconds", sa.BigInteger, nullable=False),
        sa.Column("min_devices", sa.Integer, nullable=False),
        sa.Column("created", sa.String(40), nullable=False),
    )
    op.create_table(
        "tokens",
        sa.Column("hash", sa.String(64), primary_key=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("study", sa.String(64), nullable=True),
        sa.Column("device", sa.BigInteger, nullable=True),
        sa.Column("created", sa.String(40), nullable=False),
    )
    op.create_table(
        "devices",
        sa.Column("study", sa.String(64), primary_key=True),
        sa.Column("device", sa.BigInteger, primary_key=True),
        sa.Column("order", sa.Integer, nullable=False),
        sa.Column("created", sa.String(40), nullable=False),
    )
    op.create_table(
        "reports",
        sa.Column("study", sa.String(64), primary_key=True),
        sa.Column("device", sa.BigInteger, primary_key=True),
        sa.Column("interval", sa.Integer, primary_key=True),
        sa.Column("order", sa.Integer, nullable=False),
        sa.Column("bit", sa.SmallInteger, nullable=False),
    )
    op.create_table(
        "sums",
        sa.Column("study", sa.String(64), primary_key=True),
        sa.Column("order", sa.Integer, primary_key=True),
        sa.Column("interval", sa.Integer, primary_key=True),
        sa.Column("total", sa.BigInteger, nullable=False),
        sa.Column("reports", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "enrolled",
        sa.Column("study", sa.String(64), primary_key=True),
        sa.Column("order", sa.Integer, primary_key=True),
        sa.Column("devices", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "rejections",
        sa.Column("study", sa.String(64), primary_key=True),
        sa.Column("reason", sa.String(40), primary_key=True),
        sa.Column("reports", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    for name in ("rejections", "enrolled", "sums", "reports", "devices", "tokens", "studies"):
        op.drop_table(name)
