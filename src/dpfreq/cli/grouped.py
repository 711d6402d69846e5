"""Grouped releases on the command line: ``--group``, ``--max-groups-per-item``, ``--groups``,
``--delta``.

The options and the lines every grouped output shares (the grouping, the simultaneous statement,
the groups smaller than their noise, the per-group tables led by the group's name) are here;
each command prints its own grouped release (``dpfreq profile``, ``anonymize``, ``reach``).
``--delta`` (instead of ``--groups``) selects the data's groups by private partition selection;
a profile also takes it beside ``--groups``, for zCDP accounting across groups.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

import dpfreq.cli._common as shared
from dpfreq.cli.spelling import spelled

__all__ = ["BOUND", "BoundType", "capping_option", "delta_option", "echo_group_tables",
           "echo_grouped_head", "format_grouped_plan", "group_options", "groups_line", "noise_line",
           "plan_group_options", "without_coverage"]


class BoundType(click.ParamType):
    """``--max-groups-per-item``: an integer (as :data:`dpfreq.cli._common.INTEGER`) or
    ``auto`` (m chosen privately; the library checks the rest)."""

    name = "integer|auto"

    def convert(self, value: Any, param: Any, ctx: Any) -> int | str:
        if isinstance(value, str) and value.strip().lower() == "auto":
            return "auto"
        try:
            out: int = shared.INTEGER.convert(value, param, ctx)
        except click.BadParameter:
            self.fail(f"must be an integer >= 1 or 'auto'; got {value!r}", param, ctx)
        return out


BOUND = BoundType()


def group_options(f: Any) -> Any:
    """``--group COL --max-groups-per-item M --groups FILE``."""
    f = click.option("--groups", "groups_file", type=click.Path(dir_okay=False), default=None,
                     help="File of the public group names, one per line (rows of other groups "
                          "are dropped; listed groups without rows are still released).")(f)
    f = click.option("--max-groups-per-item", type=BOUND, default=None,
                     help="Public bound m on the groups one item may touch (required with "
                          "--group at --unit item, refused at --unit event); each item keeps a "
                          "random m of its groups. 'auto': m in 1..16 chosen privately from a "
                          "noisy histogram of groups per item, paid by --capping-epsilon.")(f)
    return click.option("--group", default=None,
                        help="Column assigning each row to a group: one release per group, "
                             "the budget spent once.")(f)


def capping_option(f: Any) -> Any:
    """``--capping-epsilon E``: the share of ε that measures the pairs the cap dropped."""
    return click.option("--capping-epsilon", type=float, default=None,
                        help="With --group at --unit item: the share of --epsilon, in (0, "
                             "epsilon), that measures the fraction of (item, group) pairs the "
                             "cap --max-groups-per-item dropped (printed with its interval; "
                             "the release spends the rest); with --max-groups-per-item auto, "
                             "required: it measures the histogram m is chosen from. Default: "
                             "not measured.")(f)


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


def echo_group_tables(rel: Any, table: Callable[[Any], str], err: bool) -> None:
    """Every group's table (``table(release)``), its header once, each row led by the group's
    name (the group column first)."""
    column = str(rel.group_column)
    width = max(len(column), *(len(str(name)) for name in rel))
    for i, name in enumerate(rel):
        lines = table(rel[name]).splitlines()
        if i == 0:
            click.echo(f"{column:>{width}}  {lines[0]}", err=err)
        for line in lines[1:]:
            click.echo(f"{name!s:>{width}}  {line}", err=err)


def echo_grouped_head(rel: Any, first_line: str, err: bool) -> None:
    """The lines every grouped output leads with: the command's own first line, the grouping
    (:func:`groups_line`), what the intervals cover (the capped data or the data) and the
    simultaneous statement (without its coverage sentence, printed on the line before)."""
    click.echo(first_line, err=err)
    click.echo(groups_line(rel), err=err)
    click.echo(f"# coverage: {spelled(rel.mechanism_params['coverage'])}", err=err)
    if "bound_choice" in rel.mechanism_params:
        click.echo(f"# max-groups-per-item auto: {rel.mechanism_params['bound_choice']['why']}",
                   err=err)
    if rel.dropped_fraction is not None:
        click.echo(f"# dropped by the cap: {rel.dropped_fraction.description}", err=err)
    click.echo(f"# simultaneous: {without_coverage(rel, rel.simultaneous.description)}",
               err=err)


def without_coverage(rel: Any, text: str) -> str:
    """``text`` (an error statement's description, or a line quoting one) without the coverage
    sentence every grouped statement ends with (the output prints it once, on its own line)."""
    coverage = rel.mechanism_params["coverage"]
    for form in (coverage, spelled(coverage)):  # the library's text, or the CLI's spelling
        text = text.removesuffix(f" Coverage: {form}.")
    return text
