"""Alembic migrations of the collection service's schema (applied on start)."""
