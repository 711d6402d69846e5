"""`dpfreq ledger`: create and inspect a privacy ledger (a SQLite file).

A ledger holds a total privacy budget and records every release made with ``--ledger FILE``
(command, label, ε, δ, unit of privacy, source, time); a release that would exceed the total is
refused before any noise is drawn. From Python, :class:`dpfreq.ledger.Ledger` is the same file
as an accountant (``accountant=Ledger(path)``). ``dpfreq ledger verify FILE`` checks the hash
chain over its rows (a row deleted, edited, inserted or reordered is named), and ``dpfreq ledger
show FILE`` states the unit the budget is in and what was spent at each unit.
"""

from __future__ import annotations

import json
from typing import Any

import click

from dpfreq.budget import PrivacyBudget
from dpfreq.cli._common import output_path_option, write_output
from dpfreq.errors import DataError

__all__ = ["command", "format_summary"]


def _budget(epsilon: float, delta: float) -> PrivacyBudget:
    try:
        return PrivacyBudget(epsilon, delta)
    except DataError:
        raise
    except ValueError as exc:  # ParameterError: name the options, not the dataclass
        text = str(exc).replace("epsilon of PrivacyBudget", "--epsilon").replace(
            "delta of PrivacyBudget", "--delta")
        raise click.BadParameter(text.rstrip(".")) from None


def format_summary(summary: dict[str, Any]) -> str:
    """The ledger as text: the budget's unit; total, spent and remaining in it; what was spent
    at each unit; and one line per release (ε as charged to the budget, the unit spent at)."""
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
    header = ("time (UTC)", "command", "label", "charged epsilon", "delta", "unit", "source")
    rows = [header] + [
        (r["time"][:19].replace("T", " "), r["command"] or "-", r["label"] or "-",
         f"{r['epsilon']:g}", f"{r['delta']:g}", r["unit"] or "-", r["source"] or "-")
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
@click.option("--unit", type=click.Choice(["event", "item", "item_replace", "device"]),
              default=None,
              help="Unit of privacy the budget is stated at: spends at other units are converted "
                   "where sound (ε at item counts as 2ε at item_replace) and refused otherwise. "
                   "Without it the ledger keeps units apart (every spend at the first unit).")
def init(file: str, epsilon: float, delta: float, unit: str | None) -> None:
    """Create the ledger FILE with a total budget (refuses to overwrite a file)."""
    from dpfreq.ledger import Ledger

    budget = _budget(epsilon, delta)
    Ledger.create(file, budget, unit=unit)
    stated = f", unit={unit}" if unit else " (units kept apart)"
    click.echo(f"created ledger {file}: total epsilon={budget.epsilon:g}, "
               f"delta={budget.delta:g}{stated}", err=True)


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
def verify(file: str) -> None:
    """Check the hash chain of FILE: prints "ok: N rows", or fails with one line naming the
    first row that was deleted, edited, inserted or reordered (signed ledgers need
    DPFREQ_ARTIFACT_KEY)."""
    from dpfreq.ledger import Ledger

    count = Ledger(file).verify()
    click.echo(f"ok: {count} rows")
