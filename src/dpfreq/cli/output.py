"""Where the command line writes: machine output on stdout, people's text on stderr.

Rules every command follows through these helpers:

- An output option given ``-`` (``--json -``, ``--out -``) *claims* stdout: from the moment the
  option is parsed until the command returns, ``sys.stdout`` is redirected to stderr, so tables,
  headers and notes written with ``click.echo`` land on stderr and stdout carries exactly one
  machine-readable document, written by :func:`write_output`. Two options cannot both claim it.
- Output paths are checked when the option is parsed, before any data is read or any budget is
  spent (:func:`check_output_path`): the directory exists and is writable, the suffix is one the
  writer knows, and the path is not a directory.
- A release is never lost: if writing an output fails after the noise was drawn,
  :func:`rescue_release` writes the release to a fallback file and the error says where.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from dpfreq.errors import DataError

__all__ = [
    "STDOUT",
    "WARNING_PREFIX",
    "check_output_path",
    "claim_stdout",
    "forget_rescued_releases",
    "machine_stdout",
    "rescue_drawn_releases",
    "rescue_file",
    "rescue_release",
    "warn",
    "write_json",
    "write_output",
]

STDOUT = "-"
_CLAIM_KEY = "dpfreq.stdout_claimed_by"
_STREAM_KEY = "dpfreq.machine_stdout"


def check_output_path(path: str | None, option: str, suffixes: tuple[str, ...] = (), *,
                      allow_stdout: bool = False) -> str | None:
    """Refuse an output path that cannot be written, before any work is done.

    Parameters
    ----------
    path : str or None
        The value of the option (None: not given, nothing to check).
    option : str
        The option's name for the message, e.g. ``"--json"``.
    suffixes : tuple of str
        Accepted suffixes, lower case with the dot (``(".json",)``); empty accepts any.
    allow_stdout : bool
        Whether ``-`` (stdout) is accepted.

    Returns
    -------
    str or None
        ``path`` unchanged.

    Raises
    ------
    click.BadParameter
        One line naming the option and what would be accepted.
    """
    if path is None:
        return None
    if path == STDOUT:
        if allow_stdout:
            return path
        raise click.BadParameter("cannot write to stdout ('-'); give a file path",
                                 param_hint=option)
    target = Path(path)
    if suffixes and target.suffix.lower() not in suffixes:
        raise click.BadParameter(f"must be a file ending in {' or '.join(suffixes)}; "
                                 f"got {path!r}", param_hint=option)
    if target.is_dir():
        raise click.BadParameter(f"{path!r} is a directory; give a file path", param_hint=option)
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise click.BadParameter(f"directory {str(parent)!r} of {path!r} does not exist",
                                 param_hint=option)
    if not os.access(parent, os.W_OK | os.X_OK) or (target.exists()
                                                    and not os.access(target, os.W_OK)):
        raise click.BadParameter(f"{path!r} is not writable", param_hint=option)
    return path


@contextmanager
def _redirect_stdout_to_stderr() -> Iterator[Any]:
    """Point stdout at stderr; yield a stream to the real stdout.

    With real file descriptors (a console run) the redirection is done on descriptor 1 itself,
    so that libraries writing to it from C (DuckDB's progress bar, for one) cannot put text
    into the machine output either; otherwise (an in-process test runner) ``sys.stdout`` is
    swapped.
    """
    real = sys.stdout
    try:
        out_fd, err_fd = real.fileno(), sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        swapped = sys.stdout = sys.stderr
        try:
            yield real
        finally:
            # a parse error can leave this generator suspended until the garbage collector
            # closes it, during a later in-process run: restore only our own swap
            if sys.stdout is swapped:
                sys.stdout = real
        return
    real.flush()
    machine = os.fdopen(os.dup(out_fd), "w", encoding="utf-8")
    os.dup2(err_fd, out_fd)
    try:
        yield machine
    finally:
        with suppress(OSError, ValueError):  # a closed pipe was reported when it was written
            machine.flush()
        real.flush()
        with suppress(OSError, ValueError):  # already closed at the interpreter's exit
            os.dup2(machine.fileno(), out_fd)
            machine.close()


def claim_stdout(ctx: click.Context, option: str) -> None:
    """Reserve stdout of this command for ``option``'s machine output.

    Until the command returns, ``sys.stdout`` points at stderr (so every human line goes
    there); :func:`write_output` writes to the real stdout. A second claim is a usage error.
    """
    root = ctx.find_root()
    holder = root.meta.get(_CLAIM_KEY)
    if holder is not None and holder != option:
        raise click.UsageError(f"{holder} and {option} cannot both write to stdout ('-'); "
                               "send one of them to a file.")
    if holder is None:
        root.meta[_CLAIM_KEY] = option
        root.meta[_STREAM_KEY] = ctx.with_resource(_redirect_stdout_to_stderr())


def machine_stdout() -> Any:
    """The real stdout for machine output (stdout itself unless a claim redirected it)."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        stream = ctx.find_root().meta.get(_STREAM_KEY)
        if stream is not None:
            return stream
    return sys.stdout


def write_output(text: str, path: str, *, what: str = "") -> None:
    """Write ``text`` to ``path`` (``-``: the machine stdout) and say so on stderr.

    ``what`` describes the file for the "wrote" line (e.g. ``"(SECRET: holds the key)"``).
    """
    body = text if text.endswith("\n") else text + "\n"
    if path == STDOUT:
        stream = machine_stdout()
        stream.write(body)
        stream.flush()
        return
    Path(path).write_text(body, encoding="utf-8")
    click.echo(f"wrote {path}{' ' + what if what else ''}", err=True)


#: How every warning of the command line starts: its own (a seeded result, an empty input file)
#: and the library's Python warnings alike.
WARNING_PREFIX = "dpfreq: warning: "


def warn(text: str) -> None:
    """Print ``text`` as one warning line ``dpfreq: warning: <text>`` on stderr.

    The one door for warnings of the command line (:func:`dpfreq.cli.main.main` shows the
    library's Python warnings through it too), in the spelling of the command that runs
    (:func:`dpfreq.cli.spelling.spelled`: a warning quoting the library reads ``--method direct``,
    not ``method='direct'``). Progress bars being drawn on stderr are cleared for the line and
    drawn again below it, so a warning never lands inside a bar.
    """
    from dpfreq.cli.spelling import spelled

    line = WARNING_PREFIX + " ".join(spelled(str(text)).split())
    tqdm = sys.modules.get("tqdm")  # bars exist only if the reporter imported tqdm
    if tqdm is None:
        click.echo(line, err=True)
        return
    with tqdm.tqdm.external_write_mode(file=sys.stderr):
        click.echo(line, err=True)


def write_json(doc: Any, path: str) -> None:
    """Write the document ``doc`` as JSON with :func:`write_output`: numpy values as Python
    ones and non-finite floats as the strings ``"inf"``/``"nan"``
    (:func:`dpfreq.release.to_jsonable`), never the bare ``NaN``/``Infinity`` that strict JSON
    readers refuse."""
    import json

    from dpfreq.release import to_jsonable

    write_output(json.dumps(to_jsonable(doc), allow_nan=False), path)


#: Texts of releases already saved by a rescue during the current command (not saved twice).
_RESCUED: set[str] = set()


def forget_rescued_releases() -> None:
    """Start a new command: releases rescued by an earlier one no longer count as saved."""
    _RESCUED.clear()


def _fallback(write: Callable[[Path], object], what: str, suffix: str) -> Path | None:
    """Write with ``write(path)`` to ``./dpfreq-<what>-<UTC time><suffix>``, else to the
    temporary directory; None when neither takes it. ``write`` must refuse an existing path
    (OSError), so nothing is ever overwritten."""
    import tempfile

    for directory in (Path.cwd(), Path(tempfile.gettempdir())):
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
        target = directory / f"dpfreq-{what}-{stamp}{suffix}"
        try:
            write(target)
        except (OSError, DataError):
            continue
        return target
    return None


def _save_fallback(text: str) -> Path | None:
    """Write a release's JSON ``text`` to a fallback file (:func:`_fallback`)."""
    body = text if text.endswith("\n") else text + "\n"

    def write(target: Path) -> None:
        with open(target, "x", encoding="utf-8") as handle:
            handle.write(body)

    target = _fallback(write, "release", ".json")
    if target is not None:
        _RESCUED.add(text)
    return target


def _rescued(failed: str, failure: BaseException, what: str, target: Path | None
             ) -> DataError:
    """The one-line error of a drawn ``what`` that could not be written: where it went, or
    that it is lost."""
    reason = " ".join(str(failure).split()) or type(failure).__name__
    if target is None:
        return DataError(f"could not write {failed} ({reason}) and could not save the {what} "
                         f"anywhere; the budget was spent and the {what} is lost.")
    return DataError(f"could not write {failed} ({reason}); the {what} (budget already "
                     f"spent) was saved to {target}.")


def rescue_release(text: str, failure: BaseException, *, failed: str,
                   same: str | None = None) -> DataError:
    """Save a drawn release that could not be written, and the error to raise about it.

    The release JSON ``text`` goes to ``./dpfreq-release-<UTC time>.json`` (or the temporary
    directory if the working directory is not writable). ``same``: the release's own JSON when
    ``text`` is a larger document holding it (it then counts as saved, not saved again by
    :func:`rescue_drawn_releases`). The returned :class:`DataError` says what failed and where
    the release is, in one line; raise it.
    """
    target = _save_fallback(text)
    if target is not None and same is not None:
        _RESCUED.add(same)
    return _rescued(failed, failure, "release", target)


def rescue_file(write: Callable[[Path], object], failure: BaseException, *, failed: str,
                what: str, suffix: str) -> DataError:
    """Save a drawn artefact that is not a release (a party's sketch) with its own writer
    ``write(path)`` to ``./dpfreq-<what>-<UTC time><suffix>`` (or the temporary directory),
    and return the one-line error to raise (:func:`rescue_release`'s)."""
    def fresh(target: Path) -> None:
        if target.exists():  # the writer may overwrite: never over another file
            raise FileExistsError(target)
        write(target)

    return _rescued(failed, failure, what, _fallback(fresh, what, suffix))


def rescue_drawn_releases(exc: BaseException) -> list[Path]:
    """Save every release a failing command had already drawn; return where they went.

    Called by :func:`dpfreq.cli.main.main` for any error: the releases are found among the
    local variables of the frames of the traceback (a release exists only once its noise was
    drawn), so a command that fails while formatting or writing its result does
    not lose a release whose budget is spent. Releases already rescued are not saved again, nor
    releases kept where they were drawn (``saved_elsewhere``: a stream's, in its state).
    A grouped release (one release per group) is saved whole.
    """
    from dpfreq.grouped.result import GroupedRelease
    from dpfreq.release import Release

    saved: list[Path] = []
    seen: set[int] = set()
    frames: list[Any] = []
    chained: BaseException | None = exc
    while chained is not None and len(frames) < 10_000:  # the exception and its causes
        tb = chained.__traceback__
        while tb is not None:
            frames.append(tb.tb_frame)
            tb = tb.tb_next
        chained = chained.__cause__ or chained.__context__
    for frame in frames:
        for value in list(frame.f_locals.values()):
            if (not isinstance(value, Release | GroupedRelease) or id(value) in seen
                    or getattr(value, "saved_elsewhere", False)):
                continue
            seen.add(id(value))
            try:
                text = value.to_json()
            except Exception:  # the release cannot be serialized: nothing to save
                continue
            if text not in _RESCUED:
                target = _save_fallback(text)
                if target is not None:
                    saved.append(target)
    return saved
