"""`dpfreq longitudinal`: FutureRand locally private longitudinal counts.

Subcommands ``params`` (c_gap and predicted error per method), ``simulate`` (vectorized
simulation with truth and errors) and ``aggregate`` (server side on collected reports).
Formatting only; the work is in :mod:`dpfreq.longitudinal`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import numpy as np

from dpfreq.cli._common import (
    COUNT,
    INPUT_FILE,
    POSITIVE,
    emit_release,
    engine_option,
    output_options,
    output_path_option,
    seed_option,
    warn_if_seeded,
    write_output,
)
from dpfreq.cli.spelling import spelled
from dpfreq.errors import DataError, ParameterError
from dpfreq.longitudinal import (
    ProtocolParams,
    aggregate_reports_file,
    make_params,
    simulate_longitudinal,
)

__all__ = ["command"]

METHODS = ["auto", "calibrated", "erlingsson", "futurerand", "rr", "threshold"]


@click.group(name="longitudinal")
def command() -> None:
    """Locally private daily counts of a Boolean state with at most k changes (FutureRand)."""


def _time_axis(start: str | None, period: str | None) -> dict[str, Any]:
    return {"start": start, "period": period}


@command.command(name="params")
@click.option("--horizon", type=POSITIVE, required=True,
              help="Number of periods d (padded to a power of two inside the protocol).")
@click.option("--max-changes", type=POSITIVE, required=True,
              help="Change budget k per device.")
@click.option("--epsilon", type=float, required=True, help="Each device's local ε.")
@click.option("--devices", type=POSITIVE, default=None,
              help="Number of devices n for the predicted error (without it: error per √n).")
@click.option("--confidence", type=float, default=0.95, show_default=True,
              help="Confidence of the intervals and the band.")
@click.option("--method", "write_for", type=click.Choice(METHODS), default=None,
              help="Write the parameter bundle of this method (use with --out).")
@output_path_option("--out", "out", suffixes=(".json",), allow_stdout=True,
                    help="PARAMS.json path ('-': the JSON on stdout, the table on stderr).")
@click.option("--per-order-sparsity", is_flag=True, default=False,
              help="Randomizer of order h built for min(k, d/2^h) changes (not in the paper).")
@click.option("--start", default=None, help="Date of period 1 (ISO), written into the bundle.")
@click.option("--period", default=None, help="Period length (1d, 7d, 1w, 6h), with --start.")
def params_cmd(horizon: int, max_changes: int, epsilon: float, devices: int | None,
               confidence: float, write_for: str | None, out: str | None,
               per_order_sparsity: bool, start: str | None, period: str | None) -> None:
    """Table of c_gap, certificate, largest per-period sd and interval half-width per method.

    The sd and the half-width are those of `dpfreq plan longitudinal` (and of the estimate
    itself) for the same parameters: one error statement everywhere.
    """
    from dpfreq.longitudinal import plan_longitudinal

    if write_for is not None and out is None:
        raise click.UsageError("--method needs --out PARAMS.json")
    # every parameter (the time axis too) is checked before anything is printed
    bundle = make_params(horizon=horizon, max_changes=max_changes, epsilon=epsilon,
                         method=write_for or "auto",
                         per_order_sparsity=per_order_sparsity and write_for != "erlingsson",
                         **_time_axis(start, period))
    rows = []
    for name in ["rr", "erlingsson", "futurerand", "calibrated", "threshold", "auto"]:
        per = per_order_sparsity and name != "erlingsson"
        p = make_params(horizon=horizon, max_changes=max_changes, epsilon=epsilon,
                        method=name, per_order_sparsity=per)
        # sd is exactly proportional to √n: without --devices, n = 1 gives sd/√n
        plan = plan_longitudinal(horizon=horizon, max_changes=max_changes, epsilon=epsilon,
                                 method=name, devices=devices or 1, confidence=confidence,
                                 per_order_sparsity=per)
        label = name if name != "auto" else f"auto ({p.method})"
        half = f"{plan.max_halfwidth:.1f}" if devices is not None else "-"
        rows.append((label, p.c_gap, p.certificate, float(np.max(plan.sd)), half))
    sd_head = "max sd" if devices is not None else "max sd/√n"
    to_err = out == "-"  # stdout then carries only the JSON bundle
    click.echo(f"{'method':<22}{'c_gap':>12}{'ln ratio':>10}{sd_head:>14}{'interval ±':>16}",
               err=to_err)
    for label, c, cert, sd, half in rows:
        click.echo(f"{label:<22}{c:>12.6g}{cert:>10.4f}{sd:>14.1f}{half:>16}", err=to_err)
    click.echo(f"(horizon {horizon}, padded to {p.padded_horizon}; k = {max_changes}, ε = "
               f"{epsilon}; largest over the periods; each interval holds w.p. {confidence}, "
               "as dpfreq plan longitudinal and the estimate state it; ln ratio = exact "
               "ln(p_max/p_min) of the sampled law, ≤ ε)", err=to_err)
    if devices is None:
        click.echo("(give --devices N for the interval half-widths: Hoeffding's or "
                   "Bernstein's bound, whichever is smaller, is not proportional to √n)",
                   err=to_err)
    if write_for is not None and out is not None:
        write_output(bundle.to_json(), out)


@command.command(name="simulate")
@click.option("--devices", type=POSITIVE, required=True, help="Number of simulated devices n.")
@click.option("--horizon", type=POSITIVE, required=True, help="Number of periods d.")
@click.option("--max-changes", type=POSITIVE, required=True, help="Change budget k.")
@click.option("--epsilon", type=float, required=True, help="Each device's local ε.")
@click.option("--method", type=click.Choice(METHODS), default="auto", show_default=True,
              help="The randomizer each device runs (auto: the largest exact gap).")
@click.option("--confidence", type=float, default=0.95, show_default=True,
              help="Confidence of the intervals and the band.")
@click.option("--per-order-sparsity", is_flag=True, default=False,
              help="Randomizer of order h built for min(k, d/2^h) changes (not in the paper).")
@click.option("--start", default=None, help="Date of period 1 (ISO) for dated output.")
@click.option("--period", default=None, help="Period length (1d, 7d, 1w, 6h), with --start.")
@click.option("--rows", type=COUNT, default=None, metavar="N",
              help="Print only the first N periods of the table (default: all).")
@seed_option
@output_options
def simulate_cmd(devices: int, horizon: int, max_changes: int, epsilon: float,
                 method: str, confidence: float, per_order_sparsity: bool,
                 start: str | None, period: str | None, rows: int | None, seed: int | None,
                 json_out: str | None, plot_out: str | None) -> None:
    """Simulate n devices with at most k changes and report the estimation error."""
    warn_if_seeded(seed)
    rel = simulate_longitudinal(devices=devices, horizon=horizon, max_changes=max_changes,
                                epsilon=epsilon, method=method, confidence=confidence,
                                per_order_sparsity=per_order_sparsity, rng=seed,
                                **_time_axis(start, period))
    emit_release(rel, json_out, plot_out)  # files first: a reader stopping early loses nothing
    _echo_release(rel, f"longitudinal simulation of {devices:,} devices (synthetic states)",
                  truth=np.asarray(rel.truth), rows=rows)
    err = np.asarray(rel.errors)
    covered = np.mean((rel.error.lower <= rel.truth) & (rel.truth <= rel.error.upper))
    click.echo(f"# rmse {float(np.sqrt(np.mean(err**2))):.1f}  max |error| "
               f"{float(np.max(np.abs(err))):.1f}  intervals covering the truth "
               f"{covered:.1%} (each holds w.p. >= {confidence}); the truth is shown only "
               "because the states are simulated")


@command.command(name="aggregate")
# INPUT_FILE: a missing local file is refused early, a URI (hdfs://, s3a://) goes to Spark
@click.argument("reports", type=INPUT_FILE)
@click.option("--params", "params_path", type=click.Path(exists=True, dir_okay=False),
              required=True, help="PARAMS.json shared with the devices.")
@click.option("--enrolment", "enrolment", type=INPUT_FILE, default=None,
              help="Enrolment table (Parquet/CSV with columns device, order; the service's "
                   "enrolment export): the enrolled population.")
@click.option("--devices", "devices", default=None, metavar="N0,N1,...",
              help="Enrolled devices per order 0..log d (comma-separated), instead of "
                   "--enrolment.")
@click.option("--confidence", type=float, default=0.95, show_default=True,
              help="Confidence of the intervals and the band.")
@click.option("--dropouts", type=click.Choice(["paper", "per-interval"]), default="paper",
              show_default=True,
              help="Missing reports count as 0 (paper) or each sum is rescaled (per-interval).")
@engine_option
@output_options
def aggregate_cmd(reports: str, params_path: str, enrolment: str | None, devices: str | None,
                  confidence: float, dropouts: str, engine: Any, json_out: str | None,
                  plot_out: str | None) -> None:
    """Estimate every period's count from REPORTS (CSV/Parquet with columns device, order,
    interval, bit and optionally param_id) and the enrolled population.

    REPORTS is a local file or Parquet directory; with --engine spark also a URI read by Spark
    (hdfs://, s3a://, file://), validated and summed on the executors. The population is an
    input (--enrolment or --devices): the devices present in REPORTS undercount it whenever a
    report is missing. The service's report and enrolment exports re-aggregate to its estimate
    exactly.
    """
    if (enrolment is None) == (devices is None):
        raise click.UsageError("give the enrolled population: exactly one of --enrolment FILE "
                               "or --devices N0,N1,... (devices per order).")
    try:
        text = Path(params_path).read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read {params_path!r}: {exc.strerror}.") from None
    params = ProtocolParams.from_json(text, label=repr(params_path))
    enrolled: Any = enrolment
    if devices is not None:
        try:
            enrolled = [int(v) for v in devices.split(",")]
        except ValueError:
            enrolled = []
        if len(enrolled) != params.orders or min(enrolled) < 0 or sum(enrolled) > 2**53:
            raise ParameterError(f"--devices of dpfreq longitudinal aggregate must be "
                                 f"{params.orders} comma-separated non-negative integers "
                                 f"(devices per order 0..{params.orders - 1}, at most 2^53 in "
                                 f"all); got {devices!r}.")
    rel = aggregate_reports_file(reports, params, enrolled=enrolled, engine=engine,
                                 confidence=confidence, dropouts=dropouts)
    emit_release(rel, json_out, plot_out)  # files first: a reader stopping early loses nothing
    _echo_release(rel, f"longitudinal aggregate of {reports}")


def _echo_release(rel: Any, what: str, truth: Any = None, rows: int | None = None) -> None:
    """Header (ε, δ, unit, mechanism, error statement) and the per-period table (its first
    ``rows`` periods; None: all)."""
    mp = rel.mechanism_params
    click.echo(f"# dpfreq {what}")
    click.echo(f"# epsilon={rel.epsilon:g} (local: each device's whole transcript), "
               f"delta={rel.delta:g}; unit of privacy: {rel.unit} (one device's whole sequence "
               "of states)")
    click.echo(f"# mechanism {rel.mechanism}: method {mp.get('method')}, c_gap "
               f"{mp.get('c_gap', float('nan')):.6g}; estimates clamped to [0, {rel.devices}] "
               "devices")
    click.echo(f"# error: {spelled(rel.error.description)}")
    table = rel.table()
    first = "date" if "date" in table else "period"
    head = f"{first:>12}{'estimate':>14}{'lower':>12}{'upper':>12}"
    click.echo(head + (f"{'true':>12}" if truth is not None else ""))
    ready = rel.available
    for i in range(rel.horizon if rows is None else min(rows, rel.horizon)):
        row = (f"{table[first][i]!s:>12}{table['estimate'][i]:>14.1f}"
               f"{table['lower'][i]:>12.1f}{table['upper'][i]:>12.1f}" if ready[i] else
               f"{table[first][i]!s:>12}{'not ended':>14}{'-':>12}{'-':>12}")
        click.echo(row + (f"{truth[i]:>12.0f}" if truth is not None else ""))

