"""The device protocol's conformance vectors (clients/vectors/) are what the Python reference
sends, byte for byte, and the TypeScript client (clients/js/) reproduces all of them.

The Node tests need ``node`` on PATH and the package's devDependencies (``npm ci`` in
clients/js, which CI runs); without them the test is skipped with the reason, unless
``DPFREQ_REQUIRE_NODE=1`` (set by CI) turns the skip into a failure.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import pytest

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "clients" / "vectors"
JS = ROOT / "clients" / "js"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dpfreq_vectors", VECTORS / "generate.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_vectors_are_what_the_python_client_sends() -> None:
    built = _generator().build()
    assert sorted(built) == sorted(p.name for p in VECTORS.glob("*.json"))
    for name, text in built.items():
        assert (VECTORS / name).read_bytes() == text.encode("utf-8"), (
            f"{name} differs from the Python reference: the device protocol changed; "
            "regenerate with clients/vectors/generate.py and bump the protocol version")


def test_vectors_stay_small() -> None:
    assert sum(p.stat().st_size for p in VECTORS.glob("*.json")) < 400_000


def _unavailable(what: str) -> NoReturn:
    if os.environ.get("DPFREQ_REQUIRE_NODE") == "1":
        pytest.fail(f"{what} (DPFREQ_REQUIRE_NODE=1)")
    pytest.skip(what)


def test_typescript_client_passes_its_node_tests() -> None:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        _unavailable("node/npm not on PATH: the TypeScript client's tests need Node >= 20")
    if not (JS / "node_modules" / ".bin" / "tsc").exists():
        _unavailable("clients/js has no devDependencies installed: run `npm ci` there")
    done = subprocess.run([npm, "test", "--silent"], cwd=JS, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "# fail 0" in done.stdout
    assert "# pass" in done.stdout
