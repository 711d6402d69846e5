"""`dpfreq reach`: private reach and k+ reach over the window families the user asks for.

Mirrors :func:`dpfreq.windows.release_window_counts`; formatting only. It takes the options of
`dpfreq plan reach` (:mod:`dpfreq.cli.reach_options`), prints every family it spent budget on
and nothing else, and dispatches ``dpfreq reach query SAVED ...`` to
:mod:`dpfreq.cli.reach_query` (answers from a saved release: post-processing, no budget).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import numpy as np

import dpfreq.cli._common as shared
from dpfreq._validate import message
from dpfreq.cli.grouped import emit_grouped_reach, group_options
from dpfreq.cli.reach_options import reach_parameters, reach_public_kwargs
from dpfreq.cli.reach_query import command as query_command
from dpfreq.cli.reach_query import period_label
from dpfreq.errors import ParameterError
from dpfreq.windows import WindowCountsRelease, release_window_counts

if TYPE_CHECKING:
    from dpfreq.budget import BudgetAccountant

__all__ = ["command", "format_table", "row_indices"]


def _predicted(rec: dict[str, Any]) -> float:
    """Predicted RMSE of the chosen structure (the smallest of the candidates)."""
    return float(min(rec["predicted_rmse"].values()))


def _label(w: Any) -> str:
    """The family's name in the release's value, JSON and plan: ``fixed(W=…)`` for a width."""
    return w if isinstance(w, str) else f"fixed(W={w})"


def _curve_order(windows: tuple[Any, ...]) -> list[Any]:
    """The families with values to print: cumulative, the widths (ascending), total."""
    widths = sorted(w for w in windows if not isinstance(w, str))
    return ([w for w in ("cumulative",) if w in windows] + widths
            + [w for w in ("total",) if w in windows])


def row_indices(horizon: int, rows: int | None) -> list[int]:
    """Periods ``t`` (1-based) shown: every one, or the first ``rows − 1`` and the last."""
    if rows is None or horizon <= rows:
        return list(range(1, horizon + 1))
    return [*range(1, rows), horizon]


def format_table(rel: WindowCountsRelease, rows: int | None = None) -> str:
    """The released values, one row per period ``t`` and one column per (family, k); the
    total (only ``[1, T]``) fills the last row. ``rows`` limits the periods shown."""
    shown = row_indices(rel.horizon, rows)
    cols: list[tuple[str, list[str]]] = [
        ("t", [str(t) for t in shown]),
        ("period", [period_label(rel.time_axis, t) for t in shown])]
    for w in _curve_order(rel.windows):
        label = _label(w)
        for k in rel.k_values:
            est = np.asarray(rel.value[label][k])
            up = np.asarray(rel.error.upper[label][k])
            cells = [f"{np.rint(e) + 0:.0f} ±{h - e:.0f}" for e, h in zip(est, up, strict=True)]
            if w == "total":
                cells = [""] * (rel.horizon - 1) + cells
            cols.append((f"{label}, k={k}", [cells[t - 1] for t in shown]))
    size = [max(len(name), *(len(v) for v in vals)) for name, vals in cols]
    lines = ["  ".join(name.rjust(s) for (name, _), s in zip(cols, size, strict=True))]
    for i, t in enumerate(shown):
        if i and t != shown[i - 1] + 1:
            lines.append("...".rjust(size[0]))
        lines.append("  ".join(vals[i].rjust(s) for (_, vals), s in zip(cols, size, strict=True))
                     .rstrip())
    return "\n".join(lines)


def _parse_rows(text: str) -> int | None:
    if text.strip().lower() == "all":
        return None
    try:
        rows = int(text)
    except ValueError:
        rows = 0
    if rows < 1:
        raise click.BadParameter(f"must be an integer >= 1 or 'all'; got {text!r}",
                                 param_hint="--rows")
    return rows


class _ReachCommand(click.Command):
    """`dpfreq reach FILE ...`; ``dpfreq reach query ...`` runs the query command instead."""

    def make_context(self, info_name: str | None, args: list[str],
                     parent: click.Context | None = None, **extra: Any) -> click.Context:
        if args and args[0] == "query":
            name = f"{info_name} query" if info_name else "query"
            return query_command.make_context(name, args[1:], parent=parent, **extra)
        return super().make_context(info_name, args, parent=parent, **extra)


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
              help="Print at most N periods (the first N-1 and the last).")
@shared.output_path_option("--save", "save_path",
                           help="Write the release with its SECRET state (key, exact summaries) "
                                "for `dpfreq reach query`; needed with --windows all.")
@shared.engine_option
@shared.output_options
@shared.seed_option
@shared.ledger_option
@group_options
def command(file: str, item: str, time_col: str, time_unit: str | None, timezone: str,
            out_of_range: str, rows_text: str,
            save_path: str | None, engine: Any, json_out: str | None, plot_out: str | None,
            seed: int | None, accountant: BudgetAccountant | None = None, group: str | None = None,
            max_groups_per_item: int | None = None, groups_file: str | None = None,
            **public: Any) -> None:
    """Private reach and k+ reach of an event log FILE over the window families asked for.

    Prints one row per period with the estimate of every family asked (and only those) and its
    per-answer interval half-width. Windows of a release saved with --save are answered later,
    without new budget, by `dpfreq reach query SAVED --window START:END --k K` (see
    `dpfreq reach query --help`).
    """
    shared.warn_if_seeded(seed)
    rows = _parse_rows(rows_text)
    kwargs = reach_public_kwargs(**public)
    kwargs.update(time_unit=time_unit, timezone=timezone)
    if save_path is not None and not Path(save_path).resolve().parent.is_dir():
        raise ParameterError(message("--save", "dpfreq reach", "a file in an existing "
                                     "directory (checked before anything is spent)", save_path))
    if "all" in kwargs["windows"] and save_path is None:
        raise ParameterError(message(
            "--windows", "dpfreq reach", "without 'all' unless --save is given (the all-windows "
            "family has no curve to print: its windows are asked later with `dpfreq reach "
            "query SAVED`; without a saved release its budget would be spent for nothing)",
            ",".join(public["window_text"])))
    if group is not None or max_groups_per_item is not None or groups_file is not None:
        kwargs.update(group=group, max_groups_per_item=max_groups_per_item, groups=groups_file)
    rel = release_window_counts(file, item=item, time=time_col, out_of_range=out_of_range,
                                rng=seed, engine=engine, accountant=accountant, **kwargs)
    if group is not None:  # one table for all groups (dpfreq.cli.grouped)
        return emit_grouped_reach(rel, json_out, plot_out, save_path)
    shared.emit_release(rel, json_out, plot_out)  # files first: `| head` loses nothing
    if save_path is not None:
        rel.save(save_path)
        click.echo(f"wrote {save_path} (SECRET: contains the noise key and exact summaries of "
                   "the log)", err=True)
    if json_out != "-":  # with --json - the output is the JSON alone
        _print_release(rel, save_path, rows)


def _print_release(rel: WindowCountsRelease, save_path: str | None, rows: int | None = None
                   ) -> None:
    conf = rel.error.confidence or 0.95
    click.echo(f"# dpfreq reach: unit={rel.unit}, epsilon={rel.epsilon:g}, "
               f"delta={rel.delta:g}, mechanism={rel.mechanism}, T={rel.horizon} periods; "
               f"± = {conf:.0%} per-answer interval half-width")
    if rel.time_axis.get("kind") == "timestamp":
        click.echo(f"# periods: wall-clock time in {rel.time_axis['timezone']}")
    fams = ", ".join(_label(w) for w in _curve_order(rel.windows)
                     + [w for w in rel.windows if w == "all"])
    click.echo(f"# families: {fams}; k: {', '.join(map(str, rel.k_values))} (ε split equally "
               f"over the {len(rel.windows) * len(rel.k_values)} (family, k) structures)")
    for name, rec in rel.mechanism_params["methods"].items():
        click.echo(f"# {name}: method {rec['method']}, {rec['noise']} noise "
                   f"(predicted RMSE {_predicted(rec):.1f})")
    if "all" in rel.windows:
        click.echo(f"# all: every window [t1, t2] released, no curve; ask with `dpfreq reach "
                   f"query {save_path} --window START:END --k K` (post-processing, no budget)")
    if any(w != "all" for w in rel.windows):
        click.echo(format_table(rel, rows))
