"""Grouped releases on the command line: ``--group``, ``--max-groups-per-item``, ``--groups``,
``--delta``.

The options are shared by the commands that take them; a grouped release prints one table per
group, each row led by the group's name (the table's group column). ``--delta`` (instead of
``--groups``) selects the data's groups by private partition selection; a profile also takes it
beside ``--groups``, for zCDP accounting across groups.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

import dpfreq.cli._common as shared

__all__ = ["delta_option", "emit_grouped_anonymized", "emit_grouped_profile",
           "emit_grouped_reach", "format_grouped_plan", "group_options", "groups_line",
           "plan_group_options"]


def group_options(f: Any) -> Any:
    """``--group COL --max-groups-per-item M --groups FILE``."""
    f = click.option("--groups", "groups_file", type=click.Path(dir_okay=False), default=None,
                     help="File of the public group names, one per line (rows of other groups "
                          "are dropped; listed groups without rows are still released).")(f)
    f = click.option("--max-groups-per-item", type=shared.INTEGER, default=None,
                     help="Public bound m on the groups one item may touch (required with "
                          "--group at --unit item, refused at --unit event); each item keeps a "
                          "random m of its groups.")(f)
    return click.option("--group", default=None,
                        help="Column assigning each row to a group: one release per group, "
                             "the budget spent once.")(f)


def delta_option(f: Any) -> Any:
    """``--delta D``: δ of the private partition selection of the groups (no default)."""
    return click.option("--delta", type=float, default=None,
                        help="With --group: δ in (0, 1e-3]. Without --groups it pays for the "
                             "private partition selection of the data's groups (half of ε "
                             "selects, half releases). For a profile it also lets the groups "
                             "compose in zCDP when that gives each group a larger ε than ε/m "
                             "(also beside --groups). No default.")(f)


def plan_group_options(f: Any) -> Any:
    """The grouped options of ``dpfreq plan``: ``--group``, ``--max-groups-per-item``,
    ``--groups FILE`` and ``--delta``."""
    return group_options(delta_option(f))


def groups_line(rel: Any) -> str:
    """The shared header line of a grouped release: which groups, the bound, the budget."""
    params = rel.mechanism_params
    m = params.get("max_groups_per_item")
    sel = params.get("selection")
    what = "row" if rel.unit == "event" else "item"
    which = (f"{len(rel)} public groups" if sel is None else
             f"{len(rel)} groups selected privately (threshold τ={sel['threshold']} {what}s, "
             f"ε={sel['epsilon']:g}, δ={sel['delta']:g}; a group of one {what} is released "
             f"with probability {sel['single_item_release_probability']:.3g})")
    bound = (f"each item keeps at most m={m} of them" if m is not None else
             "each row lies in one group")
    return (f"# grouped by {params['group_column']!r}: {which}, {bound}; epsilon={rel.epsilon:g}"
            f", delta={rel.delta:g} spent once, ε={params['epsilon_per_group']:g} per group"
            + _accounting_words(params.get("accounting")))


def _accounting_words(acc: dict[str, Any] | None) -> str:
    """`` (pure: …)`` or `` (zCDP across groups: …)``: the accounting and both candidates."""
    if acc is None:
        return ""
    cands = ", ".join(f"{k} {v:.4g}" for k, v in acc["candidates"].items())
    name = "zCDP across groups" if acc["accounting"] == "zcdp" else "pure"
    return f" ({name}; per-group ε of each accounting: {cands})"


def format_grouped_plan(plan: Any, format_one: Callable[[Any], list[str]]) -> list[str]:
    """The lines of a grouped plan: its description, then one group's plan (``format_one``)."""
    lines = [f"# grouped plan: epsilon={plan.epsilon:g}, delta={plan.delta:g}, unit {plan.unit}"
             f", ε={plan.epsilon_per_group:g} per group"
             + _accounting_words(plan.accounting.to_dict()), plan.description,
             "# one group:"]
    return lines + format_one(plan.per_group)


def emit_grouped_profile(rel: Any, what: str, rows: int | None, json_out: str | None,
                         plot_out: str | None, *, format_header: Callable[..., list[str]],
                         format_table: Callable[..., str]) -> None:
    """JSON / PNG first (a reader that stops early loses nothing), then the shared header and
    one table per group (group column first); the per-release header and table come from the
    command's own formatters."""
    shared.emit_release(rel, json_out, plot_out)
    to_err = json_out == "-"
    click.echo(groups_line(rel), err=to_err)
    click.echo(f"# simultaneous: {rel.simultaneous.description}", err=to_err)
    for i, name in enumerate(rel):
        lines = format_table(rel[name], rows).splitlines()
        if i == 0:
            for line in format_header(rel[name], what)[2:]:
                click.echo(line, err=to_err)
            click.echo(f"{'group':>12}  {lines[0]}", err=to_err)
        for line in lines[1:]:
            click.echo(f"{name:>12}  {line}", err=to_err)


def emit_grouped_anonymized(rel: Any, json_out: str | None, plot_out: str | None, top: int, *,
                            frequency_list: Callable[[Any, int], list[str]],
                            properties: dict[str, list[str]], text: str) -> None:
    """JSON / PNG first (``text`` is the JSON document), then one summary row per group, the
    frequency lists and the property estimates (``properties``: each group's printed lines),
    each row led by its group."""
    shared.emit_release(rel, json_out, plot_out, text=text)
    to_err = json_out == "-"
    click.echo(groups_line(rel), err=to_err)
    click.echo(f"# simultaneous: {rel.simultaneous.description}", err=to_err)
    rows = [("group", "N", "total interval", "items", "sorted-l1 <=", "method")]
    for name in rel:
        r = rel[name]
        lo, hi = r.total_interval
        rows.append((str(name), str(r.n_estimate), f"[{lo}, {hi}]", str(r.n_items),
                     f"{float(r.error.value):.6g}", f"{r.method} ({r.regime})"))
    width = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    click.echo(f"# per group: N (DP total) with its exact interval, items released, sorted-l1 "
               f"bound at confidence about {rel.simultaneous.confidence:g}", err=to_err)
    for row in rows:
        click.echo("  ".join(c.rjust(w) for c, w in zip(row, width, strict=True)), err=to_err)
    click.echo("# released frequency lists, largest counts first:", err=to_err)
    click.echo(f"{'group':>12}  count  items  ranks", err=to_err)
    for name in rel:
        lines = frequency_list(rel[name], top)
        for line in lines[1:] if lines[0].lstrip().startswith("count") else lines:
            click.echo(f"{name:>12}  {line}", err=to_err)
    click.echo("# property estimates per group (post-processing of each group's release, no "
               "extra budget; ± = L x its sorted-l1 bound):", err=to_err)
    for name in rel:
        for line in properties[name]:
            click.echo(f"{name:>12}  {line}", err=to_err)


def _budget_line(rel: Any) -> str:
    params = rel.mechanism_params
    m = params["max_groups_per_item"]
    split = (f"each item keeps at most m={m} of them; epsilon={rel.epsilon:g} spent once, "
             f"ε/m={params['epsilon_per_group']:g} per group" if m is not None else
             f"one event is in one group; epsilon={rel.epsilon:g} spent once, "
             f"ε={params['epsilon_per_group']:g} per group (parallel composition)")
    sel = params.get("selection")
    what = "item" if m is not None else "row"
    which = (f"{len(rel)} public groups" if sel is None else
             f"{len(rel)} groups selected privately (threshold τ={sel['threshold']} {what}s, "
             f"ε={sel['epsilon']:g}, δ={sel['delta']:g}; a group of one {what} is released "
             f"with probability {sel['single_item_release_probability']:.3g}; the groups at "
             "δ = 0)")
    return f"# grouped by {params['group_column']!r}: {which}, {split}"


def emit_grouped_reach(rel: Any, json_out: str | None, plot_out: str | None,
                       save_path: str | None) -> None:
    """``dpfreq reach --group``: JSON / PNG / the saved release first (a reader that stops early
    loses nothing), then the budget line, the simultaneous statement, the structures (the same
    in every group) and one tidy table of every group's released curves, group column first."""
    shared.emit_release(rel, json_out, plot_out)
    if save_path is not None:
        rel.save(save_path)
        click.echo(f"wrote {save_path} (SECRET: contains every group's noise key and exact "
                   "summaries of the log)", err=True)
    if json_out == "-":  # with --json - the output is the JSON alone
        return
    if not rel.groups:
        click.echo(f"# dpfreq reach: unit={rel.unit}, epsilon={rel.epsilon:g}, "
                   f"delta={rel.delta:g}, mechanism={rel.mechanism}")
        click.echo(_budget_line(rel))
        click.echo(f"# {rel.simultaneous.description}")
        return
    first = rel[rel.groups[0]]
    conf = first.error.confidence or 0.95
    click.echo(f"# dpfreq reach: unit={rel.unit}, epsilon={rel.epsilon:g}, "
               f"delta={rel.delta:g}, mechanism={rel.mechanism}, T={first.horizon} periods; "
               f"± = {conf:.0%} per-answer interval half-width")
    click.echo(_budget_line(rel))
    click.echo(f"# simultaneous: {rel.simultaneous.description}")
    for name, rec in first.mechanism_params["methods"].items():
        rmse = min(rec["predicted_rmse"].values())
        click.echo(f"# every group, {name}: method {rec['method']}, {rec['noise']} noise "
                   f"(predicted RMSE {rmse:.1f})")
    tab = rel.to_pandas()
    cols = [(str(rel.group_column), [str(v) for v in tab.iloc[:, 0]]),
            ("window", [str(v) for v in tab["window"]]), ("k", [str(v) for v in tab["k"]]),
            ("start", [str(v) for v in tab["start"]]), ("end", [str(v) for v in tab["end"]]),
            ("estimate", [f"{e:.0f} ±{u - e:.0f}" for e, u in
                          zip(tab["estimate"], tab["upper"], strict=True)])]
    size = [max(len(name), *(len(v) for v in vals)) for name, vals in cols]
    click.echo("  ".join(name.rjust(w) for (name, _), w in zip(cols, size, strict=True)))
    for i in range(len(tab)):
        click.echo("  ".join(vals[i].rjust(w) for (_, vals), w in zip(cols, size, strict=True)))
