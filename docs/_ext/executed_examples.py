"""Run every page's Python examples when the site is built, and show what they print and draw.

The ``python`` blocks of a page run in order in one namespace (a page is one session), in a fresh
temporary working directory, with warnings as errors — exactly as ``tests/test_docs.py`` runs
them, through the same functions (:func:`page_blocks`, :func:`run_page`). After each block the
page shows what the block printed (an "Output" block) and every image file the block wrote or
rewrote (``fig.savefig("reach.png")``), so the text, numbers and figures a reader sees are those
of the code above them in this version of dpfreq, and cannot drift from it.

A block that needs what a build machine does not have (a Spark cluster, a running server) is
marked on the line before it with ``<!-- no-run: reason -->`` (the reason is required); it is
compiled, so it cannot hold a syntax error, but not run, and shows no output.

An example that raises, or warns, fails the build (a Sphinx warning, an error under ``-W``).
Pages with examples are read again on every build, so an incremental build re-runs them against
the current library too. The figures are kept beside the doctrees (``<doctreedir>/_examples``)
and copied into the site's ``_images`` like any other image.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import shutil
import tempfile
import time
import traceback
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.util import logging

logger = logging.getLogger(__name__)

#: A ``python`` fence, with the optional ``<!-- no-run: reason -->`` on the line before it.
BLOCK = re.compile(r"(<!--\s*no-run:\s*(?P<why>[^>]*?)\s*-->\s*\n)?```python\n(?P<code>.*?)```",
                   re.DOTALL)
#: Files a block may write that the page shows as its figures.
FIGURE_SUFFIXES = (".png", ".svg", ".jpg", ".jpeg", ".gif")


@dataclass(frozen=True)
class Block:
    """One ``python`` block of a page: its code, and why it is not run (None: it is run)."""

    code: str
    no_run: str | None


@dataclass(frozen=True)
class Outcome:
    """What one block that ran printed, and the image files it wrote (paths in the page's
    working directory, in name order)."""

    stdout: str
    figures: tuple[Path, ...]


class ExampleError(Exception):
    """A page's example raised or warned: names the page, the block and the example's line."""


def page_blocks(text: str) -> list[Block]:
    """The ``python`` blocks of a page's Markdown source, in order."""
    return [Block(m.group("code"), m.group("why")) for m in BLOCK.finditer(text)]


def _images(root: Path) -> dict[Path, str]:
    return {p: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.suffix.lower() in FIGURE_SUFFIXES}


@contextlib.contextmanager
def _session(workdir: Path) -> Iterator[None]:
    """The page's working directory and a headless matplotlib backend, both restored after."""
    backend = os.environ.get("MPLBACKEND")
    os.environ["MPLBACKEND"] = "Agg"
    try:
        with contextlib.chdir(workdir):
            yield
    finally:
        if backend is None:
            os.environ.pop("MPLBACKEND", None)
        else:
            os.environ["MPLBACKEND"] = backend
        with contextlib.suppress(ImportError):
            import matplotlib.pyplot as plt

            plt.close("all")


def _where(exc: BaseException, filename: str) -> str:
    """The line of the example (not of the library) where ``exc`` was raised."""
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    return f", line {lines[-1]}" if lines else ""


def run_page(blocks: list[Block], workdir: Path, name: str) -> list[Outcome | None]:
    """Run a page's blocks in order in one namespace with ``workdir`` as working directory.

    Every block is compiled; a ``no-run`` block is not run (its outcome is None) and must give
    a reason. Warnings are errors, as in the test suite. Raises :class:`ExampleError` (chained
    to the example's own exception) when a block fails.
    """
    namespace: dict[str, object] = {"__name__": "__docs__"}
    outcomes: list[Outcome | None] = []
    with _session(workdir):
        for i, block in enumerate(blocks):
            filename = f"{name}[block {i}]"
            try:
                compiled = compile(block.code, filename, "exec")
            except SyntaxError as exc:
                raise ExampleError(f"{filename}: {exc}") from exc
            if block.no_run is not None:
                if not block.no_run.strip():
                    raise ExampleError(f"{filename}: a no-run block needs a reason")
                outcomes.append(None)
                continue
            before = _images(workdir)
            out = io.StringIO()
            try:
                with warnings.catch_warnings(), contextlib.redirect_stdout(out):
                    warnings.simplefilter("error")
                    exec(compiled, namespace)  # the documentation's own examples
            except Exception as exc:
                raise ExampleError(f"{filename}{_where(exc, filename)}: "
                                   f"{type(exc).__name__}: {exc}") from exc
            after = _images(workdir)
            written = tuple(p for p, digest in after.items() if before.get(p) != digest)
            outcomes.append(Outcome(out.getvalue(), written))
    return outcomes


# --- Sphinx: put each block's output and figures under it -------------------------------------

_SOURCES: dict[str, str] = {}


def _keep_source(app: Any, docname: str, source: list[str]) -> None:
    _SOURCES[docname] = source[0]


def output_node(text: str) -> nodes.Element:
    """What a block printed, as a plain (unhighlighted) block under it."""
    text = text.rstrip("\n")
    block = nodes.literal_block(text, text, language="none")
    return nodes.container("", block, classes=["dpfreq-output"])


def figure_node(uri: str, name: str) -> nodes.Element:
    """An image a block wrote, shown under it."""
    image = nodes.image(uri=uri, alt=f"{name}, drawn by the code above")
    return nodes.container("", image, classes=["dpfreq-figure"])


def _insert_outcomes(app: Any, doctree: nodes.document) -> None:
    docname = app.env.docname
    blocks = page_blocks(_SOURCES.get(docname, ""))
    if not any(b.no_run is None for b in blocks):
        return
    shown = [n for n in doctree.findall(nodes.literal_block) if n.get("language") == "python"]
    if len(shown) != len(blocks):
        logger.warning("%s: %d python blocks in the source, %d on the page: outputs not shown",
                       docname, len(blocks), len(shown), location=docname)
        return
    figures = Path(app.doctreedir) / "_examples" / docname
    shutil.rmtree(figures, ignore_errors=True)
    figures.mkdir(parents=True)
    page_dir = Path(app.env.doc2path(docname)).parent
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dpfreq-docs-") as tmp:
        try:
            outcomes = run_page(blocks, Path(tmp), docname)
        except ExampleError as exc:
            logger.warning("example failed: %s", exc, location=docname)
            return
        for i, (node, outcome) in enumerate(zip(shown, outcomes, strict=True)):
            if outcome is None:
                continue
            extra: list[nodes.Node] = []
            if outcome.stdout.strip():
                extra.append(output_node(outcome.stdout))
            for path in outcome.figures:
                # named after the page and block: unique among the site's images
                kept = figures / f"{docname.replace('/', '-')}-{i}-{path.name}"
                shutil.copyfile(path, kept)
                extra.append(figure_node(os.path.relpath(kept, page_dir), path.name))
            node.parent[node.parent.index(node) + 1:node.parent.index(node) + 1] = extra
    logger.info("ran the examples of %s in %.1f s", docname, time.perf_counter() - start)


def _always_reread(app: Any, env: Any, added: set[str], changed: set[str],
                   removed: set[str]) -> list[str]:
    """Pages with examples are read (and their examples run) on every build."""
    return [doc for doc in env.found_docs
            if any(b.no_run is None for b in page_blocks(_read(env, doc)))]


def _read(env: Any, docname: str) -> str:
    try:
        return Path(env.doc2path(docname)).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


def setup(app: Any) -> dict[str, Any]:
    app.connect("source-read", _keep_source)
    # before Sphinx's image collector (priority 500) reads the page's images
    app.connect("doctree-read", _insert_outcomes, priority=400)
    app.connect("env-get-outdated", _always_reread)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
