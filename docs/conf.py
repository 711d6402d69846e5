"""Sphinx configuration of the dpfreq documentation.

Sphinx fits the project's numpydoc-format docstrings directly (autodoc reads them, napoleon
renders their sections, including the project's own ``Privacy`` section, which the numpydoc
extension would reject as unknown), MyST lets the pages be Markdown, and the PyData theme is the one NumPy,
SciPy and pandas users already know. Every code block of the pages is executed by the test suite
(``tests/test_docs.py``) and every docstring example by ``--doctest-modules``, so the pages cannot
drift from the code. Build (offline, warnings as errors)::

    pip install -e '.[docs]' && sphinx-build -W --keep-going -b html docs docs/_build/html
"""

from __future__ import annotations

import dpfreq

project = "dpfreq"
author = "the dpfreq developers"
copyright = "2026, the dpfreq developers"  # noqa: A001 - Sphinx's name
release = dpfreq.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.napoleon",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build"]
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3

autosummary_generate = True
autodoc_typehints = "none"
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_custom_sections = [("Privacy", "notes_style")]

html_theme = "pydata_sphinx_theme"
html_title = "dpfreq"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}
