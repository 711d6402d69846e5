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
    """The shared header line of a grouped release: which groups (the public list, or how the
    private selection chose them), the bound on groups per item and the budget."""
    params = rel.mechanism_params
    m = params.get("max_groups_per_item")
    sel = params.get("selection")
    what = "row" if m is None else "item"
    if sel is None:
        which = f"{len(rel)} public groups"
    elif "scale" in sel:  # the weighted set union: τ is a weight, each item spreads L
        which = (f"{len(rel)} groups selected privately (weighted set union: threshold "
                 f"τ={sel['threshold']} on the weight, each item spreading L={sel['scale']}, "
                 f"selection ε={sel['epsilon']:g}, δ={sel['delta']:g}; the groups of one item "
                 f"alone are released with probability at most "
                 f"{sel['single_item_release_probability']:.3g})")
    else:
        which = (f"{len(rel)} groups selected privately (threshold τ={sel['threshold']} "
                 f"{what}s, selection ε={sel['epsilon']:g}, δ={sel['delta']:g}; a group of one "
                 f"{what} is released with probability at most "
                 f"{sel['single_item_release_probability']:.3g})")
    per = f"ε={params['epsilon_per_group']:g}"
    if params.get("delta_per_group"):
        per += f", δ={params['delta_per_group']:g}"
    if m is not None:
        bound, split = f"each item keeps at most m={m} of them", f"{per} per group"
    else:
        bound, split = "each row lies in one group", f"{per} per group (parallel composition)"
    return (f"# grouped by {params['group_column']!r}: {which}, {bound}; epsilon={rel.epsilon:g}"
            f", delta={rel.delta:g} spent once, {split}"
            + _accounting_words(params.get("accounting")))


def noise_line(rel: Any) -> str | None:
    """``# smaller than their noise: …`` naming the groups whose error statement is vacuous
    (post-processing of each group's release), or None when there is none."""
    small = [str(name) for name in rel if rel[name].error.vacuous]
    if not small:
        return None
    shown = ", ".join(small[:30]) + (f", … ({len(small)} groups)" if len(small) > 30 else "")
    return (f"# smaller than their noise ({len(small)} of {len(rel)} groups; the error "
            f"statement is vacuous: the release cannot tell them from an empty group): {shown}")


def _accounting_words(acc: Any) -> str:
    """`` (pure: …)`` or `` (zCDP across groups: …)``: the accounting and both candidates (a
    window release names its accounting only)."""
    if acc is None:
        return ""
    if isinstance(acc, str):
        return " (zCDP across groups)" if acc == "zcdp" else f" ({acc} accounting)"
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
    if not rel.groups:
        click.echo(groups_line(rel), err=to_err)
        return
    first = rel[rel.groups[0]]
    head = format_header(first, what)
    click.echo(head[0], err=to_err)
    click.echo(f"# unit of privacy: {rel.unit} ({first.relation})", err=to_err)
    click.echo(groups_line(rel), err=to_err)
    click.echo(f"# simultaneous: {rel.simultaneous.description}", err=to_err)
    for line in head[2:]:
        click.echo(line, err=to_err)
    small = noise_line(rel)
    if small is not None:
        click.echo(small, err=to_err)
    column = str(rel.group_column)
    width = max(len(column), *(len(str(name)) for name in rel))
    for i, name in enumerate(rel):
        lines = format_table(rel[name], rows).splitlines()
        if i == 0:
            click.echo(f"{column:>{width}}  {lines[0]}", err=to_err)
        for line in lines[1:]:
            click.echo(f"{name!s:>{width}}  {line}", err=to_err)


def emit_grouped_anonymized(rel: Any, json_out: str | None, plot_out: str | None, top: int, *,
                            frequency_list: Callable[[Any, int], list[str]],
                            properties: dict[str, list[str]], text: str) -> None:
    """JSON / PNG first (``text`` is the JSON document), then one summary row per group, the
    frequency lists and the property estimates (``properties``: each group's printed lines),
    each row led by its group."""
    shared.emit_release(rel, json_out, plot_out, text=text)
    to_err = json_out == "-"
    relation = f" ({rel[rel.groups[0]].relation})" if rel.groups else ""
    click.echo(f"# dpfreq anonymize: unit of privacy: {rel.unit}{relation}, mechanism "
               f"{rel.mechanism}", err=to_err)
    click.echo(groups_line(rel), err=to_err)
    click.echo(f"# simultaneous: {rel.simultaneous.description}", err=to_err)
    small = noise_line(rel)
    if small is not None:
        click.echo(small, err=to_err)
    column = str(rel.group_column)
    name_width = max(len(column), *(len(str(name)) for name in rel))
    rows = [(column, "N", "total interval", "items", "sorted-l1 <=", "method")]
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
    click.echo(f"{column:>{name_width}}  count  items  ranks", err=to_err)
    for name in rel:
        lines = frequency_list(rel[name], top)
        for line in lines[1:] if lines[0].lstrip().startswith("count") else lines:
            click.echo(f"{name!s:>{name_width}}  {line}", err=to_err)
    click.echo("# property estimates per group (post-processing of each group's release, no "
               "extra budget; ± = L x its sorted-l1 bound):", err=to_err)
    for name in rel:
        for line in properties[name]:
            click.echo(f"{name!s:>{name_width}}  {line}", err=to_err)


def emit_grouped_reach(rel: Any, json_out: str | None, plot_out: str | None,
                       save_path: str | None, *, rows: int | None = None,
                       raw: bool = False) -> None:
    """``dpfreq reach --group``: JSON / PNG / the saved release first (a reader that stops early
    loses nothing), then the header (the grouping, the simultaneous statement, the periods and
    structures, the same in every group, and the groups smaller than their noise) and every
    group's table (:func:`dpfreq.cli.reach_table.format_table`, ``rows`` periods of each),
    group column first."""
    from dpfreq.cli.reach_table import format_table, header_lines

    shared.emit_release(rel, json_out, plot_out)
    if save_path is not None:
        rel.save(save_path)
        click.echo(f"wrote {save_path} (SECRET: contains every group's noise key and exact "
                   "summaries of the log)", err=True)
    if json_out == "-":  # with --json - the output is the JSON alone
        return
    first = rel[rel.groups[0]] if rel.groups else None
    conf = f", confidence {first.error.confidence:g}" if first is not None else ""
    click.echo(f"# dpfreq reach: unit={rel.unit}, epsilon={rel.epsilon:g}, delta={rel.delta:g}"
               f", mechanism={rel.mechanism}"
               + (f", T={first.horizon} periods" if first is not None else "") + conf)
    click.echo(groups_line(rel))
    click.echo(f"# simultaneous: {rel.simultaneous.description}")
    if first is None:
        return
    for line in header_lines(first, save_path=save_path, raw=raw, methods_prefix="every group, "):
        click.echo(line)
    small = noise_line(rel)
    if small is not None:
        click.echo(small)
    if all(w == "all" for w in first.windows):
        return
    column = str(rel.group_column)
    width = max(len(column), *(len(str(name)) for name in rel))
    for i, name in enumerate(rel):
        lines = format_table(rel[name], rows, raw=raw).splitlines()
        if i == 0:
            click.echo(f"{column:>{width}}  {lines[0]}")
        for line in lines[1:]:
            click.echo(f"{name!s:>{width}}  {line}")
