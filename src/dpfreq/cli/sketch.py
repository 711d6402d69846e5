"""`dpfreq sketch`: reach and frequency across publishers from each party's private sketch.

``key`` writes a new shared hash key (parties only); ``params`` writes the measurement's public
parameters; ``build`` turns one party's impression log into its ε-DP sketch file (the budget is
spent here, once per party); ``merge`` combines sketch files of any subset of parties into the
deduplicated reach, k+ reach and frequency with intervals (post-processing: no key, no budget).
Mirrors :mod:`dpfreq.crossparty`; formatting only. The shuffle mode's subcommands (``share``,
``shuffle-params``, ``shuffle-setup``, ``shuffle-result``) join this group from
:mod:`dpfreq.cli.sketch_shuffle`, which is what ``dpfreq sketch`` loads.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import click

import dpfreq.cli._common as shared
from dpfreq.cli.output import rescue_file
from dpfreq.errors import DataError

__all__ = ["command", "format_release", "load_key", "log_columns", "log_selection"]


@click.group(name="sketch", no_args_is_help=True)
def command() -> None:
    """Reach and frequency across publishers from each party's private sketch."""


@command.command(name="key")
@click.argument("keyfile")
def key_command(keyfile: str) -> None:
    """Write a new shared hash key to KEYFILE (mode 0600; refused if it exists).

    Give it to every party of the measurement, never to whoever merges: with it, registers can
    be traced back to user ids.
    """
    from dpfreq.crossparty import new_hash_key, write_hash_key

    path = Path(keyfile)
    if not keyfile or keyfile == shared.STDOUT or path.exists() or not path.parent.is_dir():
        raise click.BadParameter("must be a new file in an existing directory (a key is never "
                                 "overwritten)", param_hint="KEYFILE")
    write_hash_key(path, new_hash_key())
    click.echo(f"wrote {keyfile} (SECRET: the parties' shared hash key)", err=True)


def load_key(path: str) -> bytes:
    """The shared hash key in ``path`` (a key file of 'dpfreq sketch key')."""
    from dpfreq.crossparty import read_hash_key

    return read_hash_key(path)


def _epsilon_frequency(text: str) -> float | None:
    if text.strip().lower() == "none":
        return None
    try:
        return float(text)
    except ValueError:
        raise click.BadParameter(f"must be a number or 'none' (reach-only sketches); got "
                                 f"{text!r}", param_hint="--epsilon-frequency") from None


@command.command(name="params")
@click.option("--measurement", required=True, help="Public name of the measurement.")
@click.option("--registers", type=shared.IntegerType(1, 2**30), required=True,
              help="Number of registers R of the virtual-ID space.")
@click.option("--sampling-start", default=None, required=True,
              help="Start of the VID sampling interval, a fraction of the space (0, 1/4, 0.5).")
@click.option("--sampling-width", default=None, required=True,
              help="Width of the VID sampling interval (1 = every user; 1/8, 0.125).")
@click.option("--max-frequency", type=shared.IntegerType(1, 1000), required=True,
              help="Frequency cap K: frequencies 1..K-1 and K+ are estimated.")
@click.option("--epsilon-reach", type=float, required=True,
              help="Epsilon of the reach bits (randomized response).")
@click.option("--epsilon-frequency", required=True, metavar="EPSILON|none",
              help="Epsilon of the frequency registers (discrete Laplace), or 'none' for "
                   "reach-only sketches.")
@click.option("--key", "key_file", required=True, metavar="KEYFILE",
              help="The shared hash key (its fingerprint goes in the parameters).")
@shared.output_path_option("--out", "out", suffixes=(".json",), allow_stdout=True,
                           required=True,
                           help="Where to write the parameters (public JSON; '-' = stdout).")
def params_command(measurement: str, registers: int, sampling_start: str, sampling_width: str,
                   max_frequency: int, epsilon_reach: float, epsilon_frequency: str,
                   key_file: str, out: str) -> None:
    """Write the public parameters of a cross-party measurement."""
    from dpfreq.crossparty import CrossPartyParams, key_fingerprint

    params = CrossPartyParams(
        measurement=measurement, registers=registers, sampling_start=sampling_start,
        sampling_width=sampling_width, max_frequency=max_frequency, epsilon_reach=epsilon_reach,
        epsilon_frequency=_epsilon_frequency(epsilon_frequency), hash="sha256-prefix/v1",
        key_id=key_fingerprint(load_key(key_file)))
    shared.write_output(params.to_json(), out, what="(public parameters)")


def _load_params(path: str) -> Any:
    from dpfreq.crossparty import CrossPartyParams

    return CrossPartyParams.load(path)


def log_selection(time: str | None, start: str | None, end: str | None,
                  campaigns: str | None) -> tuple[tuple[Any, Any] | None, list[str] | None]:
    """The rows of a party's LOG that count, from the options of :func:`log_columns`: the
    measurement period of ``--time`` with ``--start``/``--end`` (None without ``--time``) and
    the list of ``--campaigns`` (None when not given)."""
    if time is None and (start is not None or end is not None):
        raise click.UsageError("--start and --end need --time.")
    period = _log_period(start, end) if time is not None else None
    if time is not None and period is None:
        raise click.UsageError("--time needs --start and --end (the measurement period).")
    names = None if campaigns is None else [c.strip() for c in campaigns.split(",")
                                            if c.strip()]
    return period, names


def _log_period(start: str | None, end: str | None) -> tuple[Any, Any] | None:
    """The measurement period of ``--start``/``--end`` (None when neither is given)."""
    if start is None and end is None:
        return None
    if start is None or end is None:
        raise click.UsageError("--start and --end go together (the measurement period).")
    return _instant(start, "--start"), _instant(end, "--end")


def _instant(text: str, option: str) -> Any:
    """An integer, or an ISO date/time (read as UTC without a zone)."""
    import datetime as dt

    try:
        return shared.INTEGER.convert(text, None, None)
    except click.BadParameter:
        pass
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(f"must be an integer time or an ISO date/time; got {text!r}",
                                 param_hint=option) from None


def log_columns(func: Any) -> Any:
    """The options that say which rows and columns of a party's LOG count (``build`` and the
    shuffle's ``share``): --user, --time with --start/--end, --campaign with --campaigns."""
    options = [
        click.option("--user", required=True, help="The user column of LOG."),
        click.option("--time", default=None, help="The time column (with --start and --end)."),
        click.option("--start", default=None,
                     help="First time counted (integer or ISO date/time)."),
        click.option("--end", default=None,
                     help="First time not counted (integer or ISO date/time)."),
        click.option("--campaign", default=None, help="The campaign column (with --campaigns)."),
        click.option("--campaigns", default=None, metavar="A,B,...",
                     help="Comma-separated campaigns counted (public list)."),
    ]
    return shared.with_options(func, options)


@command.command(name="build")
@click.argument("log", type=shared.INPUT_FILE)
@click.option("--party", required=True, help="This party's public name.")
@click.option("--params", "params_file", required=True, metavar="PARAMS.json",
              help="The measurement's parameters (from 'dpfreq sketch params').")
@click.option("--key", "key_file", required=True, metavar="KEYFILE",
              help="The shared hash key (from 'dpfreq sketch key').")
@log_columns
@shared.output_path_option("--out", "out", required=True,
                           help="Where to write the sketch file (an epsilon-DP release).")
@shared.engine_option
@shared.seed_option
@shared.ledger_option
def build_command(log: str, party: str, params_file: str, key_file: str, user: str,
                  time: str | None, start: str | None, end: str | None, campaign: str | None,
                  campaigns: str | None, out: str, engine: Any, seed: int | None,
                  accountant: Any) -> None:
    """Build one party's epsilon-DP sketch of LOG (one row per impression).

    The sketch file is an epsilon-DP release (epsilon of the parameters; unit: one user with all
    their impressions at this party), signed when DPFREQ_ARTIFACT_KEY is set.
    """
    from dpfreq.crossparty import build_sketch

    period, names = log_selection(time, start, end, campaigns)
    params = _load_params(params_file)
    key = load_key(key_file)
    shared.warn_if_seeded(seed)
    shared.warn_if_no_rows(log, "the sketch")  # a party with no events: all-zero registers
    sketch = build_sketch(log, user=user, party=party, params=params, key=key, time=time,
                          period=period, campaign=campaign, campaigns=names, engine=engine,
                          rng=seed, accountant=accountant)
    try:
        sketch.save(out)
    except (OSError, DataError) as exc:  # drawn and charged: never lose it
        raise rescue_file(sketch.save, exc, failed=f"--out {out}", what="sketch",
                          suffix=".sketch") from None
    click.echo(f"wrote {out}: sketch of party {party!r} ({sketch.coverage.describe()}), "
               f"epsilon={sketch.epsilon:g}, unit=item ({sketch.relation})", err=True)


def _number(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:,.0f}"


def format_release(rel: Any) -> list[str]:
    """The merge as text: the union's and each party's k+ reach with intervals, and the
    union's frequency distribution."""
    conf = rel.error.confidence
    from dpfreq.crossparty import Coverage

    covers = Coverage.from_dict(rel.mechanism_params["coverage"]).describe()
    lines = [f"# dpfreq sketch merge: {len(rel.parties)} parties ({', '.join(rel.parties)}); "
             f"epsilon={rel.epsilon:g}, delta={rel.delta:g} per party, unit={rel.unit} (a user "
             f"with all their impressions at one party); mechanism={rel.mechanism}",
             f"# measurement {rel.mechanism_params['params']['measurement']!r} covering "
             f"{covers}",
             *(["# seeded sketches (reproducible noise): NOT for production"]
               if rel.seeded else []),
             f"# {conf:g} intervals of the raw estimates; estimates after the consistency step"
             + ("; VACUOUS: registers saturated" if rel.error.vacuous else ""),
             "entity\tk\treach\tlower\tupper"]
    for row in zip(*rel.table().values(), strict=True):
        name, k, reach, lo, hi = row
        lines.append(f"{name}\t{k}+\t{_number(reach)}\t{_number(lo)}\t{_number(hi)}")
    if rel.frequency is not None:
        K = rel.max_frequency
        lines.append("frequency\tshare\tlower\tupper")
        for i in range(K):
            label = f"{i + 1}+" if i == K - 1 else f"{i + 1}"
            lines.append(f"{label}\t{rel.frequency[i]:.4f}\t{rel.frequency_lower[i]:.4f}\t"
                         f"{rel.frequency_upper[i]:.4f}")
    return lines


def _expected_coverage(start: str | None, end: str | None, campaigns: str | None) -> Any:
    """The coverage ``merge`` pins from ``--start``/``--end``/``--campaigns`` (None when none
    is given; when one is, what is not given is pinned to every time or every campaign)."""
    from dpfreq.crossparty import Coverage
    from dpfreq.crossparty.registers import check_log_spec

    period = _log_period(start, end)
    if period is None and campaigns is None:
        return None
    _, names = log_selection(None, None, None, campaigns)
    spec = check_log_spec(user="user", time=None if period is None else "time", period=period,
                          campaign=None if names is None else "campaign", campaigns=names)
    return Coverage.of(spec.period, period, spec.campaigns)


@command.command(name="merge")
@click.argument("sketches", nargs=-1, required=True)
@click.option("--confidence", type=float, default=0.95, show_default=True,
              help="Confidence level of the intervals.")
@click.option("--params", "params_file", default=None, metavar="PARAMS.json",
              help="The measurement's parameters (from 'dpfreq sketch params'): a sketch of "
                   "other parameters is refused.")
@click.option("--start", default=None,
              help="The first time the sketches must count (as given to 'build'; with --end).")
@click.option("--end", default=None,
              help="The first time they must not count (integer or ISO date/time).")
@click.option("--campaigns", default=None, metavar="A,B,...",
              help="The campaigns they must count. With --start/--end or --campaigns, what is "
                   "not given is pinned to every time or every campaign.")
@shared.output_options
def merge_command(sketches: tuple[str, ...], confidence: float, params_file: str | None,
                  start: str | None, end: str | None, campaigns: str | None,
                  json_out: str | None, plot_out: str | None) -> None:
    """Merge sketch files of any parties into reach, k+ reach and frequency.

    Post-processing of the sketches: no key, no budget. Refuses sketches of different
    parameters or coverage (period, campaigns), of others than --params, --start/--end and
    --campaigns pin, a sketch given twice, two sketches of one party and any edited file.
    """
    from dpfreq.crossparty import merge_sketches

    params = None if params_file is None else _load_params(params_file)
    coverage = _expected_coverage(start, end, campaigns)
    for path in sketches:
        if not path or not Path(path).exists():
            raise DataError(f"sketch file {path!r} does not exist.")
        if not Path(path).is_file():
            raise DataError(f"sketch file {path!r} is not a file.")
    rel = merge_sketches(list(sketches), confidence=confidence, params=params,
                         coverage=coverage)
    for line in format_release(rel):
        click.echo(line)
    shared.emit_release(rel, json_out, plot_out, text=json.dumps(rel.to_dict(), indent=2))
