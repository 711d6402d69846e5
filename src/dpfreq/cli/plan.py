"""`dpfreq plan`: accuracy before a release, from public parameters alone (no data, no budget).

``dpfreq plan profile --domain-size 2e6 --max-count 50 --epsilon 1 --unit item`` prints the
predicted per-class interval half-width, the band, the expected ℓ1 error and an ℓ1 bound;
``--target-*`` options print the ε needed for a target. Other systems add subcommands to the
:data:`command` group with ``@command.command(name=...)`` in their own CLI module (or
``command.add_command``).
"""

from __future__ import annotations

from typing import Any

import click

from dpfreq._validate import MAX_COUNT_MINIMUM, message
from dpfreq.cli._common import COUNT, IntegerType
from dpfreq.cli.grouped import capping_option, format_grouped_plan, plan_group_options
from dpfreq.cli.plan_options import echo_plan, target_option
from dpfreq.errors import ParameterError

__all__ = ["command", "format_plan", "profile_plan"]


@click.group(name="plan")
def command() -> None:
    """Predict the accuracy of a release before making it (public parameters only).

    Planning reads no data and spends no privacy budget.
    """


def format_plan(plan: Any) -> list[str]:
    """The lines printed for a :class:`dpfreq.profile.ProfilePlan`."""
    d, conf = plan.domain_size, plan.confidence
    lines = [
        f"# plan: profile of d={d:,} items, counts clamped at n={plan.max_count}, "
        f"epsilon={plan.epsilon:g}, unit {plan.unit} ({plan.relation}), method {plan.method}",
        f"# {plan.why}",
    ]
    if plan.layout_why:
        lines.append(f"# {plan.layout_why}")
    if plan.half_width is not None:
        lines += [
            f"per-class interval:  ±{plan.half_width:,.0f} items (±{plan.half_width / d:.3g} of "
            f"the domain), confidence {conf:g}, exact",
            f"simultaneous band:   ±{plan.band_half_width:,.0f} items for all "
            f"{plan.max_count + 1} classes at once, confidence {conf:g}"
            + (f" (class 0, derived from d: ±{plan.class0_half_width:,.0f} per class, "
               f"±{plan.class0_band_half_width:,.0f} in the band)"
               if plan.layout == "class 0 derived" else ""),
            f"expected ℓ1 error:   {plan.l1_error:.3g} (≈ {plan.l1_error * d:,.0f} items "
            "misplaced, before the projection, which usually lowers it)",
        ]
    else:
        lines.append("per-class intervals: depend on the data for this method (simulated at "
                     "release time)")
    lines.append(f"ℓ1 bound:            {plan.l1_bound:.3g} with probability ≥ {conf:g}"
                 + (" — VACUOUS (the trivial bound is 2)" if plan.vacuous else ""))
    return lines


@command.command(name="profile")
@click.option("--domain-size", type=COUNT, required=True, help="Public number d of items.")
@click.option("--max-count", type=IntegerType(minimum=MAX_COUNT_MINIMUM), required=True,
              help=f"Public count cap n >= {MAX_COUNT_MINIMUM}.")
@click.option("--epsilon", type=float, required=True, help="Privacy parameter ε to plan for.")
@click.option("--unit", type=click.Choice(["event", "item", "item_replace"]), required=True,
              help="Unit of privacy, as for dpfreq profile (no default): event, item "
                   "(add/remove) or item_replace.")
@click.option("--method", type=click.Choice(["auto", "direct", "fft", "mle"]), default="auto",
              show_default=True, help="As for dpfreq profile.")
@click.option("--confidence", type=float, default=0.95, show_default=True,
              help="Confidence level of the intervals and the ℓ1 bound.")
@target_option("--target-half-width", metavar="ITEMS",
               help="Also print the ε whose per-class half-width is at most ITEMS.")
@target_option("--target-l1", metavar="L1",
               help="Also print the ε whose ℓ1 bound is at most L1 (fractions, ≤ 2).")
@plan_group_options
@capping_option
def profile_plan(domain_size: int, max_count: int, epsilon: float, unit: str,
                 method: str, confidence: float, target_half_width: float | None,
                 target_l1: float | None, group: str | None = None,
                 max_groups_per_item: int | str | None = None, groups_file: str | None = None,
                 delta: float | None = None, capping_epsilon: float | None = None) -> None:
    """Predicted accuracy of `dpfreq profile` for these public parameters (with --group, of
    every group and of the private selection of the groups)."""
    from dpfreq.profile import plan_profile

    if group is not None and (target_half_width is not None or target_l1 is not None):
        raise click.UsageError("--target-* plan one ungrouped release; drop --group.")
    if target_half_width is not None and method in ("fft", "mle"):
        raise ParameterError(message(
            "--target-half-width", f"left out with --method {method} (the sketch methods "
            "predict the ℓ1 bound only: give --target-l1)", target_half_width))
    plan = plan_profile(domain_size=domain_size, max_count=max_count, epsilon=epsilon,
                        unit=unit, method=method, confidence=confidence, group=group,
                        max_groups_per_item=max_groups_per_item, groups=groups_file,
                        delta=delta, capping_epsilon=capping_epsilon)
    if group is not None:
        echo_plan(format_grouped_plan(plan, format_plan))
        return
    echo_plan(format_plan(plan))
    if target_half_width is not None:
        eps = plan.epsilon_for(target_half_width, measure="half_width")
        click.echo(f"ε for a per-class half-width ≤ {target_half_width:g} items: {eps:g}")
    if target_l1 is not None:
        eps = plan.epsilon_for(target_l1, measure="l1_bound")
        click.echo(f"ε for an ℓ1 bound ≤ {target_l1:g}: {eps:g}")


def _add_anonymize() -> None:
    from dpfreq.cli.anonymize import plan_command

    command.add_command(plan_command, name="anonymize")


_add_anonymize()


def _add_reach() -> None:
    from dpfreq.cli.plan_reach import command as reach_plan

    command.add_command(reach_plan, name="reach")


_add_reach()


def _add_longitudinal() -> None:
    from dpfreq.cli.plan_longitudinal import command as longitudinal_plan

    command.add_command(longitudinal_plan, name="longitudinal")


_add_longitudinal()


def _add_stream() -> None:
    from dpfreq.cli.plan_stream import command as stream_plan

    command.add_command(stream_plan, name="stream")


_add_stream()
