"""Options shared by the ``dpfreq plan`` commands, and the one way they print a plan's lines."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import click

__all__ = ["echo_plan", "target_option"]


def _check_target(ctx: click.Context, param: click.Parameter,
                  value: float | None) -> float | None:
    from dpfreq._validate import check_positive_float

    return None if value is None else check_positive_float(value, param.name or "target")


def target_option(option: str, *, metavar: str, help: str) -> Any:
    """A ``--target-*`` accuracy target of ``dpfreq plan``: checked while options are parsed by
    the library's check of every planner's target (:func:`~dpfreq._validate.
    check_positive_float`, a finite number > 0), whose error :func:`dpfreq.cli.main.main`
    prints in the command's spelling; so a bad target is refused before anything is printed."""
    return click.option(option, type=float, default=None, metavar=metavar,
                        callback=_check_target, help=help)


def echo_plan(lines: Iterable[str], *, err: bool = False) -> None:
    """Print a plan's lines (the library's explanations among them) in the spelling of the
    command that runs (:func:`~dpfreq.cli.spelling.spelled`: ``unit='item'`` reads
    ``--unit item``), on stdout or (``err``) stderr."""
    from dpfreq.cli.spelling import spelled

    for line in lines:
        click.echo(spelled(line), err=err)
