"""Study close and expiry, the retention of raw reports, and the log of token revocations.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("studies") as batch:
        batch.add_column(sa.Column("closes_at", sa.String(40), nullable=True))
        batch.add_column(sa.Column("closed", sa.String(40), nullable=True))
        batch.add_column(sa.Column("purged", sa.String(40), nullable=True))
        batch.add_column(sa.Column("reported_devices", sa.BigInteger, nullable=True))
    op.create_table(
        "revocations",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", sa.String(40), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("revocations")
    with op.batch_alter_table("studies") as batch:
        for name in ("reported_devices", "purged", "closed", "closes_at"):
            batch.drop_column(name)
