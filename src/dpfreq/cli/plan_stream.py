"""`dpfreq plan stream`: the errors a reach stream would publish, before `dpfreq stream init`.

Mirrors :func:`dpfreq.stream.plan_reach_stream`; formatting only. Takes the options of
``dpfreq stream init`` that fix a stream's accuracy (the same grammar, :func:`accuracy_options`)
and prints the method ``auto`` would choose and why, the standard deviation and the interval
and band half-widths of the answers at a few periods, and the cost of re-releasing every period
instead. Reads no data, spends nothing. Registered in the ``dpfreq plan`` group by
:mod:`dpfreq.cli.plan`.
"""

from __future__ import annotations

import click

import dpfreq.cli._common as shared
from dpfreq.cli._common import output_path_option
from dpfreq.cli.output import write_json
from dpfreq.cli.plan_options import echo_plan, target_option
from dpfreq.cli.stream_options import accuracy_options, parse_horizon

__all__ = ["command"]


@click.command(name="stream")
@accuracy_options
@click.option("--rows", type=shared.POSITIVE, default=8, show_default=True,
              help="Periods printed (spread from the first to the last; the JSON has all).")
@target_option("--target-half-width", metavar="ITEMS",
                      help="Also print the smallest ε of the stream whose per-answer "
                           "half-width is ≤ ITEMS at every period (every other option as "
                           "given).")
@output_path_option("--json", "json_out", suffixes=(".json",), allow_stdout=True,
                    help="Write the forecast as JSON to FILE ('-' = stdout; then the text "
                         "goes to stderr).")
def command(horizon_text: str, k_text: str, unit: str, epsilon: float, delta: float,
            method: str, group: str | None, groups_file: str | None,
            max_groups_per_item: int | None, capping_epsilon: float | None,
            confidence: float, rows: int, target_half_width: float | None,
            json_out: str | None) -> None:
    """Predicted errors of `dpfreq stream init` with the same options (no data, no budget
    spent): per period, and against re-releasing every period."""
    from dpfreq.stream import plan_reach_stream

    forecast = plan_reach_stream(
        horizon=parse_horizon(horizon_text), k_values=shared.parse_int_list(k_text, "--k"),
        unit=unit, epsilon=epsilon, delta=delta, method=method, group=group,
        groups=groups_file, max_groups_per_item=max_groups_per_item, confidence=confidence,
        capping_epsilon=capping_epsilon)
    lines = forecast.lines(rows)
    doc = forecast.to_dict()
    if target_half_width is not None:
        eps = forecast.epsilon_for(target_half_width)
        doc["epsilon_for_target_half_width"] = {"target": target_half_width, "epsilon": eps}
        lines.append(f"ε for a per-answer half-width ≤ {target_half_width:g} items at every "
                     f"period: {eps:g}")
    if json_out is not None:
        write_json(doc, json_out)
    echo_plan(lines, err=json_out == "-")
