"""Options and output helpers shared by the subcommands.

Each subcommand module defines a ``command`` (a click command or group) that
:mod:`dpfreq.cli.main` registers. Subcommands raise :class:`dpfreq.errors.DPFreqError` (or
``click.UsageError``) for bad input; :func:`dpfreq.cli.main.main` turns them into one line on
stderr and exit code 2.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

import click

from dpfreq.release import Release

__all__ = [
    "DEFAULT_SPARK_MASTER",
    "SEED_WARNING",
    "emit_release",
    "engine_option",
    "output_options",
    "parse_int_list",
    "resolve_engine_option",
    "seed_option",
    "warn_if_seeded",
]

SEED_WARNING = "warning: --seed makes the noise reproducible; this result is NOT for production."


def seed_option(f: Any) -> Any:
    return click.option(
        "--seed", type=int, default=None,
        help="Seed the noise for reproducible tests and demos. Not private: never in production.",
    )(f)


DEFAULT_SPARK_MASTER = "local[*]"


def resolve_engine_option(engine: str | None, spark_master: str | None) -> Any:
    """What to pass as ``engine=`` to a ``release_*`` function for ``--engine``/``--spark-master``.

    ``None`` (default engine for the source) or an engine name, except for ``spark``: then a
    Spark engine configured with the master URL (default ``local[*]``); its session starts on
    first use. ``--spark-master`` without ``--engine spark`` is a usage error.
    """
    if spark_master is not None and engine != "spark":
        raise click.UsageError("--spark-master needs --engine spark.")
    if engine != "spark":
        return engine
    from dpfreq.engines import get_engine

    return get_engine("spark", master=spark_master or DEFAULT_SPARK_MASTER)


def engine_option(f: Any) -> Any:
    """Add ``--engine memory|duckdb|spark`` and ``--spark-master URL`` to a command.

    The decorated command keeps a single ``engine`` parameter: it receives
    :func:`resolve_engine_option`'s value (None, an engine name, or a configured Spark engine),
    ready to pass on as ``engine=`` to the library.
    """

    @functools.wraps(f)
    def wrapper(*args: Any, engine: str | None = None, spark_master: str | None = None,
                **kwargs: Any) -> Any:
        return f(*args, engine=resolve_engine_option(engine, spark_master), **kwargs)

    wrapper = click.option(
        "--spark-master", "spark_master", default=None, metavar="URL",
        help=f"Spark master URL for --engine spark (default {DEFAULT_SPARK_MASTER}; e.g. "
             "spark://host:7077, yarn, k8s://https://host:443).",
    )(wrapper)
    return click.option(
        "--engine", type=click.Choice(["memory", "duckdb", "spark"]), default=None,
        help="Where exact aggregates are computed (default: duckdb for files; spark runs on "
             "--spark-master).",
    )(wrapper)


def output_options(f: Any) -> Any:
    f = click.option("--json", "json_out", type=click.Path(dir_okay=False, allow_dash=True),
                     default=None, help="Write the release as JSON to this file ('-' = stdout).")(f)
    f = click.option("--plot", "plot_out", type=click.Path(dir_okay=False), default=None,
                     help="Write a PNG figure with error bands to this file.")(f)
    return f


def warn_if_seeded(seed: int | None) -> None:
    if seed is not None:
        click.echo(SEED_WARNING, err=True)


def emit_release(release: Release, json_out: str | None, plot_out: str | None) -> None:
    """Write the JSON and PNG outputs that were asked for; diagnostics go to stderr."""
    if json_out is not None:
        text = release.to_json()
        if json_out == "-":
            click.echo(text)
        else:
            Path(json_out).write_text(text + "\n", encoding="utf-8")
            click.echo(f"wrote {json_out}", err=True)
    if plot_out is not None:
        from dpfreq.plotting import save_figure

        ax = release.plot()
        save_figure(ax, plot_out)
        click.echo(f"wrote {plot_out}", err=True)


def parse_int_list(text: str, param: str) -> list[int]:
    """Parse ``"1,3,5"`` into ``[1, 3, 5]`` with a one-line error otherwise."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(f"must be comma-separated integers; got {text!r}",
                                 param_hint=param) from None
    if not values:
        raise click.BadParameter(f"must list at least one integer; got {text!r}", param_hint=param)
    return values


def echo_err(text: str) -> None:
    click.echo(text, err=True)


def flush() -> None:
    sys.stdout.flush()

