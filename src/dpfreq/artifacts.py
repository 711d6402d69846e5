"""Versioned, integrity-checked files for saved state (releases, sketches, client state, params).

Every artefact dpfreq writes carries a header naming its *kind* and *format version*, and a
digest over the header and every array. Reading checks, in this order: that the file is a
readable container, that the header names the expected kind and version, that the digest
matches, and that every array has the dtype and shape the header declares. Any failure is one
:class:`~dpfreq.errors.DataError` naming the file and what is wrong — never a ``BadZipFile``,
``KeyError`` or ``zlib.error``. Each loader then validates every field against its own rules
(ε in range, known unit, shapes consistent with the parameters).

What the digest guarantees depends on the key:

* **Unsigned (the default): SHA-256.** It detects accidental corruption (a truncated copy, a
  flipped bit) and edits made without recomputing it. It does *not* detect a deliberate edit:
  anyone can recompute a SHA-256, so an edited file with a recomputed digest loads as if dpfreq
  had written it, provided its fields pass validation. Validation cannot tell such a file from a
  genuine one: a sketch that claims ε = 0.1 and ``seeded=False`` over noise drawn at ε = 1 from
  seed 1 passes every check.
* **Signed: HMAC-SHA256** under the key in the environment variable ``DPFREQ_ARTIFACT_KEY``: at
  least 32 bytes written in hexadecimal (64 or more hex digits; e.g.
  ``python -c "import secrets; print(secrets.token_hex(32))"``; a shorter or malformed key is a
  one-line :class:`~dpfreq.errors.ParameterError`). When the variable is set, every artefact is
  written signed, and the file records that it is (the zip member ``__hmac_sha256__`` instead
  of ``__sha256__``; the JSON key ``hmac_sha256`` instead of ``sha256``). Nobody without the key
  can produce a signature that verifies, so an edited file is refused. On load: a signed file
  without the key set, or with another key, or edited, is refused in one line; an **unsigned
  file is refused outright while a key is set** (an editor could have stripped the signature
  and recomputed a plain digest). There is no override: to adopt an unsigned file, load it with
  the variable unset, check it by other means, and save it again with the key set.

Public protocol parameters (:meth:`dpfreq.longitudinal.ProtocolParams.to_json`) are never
signed: they are published to devices, which do not hold the key (``seal_json(..., sign=False)``).
The key protects integrity only: the files stay readable to whoever can read them, and a file
that holds a release's secret noise key must still be protected like the raw data.

Two containers: ``.npz``-style zip files (numpy arrays, never pickles) for array state, and
JSON text for small state (device state, protocol parameters).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from dpfreq._seal import (
    bad,
    check_digest,
    open_text,
    open_zip,
    seal_text,
    unreadable,
    write_zip,
)
from dpfreq._signing import signing_key
from dpfreq.errors import DataError

__all__ = ["create_private", "open_json", "read_artifact", "read_text_file", "seal_json",
           "write_artifact", "write_private"]

_PRIVATE = stat.S_IRUSR | stat.S_IWUSR  # 0600: files holding secrets, tokens or reports


def write_artifact(path: str | Path, *, kind: str, version: int, meta: Mapping[str, Any],
                   arrays: Mapping[str, np.ndarray] | None = None) -> Path:
    """Write ``meta`` (JSON-ready) and numeric ``arrays`` as one integrity-checked zip file.

    The file is written to a temporary name beside ``path`` and renamed, so a crash never leaves
    a half-written artefact under the final name. It carries a SHA-256 digest, or is signed with
    HMAC-SHA256 when ``DPFREQ_ARTIFACT_KEY`` is set (see the module docstring).

    Parameters
    ----------
    path : str or Path
        Where to write (replaced if it exists).
    kind : str, keyword-only
        What the file holds (e.g. ``"profile-sketch"``); :func:`read_artifact` checks it.
    version : int, keyword-only
        Format version of that kind; :func:`read_artifact` checks it.
    meta : Mapping, keyword-only
        JSON-ready parameters, stored in the header.
    arrays : Mapping of str to numpy.ndarray, optional, keyword-only
        Numeric (bool, int, unsigned or float) arrays, stored without pickles.

    Returns
    -------
    pathlib.Path
        The path written.

    Raises
    ------
    TypeError
        If an array is not numeric (object, string, ... arrays are never saved).
    ParameterError
        ``DPFREQ_ARTIFACT_KEY`` is set but not a hexadecimal key of at least 32 bytes.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "state.dpfreq"
    >>> write_artifact(path, kind="example", version=1, meta={"epsilon": 1.0},
    ...                arrays={"counts": np.array([3, 1, 4])}).name
    'state.dpfreq'
    >>> version, meta, arrays = read_artifact(path, kind="example", versions=(1,))
    >>> version, meta, arrays["counts"].tolist()
    (1, {'epsilon': 1.0}, [3, 1, 4])
    """
    return write_zip(path, kind, version, meta, arrays or {}, signing_key())


def read_artifact(path: str | Path, *, kind: str, versions: tuple[int, ...]
                  ) -> tuple[int, dict[str, Any], dict[str, np.ndarray]]:
    """Read a file written by :func:`write_artifact`; returns ``(version, meta, arrays)``.

    Checks, in order: a readable container, the expected kind and a supported version, the
    digest over header and arrays (SHA-256, or HMAC-SHA256 for a signed file: see the module
    docstring), and each array's dtype and shape. The caller must still validate every field
    of ``meta`` and ``arrays`` against its own rules.

    Parameters
    ----------
    path : str or Path
        The file.
    kind : str, keyword-only
        The kind the file must hold.
    versions : tuple of int, keyword-only
        The format versions this reader supports.

    Returns
    -------
    version : int
        The file's format version (one of ``versions``).
    meta : dict
        The parameters stored by :func:`write_artifact`.
    arrays : dict of str to numpy.ndarray
        The stored arrays.

    Raises
    ------
    DataError
        The file is missing, unreadable, truncated, of another kind or version, fails its
        digest, or holds an array whose dtype or shape differs from its header; it is signed
        and ``DPFREQ_ARTIFACT_KEY`` is unset or another key; it is unsigned while the key is set.
    ParameterError
        ``DPFREQ_ARTIFACT_KEY`` is set but not a hexadecimal key of at least 32 bytes.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "state.dpfreq"
    >>> _ = write_artifact(path, kind="example", version=2, meta={"n": 3},
    ...                    arrays={"x": np.zeros(3)})
    >>> read_artifact(path, kind="example", versions=(2,))[1]
    {'n': 3}
    >>> read_artifact(path, kind="example", versions=(1,))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dpfreq.errors.DataError: ... format version 2 is not supported (this dpfreq reads 1).
    """
    key = signing_key()
    opened = open_zip(path, kind, versions)
    check_digest(str(path), kind, opened.signed, opened.stored, key, opened.compute)
    if not isinstance(opened.meta, dict):
        raise bad(str(path), kind, "its header has no parameters")
    return opened.version, opened.meta, opened.arrays


def seal_json(payload: Mapping[str, Any], *, kind: str, version: int, sign: bool = True) -> str:
    """JSON text of ``payload`` with the dpfreq header and a digest of the payload: SHA-256,
    or HMAC-SHA256 (key ``hmac_sha256``) when ``DPFREQ_ARTIFACT_KEY`` is set (module docstring).

    Parameters
    ----------
    payload : Mapping
        JSON-ready content.
    kind : str, keyword-only
        What the text holds; :func:`open_json` checks it.
    version : int, keyword-only
        Format version of that kind; :func:`open_json` checks it.
    sign : bool, default True, keyword-only
        False for text meant for parties that do not hold the key (public protocol
        parameters sent to devices): always a plain SHA-256 digest, read back by
        ``open_json(..., sign=False)`` whatever the environment.

    Returns
    -------
    str
        JSON text with keys ``format``, ``kind``, ``version``, ``payload`` and ``sha256`` (or
        ``hmac_sha256`` when signed).

    Raises
    ------
    TypeError
        If ``payload`` holds a value JSON cannot represent (convert it first, e.g. with
        :func:`dpfreq.release.to_jsonable`).
    ParameterError
        ``DPFREQ_ARTIFACT_KEY`` is set but not a hexadecimal key of at least 32 bytes.

    Examples
    --------
    >>> text = seal_json({"horizon": 8}, kind="params", version=1)
    >>> open_json(text, kind="params", versions=(1,))
    (1, {'horizon': 8})
    """
    return seal_text(payload, kind, int(version), signing_key() if sign else None)


def read_text_file(path: str | Path, what: str) -> str:
    """The UTF-8 text of the file ``path``; missing or unreadable, one DataError saying it
    cannot be read as ``what`` (e.g. ``"a parameters file"``).

    Examples
    --------
    >>> read_text_file("/no/such/file.json", "a parameters file")
    Traceback (most recent call last):
    ...
    dpfreq.errors.DataError: /no/such/file.json does not exist.
    """
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{path} does not exist.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{path} cannot be read as {what}: {unreadable(path, exc)}.") from None


def open_json(text: str | bytes, *, kind: str, versions: tuple[int, ...],
              label: str = "the text", sign: bool = True) -> tuple[int, dict[str, Any]]:
    """Check and unwrap text written by :func:`seal_json`; returns ``(version, payload)``.

    Parameters
    ----------
    text : str or bytes
        The JSON text.
    kind : str, keyword-only
        The kind the text must hold.
    versions : tuple of int, keyword-only
        The format versions this reader supports.
    label : str, keyword-only
        How error messages name the text (e.g. the file it was read from).
    sign : bool, default True, keyword-only
        False for text sealed with ``seal_json(..., sign=False)``: a plain digest is expected
        and ``DPFREQ_ARTIFACT_KEY`` is not consulted.

    Returns
    -------
    version : int
        The format version (one of ``versions``).
    payload : dict
        The content passed to :func:`seal_json`; the caller must still validate every field.

    Raises
    ------
    DataError
        Not JSON, no dpfreq header, another kind or version, or a digest mismatch; signed
        text while ``DPFREQ_ARTIFACT_KEY`` is unset or another key; unsigned text while it is
        set.

    Examples
    --------
    >>> text = seal_json({"horizon": 8}, kind="params", version=1)
    >>> open_json(text, kind="params", versions=(1,))[1]
    {'horizon': 8}
    >>> edited = text.replace('"horizon": 8', '"horizon": 9')
    >>> open_json(edited, kind="params", versions=(1,), label="params.json")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dpfreq.errors.DataError: params.json is not a valid dpfreq params file: its checksum ...
    """
    opened = open_text(text, label, kind, versions)
    check_digest(label, kind, opened.signed, opened.stored, signing_key() if sign else None,
                 opened.compute)
    return opened.version, opened.meta


def create_private(path: str | Path) -> Path:
    """Make sure ``path`` exists with mode 0600 (owner read/write only).

    An absent file is created empty with that mode (atomically: ``O_CREAT`` with mode 0600,
    so it is never readable by others, whatever the umask); an existing one is tightened to
    0600. Used for every file that holds a device secret, a token or collected reports, before
    anything is written to it (SQLite gives its ``-wal``/``-shm`` files the database's mode).

    Examples
    --------
    >>> import os, stat, tempfile
    >>> path = create_private(os.path.join(tempfile.mkdtemp(), "queue.db"))
    >>> oct(stat.S_IMODE(path.stat().st_mode))
    '0o600'
    """
    p = Path(path)
    fd = os.open(p, os.O_WRONLY | os.O_CREAT, _PRIVATE)
    try:
        os.fchmod(fd, _PRIVATE)
    finally:
        os.close(fd)
    return p


def write_private(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` (replacing it) as a file of mode 0600 (see
    :func:`create_private`).

    Examples
    --------
    >>> import os, stat, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "reports.parquet")
    >>> write_private(path, b"PAR1")
    >>> oct(stat.S_IMODE(os.stat(path).st_mode))
    '0o600'
    """
    fd = os.open(Path(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, _PRIVATE)
    try:
        os.fchmod(fd, _PRIVATE)
        with os.fdopen(fd, "wb", closefd=False) as fh:
            fh.write(data)
    finally:
        os.close(fd)
