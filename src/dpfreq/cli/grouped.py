"""Grouped releases on the command line: ``--group``, ``--max-groups-per-item``, ``--groups``.

The options are shared by the commands that take them; a grouped release prints one table per
group, each row led by the group's name (the table's group column).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

import dpfreq.cli._common as shared

__all__ = ["emit_grouped_profile", "group_options"]


def group_options(f: Any) -> Any:
    """``--group COL --max-groups-per-item M --groups FILE``."""
    f = click.option("--groups", "groups_file", type=click.Path(dir_okay=False), default=None,
                     help="File of the public group names, one per line (rows of other groups "
                          "are dropped; listed groups without rows are still released).")(f)
    f = click.option("--max-groups-per-item", type=shared.INTEGER, default=None,
                     help="Public bound m on the groups one item may touch (required with "
                          "--group at --unit item); each item keeps a random m of its groups.")(f)
    return click.option("--group", default=None,
                        help="Column assigning each row to a group: one release per group, "
                             "the budget spent once.")(f)


def emit_grouped_profile(rel: Any, what: str, rows: int | None, json_out: str | None,
                         plot_out: str | None, *, format_header: Callable[..., list[str]],
                         format_table: Callable[..., str]) -> None:
    """JSON / PNG first (a reader that stops early loses nothing), then the shared header and
    one table per group (group column first); the per-release header and table come from the
    command's own formatters."""
    shared.emit_release(rel, json_out, plot_out)
    to_err = json_out == "-"
    params = rel.mechanism_params
    click.echo(f"# grouped by {params['group_column']!r}: {len(rel)} public groups, each item "
               f"keeps at most m={params['max_groups_per_item']} of them; epsilon={rel.epsilon:g}"
               f" spent once, ε/m={params['epsilon_per_group']:g} per group", err=to_err)
    click.echo(f"# simultaneous: {rel.simultaneous.description}", err=to_err)
    for i, name in enumerate(rel):
        lines = format_table(rel[name], rows).splitlines()
        if i == 0:
            for line in format_header(rel[name], what)[2:]:
                click.echo(line, err=to_err)
            click.echo(f"{'group':>12}  {lines[0]}", err=to_err)
        for line in lines[1:]:
            click.echo(f"{name:>12}  {line}", err=to_err)
