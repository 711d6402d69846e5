"""`dpfreq profile`: the ε-DP profile (frequency of frequencies) of an item column.

Mirrors :func:`dpfreq.profile.release_profile`; formatting only. The table shows ``t``, the
private fraction of the domain with count ``t``, its interval at the stated confidence, the
estimate in items and the interval's half-width in items; long profiles are compressed into
ranges of ``t`` (``--rows``, :mod:`dpfreq.cli.profile_table`). ``--save`` writes the release
(:meth:`dpfreq.profile.ProfileRelease.save`), which ``dpfreq profile show SAVED``
(:mod:`dpfreq.cli.profile_show`) shows again without spending anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import click

import dpfreq.cli._common as shared
from dpfreq._validate import MAX_COUNT_MINIMUM, message
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
from dpfreq.cli.output import rescue_release
from dpfreq.cli.profile_show import command as show_command
from dpfreq.cli.profile_table import (
    echo_profile,
    format_header,
    format_table,
    parse_rows,
    row_ranges,
    rows_option,
    vacuous_warning,
)
from dpfreq.cli.row_rules import null_group_hint, null_group_option, rows_kept, time_range_options
from dpfreq.errors import DataError, ParameterError

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
    "save_profile",
    "vacuous_warning",
]



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
    echo_profile(rel, what, rows, json_out == "-", truth=truth)


def save_profile(rel: Any, save_path: str) -> None:
    """Write the release with :meth:`~dpfreq.profile.ProfileRelease.save`; if that fails (the
    release is drawn and charged), write the same sealed text to a fallback file, which
    ``dpfreq profile show`` reads, and raise the one-line error saying where."""
    from dpfreq.profile.saved import saved_json

    try:
        rel.save(save_path)
    except (OSError, DataError) as exc:
        raise rescue_release(saved_json(rel), exc, failed=f"--save {save_path}",
                             same=rel.to_json()) from None
    click.echo(f"wrote {save_path} (the release's noisy measurement and public parameters; "
               "`dpfreq profile show` reads it)", err=True)


def _check_save(save_path: str | None, group: str | None, json_out: str | None,
                plot_out: str | None) -> None:
    """Refuse a --save that cannot be honoured, before anything is read or spent."""
    if save_path is None:
        return
    if group is not None:
        raise ParameterError(message("--save", "given without --group (a grouped profile is "
                                     "saved by --json)", save_path))
    if save_path in (json_out, plot_out):
        raise ParameterError(message("--save", "another file than --json and --plot",
                                     save_path))


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


class _ProfileCommand(shared.RoutedCommand):
    """`dpfreq profile FILE ...`; ``dpfreq profile show ...`` runs the show command instead."""

    routes: ClassVar[dict[str, click.Command]] = {"show": show_command}


@click.command(name="profile", cls=_ProfileCommand)
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
@shared.output_path_option("--save", "save_path",
                           help="Write the release (its noisy measurement and public "
                                "parameters, sealed; signed when DPFREQ_ARTIFACT_KEY is set) to "
                                "FILE, for `dpfreq profile show FILE`. Not with --group.")
@shared.seed_option
@shared.ledger_option
def command(file: str, item: str, domain_size: int, max_count: int, epsilon: float, unit: str,
            norm: str, confidence: float, method: str, rows_text: str, engine: Any,
            json_out: str | None, plot_out: str | None, seed: int | None,
            save_path: str | None = None,
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
    range count (the range of dpfreq reach with the same options). --save writes the release
    for `dpfreq profile show SAVED`, which shows it again without spending anything.
    """
    from dpfreq.profile import release_profile

    _check_save(save_path, group, json_out, plot_out)
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
    shared.emit_release(rel, json_out, plot_out)  # files first: `| head` loses nothing
    if save_path is not None:
        save_profile(rel, save_path)
    echo_profile(rel, what, rows, json_out == "-")
