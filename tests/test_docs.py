"""Every Python code block of the documentation pages and the README runs as written.

Blocks of one page run in order in one namespace (a page is one session), in a fresh temporary
working directory. A block that needs what a test machine does not have (a Spark cluster, a
running server) is marked on the line before it with ``<!-- no-run: reason -->``; the reason is
required, and such blocks are still compiled, so they cannot hold syntax errors.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
PAGES = [p for p in PAGES if "_build" not in p.parts]
_BLOCK = re.compile(r"(<!--\s*no-run:\s*(?P<why>[^>]*?)\s*-->\s*\n)?```python\n(?P<code>.*?)```",
                    re.DOTALL)


def blocks(page: Path) -> list[tuple[str, str | None]]:
    """The ``python`` blocks of a page: (code, reason not to run or None)."""
    text = page.read_text(encoding="utf-8")
    return [(m.group("code"), m.group("why")) for m in _BLOCK.finditer(text)]


def test_pages_have_blocks() -> None:
    assert any(blocks(p) for p in PAGES)


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_code_runs(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    found = blocks(page)
    if not found:
        pytest.skip("no python blocks")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    namespace: dict[str, object] = {"__name__": "__docs__"}
    ran = 0
    for i, (code, why) in enumerate(found):
        compiled = compile(code, f"{page.name}[block {i}]", "exec")
        if why is not None:
            assert why.strip(), f"{page.name} block {i}: no-run needs a reason"
            continue
        exec(compiled, namespace)  # the documentation's own examples
        ran += 1
    assert ran or all(why for _, why in found)
    assert os.getcwd() == str(tmp_path)


def test_readme_test_command_is_what_ci_runs() -> None:
    """The Quickstart's test command, after making and activating a virtual environment, is
    CI's last line word for word: scripts/test-setup (which installs the extras, runs npm ci in
    clients/js and installs or names Node, Chromium, PostgreSQL and Java), lint, types, the
    suite. The getting-started page gives the same command."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    command = readme[readme.index("# 2. install and run the tests") + 1]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert command.split(" && ")[:2] == ["python3 -m venv .venv", ". .venv/bin/activate"]
    assert command.split(" && ")[2:] == ci[-1].split(" && ")
    assert ci[-1].startswith("scripts/test-setup && ")
    assert "python -m pytest -q -n 2 --dist loadgroup" in ci[-1]
    assert command in (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    setup = (ROOT / "scripts" / "test-setup").read_text(encoding="utf-8")
    for needed in ("pip install -q -e '.[test,spark,server,docs,dev,fast]'", "npm ci",
                   "chromium", "postgresql", "skipped:"):
        assert needed in setup
