"""`dpfreq sketch` with the shuffle mode: noise added once, by two workers.

Adds to the ``dpfreq sketch`` group (:mod:`dpfreq.cli.sketch`):

* ``shuffle-params`` writes the public parameters of a shuffled measurement, with what every
  party counts (the period and campaigns);
* ``shuffle-setup`` creates it at the aggregator and both workers (``dpfreq serve --role
  ...``) with their admin tokens, and writes each party's two tokens and an analyst token;
* ``share`` turns one party's log into its two additive shares and uploads one to each worker
  (no noise and no budget at the party: the workers add the noise, once for every party);
* ``shuffle-result`` reads the aggregator's release.

Mirrors :mod:`dpfreq.crossparty.shuffle` and :mod:`dpfreq.server.roles.client`; formatting
only. ``dpfreq sketch`` loads this module (:data:`dpfreq.cli.main.SUBCOMMANDS`), which adds
these commands to the group of :mod:`dpfreq.cli.sketch` and re-exports it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import click

import dpfreq.cli._common as shared
from dpfreq.cli.sketch import command, load_key, party_columns, selected_coverage
from dpfreq.errors import DataError, EngineUnavailableError

__all__ = ["command"]

_SAFE = re.compile(r"[A-Za-z0-9._-]{1,100}")


def _roles() -> Any:
    try:
        from dpfreq.server.roles import client
    except ImportError as exc:
        raise EngineUnavailableError("the shuffle services' client needs the server extra: "
                                     "pip install 'dpfreq[server]'") from exc
    return client


def _urls(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Base URLs: ``http://`` or ``https://`` and a host, checked before anything runs."""
    values = value if isinstance(value, tuple) else (value,)
    for url in values:
        if not re.fullmatch(r"https?://[^\s/?#]+(/[^\s?#]*)?", url or ""):
            raise click.BadParameter(f"must be a base URL (http://host:port); got {url!r}")
    return value


def _token(path: str, option: str) -> str:
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise click.BadParameter(f"cannot read {path}: {exc.strerror}.", param_hint=option
                                 ) from None
    if not token:
        raise click.BadParameter(f"{path} is empty.", param_hint=option)
    return token


@command.command(name="shuffle-params")
@click.option("--measurement", required=True,
              help="Id of the measurement (lower-case letters, digits, _ and -).")
@click.option("--registers", type=shared.IntegerType(1, 2**30), required=True,
              help="Number of registers R of the virtual-ID space.")
@click.option("--sampling-start", required=True, help="Start of the VID sampling interval.")
@click.option("--sampling-width", required=True, help="Width of the VID sampling interval.")
@click.option("--max-frequency", type=shared.IntegerType(1, 1000), required=True,
              help="Frequency cap K of each party's registers.")
@click.option("--epsilon", type=float, required=True, help="Epsilon of the whole measurement.")
@click.option("--delta", type=float, required=True, help="Delta of the whole measurement.")
@click.option("--party", "parties", multiple=True, required=True,
              help="A participating party (repeat, in a fixed order).")
@click.option("--histograms", type=click.Choice(["union", "union+parties"]), required=True,
              help="Measure the union only, or each party alone too (the budget is then "
                   "split over 1 + P noisy histograms).")
@click.option("--start", default=None,
              help="First time every party counts (integer or ISO date/time, as 'build' "
                   "reads it; with --end).")
@click.option("--end", default=None,
              help="First time no party counts (integer or ISO date/time).")
@click.option("--campaigns", default=None, metavar="A,B,...",
              help="Comma-separated campaigns every party counts (public list). Without "
                   "--start/--end or --campaigns: every time or every campaign.")
@click.option("--deadline", required=True,
              help="After this instant the workers measure whoever uploaded (ISO, UTC).")
@click.option("--key", "key_file", required=True, metavar="KEYFILE",
              help="The parties' shared hash key (its fingerprint goes in the parameters).")
@shared.output_path_option("--out", "out", suffixes=(".json",), allow_stdout=True,
                           required=True,
                           help="Where to write the parameters (public JSON; '-' = stdout).")
def params_command(measurement: str, registers: int, sampling_start: str, sampling_width: str,
                   max_frequency: int, epsilon: float, delta: float, parties: tuple[str, ...],
                   histograms: str, start: str | None, end: str | None,
                   campaigns: str | None, deadline: str, key_file: str, out: str) -> None:
    """Write the public parameters of a shuffled cross-party measurement.

    They fix what every party counts: the period (--start/--end) and the campaigns
    (--campaigns); each party's 'share' counts only those rows of its log.
    """
    from dpfreq.crossparty import Coverage, key_fingerprint
    from dpfreq.crossparty.shuffle import ShuffleParams

    coverage = selected_coverage(start, end, campaigns)
    params = ShuffleParams(
        measurement=measurement, registers=registers, sampling_start=sampling_start,
        sampling_width=sampling_width, max_frequency=max_frequency, epsilon=epsilon,
        delta=delta, parties=parties, per_party=histograms == "union+parties",
        coverage=Coverage() if coverage is None else coverage, deadline=deadline,
        hash="sha256-prefix/v1", key_id=key_fingerprint(load_key(key_file)))
    shared.write_output(params.to_json(), out, what="(public parameters)")


def _params(path: str) -> Any:
    from dpfreq.crossparty.shuffle import ShuffleParams

    return ShuffleParams.load(path)


@command.command(name="shuffle-setup")
@click.option("--params", "params_file", required=True, metavar="PARAMS.json",
              help="The measurement's parameters (from 'dpfreq sketch shuffle-params').")
@click.option("--aggregator", required=True, callback=_urls, help="The aggregator's base URL.")
@click.option("--aggregator-token-file", required=True, help="The aggregator's admin token.")
@click.option("--worker", "workers", multiple=True, required=True, callback=_urls,
              help="Worker 0's then worker 1's base URL.")
@click.option("--worker-token-file", "worker_tokens", multiple=True, required=True,
              help="Worker 0's then worker 1's admin token file.")
@click.option("--out-dir", required=True, type=click.Path(file_okay=False),
              help="Where to write PARTY.worker0.token, PARTY.worker1.token, analyst.token.")
def setup_command(params_file: str, aggregator: str, aggregator_token_file: str,
                  workers: tuple[str, ...], worker_tokens: tuple[str, ...],
                  out_dir: str) -> None:
    """Create a shuffled measurement at the aggregator and both workers; write the tokens."""
    if len(workers) != 2 or len(worker_tokens) != 2:
        raise click.UsageError("--worker and --worker-token-file go twice each (worker 0, "
                               "then worker 1).")
    params = _params(params_file)
    bad = [p for p in params.parties if not _SAFE.fullmatch(p)]
    if bad:
        raise click.UsageError(f"party names must be file names ([A-Za-z0-9._-]) to write "
                               f"their token files; got {bad[0]!r}.")
    client = _roles()
    tokens = client.setup_measurement(
        params, aggregator=(aggregator, _token(aggregator_token_file,
                                               "--aggregator-token-file")),
        workers=[(u, _token(t, "--worker-token-file"))
                 for u, t in zip(workers, worker_tokens, strict=True)])
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    from dpfreq.artifacts import write_private

    for party, (t0, t1) in tokens["parties"].items():
        write_private(out / f"{party}.worker0.token", (t0 + "\n").encode())
        write_private(out / f"{party}.worker1.token", (t1 + "\n").encode())
    write_private(out / "analyst.token", (tokens["analyst"] + "\n").encode())
    click.echo(f"measurement {params.measurement!r} created at the aggregator and both "
               f"workers; tokens of {len(tokens['parties'])} parties and the analyst in "
               f"{out_dir} (mode 0600)", err=True)


@command.command(name="share")
@click.argument("log", type=shared.INPUT_FILE)
@click.option("--party", required=True, help="This party's name (one of the parameters').")
@click.option("--params", "params_file", required=True, metavar="PARAMS.json",
              help="The measurement's parameters (from 'dpfreq sketch shuffle-params').")
@click.option("--key", "key_file", required=True, metavar="KEYFILE",
              help="The parties' shared hash key.")
@party_columns
@click.option("--worker", "workers", multiple=True, required=True, callback=_urls,
              help="Worker 0's then worker 1's base URL.")
@click.option("--token-file", "token_files", multiple=True, required=True,
              help="This party's token at worker 0, then at worker 1.")
@shared.output_path_option("--state", "state_file", required=True,
                           help="Where the two shares are kept until both workers acknowledged "
                                "them (mode 0600; as secret as the log). A rerun sends the same "
                                "shares again.")
@click.option("--wait", type=float, default=300.0, show_default=True,
              help="Seconds to keep retrying a worker that does not answer.")
@shared.engine_option
@shared.seed_option
def share_command(log: str, party: str, params_file: str, key_file: str, user: str,
                  time: str | None, campaign: str | None, workers: tuple[str, ...],
                  token_files: tuple[str, ...], state_file: str, wait: float, engine: Any,
                  seed: int | None) -> None:
    """Split one party's LOG into two additive shares and send one to each worker.

    Only the rows of the parameters' period and campaigns count (--time and --campaign name
    this party's columns for them).

    No noise is added and no budget is spent here: each share alone is uniformly random, and
    the workers add the noise once, for every party together. Exit code 2 when a worker
    refused the share or did not acknowledge it within --wait seconds.
    """
    if len(workers) != 2 or len(token_files) != 2:
        raise click.UsageError("--worker and --token-file go twice each (worker 0, then "
                               "worker 1).")
    tokens = [_token(t, "--token-file") for t in token_files]
    params = _params(params_file)
    client = _roles()
    state = Path(state_file)
    if state.exists():
        head, _ = client.load_state(state)
        if (head["param_id"], head["party"]) != (params.param_id, party):
            raise DataError(f"{state_file} holds the shares of another measurement or party.")
        click.echo(f"resuming from {state_file}: the same shares are sent again", err=True)
    else:
        from dpfreq.crossparty.shuffle import share_log

        shared.warn_if_seeded(seed)
        shares = share_log(log, user=user, party=party, params=params,
                           key=load_key(key_file), time=time, campaign=campaign,
                           engine=engine, rng=seed)
        client.save_state(state, shares, [])
    outcome = client.upload_shares(state, list(workers), tokens, wait=wait)
    click.echo(json.dumps({"party": party, "measurement": params.measurement, **outcome}))
    if any(outcome[f"worker{w}"] != "acknowledged" for w in (0, 1)):
        raise DataError(f"the shares of party {party!r} were not acknowledged by both workers "
                        f"({outcome['worker0']}; {outcome['worker1']}).")


@command.command(name="shuffle-result")
@click.option("--aggregator", required=True, callback=_urls, help="The aggregator's base URL.")
@click.option("--measurement", required=True, help="The measurement's id.")
@click.option("--token-file", required=True, help="An analyst (or admin) token file.")
@click.option("--wait", type=float, default=60.0, show_default=True,
              help="Seconds to keep asking while the workers' outputs are still missing.")
@shared.output_path_option("--json", "json_out", suffixes=(".json",), allow_stdout=True,
                           help="Write the release's JSON here ('-' = stdout).")
def result_command(aggregator: str, measurement: str, token_file: str, wait: float,
                   json_out: str | None) -> None:
    """Read the release of a shuffled measurement from the aggregator (waiting up to --wait
    seconds while it is not released yet)."""
    import time

    token = _token(token_file, "--token-file")
    deadline = time.monotonic() + max(wait, 0.0)
    while True:
        status, payload = _roles().fetch_result(aggregator, measurement, token)
        if status != 409 or time.monotonic() >= deadline:
            break
        time.sleep(0.25)
    if status != 200:
        raise DataError(f"the aggregator answered {status}: {payload.get('error', payload)}")
    if json_out is not None:
        shared.write_output(json.dumps(payload, indent=2), json_out, what="(the release)")
    for line in _lines(payload):
        click.echo(line, err=json_out == shared.STDOUT)


def _number(x: Any) -> str:
    value = float(x)
    return "inf" if value == float("inf") else f"{value:,.0f}"


def _lines(payload: dict[str, Any]) -> list[str]:
    """The release as text: the union's (and each party's) k+ reach with the raw intervals,
    and the union's frequency distribution."""
    from dpfreq.crossparty import Coverage

    parties, err = payload["parties"], payload["error"]
    mech = payload["mechanism_params"]
    lines = [f"# dpfreq sketch shuffle-result: {len(parties)} parties ({', '.join(parties)}); "
             f"epsilon={payload['epsilon']:g}, delta={payload['delta']:g} for one user with "
             f"all their impressions at every party; mechanism={payload['mechanism']}"]
    lines.append(f"# measurement {mech['params']['measurement']!r} covering "
                 f"{Coverage.from_dict(mech['coverage']).describe()}")
    if payload.get("seeded"):
        lines.append("# seeded noise (reproducible): NOT for production")
    for p, reason in mech["missing"].items():
        lines.append(f"# measured without {p}: {reason}")
    lines += [f"# {err['confidence']:g} intervals of the raw estimates; estimates after the "
              "consistency step", "entity\tk\treach\tlower\tupper"]
    rows = [("union", payload["value"], err["lower"], err["upper"])]
    rows += [(p, payload["party_kplus_reach"][i], payload["party_lower"][i],
              payload["party_upper"][i]) for i, p in enumerate(parties)
             if len(payload["party_kplus_reach"]) > i]
    for name, val, lo, hi in rows:
        lines += [f"{name}\t{k + 1}+\t{_number(val[k])}\t{_number(lo[k])}\t{_number(hi[k])}"
                  for k in range(len(val))]
    K = payload["max_frequency"]
    lines.append("frequency\tshare\tlower\tupper")
    for i in range(K):
        label = f"{i + 1}+" if i == K - 1 else f"{i + 1}"
        f, lo, hi = (float(payload[k][i]) for k in ("frequency", "frequency_lower",
                                                     "frequency_upper"))
        lines.append(f"{label}\t{f:.4f}\t{lo:.4f}\t{hi:.4f}")
    return lines
