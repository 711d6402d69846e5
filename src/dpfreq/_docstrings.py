"""Shared numpydoc fragments: one text for blocks that several docstrings state identically.

A docstring names a fragment on a line of its own, ``[[name]]``; :func:`fill_doc` replaces that
line by the fragment, indented like the marker. The filled text is the ordinary ``__doc__``
that ``help()``, doctest and Sphinx read.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from typing import TypeVar

__all__ = ["PLOT_SECTIONS", "fill_doc"]

T = TypeVar("T")

#: The numpydoc sections of a ``plot(ax=None)`` method that takes no other argument.
PLOT_SECTIONS = """Parameters
----------
ax : matplotlib axes, optional
    Where to draw; a new Agg figure when omitted.

Returns
-------
matplotlib axes"""

_MARKER = re.compile(r"^([ \t]*)\[\[(\w+)\]\][ \t]*$", re.MULTILINE)


def fill_doc(**fragments: str) -> Callable[[T], T]:
    """Decorator: replace each ``[[name]]`` line of the docstring by ``fragments[name]``.

    Parameters
    ----------
    **fragments : str
        Text of each fragment (its own indentation is removed, then the marker's added).

    Returns
    -------
    callable
        The decorator; it returns the object it decorates, with ``__doc__`` filled.

    Raises
    ------
    KeyError
        If a marker names no fragment (at import time, so a typo cannot ship).

    Examples
    --------
    >>> @fill_doc(x="x : int\\n    A number.")
    ... def f(x):
    ...     '''Parameters
    ...     ----------
    ...     [[x]]
    ...     '''
    >>> print(f.__doc__.strip())
    Parameters
        ----------
        x : int
            A number.
    """

    def decorate(obj: T) -> T:
        doc = obj.__doc__
        if doc:  # None under python -OO

            def fragment(m: re.Match[str]) -> str:
                text = textwrap.dedent(fragments[m.group(2)]).strip("\n")
                return textwrap.indent(text, m.group(1))

            obj.__doc__ = _MARKER.sub(fragment, doc)
        return obj

    return decorate
