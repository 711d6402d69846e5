"""Versioned, integrity-checked files for saved state (releases, sketches, client state, params).

Every artefact dpfreq writes carries a header naming its *kind* and *format version*, and a
SHA-256 digest over the header and every array. Reading checks, in this order: that the file is
a readable container, that the header names the expected kind and version, that the digest
matches, and that every array has the dtype and shape the header declares. Any failure is one
:class:`~dpfreq.errors.DataError` naming the file and what is wrong — never a ``BadZipFile``,
``KeyError`` or ``zlib.error``.

The digest detects corruption and casual edits. It does not stop a deliberate forger who
recomputes it (the files that hold a release's secret key could not keep a MAC key from such a
person anyway), so each loader also validates every field against its own rules (ε in range,
known unit, shapes consistent with the parameters): an edited file either fails the digest or
fails validation, or is a well-formed artefact the editor could have produced by calling dpfreq.

Two containers: ``.npz``-style zip files (numpy arrays, never pickles) for array state, and
JSON text for small state (device state, protocol parameters).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from dpfreq.errors import DataError

__all__ = ["create_private", "open_json", "read_artifact", "seal_json", "write_artifact",
           "write_private"]

_FORMAT = "dpfreq"
_PRIVATE = stat.S_IRUSR | stat.S_IWUSR  # 0600: files holding secrets, tokens or reports
_HEADER = "__header__.json"
_ALLOWED_KINDS = "biuf"


def _digest(header: bytes, arrays: Mapping[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    h.update(len(header).to_bytes(8, "big") + header)
    for name in sorted(arrays):
        arr = np.ascontiguousarray(arrays[name])
        meta = f"{name}|{arr.dtype.str}|{arr.shape}".encode()
        h.update(len(meta).to_bytes(8, "big") + meta)
        data = arr.tobytes()
        h.update(len(data).to_bytes(8, "big") + data)
    return h.hexdigest()


def _bad(label: str, kind: str, reason: str) -> DataError:
    return DataError(f"{label} is not a valid dpfreq {kind} file: {reason}.")


def _check_header(obj: Any, label: str, kind: str, versions: tuple[int, ...], what: str) -> int:
    """The format version of a parsed dpfreq header, after checking its format, kind and
    version (``what`` names the container in the error: "a file" or "text")."""
    if not isinstance(obj, dict) or obj.get("format") != _FORMAT:
        raise _bad(label, kind, f"no dpfreq header (not {what} dpfreq wrote)")
    if obj.get("kind") != kind:
        raise _bad(label, kind, f"it holds a {obj.get('kind')!r}")
    version = obj.get("version")
    if version not in versions:
        raise _bad(label, kind, f"format version {version!r} is not supported "
                   f"(this dpfreq reads {', '.join(map(str, versions))})")
    return int(version)


def write_artifact(path: str | Path, *, kind: str, version: int, meta: Mapping[str, Any],
                   arrays: Mapping[str, np.ndarray] | None = None) -> Path:
    """Write ``meta`` (JSON-ready) and numeric ``arrays`` as one integrity-checked zip file.

    The file is written to a temporary name beside ``path`` and renamed, so a crash never leaves
    a half-written artefact under the final name.

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
    arrays = {k: np.ascontiguousarray(v) for k, v in (arrays or {}).items()}
    for name, arr in arrays.items():
        if arr.dtype.kind not in _ALLOWED_KINDS:
            raise TypeError(f"array {name!r} has dtype {arr.dtype}; only numeric arrays are saved")
    shapes = {k: [v.dtype.str, list(v.shape)] for k, v in arrays.items()}
    header_obj = {"format": _FORMAT, "kind": kind, "version": int(version), "meta": meta,
                  "arrays": shapes}
    header = json.dumps(header_obj, sort_keys=True, separators=(",", ":")).encode()
    digest = _digest(header, arrays)
    out = Path(path)
    tmp = out.with_name(out.name + ".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(_HEADER, header)
        zf.writestr("__sha256__", digest)
        for name, arr in arrays.items():
            buf = io.BytesIO()
            np.save(buf, arr, allow_pickle=False)
            zf.writestr(name + ".npy", buf.getvalue())
    tmp.replace(out)
    return out


def read_artifact(path: str | Path, *, kind: str, versions: tuple[int, ...]
                  ) -> tuple[int, dict[str, Any], dict[str, np.ndarray]]:
    """Read a file written by :func:`write_artifact`; returns ``(version, meta, arrays)``.

    Checks, in order: a readable container, the expected kind and a supported version, the
    SHA-256 digest over header and arrays, and each array's dtype and shape. The caller must
    still validate every field of ``meta`` and ``arrays`` against its own rules.

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
        digest, or holds an array whose dtype or shape differs from its header.

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
    label = str(path)
    try:
        with zipfile.ZipFile(path) as zf:
            names = set(zf.namelist())
            if _HEADER not in names or "__sha256__" not in names:
                raise _bad(label, kind, "no dpfreq header (not a file dpfreq wrote)")
            header = zf.read(_HEADER)
            stored = zf.read("__sha256__").decode("ascii", "replace")
            obj = json.loads(header)
            version = _check_header(obj, label, kind, versions, "a file")
            shapes = obj.get("arrays")
            if not isinstance(shapes, dict) or set(shapes) != {
                    n[:-4] for n in names if n.endswith(".npy")}:
                raise _bad(label, kind, "its arrays do not match its header")
            arrays: dict[str, np.ndarray] = {}
            for name, (dtype, shape) in shapes.items():
                arr = np.load(io.BytesIO(zf.read(name + ".npy")), allow_pickle=False)
                if arr.dtype.str != dtype or list(arr.shape) != list(shape):
                    raise _bad(label, kind, f"array {name!r} does not match its header")
                arrays[name] = arr
    except DataError:
        raise
    except FileNotFoundError:
        raise DataError(f"{label} does not exist.") from None
    except (OSError, zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, ValueError,
            TypeError, KeyError, UnicodeDecodeError, NotImplementedError, RuntimeError) as exc:
        # a corrupt zip directory can name an unknown compression method (NotImplementedError)
        # or an encrypted member (RuntimeError)
        raise _bad(label, kind, f"unreadable or truncated ({type(exc).__name__})") from None
    if _digest(header, arrays) != stored:
        raise _bad(label, kind, "its checksum does not match (the file was edited or corrupted)")
    meta = obj.get("meta")
    if not isinstance(meta, dict):
        raise _bad(label, kind, "its header has no parameters")
    return int(version), meta, arrays


def seal_json(payload: Mapping[str, Any], *, kind: str, version: int) -> str:
    """JSON text of ``payload`` with the dpfreq header and a SHA-256 digest of the payload.

    Parameters
    ----------
    payload : Mapping
        JSON-ready content.
    kind : str, keyword-only
        What the text holds; :func:`open_json` checks it.
    version : int, keyword-only
        Format version of that kind; :func:`open_json` checks it.

    Returns
    -------
    str
        JSON text with keys ``format``, ``kind``, ``version``, ``payload`` and ``sha256``.

    Raises
    ------
    TypeError
        If ``payload`` holds a value JSON cannot represent (convert it first, e.g. with
        :func:`dpfreq.release.to_jsonable`).

    Examples
    --------
    >>> text = seal_json({"horizon": 8}, kind="params", version=1)
    >>> open_json(text, kind="params", versions=(1,))
    (1, {'horizon': 8})
    """
    body = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(f"{kind}|{int(version)}|{body}".encode()).hexdigest()
    return json.dumps({"format": _FORMAT, "kind": kind, "version": int(version),
                       "payload": payload, "sha256": digest}, sort_keys=True)


def open_json(text: str | bytes, *, kind: str, versions: tuple[int, ...],
              label: str = "the text") -> tuple[int, dict[str, Any]]:
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

    Returns
    -------
    version : int
        The format version (one of ``versions``).
    payload : dict
        The content passed to :func:`seal_json`; the caller must still validate every field.

    Raises
    ------
    DataError
        Not JSON, no dpfreq header, another kind or version, or a digest mismatch.

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
    try:
        obj = json.loads(text)
    except (ValueError, TypeError, UnicodeDecodeError):
        raise _bad(label, kind, "not JSON") from None
    version = _check_header(obj, label, kind, versions, "text")
    payload = obj.get("payload")
    if not isinstance(payload, dict):
        raise _bad(label, kind, "it has no payload")
    body = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(f"{kind}|{int(version)}|{body}".encode()).hexdigest()
    if obj.get("sha256") != digest:
        raise _bad(label, kind, "its checksum does not match (it was edited or corrupted)")
    return int(version), payload


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
