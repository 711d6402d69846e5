"""`dpfreq profile`: the ε-DP profile (frequency of frequencies) of an item column.

Mirrors :func:`dpfreq.profile.release_profile`; formatting only. The table shows ``t``, the
private fraction of the domain with count ``t``, its interval at the stated confidence, the
estimate in items and the interval's half-width in items; long profiles are compressed into
ranges of ``t`` (``--rows``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click
import numpy as np

import dpfreq.cli._common as shared
from dpfreq._validate import MAX_COUNT_MINIMUM
from dpfreq.cli.grouped import (
    capping_option,
    delta_option,
    echo_group_tables,
    echo_grouped_head,
    group_options,
    groups_line,
    noise_line,
    without_coverage,
)
from dpfreq.cli.row_rules import null_group_hint, null_group_option, rows_kept, time_range_options
from dpfreq.errors import DataError

if TYPE_CHECKING:
    from dpfreq.budget import BudgetAccountant

__all__ = [
    "command",
    "emit_grouped_profile",
    "emit_profile",
    "format_header",
    "format_table",
    "parse_rows",
    "profile_options",
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
        f"# method {rel.method}: {_why(rel.method, str(params.get('why', '')))}",
        f"# error: {rel.error.description}",
        f"# interval: per-class interval at confidence {rel.error.confidence:g} (rows t = a-b: "
        "an interval for the group's sum, see ProfileRelease.sum_interval); ± items: its "
        "half-width in items; "
        f"t = {rel.max_count}+ counts items with {rel.max_count} or more rows",
    ]


def vacuous_warning(rel: Any) -> str | None:
    """One line for stderr when the release's error statement is vacuous, else None."""
    if not rel.error.vacuous:
        return None
    tail = rel.error.description.split("This statement is vacuous:")[-1].strip()
    return f"warning: the error statement is vacuous: {tail}"


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


def profile_options(f: Any) -> Any:
    """``--method``, ``--confidence`` and ``--norm`` (shared with ``dpfreq demo``)."""
    f = click.option("--method", type=click.Choice(["auto", "direct", "fft", "mle"]),
                     default="auto", show_default=True,
                     help="direct: noisy count-of-counts (item or event level); fft/mle: the Wu "
                          "& Pagh sketch (event level only); auto: direct for this one-shot "
                          "release.")(f)
    f = click.option("--confidence", type=float, default=0.95, show_default=True,
                     help="Confidence level of the intervals and the band.")(f)
    return click.option("--norm", type=click.Choice(["1", "2", "inf"]), default="1",
                        show_default=True,
                        help="Norm the fft reconstruction optimizes (ignored by direct).")(f)


def emit_profile(rel: Any, what: str, rows: int | None, json_out: str | None,
                 plot_out: str | None, truth: Any = None) -> None:
    """The JSON / PNG outputs first, then header, table and the vacuous warning (stderr).

    Files come first so that a reader who stops early (``| head``) loses nothing.
    """
    shared.emit_release(rel, json_out, plot_out)
    to_err = json_out == "-"
    for line in format_header(rel, what):
        click.echo(line, err=to_err)
    click.echo(format_table(rel, rows, truth=truth), err=to_err)
    warning = vacuous_warning(rel)
    if warning is not None:
        click.echo(warning, err=True)


def emit_grouped_profile(rel: Any, what: str, rows: int | None, json_out: str | None,
                         plot_out: str | None) -> None:
    """A grouped profile: JSON / PNG first (a reader that stops early loses nothing), then the
    profile header of the first group, the grouping, the simultaneous statement and one table
    per group (group column first)."""
    shared.emit_release(rel, json_out, plot_out)
    to_err = json_out == "-"
    if not rel.groups:
        click.echo(groups_line(rel), err=to_err)
        return
    first = rel[rel.groups[0]]
    head = format_header(first, what)
    echo_grouped_head(rel, f"{head[0]}\n# unit of privacy: {rel.unit} ({first.relation})",
                      to_err)
    for line in head[2:]:
        click.echo(without_coverage(rel, line), err=to_err)
    small = noise_line(rel)
    if small is not None:
        click.echo(small, err=to_err)
    echo_group_tables(rel, lambda r: format_table(r, rows), to_err)


@click.command(name="profile")
@click.argument("file", type=shared.INPUT_FILE)
@click.option("--item", required=True, help="Column naming the item (e.g. user) of each row.")
@click.option("--domain-size", type=shared.COUNT, required=True,
              help="Public number d of potential items (never taken from the data).")
@click.option("--max-count", type=shared.IntegerType(minimum=MAX_COUNT_MINIMUM), required=True,
              help=f"Public count cap n >= {MAX_COUNT_MINIMUM}: counts above n are clamped to n.")
@click.option("--epsilon", type=float, required=True, help="Privacy parameter ε (pure ε-DP).")
@click.option("--unit", type=click.Choice(["event", "item", "item_replace"]), required=True,
              help="Unit of privacy (no default): event (add/remove one row), item (add/remove "
                   "one item with all its rows) or item_replace (replace one item's rows).")
@profile_options
@group_options
@capping_option
@null_group_option
@delta_option
@time_range_options
@rows_option
@shared.engine_option
@shared.output_options
@shared.seed_option
@shared.ledger_option
def command(file: str, item: str, domain_size: int, max_count: int, epsilon: float, unit: str,
            norm: str, confidence: float, method: str, rows_text: str, engine: Any,
            json_out: str | None, plot_out: str | None, seed: int | None,
            group: str | None = None, max_groups_per_item: int | str | None = None,
            groups_file: str | None = None, delta: float | None = None,
            null_group: str = "error", time_col: str | None = None, start: str | None = None,
            end: str | None = None, period: str = "1d", timezone: str = "UTC",
            time_unit: str | None = None, accountant: BudgetAccountant | None = None,
            capping_epsilon: float | None = None) -> None:
    """Private profile of the item column of FILE (CSV or Parquet file, or Parquet directory).

    The profile is the fraction of the d domain items occurring exactly t times, t = 0..n
    (items never seen count at t = 0). Prints the table with per-class intervals; --json and
    --plot write the release. With --time, --start and --end only the rows in that public
    range count (the range of dpfreq reach with the same options).
    """
    from dpfreq.profile import release_profile

    shared.warn_if_seeded(seed)
    rows = parse_rows(rows_text)
    source = rows_kept(file, item=item, group=group, null_group=null_group, engine=engine,
                       time=time_col, start=start, end=end,
                       period=period, timezone=timezone, time_unit=time_unit)
    shared.warn_if_no_rows(file, "the profile")
    what = f"column {item!r} in {file}"
    if start is not None:
        what += (f", rows with {time_col} from {start} to {end} ({timezone}, whole periods of "
                 f"{period})")
    if null_group == "drop":
        what += f", rows with a {group}"
    try:
        rel = release_profile(source, item=item, domain_size=domain_size, max_count=max_count,
                              epsilon=epsilon, unit=unit, method=method, confidence=confidence,
                              norm=norm, engine=engine, rng=seed, accountant=accountant,
                              group=group, max_groups_per_item=max_groups_per_item,
                              groups=groups_file, delta=delta, capping_epsilon=capping_epsilon)
    except DataError as exc:
        raise null_group_hint(exc, group) from None
    if group is not None:
        emit_grouped_profile(rel, what, rows, json_out, plot_out)
        return
    emit_profile(rel, what, rows, json_out, plot_out)
