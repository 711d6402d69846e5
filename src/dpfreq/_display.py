"""Short text and HTML summaries of releases (``repr`` and notebooks' ``_repr_html_``).

A release holds arrays of any length and long descriptions; its summary names the kind of
release, summarises each value by its shape and first entries, and states ε/δ, the unit, the
mechanism and the confidence in a few lines. Every result class builds its rows with these
helpers, so all of them look alike in a terminal and in a notebook.
"""

from __future__ import annotations

import dataclasses
import html
import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

__all__ = ["PlanSummary", "brief", "error_text", "html_table", "privacy_text", "text_block"]

#: Entries of an array shown before the ellipsis.
SHOWN = 4
#: Longest text of one summary row before it is cut with an ellipsis.
ROW_CHARS = 100


def _number(x: Any) -> str:
    if isinstance(x, bool | np.bool_):
        return str(bool(x))
    if isinstance(x, int | np.integer):
        return str(int(x))
    if isinstance(x, Fraction):
        return f"{x.numerator}/{x.denominator}"
    if isinstance(x, float | np.floating):
        return f"{float(x):.4g}"
    return repr(x)


def cut(text: str, limit: int = ROW_CHARS) -> str:
    """``text`` on one line, cut at ``limit`` characters with an ellipsis."""
    one = " ".join(str(text).split())
    return one if len(one) <= limit else one[:limit - 1] + "…"


def brief(value: Any) -> str:
    """A one-line summary of ``value``: arrays by shape, dtype and first entries.

    Examples
    --------
    >>> brief(np.arange(10))
    'int64 array (10,): [0, 1, 2, 3, …]'
    >>> brief({"n": 3, "x": np.array([0.5, 0.25])})
    'n=3, x=float64 array (2,): [0.5, 0.25]'
    """
    if isinstance(value, np.ndarray):
        flat = value.ravel()
        head = ", ".join(_number(v) for v in flat[:SHOWN])
        more = ", …" if flat.size > SHOWN else ""
        return f"{value.dtype} array {value.shape}: [{head}{more}]"
    if isinstance(value, Mapping):
        return cut(", ".join(f"{k}={brief(v)}" for k, v in value.items()), 2 * ROW_CHARS)
    if isinstance(value, Sequence) and not isinstance(value, str):
        head = ", ".join(brief(v) for v in list(value)[:SHOWN])
        more = f", … ({len(value)} entries)" if len(value) > SHOWN else ""
        return cut(f"[{head}{more}]")
    if isinstance(value, str):
        return cut(value)
    return _number(value)


def privacy_text(epsilon: float, delta: float, unit: str) -> str:
    """``ε=…, δ=…, unit=…`` (δ only when it is not 0)."""
    eps = "∞" if math.isinf(epsilon) else f"{epsilon:.6g}"
    delta_text = f", δ={delta:.3g}" if delta else ""
    return f"ε={eps}{delta_text}, unit={unit}"


def error_text(error: Any) -> str:
    """The kind, confidence and size of an :class:`~dpfreq.release.ErrorStatement`."""
    if error.kind == "interval":
        band = " and a simultaneous band" if error.band_lower is not None else ""
        parts = [f"per-estimate intervals{band}"]
    elif error.kind == "bound":
        parts = [f"bound {brief(error.value)}"]
    else:
        parts = [f"standard deviation {brief(error.value)}"]
    if error.confidence is not None:
        parts.append(f"confidence {error.confidence:.6g}")
    if error.vacuous:
        parts.append("VACUOUS")
    return ", ".join(parts)


def text_block(title: str, rows: Sequence[tuple[str, str]]) -> str:
    """``title`` and one indented ``label  text`` line per row (at most ``ROW_CHARS + 4``
    characters)."""
    width = max((len(label) for label, _ in rows), default=0)
    return "\n".join([title, *(f"  {label:<{width}}  {cut(text, ROW_CHARS - width)}"
                               for label, text in rows)])


def html_table(title: str, rows: Sequence[tuple[str, str]]) -> str:
    """A small HTML table: the title as caption, one row per ``(label, text)``."""
    body = "".join(f'<tr><th style="text-align:left">{html.escape(label)}</th>'
                   f'<td style="text-align:left">{html.escape(cut(text))}</td></tr>'
                   for label, text in rows)
    return (f'<table><caption style="text-align:left"><b>{html.escape(title)}</b></caption>'
            f"<tbody>{body}</tbody></table>")


class PlanSummary:
    """The display of a plan (``repr`` and notebooks): its name, then its own ``lines()`` when
    it has them (what ``dpfreq plan`` prints), else one row per public field that is set,
    arrays by shape and first entries — never the one-line dump of a dataclass."""

    def _display_title(self) -> str:
        return f"{type(self).__name__} (from public parameters: no data read, nothing spent)"

    def _display_rows(self) -> list[tuple[str, str]]:
        if not dataclasses.is_dataclass(self):  # pragma: no cover - every plan is one
            return []
        def shown(value: Any) -> str:
            if isinstance(value, PlanSummary):  # a nested plan: its kind, see its own repr
                return f"{type(value).__name__} ({value._privacy() or 'see its repr'})"
            return brief(value)

        return [(f.name, shown(getattr(self, f.name))) for f in dataclasses.fields(self)
                if f.repr and not f.name.startswith("_") and getattr(self, f.name) is not None]

    def _privacy(self) -> str:
        """``ε=…, δ=…, unit=…`` of the plan ("" when it has no ε or unit)."""
        eps, unit = getattr(self, "epsilon", None), getattr(self, "unit", None)
        if not isinstance(eps, int | float) or not isinstance(unit, str):
            return ""
        return privacy_text(float(eps), float(getattr(self, "delta", 0.0) or 0.0), unit)

    def __repr__(self) -> str:
        lines = getattr(self, "lines", None)
        if callable(lines):
            head = [f"  {self._privacy()}"] if self._privacy() else []
            return "\n".join([self._display_title(), *head,
                              *(f"  {cut(line, 2 * ROW_CHARS)}" for line in lines())])
        return text_block(self._display_title(), self._display_rows())

    def _repr_html_(self) -> str:
        lines = getattr(self, "lines", None)
        rows = ([("", line) for line in lines()] if callable(lines)
                else self._display_rows())
        return html_table(self._display_title(), rows)
