"""Sphinx configuration of the dpfreq documentation.

Sphinx fits the project's numpydoc-format docstrings directly (autodoc reads them, napoleon
renders their sections, including the project's own ``Privacy`` section, which the numpydoc
extension would reject as unknown), MyST lets the pages be Markdown, and the PyData theme is the
one NumPy, SciPy and pandas users already know.

The API reference (``api.md``) is generated: the line ``<!-- api-reference -->`` of that page is
replaced, when Sphinx reads it, by one autosummary table per public module listing every name of
the module's ``__all__`` (:func:`api_listing`), so a new export is documented without editing the
page (``tests/test_docs_api.py`` checks the listing covers every ``__all__``).

Two local extensions live in ``_ext/``: ``executed_examples`` runs every page's Python blocks at
build time and shows under each block what it printed and the figures it saved (the test suite
runs them through the same functions, ``tests/test_docs.py``; every docstring example of a public
name runs in ``tests/test_public_docstrings.py``), so the pages cannot drift from the code; and
``offline_mathjax`` serves MathJax from the site itself, so formulas render without a network
(``tests/test_docs_build.py`` fails on any remote asset and checks the formulas in Chromium).
The site has three sections with their own navigation (``guide/index``, ``theory/index``,
``reference/index``). Build (offline, warnings as errors)::

    pip install -e '.[docs]' && sphinx-build -W --keep-going -b html docs docs/_build/html
"""

from __future__ import annotations

import importlib
import sys
import tempfile
from pathlib import Path
from typing import Any

import dpfreq

sys.path.insert(0, str(Path(__file__).resolve().parent / "_ext"))

project = "dpfreq"
author = "the dpfreq developers"
copyright = "2026, the dpfreq developers"
release = dpfreq.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "offline_mathjax",
    "executed_examples",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build"]
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3

autosummary_generate = True
# without nitpicky, the only ``ref.python`` warnings are ambiguous short names in docstring type
# fields (``counts`` is an attribute of several engine classes): not errors of the pages
suppress_warnings = ["ref.python"]
autodoc_typehints = "none"
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_custom_sections = [("Privacy", "notes_style")]

html_theme = "pydata_sphinx_theme"
html_title = "dpfreq"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}
html_static_path = ["_static"]
html_css_files = ["dpfreq.css"]
# one page without a section: no empty "Section Navigation" beside it
html_sidebars = {"index": [], "getting-started": []}

#: The public namespaces, in the order of the reference: the package, its four systems, then the
#: shared primitives. (``dpfreq.cli`` is documented by ``dpfreq --help``, ``dpfreq.server`` by
#: ``service.md``; modules without an entry here are internal.)
API_MODULES = ["dpfreq", "dpfreq.profile", "dpfreq.anonymized", "dpfreq.windows",
               "dpfreq.stream", "dpfreq.longitudinal", "dpfreq.grouped", "dpfreq.crossparty",
               "dpfreq.crossparty.shuffle", "dpfreq.engines", "dpfreq.budget", "dpfreq.ledger",
               "dpfreq.accounting",
               "dpfreq.release", "dpfreq.errors", "dpfreq.rng", "dpfreq.noise",
               "dpfreq.artifacts", "dpfreq.resign"]
API_MARKER = "<!-- api-reference -->"


def api_entries() -> dict[str, list[str]]:
    """Per public module, the names of its ``__all__`` to list there: every name, except one
    whose object an earlier module already lists (a re-export is documented once, where the
    user first meets it) and dunder names (``__version__``)."""
    listed: set[int] = set()
    out: dict[str, list[str]] = {}
    for name in API_MODULES:
        module = importlib.import_module(name)
        names = []
        for attr in module.__all__:
            obj = getattr(module, attr)
            if attr.startswith("__") or id(obj) in listed:
                continue
            if not isinstance(obj, int | float | str):  # constants are not shared by identity
                listed.add(id(obj))
            names.append(attr)
        out[name] = names
    return out


def api_listing() -> str:
    """The Markdown (with reST autosummary blocks) that replaces :data:`API_MARKER`."""
    parts = []
    for module, names in api_entries().items():
        if not names:
            continue
        rows = "\n".join(f"   {module}.{n}" for n in names)
        parts.append(f"## `{module}`\n\n```{{eval-rst}}\n.. autosummary::\n"
                     f"   :toctree: generated\n   :nosignatures:\n\n{rows}\n```\n")
    return "\n".join(parts)


def _fill_api_page(app: Any, docname: str, source: list[str]) -> None:
    if docname == "api":
        source[0] = source[0].replace(API_MARKER, api_listing())


def _write_api_stubs(app: Any) -> None:
    """The autosummary stub pages of the listing (autosummary's own pass reads the pages from
    disk, where ``api.md`` holds only the marker)."""
    from sphinx.ext.autosummary.generate import generate_autosummary_docs

    out = Path(app.srcdir) / "generated"
    current = {f"{m}.{n}.rst" for m, names in api_entries().items() for n in names}
    for stale in out.glob("*.rst"):  # a name no longer exported leaves no orphan page
        if stale.name not in current:
            stale.unlink()
    with tempfile.TemporaryDirectory() as tmp:
        listing = Path(tmp) / "api.md"
        listing.write_text(api_listing(), encoding="utf-8")
        generate_autosummary_docs([str(listing)], output_dir=out, app=app, overwrite=False)


def setup(app: Any) -> None:
    app.connect("builder-inited", _write_api_stubs)
    app.connect("source-read", _fill_api_page)
