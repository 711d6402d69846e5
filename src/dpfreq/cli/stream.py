"""`dpfreq stream init|append|show`: a reach stream on the command line.

Mirrors :class:`dpfreq.stream.ReachStream`; formatting only. ``init`` creates the stream (and
charges its whole budget, once, to ``--ledger``), ``append`` adds the events of the next
period(s) and prints what they added, ``show`` prints the stream to date from its saved
measurements (free). A daily cron line::

    15 2 * * * dpfreq stream append /srv/reach /data/events-$(date -d yesterday +\\%F).parquet \\
        --through $(date -d yesterday +\\%F) --json /srv/reach-latest.json

(the JSON is public: it goes beside the secret state directory, not into it).
"""

from __future__ import annotations

from typing import Any

import click
import numpy as np

import dpfreq.cli._common as shared
from dpfreq.cli.output import write_output
from dpfreq.cli.spelling import spelled
from dpfreq.cli.stream_options import accuracy_options, parse_horizon
from dpfreq.errors import ParameterError
from dpfreq.stream import ReachStream, StreamRelease

__all__ = ["command", "format_release"]


#: groups drawn by ``--plot`` without ``--group`` (small multiples, largest reach first)
PANELS = 12


def _through(text: str | None) -> Any:
    if text is None:
        return None
    return int(text) if text.strip().lstrip("-").isdigit() else text.strip()


def format_release(rel: StreamRelease, group: str | None = None, rows: int = 10) -> str:
    """The last ``rows`` periods of every k (of one group, or of every group), with the
    per-answer interval half-width."""
    groups: list[str | None] = [None] if rel.groups is None else (
        [group] if group is not None else list(rel.groups))
    conf = rel.error.confidence or 0.95
    lines = [f"# dpfreq stream: unit={rel.unit}, epsilon={rel.epsilon:g}, delta={rel.delta:g}, "
             f"method={rel.mechanism_params['method']}; ± = {conf:.0%} per-answer interval",
             f"# why: {rel.mechanism_params['why']}"]
    if "coverage" in rel.mechanism_params:
        lines.append(f"# coverage: {spelled(rel.mechanism_params['coverage'])}")
    if rel.dropped_fraction is not None:
        lines.append(f"# dropped by the cap: {rel.dropped_fraction.description}")
    lines += _noise_lines(rel, groups)
    periods = np.asarray(rel.periods)
    shown = range(max(0, periods.size - rows), periods.size)
    for g in groups:
        curves = rel.value if g is None else rel.value[g]
        upper = rel.error.upper if g is None else rel.error.upper[g]
        head = ["period"] + [f"{k}+ reach" for k in rel.k_values]
        body = [[str(periods[i])] + [f"{np.rint(curves[k][i]) + 0:.0f} "
                                     f"±{upper[k][i] - curves[k][i]:.0f}"
                                     for k in rel.k_values] for i in shown]
        if g is not None:
            lines.append(f"# group {g}")
        width = [max(len(r[c]) for r in [head, *body]) for c in range(len(head))]
        lines += ["  ".join(cell.rjust(w) for cell, w in zip(r, width, strict=True))
                  for r in [head, *body]]
    return "\n".join(lines)


def _noise_lines(rel: StreamRelease, groups: list[str | None]) -> list[str]:
    """``# smaller than its noise`` when the statement is vacuous, or naming the shown groups
    whose every answer is (post-processing of the release)."""
    if rel.error.vacuous:
        return ["# VACUOUS: smaller than its noise: every answer's interval reaches 0 (the "
                "release cannot tell these counts from 0; a stream with a larger epsilon or "
                "fewer k would)"]
    if rel.groups is None:
        return []
    small = [str(g) for g in groups
             if all(bool(np.all(m)) for m in rel.below_noise(g).values())]
    if not small:
        return []
    shown = ", ".join(small[:30]) + (f", … ({len(small)} groups)" if len(small) > 30 else "")
    return [f"# smaller than their noise ({len(small)} of {len(groups)} groups: every answer's "
            f"interval reaches 0): {shown}"]


def _check_group(s: ReachStream, group: str | None, command: str) -> None:
    """Refuse a ``--group`` the stream does not have before anything is appended or built
    (``command``: ``"append"`` or ``"show"``, named in the refusal)."""
    groups = s.params.groups
    if group is not None and (groups is None or group not in groups):
        rule = "one of the stream's groups" if groups is not None else (
            "left out (the stream has no groups)")
        raise ParameterError(f"--group of dpfreq stream {command} must be {rule}; "
                             f"got {group!r}.")


def _emit(rel: StreamRelease, json_out: str | None, plot_out: str | None,
          group: str | None, rows: int) -> None:
    if json_out is not None:
        write_output(rel.to_json(), json_out)
    if plot_out is not None:
        from dpfreq.plotting import save_figure

        save_figure(rel.plot(group=group, max_panels=PANELS), plot_out)
        left = len(rel.groups) - PANELS if rel.groups is not None and group is None else 0
        click.echo(f"wrote {plot_out}" + (
            f" (the {PANELS} groups with the largest released reach; {left} left out: "
            "--group G plots any one)" if left > 0 else ""), err=True)
    if json_out != "-":
        click.echo(format_release(rel, group, rows))


@click.group(name="stream")
def command() -> None:
    """Reach that updates every period: a stream released from one budget."""


@command.command(name="init")
@click.argument("state", type=click.Path(file_okay=False))
@click.option("--item", required=True, help="Column naming the item (user) of each event.")
@click.option("--time", "time_col", required=True, help="Column with the event time.")
@click.option("--start", default=None, help="Start of period 1 (date or timestamp, UTC); "
              "with --period. Without both the time column holds integer periods 1, 2, ...")
@click.option("--period", default=None, help="Period length ('1d', '6h', '1w').")
@accuracy_options
@click.option("--late", type=click.Choice(["drop", "error"]), required=True,
              help="Events of an already closed period in a later append: dropped or refused.")
@click.option("--state-engine", "state_engine",
              type=click.Choice(["duckdb", "memory", "spark"]), default="duckdb",
              show_default=True,
              help="Where the per-item state lives: Parquet files updated by DuckDB, numpy "
                   "arrays (appends read their files with DuckDB), or Parquet directories "
                   "updated by Spark SQL (appends read their files with Spark).")
@shared.seed_option
@shared.ledger_option
def init(state: str, item: str, time_col: str, horizon_text: str, start: str | None,
         period: str | None, k_text: str, unit: str, epsilon: float, delta: float,
         method: str, late: str, group: str | None, groups_file: str | None,
         max_groups_per_item: int | None, capping_epsilon: float | None, confidence: float,
         state_engine: str, seed: int | None, accountant: Any = None) -> None:
    """Create the stream STATE (a new directory) and charge its whole budget once."""
    shared.warn_if_seeded(seed)
    horizon = parse_horizon(horizon_text)
    s = ReachStream.create(
        state, item=item, time=time_col, horizon=horizon, start=start,
        period=period, k_values=shared.parse_int_list(k_text, "--k"), unit=unit,
        epsilon=epsilon, delta=delta, method=method, late=late, group=group,
        groups=groups_file, max_groups_per_item=max_groups_per_item, confidence=confidence,
        engine=state_engine, capping_epsilon=capping_epsilon, rng=seed, accountant=accountant)
    click.echo(f"created stream {state}: method {s.plan.method}; {s.plan.record['why']}",
               err=True)
    click.echo(f"SECRET: {state} holds the noise key and exact counts; protect it like the "
               "raw data.", err=True)


@command.command(name="append")
@click.argument("state", type=click.Path(file_okay=False))
@click.argument("file", type=shared.INPUT_FILE)
@click.option("--through", "through_text", required=True, metavar="PERIOD",
              help="Last period this append closes (integer, or a date/timestamp). Required: "
                   "a re-run of yesterday's file names yesterday (a re-send, answered from "
                   "the state) instead of closing today's period without its events.")
@click.option("--group", "show_group", default=None,
              help="Print (and plot) only this group; without it --plot draws every group, "
                   "at most 12 (the largest released reach first).")
@click.option("--rows", type=shared.POSITIVE, default=10, show_default=True,
              help="Periods printed (the last ones).")
@click.option("--spark-master", "spark_master", default=None, metavar="URL",
              help="Spark master URL for a stream whose state is on Spark (default "
                   f"{shared.DEFAULT_SPARK_MASTER}; ignored when a session is already active, "
                   "e.g. under spark-submit).")
@shared.output_options
def append(state: str, file: str, through_text: str, show_group: str | None,
           rows: int, spark_master: str | None, json_out: str | None,
           plot_out: str | None) -> None:
    """Append the events of FILE (the next period(s)) to the stream STATE."""
    s = ReachStream.open(state)
    _check_group(s, show_group, "append")
    if spark_master is not None:
        if s.params.engine != "spark":
            raise click.UsageError("--spark-master needs a stream created with "
                                   "--state-engine spark.")
        _ = shared.resolve_engine_option("spark", spark_master).spark  # start the session
    rels = s.append(file, through=_through(through_text))
    _emit(rels[-1], json_out, plot_out, show_group, rows)


@command.command(name="show")
@click.argument("state", type=click.Path(file_okay=False))
@click.option("--through", "through_text", default=None, metavar="PERIOD",
              help="A past period (default: the last appended).")
@click.option("--group", "show_group", default=None,
              help="Print (and plot) only this group; without it --plot draws every group, "
                   "at most 12 (the largest released reach first).")
@click.option("--rows", type=shared.POSITIVE, default=10, show_default=True,
              help="Periods printed (the last ones).")
@click.option("--confidence", type=float, default=None,
              help="Confidence of the intervals (default: the stream's).")
@shared.output_options
def show(state: str, through_text: str | None, show_group: str | None, rows: int,
         confidence: float | None, json_out: str | None, plot_out: str | None) -> None:
    """Print the stream STATE to date (or through a past period): free, no budget."""
    s = ReachStream.open(state)
    _check_group(s, show_group, "show")
    rel = s.release(_through(through_text), confidence=confidence)
    _emit(rel, json_out, plot_out, show_group, rows)
