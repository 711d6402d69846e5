"""The documentation builds offline with warnings as errors (the command in README.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_docs_build_without_warnings(tmp_path: Path) -> None:
    pytest.importorskip("sphinx", reason="the [docs] extra is not installed")
    pytest.importorskip("myst_parser", reason="the [docs] extra is not installed")
    pytest.importorskip("pydata_sphinx_theme", reason="the [docs] extra is not installed")
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         "-d", str(tmp_path / "doctrees"), str(ROOT / "docs"), str(tmp_path / "html")],
        capture_output=True, text=True, timeout=600, check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "html" / "index.html").exists()
    assert (tmp_path / "html" / "theory" / "longitudinal.html").exists()
