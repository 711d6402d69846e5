"""`dpfreq profile show SAVED`: the table, JSON and figure of a saved profile release.

Mirrors :meth:`dpfreq.profile.ProfileRelease.load`; formatting only. The release is recomputed
from the noisy measurement in SAVED (written by ``dpfreq profile --save``), so showing it is
post-processing: nothing is spent and no ledger is charged (the command takes no
``--epsilon`` and no ``--ledger``). Reached through ``dpfreq profile show`` (see
:mod:`dpfreq.cli.profile`).
"""

from __future__ import annotations

from typing import Any

import click

from dpfreq._validate import message
from dpfreq.cli._common import output_options, write_output
from dpfreq.cli.output import warn
from dpfreq.cli.profile_table import echo_profile, parse_rows, rows_option
from dpfreq.errors import DataError, DPFreqError, ParameterError

__all__ = ["command"]


def _show(saved: str, rows: int | None, json_out: str | None, plot_out: str | None) -> None:
    """Load, write the files asked for, print. A failure is raised afresh once the loaded
    release is dropped: the CLI saves every release it finds in a failing traceback as one whose
    budget was spent, which a loaded release is not."""
    from pathlib import Path

    from dpfreq.profile import ProfileRelease

    for option, out in (("--json", json_out), ("--plot", plot_out)):
        if out not in (None, "-") and Path(str(out)).resolve() == Path(saved).resolve():
            raise ParameterError(message(option, "another file than SAVED (it would replace "
                                         "the saved release)", out))
    rel: Any = ProfileRelease.load(saved)
    try:
        if rel.seeded:
            warn(f"{saved} holds a seeded release (reproducible noise); it is NOT for "
                 "production.")
        if json_out is not None:
            write_output(rel.to_json(), json_out)
        if plot_out is not None:
            from dpfreq.plotting import save_figure

            save_figure(rel.plot(), plot_out)
            click.echo(f"wrote {plot_out}", err=True)
        echo_profile(rel, f"the release saved in {saved} (recomputed from its noisy "
                     "measurement; nothing spent)", rows, json_out == "-")
    except (DPFreqError, OSError) as exc:
        failure = (type(exc) if isinstance(exc, DPFreqError) else DataError,
                   str(exc) if isinstance(exc, DPFreqError)
                   else f"cannot write an output of dpfreq profile show ({exc}).")
    else:
        return
    rel = None  # no loaded release may stay in the failing frame
    raise failure[0](failure[1])


@click.command(name="show")
@click.argument("saved", metavar="SAVED")
@rows_option
@output_options
def command(saved: str, rows_text: str, json_out: str | None, plot_out: str | None) -> None:
    """Show the profile release saved in SAVED by `dpfreq profile --save` (no budget spent).

    Every published number (estimate, intervals, band, ℓ1 bound) is recomputed from the noisy
    measurement SAVED holds, so it is the release as it was made, bit for bit. A file that was
    edited (or signed, while DPFREQ_ARTIFACT_KEY is not its key) is refused in one line.
    --json writes the release's JSON, --plot its figure.
    """
    _show(saved, parse_rows(rows_text), json_out, plot_out)
