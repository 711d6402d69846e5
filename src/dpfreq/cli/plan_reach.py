"""`dpfreq plan reach`: the intervals `dpfreq reach` would print, from public parameters alone.

Mirrors :func:`dpfreq.windows.plan_window_counts`; formatting only. Registered in the
``dpfreq plan`` group by :mod:`dpfreq.cli.plan`.
"""

from __future__ import annotations

from typing import Any

import click

from dpfreq._validate import EPSILON_MAX
from dpfreq.cli._common import COUNT, output_path_option
from dpfreq.cli.grouped import capping_option, group_options
from dpfreq.cli.output import write_json
from dpfreq.cli.plan_options import echo_plan, target_option
from dpfreq.cli.reach_options import reach_parameters, reach_public_kwargs
from dpfreq.errors import ParameterError

__all__ = ["command"]


@click.command(name="reach")
@reach_parameters
@click.option("--scale", type=COUNT, default=None, metavar="ITEMS",
              help="Public reference reach (e.g. audience size): a family whose interval is no "
                   "narrower than [0, ITEMS] is flagged VACUOUS, with the ε that fixes it.")
@target_option("--target-half-width", metavar="ITEMS",
               help="Also print, per family and k, the total ε of the call (as --epsilon, split "
                    "over every family and k) whose largest half-width is ≤ ITEMS.")
@output_path_option("--json", "json_out", suffixes=(".json",), allow_stdout=True,
                    help="Write the plan as JSON to FILE ('-' = stdout; then the text goes to "
                         "stderr).")
@group_options
@capping_option
def command(scale: int | None, target_half_width: float | None, json_out: str | None,
            group: str | None = None, max_groups_per_item: int | str | None = None,
            groups_file: str | None = None, capping_epsilon: float | None = None,
            **public: Any) -> None:
    """Predicted per-answer intervals of `dpfreq reach` with the same options (no data, no
    budget spent)."""
    from dpfreq.windows import plan_window_counts

    kwargs = reach_public_kwargs(**public)
    if group is not None or max_groups_per_item is not None or groups_file is not None:
        kwargs.update(group=group, max_groups_per_item=max_groups_per_item, groups=groups_file)
    if capping_epsilon is not None:
        kwargs.update(capping_epsilon=capping_epsilon)
    plan = plan_window_counts(scale=scale, **kwargs)
    one = getattr(plan, "per_group", plan)  # a grouped plan: every group's plan is the same
    lines = [f"# plan: reach over T={one.horizon} periods, epsilon={plan.epsilon:g}, "
             f"delta={plan.delta:g}, unit {one.unit}; {one.accounting}"]
    if one is not plan:
        head = plan.lines()[:2 if plan.selection is not None else 1]
        lines += f"# grouped by {group!r}: {head[0]}", *(f"# {line}" for line in head[1:])
    echo_plan([*lines, *one.lines()])
    targets: dict[str, float | None] = {}
    if target_half_width is not None:
        n = sum(len(per_k) for per_k in one.max_halfwidth.values())
        spread = (f"the whole call's ε (split over the groups, then over each group's {n} "
                  "(family, k) structures)" if one is not plan else
                  f"the whole call's ε, split equally over its {n} (family, k) structures")
        click.echo(f"# ε below: {spread}, as --epsilon is; the family's largest per-answer "
                   f"half-width ≤ {target_half_width:g} items with the other options unchanged")
        for label, per_k in one.max_halfwidth.items():
            for k in per_k:
                try:
                    eps: float | None = plan.epsilon_for(target_half_width, family=label, k=k)
                    said = f"{eps:g}"
                except ParameterError:  # the target was checked: out of reach
                    eps, said = None, f"not reachable at ε ≤ {EPSILON_MAX:g}"
                targets[f"{label}, k={k}"] = eps
                click.echo(f"total ε for {label}, k={k} half-width ≤ {target_half_width:g} "
                           f"items: {said}")
    if json_out is not None:
        doc = plan.to_dict()
        if targets:
            doc["epsilon_for_target"] = {"target_half_width": target_half_width, **targets}
        write_json(doc, json_out)
