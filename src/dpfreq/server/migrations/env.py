"""Alembic environment: migrations run on the connection the service hands in."""

from __future__ import annotations

from alembic import context

from dpfreq.server.storage import METADATA

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - the service always passes its connection
    raise RuntimeError("dpfreq migrations run through dpfreq.server.storage.upgrade")
context.configure(connection=connection, target_metadata=METADATA)
with context.begin_transaction():
    context.run_migrations()
