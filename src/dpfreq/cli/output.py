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
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from dpfreq.errors import DataError

__all__ = [
    "STDOUT",
    "check_output_path",
    "claim_stdout",
    "machine_stdout",
    "rescue_release",
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
    real = sys.stdout
    sys.stdout = sys.stderr
    try:
        yield real
    finally:
        sys.stdout = real


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


def _fallback_path(directory: Path) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    return directory / f"dpfreq-release-{stamp}.json"


def rescue_release(text: str, failure: BaseException, *, failed: str) -> DataError:
    """Save a drawn release that could not be written, and the error to raise about it.

    The release JSON ``text`` goes to ``./dpfreq-release-<UTC time>.json`` (or the temporary
    directory if the working directory is not writable). The returned :class:`DataError` says
    what failed and where the release is, in one line; raise it.
    """
    import tempfile

    reason = " ".join(str(failure).split()) or type(failure).__name__
    for directory in (Path.cwd(), Path(tempfile.gettempdir())):
        target = _fallback_path(directory)
        try:
            with open(target, "x", encoding="utf-8") as handle:
                handle.write(text if text.endswith("\n") else text + "\n")
        except OSError:
            continue
        return DataError(f"could not write {failed} ({reason}); the release (budget already "
                         f"spent) was saved to {target}.")
    return DataError(f"could not write {failed} ({reason}) and could not save the release "
                     "anywhere; the budget was spent and the release is lost.")
