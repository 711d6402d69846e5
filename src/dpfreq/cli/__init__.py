"""The ``dpfreq`` command line (formatting only; the logic lives in the library)."""

from dpfreq.cli.main import cli, main

__all__ = ["cli", "main"]
