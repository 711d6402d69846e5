"""Options, parameter types and output helpers shared by the subcommands.

Each subcommand module defines a ``command`` (a click command or group) that
:mod:`dpfreq.cli.main` registers. Subcommands raise :class:`dpfreq.errors.DPFreqError` (or a
click usage error) for bad input; :func:`dpfreq.cli.main.main` turns them into one line on
stderr and exit code 2.

Everything a command can check without the data is checked while its options are parsed, so
before any data is read, any budget spent or any noise drawn. A command:

- takes integers as ``type=INTEGER`` / ``COUNT`` (>= 0) / ``POSITIVE`` (>= 1) or
  ``IntegerType(minimum, maximum)``: ``2000000``, ``2_000_000`` and ``2e6`` all work, ``1.5e0``
  and values past int64 are refused (:mod:`dpfreq.cli.numbers`); rates and times in seconds as
  ``type=NON_NEGATIVE`` (a finite number >= 0);
- takes FILE arguments as ``type=INPUT_FILE``: a missing file is refused at once and ``-``
  reads stdin (spooled to a temporary file any engine can read);
- declares every output path with :func:`output_options` (``--json``/``--plot``) or
  :func:`output_path_option` (``--out``, ``--save``, ...): the directory, the suffix and
  writability are checked at parse time, and ``-`` sends all human text to stderr so that
  stdout carries exactly the document written by :func:`write_output` / :func:`emit_release`;
- adds :func:`ledger_option` and passes the ``accountant`` it receives to the release function;
- checks memory with :func:`check_memory` before allocating anything large.
"""

from __future__ import annotations

import functools
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, ClassVar

import click

from dpfreq.cli.numbers import (
    COUNT,
    INTEGER,
    NON_NEGATIVE,
    POSITIVE,
    IntegerType,
    NonNegativeType,
)
from dpfreq.cli.output import (
    STDOUT,
    check_output_path,
    claim_stdout,
    machine_stdout,
    rescue_release,
    warn,
    write_output,
)
from dpfreq.errors import DataError
from dpfreq.release import Release
from dpfreq.resources import available_memory_bytes, check_memory, format_bytes

__all__ = [
    "COUNT",
    "DEFAULT_SPARK_MASTER",
    "INPUT_FILE",
    "INTEGER",
    "NON_NEGATIVE",
    "PLOT_SUFFIXES",
    "POSITIVE",
    "SEED_WARNING",
    "STDOUT",
    "InputFileType",
    "IntegerType",
    "NonNegativeType",
    "RoutedCommand",
    "available_memory_bytes",
    "check_memory",
    "check_output_path",
    "claim_stdout",
    "emit_release",
    "engine_option",
    "format_bytes",
    "is_empty_csv",
    "ledger_option",
    "machine_stdout",
    "output_options",
    "output_path_option",
    "parse_int_list",
    "positive_or_none",
    "rescue_release",
    "resolve_engine_option",
    "seed_option",
    "spool_stdin",
    "warn",
    "warn_if_no_rows",
    "warn_if_seeded",
    "with_options",
    "write_output",
]

SEED_WARNING = "--seed makes the noise reproducible; this result is NOT for production."
DEFAULT_SPARK_MASTER = "local[*]"
PLOT_SUFFIXES = (".png", ".pdf", ".svg")


class RoutedCommand(click.Command):
    """A command whose first word may name another command instead (``dpfreq reach query
    SAVED``, ``dpfreq profile show SAVED``): a subclass sets :attr:`routes`, which
    :func:`dpfreq.cli.spelling.invoked_command` also reads."""

    #: first words that run another command
    routes: ClassVar[dict[str, click.Command]] = {}

    def make_context(self, info_name: str | None, args: list[str],
                     parent: click.Context | None = None, **extra: Any) -> click.Context:
        if args and args[0] in self.routes:
            name = f"{info_name} {args[0]}" if info_name else args[0]
            return self.routes[args[0]].make_context(name, args[1:], parent=parent, **extra)
        return super().make_context(info_name, args, parent=parent, **extra)




def spool_stdin(ctx: click.Context | None, *, option: str = "FILE",
                suffix: str = ".csv") -> str:
    """Copy stdin to a temporary file that DuckDB (or any reader) can open; return its path.

    The file is deleted when the command finishes. A Parquet stream (magic ``PAR1``) gets the
    ``.parquet`` suffix, anything else ``suffix``. An empty stdin is a usage error.
    """
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        raise click.BadParameter("stdin ('-') cannot be read as bytes here; give a path",
                                 param_hint=option)
    head = stream.read(4)
    if not head:
        raise click.BadParameter("stdin ('-') is empty; pipe a CSV or Parquet file in, or give "
                                 "a path", param_hint=option)
    chosen = ".parquet" if head == b"PAR1" else suffix
    with tempfile.NamedTemporaryFile(prefix="dpfreq-stdin-", suffix=chosen,
                                     delete=False) as handle:
        handle.write(head)
        shutil.copyfileobj(stream, handle, 1 << 20)
    path = Path(handle.name)
    if ctx is not None:
        ctx.call_on_close(lambda: path.unlink(missing_ok=True))
    return str(path)


class InputFileType(click.ParamType):
    """A FILE argument: an existing file or directory, a glob pattern, a URI (``hdfs://...``,
    read by the engine), or ``-`` for stdin.

    ``-`` is spooled to a temporary file (see :func:`spool_stdin`), so every engine reads it like
    a path. A path that does not exist is refused here, before any other work.
    """

    name = "file"

    def __init__(self, suffix: str = ".csv") -> None:
        self.suffix = suffix

    def convert(self, value: Any, param: Any, ctx: Any) -> str:
        text = str(value)
        hint = param.get_error_hint(ctx) if param is not None else "FILE"
        if text == STDOUT:
            return spool_stdin(ctx, option=hint, suffix=self.suffix)
        if not text.strip():
            self.fail("must be a file path or '-' for stdin; got ''", param, ctx)
        remote = "://" in text  # hdfs://, s3a://, file:// ... read by the engine (Spark)
        if not remote and not any(ch in text for ch in "*?[") and not Path(text).exists():
            self.fail(f"file {text!r} does not exist", param, ctx)
        return text


INPUT_FILE = InputFileType()


def _file_kind(path: Path) -> str | None:
    """``"csv"`` (uncompressed) or ``"parquet"`` by the engines' file names, else None (a
    compressed CSV is not peeked; another format is the engine's to refuse)."""
    from dpfreq.engines import CSV_SUFFIXES, PARQUET_SUFFIXES

    name = path.name.lower()
    if name.endswith(PARQUET_SUFFIXES):
        return "parquet"
    return "csv" if name.endswith(CSV_SUFFIXES) and not name.endswith(".gz") else None


def _has_rows(path: Path) -> bool | None:
    """Whether a local CSV or Parquet file holds a data row (None: cannot tell cheaply)."""
    kind = _file_kind(path)
    if kind == "parquet":
        import pyarrow.parquet as pq

        try:
            return bool(pq.read_metadata(path).num_rows > 0)
        except Exception:  # not Parquet after all: the engine reports it
            return None
    if kind is None:
        return None
    try:
        with path.open("rb") as handle:
            handle.readline()  # the header
            return any(line.strip() for line in handle)
    except OSError:
        return None


def is_empty_csv(file: str) -> bool:
    """Whether ``file`` is a local CSV file with a header and no data rows (its column types
    cannot be read from it)."""
    path = Path(file)
    return ("://" not in file and path.is_file() and path.stat().st_size > 0
            and _file_kind(path) == "csv" and _has_rows(path) is False)


def warn_if_no_rows(file: str, what: str) -> None:
    """Say on stderr, before anything is spent, that a local input file has a header and no
    rows: the release is then ``what`` of an empty data set. Files only (not directories,
    globs or URIs); the data holder sees this line, it is never part of a release."""
    path = Path(file)
    if ("://" in file or not path.is_file() or path.stat().st_size == 0  # refused later
            or _has_rows(path) is not False):
        return
    warn(f"{file} has no data rows; the release is {what} of an empty data set (the budget "
         "is spent as usual).")


def with_options(f: Any, options: list[Any]) -> Any:
    """``f`` decorated with ``options`` (click option decorators), listed in the order
    ``--help`` shows them."""
    for option in reversed(options):
        f = option(f)
    return f


def seed_option(f: Any) -> Any:
    return click.option(
        "--seed", type=COUNT, default=None,
        help="Seed the noise for reproducible tests and demos. Not private: never in production.",
    )(f)


def warn_if_seeded(seed: int | None) -> None:
    if seed is not None:
        warn(SEED_WARNING)


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


def _path_callback(option: str, suffixes: tuple[str, ...], allow_stdout: bool) -> Any:
    def callback(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        checked = check_output_path(value, option, suffixes, allow_stdout=allow_stdout)
        if checked == STDOUT:
            claim_stdout(ctx, option)
        return checked

    return callback


def output_path_option(option: str, dest: str, *, suffixes: tuple[str, ...] = (),
                       allow_stdout: bool = False, required: bool = False, help: str) -> Any:
    """A decorator adding an output-path option checked at parse time (see the module doc).

    With ``allow_stdout``, ``-`` claims stdout for this option: human text goes to stderr and
    the command writes its document with :func:`write_output`.
    """
    default = {} if required else {"default": None}  # an explicit default would satisfy it
    return click.option(option, dest, metavar="FILE" + ("|-" if allow_stdout else ""),
                        callback=_path_callback(option, suffixes, allow_stdout),
                        required=required, expose_value=True, help=help, **default)


def output_options(f: Any) -> Any:
    """``--json FILE|-`` (the release as JSON) and ``--plot FILE`` (a figure), checked early."""
    f = output_path_option("--json", "json_out", suffixes=(".json",), allow_stdout=True,
                           help="Write the release as JSON to FILE ('-' = stdout; then the "
                                "table goes to stderr).")(f)
    return output_path_option("--plot", "plot_out", suffixes=PLOT_SUFFIXES,
                              help="Write a figure with error bands to FILE (.png, .pdf or "
                                   ".svg).")(f)


def emit_release(release: Release, json_out: str | None, plot_out: str | None, *,
                 text: str | None = None) -> None:
    """Write the JSON and figure asked for; if a write fails, save the release and say where.

    ``text`` replaces the release's own JSON when a command writes a larger document (e.g. the
    release with the estimates post-processed from it).

    A failing write (a full disk, a vanished directory) becomes one :class:`DataError` naming
    the fallback file the release was saved to (:func:`rescue_release`); any other exception
    propagates, and :func:`dpfreq.cli.main.main` saves the release from the traceback.
    """
    larger = text is not None  # a document holding the release: it counts as saved with it
    text = release.to_json() if text is None else text
    current = "--json"
    try:
        if json_out is not None:
            write_output(text, json_out)
        if plot_out is not None:
            from dpfreq.plotting import save_figure

            current = "--plot"
            save_figure(release.plot(), plot_out)
            click.echo(f"wrote {plot_out}", err=True)
    except (OSError, DataError) as exc:  # a bug raises on: dpfreq.cli.main rescues the release
        target = {"--json": json_out, "--plot": plot_out}[current]
        raise rescue_release(text, exc, failed=f"{current} {target}",
                             same=release.to_json() if larger else None) from None


def _open_ledger(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    if value is None:
        return None
    from dpfreq.ledger import Ledger

    try:
        return Ledger(value, command=ctx.command_path)
    except DataError as exc:
        raise click.BadParameter(str(exc).rstrip("."), ctx=ctx, param=param) from None


def _source_name(ctx: click.Context) -> str | None:
    for param in ctx.command.params:
        if isinstance(param, click.Argument):
            value = ctx.params.get(param.name or "")
            if isinstance(value, str):
                return value
    return None


def _precheck(ledger: Any, epsilon: Any, delta: Any) -> None:
    """Refuse early if (ε, δ) of the command line no longer fit (invalid values are left to
    the command's own checks)."""
    from dpfreq.errors import ParameterError

    if not isinstance(epsilon, float):
        return
    try:
        ledger.check(epsilon, delta if isinstance(delta, float) else 0.0)
    except ParameterError:
        return


def ledger_option(f: Any) -> Any:
    """Add ``--ledger FILE``: the command receives ``accountant=`` (a Ledger or None).

    The ledger is opened (and checked) when options are parsed. Before the command runs, a
    command line whose ``--epsilon``/``--delta`` no longer fit is refused at once (before any
    data is read); the release function then records its spend atomically, tagged with the
    command, ``--unit`` if any and the command's record (:func:`release_record`: the input,
    the engine, the groups, window families and k released), and refuses it before any noise
    is drawn if the total would be exceeded (another process may have spent in between). What
    is left is reported on stderr afterwards.
    """

    @functools.wraps(f)
    def wrapper(*args: Any, ledger: Any = None, **kwargs: Any) -> Any:
        if ledger is None:
            return f(*args, accountant=None, **kwargs)
        ctx = click.get_current_context()
        unit = kwargs.get("unit")
        from dpfreq.cli.ledger_record import command_ledger, release_record

        ledger = command_ledger(ledger, ledger.command or ctx.command_path,
                                unit if isinstance(unit, str) else None,
                                release_record(_source_name(ctx) or ctx.command_path, kwargs))
        _precheck(ledger, kwargs.get("epsilon"), kwargs.get("delta"))
        result = f(*args, accountant=ledger, **kwargs)
        left = ledger.remaining
        click.echo(f"ledger {ledger.path}: remaining epsilon={left.epsilon:g}, "
                   f"delta={left.delta:g}; head {ledger.head} (keep it: 'dpfreq ledger verify "
                   "FILE --expect-head HEAD' detects a restored older copy)", err=True)
        return result

    return click.option(
        "--ledger", "ledger", default=None, metavar="FILE", callback=_open_ledger,
        help="Privacy ledger (made by 'dpfreq ledger init'): record this release there, and "
             "refuse it before any noise is drawn if it would exceed the ledger's budget.",
    )(wrapper)


def parse_int_list(text: str, param: str) -> list[int]:
    """Parse ``"1,3,5"`` (or ``"1e3,2e3"``) into ``[1, 3, 5]`` with a one-line error otherwise."""
    values = []
    for part in text.split(","):
        if not part.strip():
            continue
        try:
            values.append(INTEGER.convert(part, None, None))
        except click.BadParameter:
            raise click.BadParameter(f"must be comma-separated integers; got {text!r}",
                                     param_hint=param) from None
    if not values:
        raise click.BadParameter(f"must list at least one integer; got {text!r}", param_hint=param)
    return values


def positive_or_none(text: str, option: str, words: tuple[str, ...], rule: str) -> int | None:
    """None for one of ``words`` (any case, blanks around ignored), else an integer ``>= 1``,
    with a one-line error naming ``option`` (``rule``: what it must be)."""
    if text.strip().lower() in words:
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise click.BadParameter(f"must be {rule}; got {text!r}", param_hint=option)
    return value
