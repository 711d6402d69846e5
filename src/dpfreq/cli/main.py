"""Entry point of the ``dpfreq`` command.

Exit status, the same for every subcommand:

- **0** success (also ``--help``, ``--version`` and a bare ``dpfreq``, which prints the help,
  and a reader of stdout that stops early, ``| head``: every output file is written before
  any text is printed);
- **2** bad input: a usage error, an invalid option value, a file that cannot be read or
  written (or is binary where text is expected), a refused budget — one line
  ``dpfreq: error: ...`` on stderr, never a traceback;
- **1** internal error (a bug in dpfreq): one line ``dpfreq: internal error: ...`` naming the
  exception type and where it was raised, without its message (which could hold values from the
  data); ``DPFREQ_DEBUG=1`` prints the full traceback as well;
- **130** interrupted (Ctrl-C).

Python warnings are shown as one line ``dpfreq: warning: ...`` on stderr.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import click

from dpfreq import __version__
from dpfreq.cli.output import forget_rescued_releases, rescue_drawn_releases, warn
from dpfreq.cli.progress import progress_wanted, tqdm_reporter
from dpfreq.errors import DPFreqError, debug_enabled, public_call
from dpfreq.progress import reporting

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "SUBCOMMANDS",
    "cli",
    "main",
]

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


#: Subcommand name -> module defining it as ``command``. Modules are imported when their command
#: runs (or for the help listing), so one command's imports never slow down or break another.
SUBCOMMANDS = {
    "profile": "dpfreq.cli.profile",
    "plan": "dpfreq.cli.plan",
    "anonymize": "dpfreq.cli.anonymize",
    "reach": "dpfreq.cli.reach",
    "longitudinal": "dpfreq.cli.longitudinal",
    "demo": "dpfreq.cli.demo",
    "ledger": "dpfreq.cli.ledger",
    "serve": "dpfreq.cli.serve",
    "sketch": "dpfreq.cli.sketch_shuffle",  # the sketch group with the shuffle mode
    "stream": "dpfreq.cli.stream",
    "resign": "dpfreq.cli.resign",
}


#: One line per subcommand for ``dpfreq --help``, so that the help imports no command module
#: (each pulls in numpy, scipy or DuckDB); tests check each line against the command's own help.
SHORT_HELP = {
    "anonymize": "Release the anonymized histogram (frequency list) of a file.",
    "demo": "Private profile of a synthetic ad-impression log, beside the truth.",
    "ledger": "Privacy ledger: a budget shared by every release made with it.",
    "longitudinal": "Locally private counts of a Boolean state over time (FutureRand).",
    "plan": "Predict the accuracy of a release before making it (public inputs only).",
    "profile": "Private profile of the item column of a CSV or Parquet file.",
    "reach": "Private reach (k+ counts) of an event log over time windows.",
    "resign": "Re-sign saved files, ledgers and stream states under a new artefact key.",
    "serve": "Collect FutureRand reports over HTTP and serve estimates.",
    "sketch": "Reach and frequency across publishers from each party's private sketch.",
    "stream": "Reach that updates every period: a stream released from one budget.",
}


def _quiet(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:  # silence the reporter the root group installed, for this command
        ctx.with_resource(reporting(None))


def _with_quiet(command: click.Command) -> click.Command:
    """Give every command (and every command of a group) ``--quiet``, so that it works after
    the subcommand too (``dpfreq profile ... --quiet``); idempotent."""
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _with_quiet(sub)
        return command
    taken = {opt for p in command.params for opt in getattr(p, "opts", [])}
    if "--quiet" not in taken:
        names = ["--quiet"] if "-q" in taken else ["--quiet", "-q"]
        command.params.append(click.Option(
            names, is_flag=True, default=False, expose_value=False, callback=_quiet,
            help="No progress bars (they are drawn on stderr only when it is a terminal)."))
    return command


class _ClosedPipe(Exception):
    """The reader of stdout went away; raised past click, which would exit 1 on it."""


class _LazyGroup(click.Group):
    """A group whose subcommands (:data:`SUBCOMMANDS`) are imported on first use."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError as exc:
            raise _ClosedPipe from exc

    def list_commands(self, ctx: click.Context) -> list[str]:
        lazy = [name for name, module in SUBCOMMANDS.items()
                if importlib.util.find_spec(module) is not None]
        return sorted(set(lazy) | set(super().list_commands(ctx)))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = SUBCOMMANDS.get(cmd_name)
        if cmd_name in self.commands or module is None:
            return super().get_command(ctx, cmd_name)
        if importlib.util.find_spec(module) is None:
            return None
        command: click.Command = importlib.import_module(module).command
        return _with_quiet(command)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of the help; a command whose module fails to import is listed as
        unavailable instead of breaking the help of every other command."""
        rows = []
        for name in self.list_commands(ctx):
            if name in SHORT_HELP and name not in self.commands:  # not imported for the help
                rows.append((name, SHORT_HELP[name]))
                continue
            try:
                command = self.get_command(ctx, name)
            except Exception as exc:  # the help must not fail because one module is broken
                rows.append((name, f"(unavailable: {type(exc).__name__} on import)"))
                continue
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(formatter.width - 6 - len(name))))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]},
             invoke_without_command=True)
@click.option("--quiet", "-q", is_flag=True, default=False,
              help="No progress bars (they are drawn on stderr only when it is a terminal).")
@click.version_option(__version__, prog_name="dpfreq")
@click.pass_context
def cli(ctx: click.Context, quiet: bool) -> None:
    """dpfreq: differentially private frequency statistics.

    Every release prints its privacy parameters (ε, δ), the unit of privacy, the mechanism and
    an error bound. With --json - (or --out -) stdout carries only JSON and everything else goes
    to stderr. Exit status: 0 ok, 2 bad input (one line on stderr), 1 internal error.
    """
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())
        ctx.exit(EXIT_OK)
    ctx.with_resource(reporting(tqdm_reporter() if progress_wanted(quiet) else None))


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _where(exc: BaseException) -> str:
    """``file:line (function)`` of the innermost dpfreq frame of the traceback (else the
    innermost frame)."""
    frames = traceback.extract_tb(exc.__traceback__)
    here = os.path.abspath(__file__)
    inside = [f for f in frames if f"{os.sep}dpfreq{os.sep}" in f.filename
              and os.path.abspath(f.filename) != here] or frames[-1:]
    if not inside:
        return "an unknown place"
    frame = inside[-1]
    path = frame.filename
    cut = path.rfind(f"{os.sep}dpfreq{os.sep}")
    return f"{path[cut + 1:] if cut >= 0 else path}:{frame.lineno} ({frame.name})"


@contextmanager
def _one_line_warnings(argv: list[str] | None) -> Iterator[None]:
    def show(message: Any, category: type[Warning], filename: str, lineno: int,
             file: Any = None, line: str | None = None) -> None:
        warn(_spelled(str(message), argv))

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


def _fail(text: str, code: int, exc: BaseException | None = None) -> None:
    """Print the one error line (saying where drawn releases were saved, if any) and exit."""
    saved = rescue_drawn_releases(exc) if exc is not None else []
    if saved:
        where = ", ".join(str(p) for p in saved)
        text = (f"{text.rstrip('.')}; the release drawn before the error (budget spent) was "
                f"saved to {where}")
    click.echo(text, err=True)
    sys.exit(code)


def _spelled(text: str, argv: list[str] | None) -> str:
    """A library message in the spelling of the command that ran (its options, its name)."""
    from dpfreq.cli.spelling import cli_spelling, invoked_command

    command, path = invoked_command(cli, sys.argv[1:] if argv is None else argv)
    return cli_spelling(text, command, path, root=cli)


def _path(argv: list[str] | None) -> str:
    """The command that runs (``"dpfreq profile"``): the public call its messages name."""
    from dpfreq.cli.spelling import invoked_command

    return invoked_command(cli, sys.argv[1:] if argv is None else argv)[1]


def _run(argv: list[str] | None) -> None:
    stdout = sys.stdout  # an output option may redirect it; a failed parse must not leak that
    forget_rescued_releases()
    try:
        with public_call(_path(argv)):
            cli.main(args=argv, prog_name="dpfreq", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:  # a bare group: its help, not an error
        click.echo(exc.ctx.get_help() if exc.ctx is not None else cli.get_help(
            click.Context(cli, info_name="dpfreq")))
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.Abort as exc:
        _fail("dpfreq: aborted", EXIT_INTERRUPTED, exc)
    except click.ClickException as exc:
        ctx = getattr(exc, "ctx", None)
        if ctx is not None:  # a parse error: give back the stdout an output option claimed
            ctx.close()
        _fail(f"dpfreq: error: {_one_line(exc.format_message())}", EXIT_BAD_INPUT, exc)
    except DPFreqError as exc:
        _fail(f"dpfreq: error: {_one_line(_spelled(str(exc), argv))}", EXIT_BAD_INPUT, exc)
    except UnicodeDecodeError as exc:  # a binary file where text was expected: input, not a bug
        _fail(f"dpfreq: error: an input file is not UTF-8 text ({exc.reason}); give a text "
              "file (CSV, JSON) where one is expected.", EXIT_BAD_INPUT, exc)
    except (BrokenPipeError, _ClosedPipe):  # the reader of stdout went away (`| head`)
        # Output files are written before any text, so the release is saved: success.
        # Point stdout at /dev/null so the interpreter's final flush cannot fail again.
        with suppress(OSError, ValueError, AttributeError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(EXIT_OK)
    except OSError as exc:  # the file system refused: a path, a permission, a full disk
        _fail(f"dpfreq: error: {_one_line(str(exc))}", EXIT_BAD_INPUT, exc)
    finally:
        sys.stdout = stdout


def main(argv: list[str] | None = None) -> int:
    """Run the CLI with the exit statuses of the module doc; returns 0 on success."""
    with _one_line_warnings(argv):
        try:
            _run(argv)
        except SystemExit:
            raise
        except KeyboardInterrupt as exc:
            _fail("dpfreq: aborted", EXIT_INTERRUPTED, exc)
        except BaseException as exc:
            if debug_enabled():
                traceback.print_exc()
            kind = "out of memory (MemoryError)" if isinstance(exc, MemoryError) else (
                type(exc).__name__)
            _fail(f"dpfreq: internal error: {kind} in {_where(exc)}; this is a bug in dpfreq — "
                  "rerun with DPFREQ_DEBUG=1 for the traceback and report it.", EXIT_INTERNAL, exc)
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
