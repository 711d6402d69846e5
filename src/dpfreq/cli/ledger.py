"""`dpfreq ledger`: create and inspect a privacy ledger (a SQLite file).

A ledger holds a total privacy budget and a composition rule, and records every release made
with ``--ledger FILE`` (command, label, ε, δ, unit of privacy, source, time, privacy loss, the rule
that admitted it); a release the rule does not admit is refused before any noise is drawn. From
Python, :class:`dpfreq.ledger.Ledger` is the same file as an accountant
(``accountant=Ledger(path)``). ``dpfreq ledger verify FILE`` checks the hash chain over its rows
(a row deleted, edited, inserted or reordered is named) and, with ``--expect-head`` or an anchor,
that it is not an older copy; ``dpfreq ledger show FILE`` states what was spent under each rule,
what is left, which rule binds, and the unit the budget is in.
"""

from __future__ import annotations

import json
from typing import Any

import click

from dpfreq.budget import PrivacyBudget
from dpfreq.cli._common import output_path_option, write_output
from dpfreq.release import UNITS

__all__ = ["command", "format_summary"]


def _rules(summary: dict[str, Any]) -> list[str]:
    """What was spent under each rule, and which one binds."""
    sp = summary["spending"]

    def eps(value: float | None) -> str:
        return "none fits" if value is None else f"epsilon={value:.6g}"

    branch = {"sum": "the sum", "renyi": "the Rényi filter", "none": "no branch"}
    own = (f"binds: {branch.get(sp['binding'], sp['binding'])}"
           if summary["composition"] == "tight" else "binds: the sum")
    return [
        f"# composition: {summary['rule']}",
        f"# spent by rule at delta={sp['total_delta']:g}: sum epsilon={sp['sum_epsilon']:.6g}"
        f" (delta={sp['sum_delta']:g}); filter {eps(sp['filter_epsilon'])} "
        f"({branch.get(sp['filter_branch'], sp['filter_branch'])}); as one declared plan "
        f"{eps(sp['plan_epsilon'])} ({sp['plan_method']}, valid only for a batch fixed in "
        f"advance); {own}",
    ]


def format_summary(summary: dict[str, Any]) -> str:
    """The ledger as text: the budget's unit; total, spent and remaining in it; what was spent
    under each rule and which binds; what was spent at each unit; the head to keep; and one
    line per release (ε as charged to the budget, the unit spent at, the rule that admitted
    it)."""
    total, spent, left = summary["total"], summary["spent"], summary["remaining"]
    unit = summary["unit"]
    if summary["unit_stated"]:
        currency = (f"unit={unit} (spends at other units converted where sound, refused "
                    "otherwise)")
    elif unit is not None:
        currency = f"unit={unit} (the unit first spent at; units kept apart)"
    else:
        currency = "the unit of the first spend (units kept apart)"
    lines = [
        f"# dpfreq ledger {summary['ledger']}; budget in {currency}",
        f"# total epsilon={total['epsilon']:g}, delta={total['delta']:g}; "
        f"spent epsilon={spent['epsilon']:g}, delta={spent['delta']:g}; "
        f"remaining epsilon={left['epsilon']:g}, delta={left['delta']:g}",
        *_rules(summary),
    ]
    for part in summary["spent_by_unit"]:
        charged = f" (charged at unit={unit})" if part["unit"] != unit else ""
        lines.append(f"# spent at unit={part['unit'] or 'unstated'}: epsilon={part['epsilon']:g},"
                     f" delta={part['delta']:g} in {part['releases']} release(s){charged}")
    others = {u: e for u, e in summary["remaining_by_unit"].items() if u != unit}
    if others:
        lines.append("# remaining at other units: " + ", ".join(
            f"epsilon={e:g} at unit={u}" for u, e in others.items()))
    lines.append(f"# {len(summary['releases'])} release(s); hash chain: {summary['chain']}")
    anchored = f"; anchored to {summary['anchor']}" if summary.get("anchor") else ""
    lines.append(f"# head {summary['head']} (keep it to detect a restored older copy: "
                 f"dpfreq ledger verify FILE --expect-head HEAD){anchored}")
    header = ("time (UTC)", "command", "label", "charged epsilon", "delta", "unit", "rule",
              "source")
    rows = [header] + [
        (r["time"][:19].replace("T", " "), r["command"] or "-", r["label"] or "-",
         f"{r['epsilon']:g}", f"{r['delta']:g}", r["unit"] or "-", r["rule"],
         r["source"] or "-")
        for r in summary["releases"]
    ]
    if len(rows) > 1:
        width = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines += ["  ".join(cell.ljust(w) for cell, w in zip(row, width, strict=True)).rstrip()
                  for row in rows]
    return "\n".join(lines)


@click.group(name="ledger")
def command() -> None:
    """Privacy ledger: a budget shared by every release made with --ledger FILE."""


@command.command(name="init")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--epsilon", type=float, required=True,
              help="Total ε that all releases recorded in the ledger may spend together.")
@click.option("--delta", type=float, default=0.0, show_default=True,
              help="Total δ that all releases recorded in the ledger may spend together.")
@click.option("--unit", type=click.Choice(list(UNITS)),
              default=None,
              help="Unit of privacy the budget is stated at: spends at other units are converted "
                   "where sound (ε at item counts as 2ε at item_replace) and refused otherwise. "
                   "Without it the ledger keeps units apart (every spend at the first unit).")
@click.option("--composition", type=click.Choice(["tight", "basic"]), default="tight",
              show_default=True,
              help="How releases add up against the total. tight: a release is admitted when "
                   "the sum of the epsilons, or a Rényi privacy filter (valid for releases "
                   "chosen from earlier results), stays within the total; half of --delta "
                   "converts the filter, half bounds the releases' own delta. It admits "
                   "everything basic admits whose releases' delta fits that half, and far more "
                   "small releases. basic: the epsilons and deltas add up. Equal with delta 0.")
@click.option("--anchor", type=click.Path(dir_okay=False), default=None,
              help="A second file, best on other storage, that the ledger appends its head to "
                   "after every spend: a restored older copy of the ledger is then refused.")
def init(file: str, epsilon: float, delta: float, unit: str | None, composition: str,
         anchor: str | None) -> None:
    """Create the ledger FILE with a total budget (refuses to overwrite a file)."""
    from dpfreq.ledger import Ledger

    # a bad total is a ParameterError naming this command; main() spells its options
    budget = PrivacyBudget(epsilon, delta)
    ledger = Ledger.create(file, budget, unit=unit, composition=composition, anchor=anchor)
    stated = f", unit={unit}" if unit else " (units kept apart)"
    click.echo(f"created ledger {file}: total epsilon={budget.epsilon:g}, "
               f"delta={budget.delta:g}{stated}, composition={composition}; head "
               f"{ledger.head}", err=True)


@command.command(name="show")
@click.argument("file", type=click.Path(dir_okay=False))
@output_path_option("--json", "json_out", suffixes=(".json",), allow_stdout=True,
                    help="Write the ledger (total, spent, remaining, releases) as JSON to "
                         "FILE ('-' = stdout).")
def show(file: str, json_out: str | None) -> None:
    """Print the total, spent and remaining budget of FILE and every recorded release."""
    from dpfreq.ledger import Ledger

    summary = Ledger(file).summary()
    click.echo(format_summary(summary))
    if json_out is not None:
        write_output(json.dumps(summary, indent=2), json_out)


@command.command(name="verify")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--expect-head", default=None, metavar="HEAD",
              help="A head the ledger had (printed after a spend, by init and by show): fail "
                   "if FILE never had it, i.e. an older copy was restored since.")
def verify(file: str, expect_head: str | None) -> None:
    """Check the hash chain of FILE: prints "ok: N rows", or fails with one line naming the
    first row that was deleted, edited, inserted or reordered (signed ledgers need
    DPFREQ_ARTIFACT_KEY), or saying FILE is older than its anchor or than --expect-head."""
    from dpfreq.ledger import Ledger

    count = Ledger(file).verify(expect_head=expect_head)
    click.echo(f"ok: {count} rows")
