"""`dpfreq plan longitudinal`: the intervals a longitudinal estimate will state, from public
parameters alone.

Mirrors :func:`dpfreq.longitudinal.plan_longitudinal`; formatting only. Registered in the
``dpfreq plan`` group by :mod:`dpfreq.cli.plan`.
"""

from __future__ import annotations

import click

from dpfreq._validate import EPSILON_MAX
from dpfreq.cli._common import POSITIVE, output_path_option
from dpfreq.cli.output import write_json
from dpfreq.cli.plan_options import echo_plan, target_option
from dpfreq.errors import ParameterError

__all__ = ["command"]

METHODS = ["auto", "calibrated", "erlingsson", "futurerand", "rr", "threshold"]


@click.command(name="longitudinal")
@click.option("--horizon", type=POSITIVE, required=True, help="Number of periods d.")
@click.option("--max-changes", type=POSITIVE, required=True, help="Change budget k per device.")
@click.option("--epsilon", type=float, required=True, help="Each device's local ε.")
@click.option("--method", type=click.Choice(METHODS), default="auto", show_default=True,
              help="As for dpfreq longitudinal simulate.")
@click.option("--devices", type=POSITIVE, required=True,
              help="Number of devices n that will report.")
@click.option("--confidence", type=float, default=0.95, show_default=True,
              help="Confidence of the intervals and the band.")
@click.option("--per-order-sparsity", is_flag=True, default=False,
              help="Randomizer of order h built for min(k, d/2^h) changes (not in the paper).")
@target_option("--target-half-width", metavar="DEVICES",
               help="Also print the ε whose largest per-period half-width is at most DEVICES.")
@output_path_option("--json", "json_out", suffixes=(".json",), allow_stdout=True,
                    help="Write the plan as JSON to FILE ('-' = stdout; then the text goes to "
                         "stderr).")
def command(horizon: int, max_changes: int, epsilon: float, method: str, devices: int,
            confidence: float, per_order_sparsity: bool, target_half_width: float | None,
            json_out: str | None) -> None:
    """Predicted per-period intervals of a longitudinal estimate (no data, no budget)."""
    from dpfreq.longitudinal import plan_longitudinal

    plan = plan_longitudinal(horizon=horizon, max_changes=max_changes, epsilon=epsilon,
                             method=method, devices=devices, confidence=confidence,
                             per_order_sparsity=per_order_sparsity)
    to_err = json_out == "-"
    echo_plan((f"# {line}" for line in plan.lines()), err=to_err)
    doc = plan.to_dict()
    if target_half_width is not None:
        try:
            eps: float | None = plan.epsilon_for(target_half_width)
            said = f"{eps:g}"
        except ParameterError:
            eps, said = None, f"not reachable at ε ≤ {EPSILON_MAX:g} with these devices"
        doc["epsilon_for_target"] = {"target_half_width": target_half_width, "epsilon": eps}
        click.echo(f"ε for a per-period half-width ≤ {target_half_width:g} devices: {said}",
                   err=to_err)
    if json_out is not None:
        write_json(doc, json_out)
