"""Rotating the artefact key: re-sign saved files, ledgers and stream states under a new key.

Files dpfreq saves are signed with HMAC-SHA256 under ``DPFREQ_ARTIFACT_KEY`` when it is set
(:mod:`dpfreq.artifacts`), and refused under any other key. When the key changes (it leaked, or
a policy rotates it), :func:`resign` carries each artefact over: it verifies it under the old
key, in ``DPFREQ_ARTIFACT_KEY_OLD`` (same format: at least 32 bytes in hexadecimal; never
shown), then signs it under the new one, ``DPFREQ_ARTIFACT_KEY``. What it takes:

* a **saved file** (binary or text: a saved release, sketch, device state, ...): written again
  with the same content, signed under the new key (:mod:`dpfreq._resign_file`);
* a **ledger** (a SQLite file): its hash chain rehashed in place in one transaction, every row
  kept as it is, and its anchor, if it has one, rewritten with the same row counts
  (:mod:`dpfreq._ledger_resign`);
* a **reach stream's state directory**: under the stream's lock, its manifest and per-item file
  re-signed (:mod:`dpfreq.stream.resign`); the stream keeps its budget and answers, and appends
  go on.

Every file of an artefact is verified before any is written; one that does not verify under
the old key (edited, or signed with another key) is refused in one line naming it, and nothing
of that artefact changes. Each write is atomic (a temporary file renamed over the old one; a
SQLite transaction for a ledger). Public protocol parameters, never signed, are refused: they
need no re-signing.

A team starting to sign re-signs its unsigned files with ``from_unsigned`` (the old key unset;
check the files by other means first: anyone could have edited an unsigned file and recomputed
its digest); a team stopping writes plain digests with ``to_unsigned`` (the new key unset). Both
must be asked for: an unset variable alone is refused, so a forgotten key never silently signs
unchecked files or strips signatures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dpfreq._ledger_resign import resign_ledger
from dpfreq._resign_file import resign_file
from dpfreq._signing import KEY_VARIABLE, OLD_KEY_VARIABLE, key_in, signing_key
from dpfreq.errors import DataError, ParameterError

__all__ = ["resign", "resign_with_keys", "rotation_keys"]

_SQLITE = b"SQLite format 3\x00"


def rotation_keys(*, from_unsigned: bool = False, to_unsigned: bool = False
                  ) -> tuple[bytes | None, bytes | None]:
    """The old and new keys of a rotation, from ``DPFREQ_ARTIFACT_KEY_OLD`` and
    ``DPFREQ_ARTIFACT_KEY`` (None: unsigned, only when asked for).

    Parameters
    ----------
    from_unsigned : bool, default False, keyword-only
        The artefacts are unsigned (plain SHA-256): the old key must be unset.
    to_unsigned : bool, default False, keyword-only
        Write plain SHA-256 digests: the new key must be unset.

    Returns
    -------
    tuple of (bytes or None, bytes or None)
        The old and the new key.

    Raises
    ------
    ParameterError
        A key is malformed or shorter than 32 bytes, missing without its ``*_unsigned`` flag,
        or set with it; or the old and new keys are the same (nothing to re-sign). The keys'
        values are never shown.

    Examples
    --------
    >>> import os, secrets
    >>> from unittest import mock
    >>> with mock.patch.dict(os.environ, {"DPFREQ_ARTIFACT_KEY": secrets.token_hex(32)}):
    ...     old, new = rotation_keys(from_unsigned=True)
    >>> old is None, len(new)
    (True, 32)
    """
    old, new = key_in(OLD_KEY_VARIABLE), signing_key()
    for key, flag, variable, what in (
            (old, from_unsigned, OLD_KEY_VARIABLE, "the key the artefacts are signed with"),
            (new, to_unsigned, KEY_VARIABLE, "the new key")):
        option = "from_unsigned" if variable == OLD_KEY_VARIABLE else "to_unsigned"
        if key is None and not flag:
            raise ParameterError(f"{variable} is not set: set it to {what}, or pass "
                                 f"{option}=True for unsigned files.")
        if key is not None and flag:
            raise ParameterError(f"{option}=True asks for unsigned files, but {variable} is "
                                 f"set: unset it, or leave {option} out.")
    if old == new:
        raise ParameterError("the old and new keys are the same: there is nothing to re-sign.")
    return old, new


def resign(path: str | Path, *, from_unsigned: bool = False, to_unsigned: bool = False) -> str:
    """Verify the artefact at ``path`` under the old key and re-sign it under the new one.

    Parameters
    ----------
    path : str or Path
        A saved file, a ledger, or a reach stream's state directory.
    from_unsigned, to_unsigned : bool, default False, keyword-only
        The old (new) side is unsigned: see :func:`rotation_keys`.

    Returns
    -------
    str
        What was re-signed: ``"ledger"``, ``"stream"``, or the kind a saved file's header names
        (e.g. ``"window-release"``, ``"ProfileRelease"``).

    Raises
    ------
    DataError
        One line naming the file that does not verify under the old key (edited, signed with
        another key, or unsigned while the old key is set), or that is not an artefact dpfreq
        re-signs; nothing of this artefact is changed.
    ParameterError
        The keys are missing, malformed or the same (:func:`rotation_keys`).

    Examples
    --------
    >>> import os, pathlib, secrets, tempfile
    >>> from unittest import mock
    >>> from dpfreq.artifacts import read_artifact, write_artifact
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "state.dpfreq"
    >>> a, b = secrets.token_hex(32), secrets.token_hex(32)
    >>> with mock.patch.dict(os.environ, {"DPFREQ_ARTIFACT_KEY": a}):
    ...     path = write_artifact(path, kind="example", version=1, meta={"n": 3})
    >>> with mock.patch.dict(os.environ, {"DPFREQ_ARTIFACT_KEY_OLD": a,
    ...                                   "DPFREQ_ARTIFACT_KEY": b}):
    ...     resign(path), read_artifact(path, kind="example", versions=(1,))[1]
    ('example', {'n': 3})
    """
    old, new = rotation_keys(from_unsigned=from_unsigned, to_unsigned=to_unsigned)
    return resign_with_keys(path, old, new)


def resign_with_keys(path: str | Path, old: bytes | None, new: bytes | None) -> str:
    """:func:`resign` under keys already read by :func:`rotation_keys` (a command re-signing
    many artefacts reads and checks the keys once).

    Parameters
    ----------
    path : str or Path
        A saved file, a ledger, or a reach stream's state directory.
    old, new : bytes or None
        The keys :func:`rotation_keys` returned (None: unsigned).

    Returns
    -------
    str
        What was re-signed, as :func:`resign` says.

    Examples
    --------
    >>> import os, pathlib, secrets, tempfile
    >>> from unittest import mock
    >>> from dpfreq.artifacts import write_artifact
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "state.dpfreq"
    >>> a, b = secrets.token_bytes(32), secrets.token_bytes(32)
    >>> with mock.patch.dict(os.environ, {"DPFREQ_ARTIFACT_KEY": a.hex()}):
    ...     path = write_artifact(path, kind="example", version=1, meta={"n": 3})
    >>> resign_with_keys(path, a, b)
    'example'
    """
    target = Path(path)
    try:
        if target.is_dir():
            from dpfreq.stream.resign import resign_stream  # the stream's imports, when needed

            resign_stream(target, old, new)
            return "stream"
        if _head(target) == _SQLITE:
            resign_ledger(target, old, new)
            return "ledger"
        return resign_file(target, old, new)
    except OSError as exc:  # a file that cannot be written (permissions, a full disk)
        raise DataError(f"{target} cannot be re-signed: "
                        f"{(exc.strerror or 'it cannot be written').lower()}.") from None


def _head(path: Path) -> Any:
    """The first bytes of the file ``path`` (a DataError when it cannot be read)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(len(_SQLITE))
    except FileNotFoundError:
        raise DataError(f"{path} does not exist.") from None
    except OSError as exc:
        raise DataError(f"{path} cannot be read: {(exc.strerror or 'unreadable').lower()}."
                        ) from None
