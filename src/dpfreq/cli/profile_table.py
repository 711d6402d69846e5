"""The text of a profile release on the command line: header lines, the table of ``t``
with intervals (long profiles compressed into ranges of ``t``), the vacuous warning, and the
``--rows`` option; shared by ``dpfreq profile``, ``dpfreq profile show`` and ``dpfreq demo``.
"""

from __future__ import annotations

from typing import Any

import click
import numpy as np

from dpfreq.cli.output import warn
from dpfreq.cli.spelling import spelled

__all__ = [
    "echo_profile",
    "format_header",
    "format_table",
    "parse_rows",
    "row_ranges",
    "rows_option",
    "vacuous_warning",
]


def row_ranges(max_count: int, rows: int | None) -> list[tuple[int, int]]:
    """Inclusive ranges ``[lo, hi]`` of ``t`` shown as table rows.

    ``t = 0..rows`` one per row, then ranges doubling in width up to ``n − 1``, then ``t = n``
    (the clamped count) on its own row. ``rows=None`` shows every ``t``.
    """
    n = max_count
    if rows is None or n <= rows + 1:
        return [(t, t) for t in range(n + 1)]
    out = [(t, t) for t in range(rows + 1)]
    lo, width = rows + 1, max(rows, 1)
    while lo <= n - 1:
        hi = min(lo + width - 1, n - 1)
        out.append((lo, hi))
        lo, width = hi + 1, 2 * width
    out.append((n, n))
    return out


def _label(lo: int, hi: int, max_count: int) -> str:
    if lo == hi == max_count and max_count >= 1:
        return f"{max_count}+"
    return str(lo) if lo == hi else f"{lo}-{hi}"


def format_table(rel: Any, rows: int | None = 20, truth: Any = None) -> str:
    """The release as a text table: t, private fraction, its interval, items, ± items, (true).

    Parameters
    ----------
    rel : ProfileRelease
        The release.
    rows : int or None
        Counts ``0..rows`` get a row each, larger counts are grouped (see :func:`row_ranges`);
        None lists every count.
    truth : array-like, optional
        The true profile, shown in a ``true`` column (simulations and demos only).
    """
    r = np.asarray(rel.value, dtype=np.float64)
    n, d = int(rel.max_count), int(rel.domain_size)
    cum = np.concatenate([[0.0], np.cumsum(r)])
    f_cum = None
    if truth is not None:
        f_cum = np.concatenate([[0.0], np.cumsum(np.asarray(truth, dtype=np.float64))])
    header = ["t", "fraction", "interval", "≈ items", "± items"]
    header += ["true"] if f_cum is not None else []
    table = [header]
    for lo, hi in row_ranges(n, rows):
        x = float(cum[hi + 1] - cum[lo])
        low, high = rel.sum_interval(lo, hi)
        half = max(x - low, high - x) * d
        row = [_label(lo, hi, n), f"{x:.6f}", f"[{low:.6f}, {high:.6f}]", f"{x * d:,.0f}",
               f"±{half:,.0f}"]
        if f_cum is not None:
            row.append(f"{float(f_cum[hi + 1] - f_cum[lo]):.6f}")
        table.append(row)
    width = [max(len(row[i]) for row in table) for i in range(len(header))]
    return "\n".join("  ".join(cell.rjust(w) for cell, w in zip(row, width, strict=True))
                     for row in table)


_UNIT_NOTE = {"event": "; an item with k rows is protected at k·ε"}


def _why(method: str, why: str) -> str:
    """The reason the method was chosen, without repeating the method's name."""
    head = f"{method}:"
    return why[len(head):].strip() if why.startswith(head) else why


def format_header(rel: Any, what: str) -> list[str]:
    """Comment lines (``# ...``) stating ε, δ, the unit of privacy, the mechanism and the error."""
    params = rel.mechanism_params
    noise = (f"on the count-of-counts ({params.get('layout')}, sensitivity "
             f"{params.get('sensitivity')})"
             if rel.method == "direct" else f"on each of d={rel.domain_size:,} item counts, "
             f"B={rel.B}")
    return [
        f"# dpfreq profile of {what} (engine {params.get('engine', '?')})",
        f"# epsilon={rel.epsilon:g}, delta={rel.delta:g} (pure ε-DP); unit of privacy: "
        f"{rel.unit} ({rel.relation}{_UNIT_NOTE.get(rel.unit, '')})",
        f"# mechanism {rel.mechanism}: exact discrete Laplace noise {noise}; counts clamped at "
        f"n={rel.max_count}; d={rel.domain_size:,}",
        f"# method {rel.method}" + (f": {_why(rel.method, str(params['why']))}"
                                    if params.get("why") else ""),
        f"# error: {spelled(rel.error.description)}",
        f"# interval: per-class interval at confidence {rel.error.confidence:g} (a row t = a-b: "
        "an interval for the sum of the classes a to b; --rows chooses the rows, --rows all "
        "one per class); ± items: its half-width in items; "
        f"t = {rel.max_count}+ counts items with {rel.max_count} or more rows",
    ]


def vacuous_warning(rel: Any) -> str | None:
    """The warning (:func:`dpfreq.cli.output.warn`) when the release's error statement is
    vacuous, else None."""
    if not rel.error.vacuous:
        return None
    tail = rel.error.description.split("This statement is vacuous:")[-1].strip()
    return f"the error statement is vacuous: {tail}"


def parse_rows(text: str) -> int | None:
    """``--rows``: an integer >= 0 or ``all``."""
    if text.strip().lower() == "all":
        return None
    try:
        rows = int(text)
    except ValueError:
        rows = -1
    if rows < 0:
        raise click.BadParameter(f"must be an integer >= 0 or 'all'; got {text!r}",
                                 param_hint="--rows")
    return rows


def rows_option(f: Any) -> Any:
    return click.option(
        "--rows", "rows_text", default="20", show_default=True, metavar="N|all",
        help="Show t = 0..N one per row and group larger t into ranges; 'all' lists every t.",
    )(f)


def echo_profile(rel: Any, what: str, rows: int | None, to_err: bool,
                 truth: Any = None) -> None:
    """Header and table (on stderr when ``to_err``: stdout holds a document), then the vacuous
    warning (stderr)."""
    for line in format_header(rel, what):
        click.echo(line, err=to_err)
    click.echo(format_table(rel, rows, truth=truth), err=to_err)
    warning = vacuous_warning(rel)
    if warning is not None:
        warn(warning)
