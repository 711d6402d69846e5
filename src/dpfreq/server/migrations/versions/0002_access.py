"""Access control: token expiry, revocation and labels, the token audit log, study enrolment.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tokens") as batch:
        batch.add_column(sa.Column("expires", sa.Float, nullable=True))
        batch.add_column(sa.Column("revoked", sa.String(40), nullable=True))
        batch.add_column(sa.Column("label", sa.String(40), nullable=True))
    with op.batch_alter_table("studies") as batch:
        batch.add_column(sa.Column("enrol_hash", sa.String(64), nullable=True))
    op.create_table(
        "audit",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", sa.String(40), nullable=False),
        sa.Column("token", sa.String(16), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("study", sa.String(64), nullable=True),
        sa.Column("action", sa.String(80), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("audit")
    with op.batch_alter_table("studies") as batch:
        batch.drop_column("enrol_hash")
    with op.batch_alter_table("tokens") as batch:
        for name in ("label", "revoked", "expires"):
            batch.drop_column(name)
