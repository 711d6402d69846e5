"""Admin tokens carry the lineage of the start that created them.

``tokens.lineage`` is, for an admin token, the id (16 hex digits of the hash) of the admin
token a ``dpfreq serve`` start registered, from which it descends: the start's own token, its
rotations, the admin tokens issued by any of them, and so on. A start with a new admin token
revokes every admin token of another lineage (``dpfreq.server.service.Service.bootstrap_admin``).
Other roles keep ``lineage`` null. The upgrade gives each token registered by a start (label
``bootstrap``) its own id as lineage; any other admin token of the old schema (a rotation, an
issued one) has none and is revoked by the next start with a new admin token.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tokens") as batch:
        batch.add_column(sa.Column("lineage", sa.String(16), nullable=True))
    tokens = sa.table("tokens", sa.column("hash", sa.String), sa.column("label", sa.String),
                      sa.column("lineage", sa.String))
    op.execute(tokens.update().where(tokens.c.label == "bootstrap")
               .values(lineage=sa.func.substr(tokens.c.hash, 1, 16)))


def downgrade() -> None:
    with op.batch_alter_table("tokens") as batch:
        batch.drop_column("lineage")
