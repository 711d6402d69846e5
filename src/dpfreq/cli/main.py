"""Entry point of the ``dpfreq`` command: ``dpfreq profile | anonymize | reach | longitudinal |
demo``. Bad input exits with code 2 and one line on stderr, never a traceback."""

from __future__ import annotations

import sys

import click

from dpfreq import __version__
from dpfreq.cli import anonymize, demo, longitudinal, profile, reach
from dpfreq.errors import DPFreqError

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dpfreq")
def cli() -> None:
    """dpfreq: differentially private frequency statistics.

    Every release prints its privacy parameters (ε, δ), the mechanism and an error bound.
    """


for _module in (profile, anonymize, reach, longitudinal, demo):
    cli.add_command(_module.command)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; map user errors to exit code 2 with a single line on stderr.

    Returns 0 on success (a subcommand's return value is not an exit status).
    """
    try:
        cli.main(args=argv, prog_name="dpfreq", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("dpfreq: aborted", err=True)
        sys.exit(1)
    except click.ClickException as exc:
        click.echo(f"dpfreq: error: {_one_line(exc.format_message())}", err=True)
        sys.exit(2)
    except (DPFreqError, ValueError, OSError) as exc:
        click.echo(f"dpfreq: error: {_one_line(str(exc))}", err=True)
        sys.exit(2)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
