"""`dpfreq profile` (placeholder until its issue lands)."""

from __future__ import annotations

import click

__all__ = ["command"]


@click.command(name="profile")
def command() -> None:
    """Not available yet in this version of dpfreq."""
    raise click.UsageError("'dpfreq profile' is not implemented yet")
