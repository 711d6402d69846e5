"""`dpfreq plan reach`: the intervals `dpfreq reach` would print, from public parameters alone.

Mirrors :func:`dpfreq.windows.plan_window_counts`; formatting only. Registered in the
``dpfreq plan`` group by :mod:`dpfreq.cli.plan`.
"""

from __future__ import annotations

import json
from typing import Any

import click

from dpfreq.cli._common import COUNT, POSITIVE, output_path_option, parse_int_list, write_output
from dpfreq.errors import ParameterError

__all__ = ["command", "parse_window_list"]


def parse_window_list(values: tuple[str, ...]) -> list[Any]:
    """``--window`` values (repeated or comma-separated): ``cumulative``, ``all`` or a width W."""
    out: list[Any] = []
    for text in values:
        for part in text.split(","):
            name = part.strip().lower()
            if name in ("cumulative", "all"):
                out.append(name)
            elif name:
                try:
                    out.extend(parse_int_list(name, "--window"))
                except click.BadParameter:
                    raise click.BadParameter(f"must be 'cumulative', 'all' or a width W "
                                             f"(integer); got {part.strip()!r}",
                                             param_hint="--window") from None
    return out or ["cumulative"]


@click.command(name="reach")
@click.option("--horizon", type=POSITIVE, default=None,
              help="Public number of periods T when times are integer periods 1..T.")
@click.option("--start", default=None, help="Public start of the time range (date/timestamp).")
@click.option("--end", default=None, help="Public end of the time range (date/timestamp).")
@click.option("--period", default=None, help="Public period length, e.g. 1d, 6h, 30min.")
@click.option("--epsilon", type=float, required=True, help="Total privacy budget ε to plan for.")
@click.option("--delta", type=float, default=0.0, show_default=True, help="As for dpfreq reach.")
@click.option("--unit", type=click.Choice(["event", "item"]), required=True,
              help="Unit of privacy: one event, or one item with all its events (no default).")
@click.option("--k", "k_text", default="1", show_default=True,
              help="Comma-separated k values (k+ reach; 1 = reach).")
@click.option("--window", "window_text", multiple=True, default=("cumulative",),
              show_default=True, metavar="cumulative|W|all",
              help="Window families to plan (repeat, or comma-separate): cumulative, rolling "
                   "width W, all windows. The budget is split over exactly these; `dpfreq "
                   "reach` always releases cumulative, so list it to plan that command.")
@click.option("--singleton", is_flag=True, default=False,
              help="Plan for a declared singleton log (as for dpfreq reach).")
@click.option("--confidence", type=float, default=0.95, show_default=True,
              help="Confidence of the intervals.")
@click.option("--scale", type=COUNT, default=None, metavar="ITEMS",
              help="Public reference reach (e.g. audience size): a family whose interval is no "
                   "narrower than [0, ITEMS] is flagged VACUOUS, with the ε that fixes it.")
@click.option("--target-half-width", type=float, default=None, metavar="ITEMS",
              help="Also print, per family and k, the ε whose largest half-width is ≤ ITEMS.")
@output_path_option("--json", "json_out", suffixes=(".json",), allow_stdout=True,
                    help="Write the plan as JSON to FILE ('-' = stdout; then the text goes to "
                         "stderr).")
def command(horizon: int | None, start: str | None, end: str | None, period: str | None,
            epsilon: float, delta: float, unit: str, k_text: str, window_text: tuple[str, ...],
            singleton: bool, confidence: float, scale: int | None,
            target_half_width: float | None, json_out: str | None) -> None:
    """Predicted per-answer intervals of `dpfreq reach` (no data, no budget spent)."""
    from dpfreq.windows import plan_window_counts

    plan = plan_window_counts(horizon=horizon, start=start, end=end, period=period,
                              epsilon=epsilon, delta=delta, unit=unit,
                              k_values=parse_int_list(k_text, "--k"),
                              windows=parse_window_list(window_text), singleton=singleton,
                              confidence=confidence, scale=scale)
    click.echo(f"# plan: reach over T={plan.horizon} periods, epsilon={plan.epsilon:g}, "
               f"delta={plan.delta:g}, unit {plan.unit}; {plan.accounting}")
    for line in plan.lines():
        click.echo(line)
    targets: dict[str, float | None] = {}
    if target_half_width is not None:
        for label, per_k in plan.max_halfwidth.items():
            for k in per_k:
                try:
                    eps: float | None = plan.epsilon_for(target_half_width, family=label, k=k)
                    said = f"{eps:g}"
                except ParameterError as exc:
                    if target_half_width <= 0:
                        raise
                    eps, said = None, f"not reachable ({exc})"
                targets[f"{label}, k={k}"] = eps
                click.echo(f"ε for {label}, k={k} half-width ≤ {target_half_width:g} items: "
                           f"{said}")
    if json_out is not None:
        doc = plan.to_dict()
        if targets:
            doc["epsilon_for_target"] = {"target_half_width": target_half_width, **targets}
        write_output(json.dumps(doc), json_out)
