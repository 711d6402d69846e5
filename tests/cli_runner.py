"""Running ``dpfreq`` in-process for the CLI tests: the exit status and what it wrote."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from dpfreq.cli.main import main

__all__ = ["run_cli"]


def run_cli(argv: Sequence[object], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``(exit status, stdout, stderr)`` of ``dpfreq argv`` (each argument as ``str``); a
    ``SystemExit`` (Click's usage errors) gives its code, ``None`` read as 0."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err
