"""Every Python code block of the documentation pages and the README runs as written.

Blocks of one page run in order in one namespace (a page is one session), in a fresh temporary
working directory, with warnings as errors. A block that needs what a test machine does not have
(a Spark cluster, a running server) is marked on the line before it with
``<!-- no-run: reason -->``; the reason is required, and such blocks are still compiled, so they
cannot hold syntax errors. The pages run through the functions the documentation build runs them
with (``docs/_ext/executed_examples.py``), which also shows their output and figures on the page:
what this test runs is what a reader sees.

Code blocks of every kind stay within :data:`MAX_CODE_COLUMNS` characters, the width the theme's
column shows without a scroll bar.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
PAGES = [p for p in PAGES if "_build" not in p.parts]
#: The widest code line the PyData theme's article column shows whole (at 1024 to 1920 pixels
#: wide, 14 px monospace: about 82 characters; one less for a margin).
MAX_CODE_COLUMNS = 80
_FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


def _examples() -> ModuleType:
    """``docs/_ext/executed_examples.py``, the build's example runner."""
    path = ROOT / "docs" / "_ext" / "executed_examples.py"
    spec = importlib.util.spec_from_file_location("executed_examples", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


examples = _examples()


def test_pages_have_blocks() -> None:
    assert any(examples.page_blocks(p.read_text(encoding="utf-8")) for p in PAGES)


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_code_runs(page: Path, tmp_path: Path) -> None:
    found = examples.page_blocks(page.read_text(encoding="utf-8"))
    if not found:
        pytest.skip("no python blocks")
    here = os.getcwd()
    outcomes = examples.run_page(found, tmp_path, page.name)
    assert len(outcomes) == len(found)
    assert all((o is None) == (b.no_run is not None) for o, b in zip(outcomes, found, strict=True))
    assert os.getcwd() == here  # the page's working directory is left again


def test_run_page_reports_output_figures_and_failures(tmp_path: Path) -> None:
    """The runner shows a block's stdout and the images it writes, and names the failing
    block, its line and the error (a warning counts as one)."""
    text = ("```python\nimport matplotlib.pyplot as plt\nprint('hi')\n"
            "plt.plot([1, 2]); plt.savefig('a.png')\n```\n"
            "<!-- no-run: needs a cluster -->\n```python\nraise SystemExit\n```\n"
            "```python\nprint(1)\n```\n")
    first, skipped, last = examples.run_page(examples.page_blocks(text), tmp_path, "p.md")
    assert first.stdout == "hi\n"
    assert [f.name for f in first.figures] == ["a.png"]
    assert skipped is None
    assert last.stdout == "1\n"
    assert last.figures == ()  # a.png was not written again
    failing = "```python\nx = 1\n\nimport warnings\nwarnings.warn('careful')\n```\n"
    with pytest.raises(examples.ExampleError, match=r"p\.md\[block 0\], line 4: UserWarning"):
        examples.run_page(examples.page_blocks(failing), tmp_path, "p.md")
    unexplained = "<!-- no-run: -->\n```python\npass\n```\n"
    with pytest.raises(examples.ExampleError, match="needs a reason"):
        examples.run_page(examples.page_blocks(unexplained), tmp_path, "p.md")


def code_lines(page: Path) -> list[tuple[int, str, str]]:
    """Every line inside a fenced code block of a page: (line number, block's info, line).
    Directives (``{toctree}``, ``{eval-rst}``) are not code."""
    out: list[tuple[int, str, str]] = []
    fence: str | None = None
    info = ""
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        m = _FENCE.match(line.strip())
        if fence is None:
            if m:
                fence, info = m.group("fence"), m.group("info").strip()
        elif m and m.group("fence").startswith(fence) and not m.group("info").strip():
            fence = None
        elif not info.startswith("{"):
            out.append((number, info, line))
    return out


@pytest.mark.parametrize("page", PAGES[:-1], ids=[str(p.relative_to(ROOT)) for p in PAGES[:-1]])
def test_code_lines_fit_the_column(page: Path) -> None:
    long = [f"{page.name}:{n} ({info or 'text'}, {len(line)} characters)"
            for n, info, line in code_lines(page) if len(line) > MAX_CODE_COLUMNS]
    assert not long, f"code lines wider than {MAX_CODE_COLUMNS} characters: {long}"


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
    started = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    for step in command.split(" && ")[2:]:  # the same steps, one per line there
        assert step in started
    setup = (ROOT / "scripts" / "test-setup").read_text(encoding="utf-8")
    for needed in ("pip install -q -e '.[test,spark,server,docs,dev,fast]'", "npm ci",
                   "chromium", "postgresql", "skipped:"):
        assert needed in setup
