"""MathJax served by the built site itself, so formulas render without a network.

Sphinx's ``mathjax`` extension loads MathJax from a CDN by default; a reader behind a restricted
network (a DP team's analytics environment, a laptop on a train) then sees raw TeX. This
extension copies MathJax 3 (the files of the ``sphinx-mathjax-offline`` package from PyPI, part
of the ``docs`` extra) into ``_static/mathjax`` of the HTML output and points ``mathjax_path`` at
it: the CommonHTML output (``tex-chtml.js``) with its web fonts, the TeX extensions it loads on
demand, and the menu with its accessibility and speech components. The combined files of the
other outputs (SVG, MathML input) are left out. ``tests/test_docs_build.py`` checks that no built
page asks for a remote script, stylesheet or font, and that the formulas render in Chromium.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from sphinx.errors import ExtensionError
from sphinx.util.fileutil import copy_asset

#: The distribution (and top-level folder) that ships MathJax's files.
PACKAGE = "sphinx-mathjax-offline"
#: What of MathJax the site needs, relative to its folder: the loader-free combined component
#: the pages load, and the folders it (or its menu) loads further components from.
ENTRY = "tex-chtml.js"
FOLDERS = ("input", "output/chtml", "ui", "a11y", "adaptors", "sre")


def mathjax_source() -> Path:
    """The folder of MathJax's files in the installed ``sphinx-mathjax-offline`` package."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ExtensionError(f"the docs need MathJax from the {PACKAGE} package: "
                             "pip install -e '.[docs]'")
    return Path(next(iter(spec.submodule_search_locations))) / "static" / "mathjax"


def _copy_mathjax(app: Any, exc: BaseException | None) -> None:
    if exc is not None or app.builder.format != "html":
        return
    source = mathjax_source()
    target = Path(app.outdir) / "_static" / "mathjax"
    target.mkdir(parents=True, exist_ok=True)
    copy_asset(source / ENTRY, target)
    for folder in FOLDERS:
        copy_asset(source / folder, target / folder)


def setup(app: Any) -> dict[str, Any]:
    app.setup_extension("sphinx.ext.mathjax")
    mathjax_source()  # fail at start, with the install command, when the package is missing
    app.config.mathjax_path = f"mathjax/{ENTRY}"
    app.connect("build-finished", _copy_mathjax)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
