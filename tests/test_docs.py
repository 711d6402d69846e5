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
    """The Quickstart's test command installs the extras CI installs and runs CI's commands."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    command = readme[readme.index("# 2. install and run the tests") + 1].split(" && ")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    ci_install = next(line for line in ci if line.startswith("pip install -q -e "))
    assert command[2] == ci_install.replace("pip install -q -e ", "pip install -e ")
    assert command[3:] == ci[-1].split(" && ")
