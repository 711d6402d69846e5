"""`dpfreq reach`: private reach and k+ reach over the window families the user asks for.

Mirrors :func:`dpfreq.windows.release_window_counts`; formatting only. It takes the options of
`dpfreq plan reach` (:mod:`dpfreq.cli.reach_options`), prints every family it spent budget on
and nothing else, and dispatches ``dpfreq reach query SAVED ...`` to
:mod:`dpfreq.cli.reach_query` (answers from a saved release: post-processing, no budget).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import click
import numpy as np

import dpfreq.cli._common as shared
from dpfreq._validate import message
from dpfreq.cli.grouped import (
    capping_option,
    echo_group_tables,
    echo_grouped_head,
    group_options,
    noise_line,
)
from dpfreq.cli.reach_options import reach_parameters, reach_public_kwargs
from dpfreq.cli.reach_query import command as query_command
from dpfreq.cli.reach_table import format_table, header_lines, row_indices
from dpfreq.cli.row_rules import null_group_hint, null_group_option, rows_kept
from dpfreq.errors import DataError, ParameterError
from dpfreq.windows import WindowCountsRelease, release_window_counts

if TYPE_CHECKING:
    from dpfreq.budget import BudgetAccountant

__all__ = ["command", "emit_grouped_reach", "format_table", "row_indices"]


class _ReachCommand(shared.RoutedCommand):
    """`dpfreq reach FILE ...`; ``dpfreq reach query ...`` runs the query command instead."""

    routes: ClassVar[dict[str, click.Command]] = {"query": query_command}


@click.command(name="reach", cls=_ReachCommand)
@click.argument("file", type=shared.INPUT_FILE)
@click.option("--item", required=True, help="Column naming the item (user) of each event.")
@click.option("--time", "time_col", required=True, help="Column with the event time.")
@click.option("--time-unit", type=click.Choice(["s", "ms", "us", "ns"]), default=None,
              help="An integer --time column holds epochs in this unit (with --start/--end/"
                   "--period); without it integers are periods 1..T (--horizon).")
@click.option("--timezone", default="UTC", show_default=True, metavar="ZONE",
              help="IANA zone of --start/--end and of the period boundaries: each event's "
                   "instant is bucketed by its wall-clock time in ZONE (a daily period starts "
                   "at local midnight; a DST day has 23 or 25 hours).")
@reach_parameters
@click.option("--out-of-range", type=click.Choice(["error", "drop"]), default="error",
              show_default=True, help="Events outside [start, end].")
@click.option("--rows", "rows_text", default="all", show_default=True, metavar="N|all",
              help="Print at most N periods (the first N-1 and the last), of each group with "
                   "--group.")
@click.option("--raw", is_flag=True, default=False,
              help="Print the released values with their interval half-widths (as in the "
                   "JSON) instead of the consistent view (non-increasing in k and clamped at "
                   "0: post-processing, no privacy cost).")
@shared.output_path_option("--save", "save_path",
                           help="Write the release with its SECRET state (key, exact summaries) "
                                "for `dpfreq reach query`; needed with --windows all.")
@shared.engine_option
@shared.output_options
@shared.seed_option
@shared.ledger_option
@group_options
@capping_option
@null_group_option
def command(file: str, item: str, time_col: str, time_unit: str | None, timezone: str,
            out_of_range: str, rows_text: str, raw: bool,
            save_path: str | None, engine: Any, json_out: str | None, plot_out: str | None,
            seed: int | None, accountant: BudgetAccountant | None = None, group: str | None = None,
            max_groups_per_item: int | str | None = None, groups_file: str | None = None,
            null_group: str = "error", capping_epsilon: float | None = None,
            **public: Any) -> None:
    """Private reach and k+ reach of an event log FILE over the window families asked for.

    Prints one row per period with the estimate of every family asked (and only those) and its
    per-answer interval (--raw: the released values ± their half-widths). Windows of a release
    saved with --save are answered later, without new budget, by `dpfreq reach query SAVED
    --window START:END --k K` (see `dpfreq reach query --help`).
    """
    shared.warn_if_seeded(seed)
    rows = shared.positive_or_none(rows_text, "--rows", ("all",), "an integer >= 1 or 'all'")
    kwargs = reach_public_kwargs(**public)
    kwargs.update(time_unit=time_unit, timezone=timezone)
    if save_path is not None and not Path(save_path).resolve().parent.is_dir():
        raise ParameterError(message("--save", "a file in an existing "
                                     "directory (checked before anything is spent)", save_path))
    if "all" in kwargs["windows"] and save_path is None:
        raise ParameterError(message(
            "--windows", "without 'all' unless --save is given (the all-windows "
            "family has no curve to print: its windows are asked later with `dpfreq reach "
            "query SAVED`; without a saved release its budget would be spent for nothing)",
            ",".join(public["window_text"])))
    if group is not None or max_groups_per_item is not None or groups_file is not None:
        kwargs.update(group=group, max_groups_per_item=max_groups_per_item, groups=groups_file,
                      capping_epsilon=capping_epsilon)
    elif capping_epsilon is not None:
        kwargs.update(capping_epsilon=capping_epsilon)  # refused without --group
    source = rows_kept(file, item=item, group=group, null_group=null_group, engine=engine)
    shared.warn_if_no_rows(file, "the reach")  # a header-only CSV or a Parquet without rows
    if shared.is_empty_csv(file):  # no row to type the columns by: an empty log of the axis
        source, engine = _empty_log(item, time_col, group, kwargs), "memory"
    try:
        rel = release_window_counts(source, item=item, time=time_col, out_of_range=out_of_range,
                                    rng=seed, engine=engine, accountant=accountant, **kwargs)
    except DataError as exc:
        raise null_group_hint(exc, group) from None
    if group is not None:  # one table for all groups
        return emit_grouped_reach(rel, json_out, plot_out, save_path, rows=rows, raw=raw)
    shared.emit_release(rel, json_out, plot_out)  # files first: `| head` loses nothing
    if save_path is not None:
        rel.save(save_path)
        click.echo(f"wrote {save_path} (SECRET: contains the noise key and exact summaries of "
                   "the log)", err=True)
    if json_out != "-":  # with --json - the output is the JSON alone
        _print_release(rel, save_path, rows, raw)


def emit_grouped_reach(rel: Any, json_out: str | None, plot_out: str | None,
                       save_path: str | None, *, rows: int | None = None,
                       raw: bool = False) -> None:
    """``dpfreq reach --group``: JSON / PNG / the saved release first (a reader that stops early
    loses nothing), then the header (the grouping, the simultaneous statement, the periods and
    structures, the same in every group, and the groups smaller than their noise) and every
    group's table (:func:`dpfreq.cli.reach_table.format_table`, ``rows`` periods of each),
    group column first."""
    shared.emit_release(rel, json_out, plot_out)
    if save_path is not None and not rel.groups:  # decided by the noise: not a failure
        click.echo(f"no group passed the private partition selection: nothing to save to "
                   f"{save_path} (no window of any group to query)", err=True)
    elif save_path is not None:
        rel.save(save_path)
        click.echo(f"wrote {save_path} (SECRET: contains every group's noise key and exact "
                   "summaries of the log)", err=True)
    if json_out == "-":  # with --json - the output is the JSON alone
        return
    first = rel[rel.groups[0]] if rel.groups else None
    conf = f", confidence {first.error.confidence:g}" if first is not None else ""
    echo_grouped_head(rel, f"# dpfreq reach: unit={rel.unit}, epsilon={rel.epsilon:g}, "
                      f"delta={rel.delta:g}, mechanism={rel.mechanism}"
                      + (f", T={first.horizon} periods" if first is not None else "") + conf,
                      False)
    if first is None:
        return
    for line in header_lines(first, save_path=save_path, raw=raw, methods_prefix="every group, "):
        click.echo(line)
    small = noise_line(rel)
    if small is not None:
        click.echo(small)
    if any(w != "all" for w in first.windows):
        echo_group_tables(rel, lambda r: format_table(r, rows, raw=raw), False)


def _empty_log(item: str, time: str, group: str | None, kwargs: dict[str, Any]
               ) -> dict[str, Any]:
    """The columns of an empty log, typed for the public time axis (integer periods or epochs,
    else timestamps): what a header-only CSV holds."""
    stamps = kwargs.get("horizon") is None and kwargs.get("time_unit") is None
    cols: dict[str, Any] = {item: np.array([], dtype=object),
                            time: np.array([], dtype="datetime64[us]" if stamps else np.int64)}
    if group is not None:
        cols[group] = np.array([], dtype=object)
    return cols


def _print_release(rel: WindowCountsRelease, save_path: str | None, rows: int | None,
                   raw: bool) -> None:
    click.echo(f"# dpfreq reach: unit={rel.unit} ({rel.relation}), epsilon={rel.epsilon:g}, "
               f"delta={rel.delta:g}, mechanism={rel.mechanism}, T={rel.horizon} periods, "
               f"confidence {rel.error.confidence:g}")
    for line in header_lines(rel, save_path=save_path, raw=raw):
        click.echo(line)
    if rel.error.vacuous:
        click.echo("# smaller than its noise: every released value's interval reaches 0 (the "
                   "release cannot tell these counts from 0; a larger epsilon or fewer "
                   "families and k would)")
    if any(w != "all" for w in rel.windows):
        click.echo(format_table(rel, rows, raw=raw))
