"""`dpfreq longitudinal`: FutureRand locally private longitudinal counts (futurerand.md).

Subcommands ``params`` (c_gap and predicted error per randomizer), ``simulate`` (vectorized
simulation with truth and errors) and ``aggregate`` (server side on collected reports).
Formatting only; the work is in :mod:`dpfreq.longitudinal`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import click
import numpy as np

from dpfreq.cli._common import (
    emit_release,
    engine_option,
    output_options,
    seed_option,
    warn_if_seeded,
)
from dpfreq.cli.devices import command as devices_command
from dpfreq.errors import DataError
from dpfreq.longitudinal import (
    ProtocolParams,
    aggregate_reports_file,
    make_params,
    simulate_longitudinal,
)

__all__ = ["command"]

RANDOMIZERS = ["auto", "calibrated", "erlingsson", "futurerand", "rr", "threshold"]


@click.group(name="longitudinal")
def command() -> None:
    """Locally private daily counts of a Boolean state with at most k changes (FutureRand)."""


@command.command(name="params")
@click.option("--periods", type=int, required=True, help="Horizon d (padded to a power of two).")
@click.option("--changes", type=int, required=True, help="Change budget k per device.")
@click.option("--epsilon", type=float, required=True, help="Each device's local ε.")
@click.option(
    "--users",
    type=int,
    default=None,
    help="Number of devices n for the predicted error (without it: error per √n).",
)
@click.option("--beta", type=float, default=0.05, show_default=True, help="Failure probability.")
@click.option(
    "--write",
    "write_for",
    type=click.Choice(RANDOMIZERS),
    default=None,
    help="Write the parameter bundle of this randomizer (use with --out).",
)
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="PARAMS.json path.")
@click.option(
    "--per-order-sparsity",
    is_flag=True,
    default=False,
    help="Randomizer of order h built for min(k, d/2^h) changes (not in the paper; pitfall 5).",
)
def params_cmd(
    periods: int,
    changes: int,
    epsilon: float,
    users: int | None,
    beta: float,
    write_for: str | None,
    out: str | None,
    per_order_sparsity: bool,
) -> None:
    """Table of c_gap, certificate, per-time sd and simultaneous bound per randomizer."""
    if users is not None and users < 1:
        raise DataError(f"--users of longitudinal params must be an integer >= 1; got {users!r}.")
    if not 0 < beta < 1:
        raise DataError(f"--beta of longitudinal params must be in (0, 1); got {beta!r}.")
    n = 1 if users is None else users
    rows = []
    for name in ["rr", "erlingsson", "futurerand", "calibrated", "threshold", "auto"]:
        per = per_order_sparsity and name != "erlingsson"
        p = make_params(periods, changes, epsilon, name, per_order_sparsity=per)
        lg1 = p.orders
        gaps = p.c_gaps
        # largest variance over t ≤ d: t = d − 1 uses every order below log d
        sd = math.sqrt(n * lg1 * sum(1 / c**2 for c in gaps[: max(lg1 - 1, 1)]))
        bound = lg1 / min(gaps) * math.sqrt(2 * n * math.log(2 * p.padded_periods / beta))
        label = name if name != "auto" else f"auto ({p.randomizer})"
        rows.append((label, p.c_gap, p.certificate, sd, bound))
    sd_head, b_head = ("max sd", "bound") if users is not None else ("max sd/√n", "bound/√n")
    click.echo(f"{'randomizer':<22}{'c_gap':>12}{'ln ratio':>10}{sd_head:>14}{b_head:>14}")
    for label, c, cert, sd, b in rows:
        click.echo(f"{label:<22}{c:>12.6g}{cert:>10.4f}{sd:>14.1f}{b:>14.1f}")
    click.echo(
        f"(d = {p.padded_periods}, "
        f"k = {changes}, ε = {epsilon}; max sd at t = d − 1; the bound holds simultaneously "
        f"over all t w.p. {1 - beta}; ln ratio = exact ln(p_max/p_min) ≤ ε)"
    )
    if write_for is not None:
        if out is None:
            raise click.UsageError("--write needs --out PARAMS.json")
        per = per_order_sparsity and write_for != "erlingsson"
        bundle = make_params(periods, changes, epsilon, write_for, per_order_sparsity=per)
        Path(out).write_text(bundle.to_json() + "\n")
        click.echo(f"wrote {out}", err=True)


@command.command(name="simulate")
@click.option("--users", type=int, required=True, help="Number of simulated devices n.")
@click.option("--periods", type=int, required=True, help="Horizon d.")
@click.option("--changes", type=int, required=True, help="Change budget k.")
@click.option("--epsilon", type=float, required=True, help="Each device's local ε.")
@click.option("--randomizer", type=click.Choice(RANDOMIZERS), default="auto", show_default=True)
@click.option("--beta", type=float, default=0.05, show_default=True)
@click.option(
    "--per-order-sparsity",
    is_flag=True,
    default=False,
    help="Randomizer of order h built for min(k, d/2^h) changes (not in the paper; pitfall 5).",
)
@seed_option
@output_options
def simulate_cmd(
    users: int,
    periods: int,
    changes: int,
    epsilon: float,
    randomizer: str,
    beta: float,
    per_order_sparsity: bool,
    seed: int | None,
    json_out: str | None,
    plot_out: str | None,
) -> None:
    """Simulate n devices with at most k changes and report the estimation error."""
    warn_if_seeded(seed)
    rel = simulate_longitudinal(
        users=users,
        periods=periods,
        changes=changes,
        epsilon=epsilon,
        randomizer=randomizer,
        beta=beta,
        per_order_sparsity=per_order_sparsity,
        rng=seed,
    )
    err = np.asarray(rel.errors)
    mp = rel.mechanism_params
    click.echo(f"randomizer {mp['randomizer']}  c_gap {mp['c_gap']:.6g}")
    click.echo(
        f"rmse {float(np.sqrt(np.mean(err**2))):.1f}  max |error| {float(np.max(np.abs(err))):.1f}"
        f"  bound {rel.error.value:.1f} (w.p. {1 - beta})"
    )
    emit_release(rel, json_out, plot_out)


@command.command(name="aggregate")
# not click.Path(exists=True): with --engine spark REPORTS may be a URI (hdfs://, s3a://,
# file://) or a Parquet directory; aggregate_reports_file checks local paths itself
@click.argument("reports", type=str)
@click.option(
    "--params",
    "params_path",
    type=click.Path(exists=True, dir_okay=False),
    required=True,
    help="PARAMS.json shared with the devices.",
)
@click.option("--beta", type=float, default=0.05, show_default=True)
@click.option(
    "--dropouts",
    type=click.Choice(["paper", "per-interval"]),
    default="paper",
    show_default=True,
    help="Missing reports count as 0 (paper) or each (h, j) sum is rescaled (per-interval).",
)
@engine_option
@output_options
def aggregate_cmd(
    reports: str,
    params_path: str,
    beta: float,
    dropouts: str,
    engine: Any,
    json_out: str | None,
    plot_out: str | None,
) -> None:
    """Estimate every period's count from REPORTS (CSV/Parquet: user, h, j, bit).

    REPORTS is a local file or Parquet directory; with --engine spark also a URI read by Spark
    (hdfs://, s3a://, file://), validated and summed on the executors.
    """
    try:
        params = ProtocolParams.from_json(Path(params_path).read_text())
    except OSError as exc:
        raise DataError(f"cannot read {params_path!r}: {exc}") from None
    rel = aggregate_reports_file(reports, params, engine=engine, beta=beta, dropouts=dropouts)
    click.echo(f"{'t':>6}{'estimate':>14}{'sd':>12}")
    for t in range(params.periods):
        click.echo(f"{t + 1:>6}{rel.value[t]:>14.1f}{rel.sd[t]:>12.1f}")
    click.echo(f"simultaneous bound {rel.error.value:.1f} (w.p. {1 - beta})")
    emit_release(rel, json_out, plot_out)


command.add_command(devices_command)
