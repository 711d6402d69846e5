"""The containers of :mod:`dpfreq.artifacts` under an explicit key: parsing, digests, writing.

:mod:`dpfreq.artifacts` reads and writes with the key in ``DPFREQ_ARTIFACT_KEY``; a key rotation
(:mod:`dpfreq.resign`) verifies with one key and writes with another. Both go through these
functions, which take the key (None: a plain SHA-256 digest) as an argument. Parsing
(:func:`open_zip`, :func:`open_text`) checks the container and the header but not the digest:
the caller checks it (:func:`check_digest`) under the key it holds.
"""

from __future__ import annotations

import hmac
import io
import json
import os
import zipfile
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dpfreq._signing import KEY_VARIABLE, OLD_KEY_VARIABLE, hasher
from dpfreq.errors import DataError

__all__ = ["PLAIN", "SIGNED", "Opened", "bad", "check_digest", "check_header", "open_text",
           "open_zip", "replace_file", "seal_text", "unreadable", "write_zip"]

_FORMAT = "dpfreq"
_HEADER = "__header__.json"
_ALLOWED_KINDS = "biuf"
#: the member (zip) or key (JSON) holding the digest: plain, or signed with the key
PLAIN, SIGNED = "sha256", "hmac_sha256"


@dataclass(frozen=True)
class Opened:
    """A parsed dpfreq file whose digest is not checked yet: its kind and version, its
    parameters (``meta`` of a binary file, ``payload`` of a text one), its arrays (binary
    only), whether it is signed, its stored digest, and ``compute(key)``, the digest it must
    have under ``key``."""

    kind: str
    version: int
    meta: Any
    signed: bool
    stored: Any
    compute: Callable[[bytes | None], str]
    arrays: dict[str, np.ndarray] = field(default_factory=dict)


def _zip_digest(header: bytes, arrays: Mapping[str, np.ndarray], key: bytes | None) -> str:
    h = hasher(key)
    h.update(len(header).to_bytes(8, "big") + header)
    for name in sorted(arrays):
        arr = np.ascontiguousarray(arrays[name])
        meta = f"{name}|{arr.dtype.str}|{arr.shape}".encode()
        h.update(len(meta).to_bytes(8, "big") + meta)
        data = arr.tobytes()
        h.update(len(data).to_bytes(8, "big") + data)
    return str(h.hexdigest())


def _json_digest(payload: Mapping[str, Any], kind: str, version: int, key: bytes | None) -> str:
    body = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    h = hasher(key)
    h.update(f"{kind}|{version}|{body}".encode())
    return str(h.hexdigest())


def bad(label: str, kind: str, reason: str) -> DataError:
    """The one-line refusal of a file that is not a valid dpfreq file of ``kind``."""
    return DataError(f"{label} is not a valid dpfreq {kind} file: {reason}.")


def check_digest(label: str, kind: str, signed: bool, stored: Any, key: bytes | None,
                 compute: Callable[[bytes | None], str]) -> None:
    """Refuse a digest that does not match, or a signed state that does not match the key's
    (``compute(key)`` gives the expected digest)."""
    if signed and key is None:
        raise bad(label, kind, f"it is signed (HMAC-SHA256); set {KEY_VARIABLE} to its key "
                  "to load it")
    if not signed and key is not None:
        raise bad(label, kind, f"it is not signed, and unsigned files are refused while "
                  f"{KEY_VARIABLE} is set (anyone could have edited it and recomputed its "
                  "checksum); to adopt it, load it with the key unset and save it again with "
                  "the key set")
    if not isinstance(stored, str) or not hmac.compare_digest(
            stored.encode("utf-8", "replace"), compute(key).encode("ascii")):
        raise bad(label, kind, "its signature does not match (it was edited, or signed with "
                  "another key: after a key rotation, carry it over with 'dpfreq resign', the "
                  f"old key in {OLD_KEY_VARIABLE})" if signed else
                  "its checksum does not match (the file was edited or corrupted)")


def check_header(obj: Any, label: str, kind: str | None, versions: tuple[int, ...] | None,
                 what: str) -> int:
    """The format version of a parsed dpfreq header, after checking its format, kind and
    version (``what`` names the container in the error: "a file" or "text"; ``kind`` or
    ``versions`` None: any)."""
    name = kind or "saved"
    if not isinstance(obj, dict) or obj.get("format") != _FORMAT:
        raise bad(label, name, f"no dpfreq header (not {what} dpfreq wrote)")
    if obj.get("kind") != kind and (kind is not None or not isinstance(obj.get("kind"), str)):
        raise bad(label, name, f"it holds a {obj.get('kind')!r}")
    version = obj.get("version")
    if versions is None:
        if not isinstance(version, int) or isinstance(version, bool):
            raise bad(label, name, f"format version {version!r} is not one")
    elif version not in versions:
        raise bad(label, name, f"format version {version!r} is not supported "
                  f"(this dpfreq reads {', '.join(map(str, versions))})")
    return int(version)


def open_zip(path: str | Path, kind: str | None, versions: tuple[int, ...] | None) -> Opened:
    """Parse a file written by :func:`write_zip` (container, header, arrays; ``kind`` or
    ``versions`` None: any); a one-line DataError when it is not one."""
    label, name = str(path), kind or "saved"
    try:
        with zipfile.ZipFile(path) as zf:
            names = set(zf.namelist())
            signed = f"__{SIGNED}__" in names
            if _HEADER not in names or not (signed or f"__{PLAIN}__" in names):
                raise bad(label, name, "no dpfreq header (not a file dpfreq wrote)")
            header = zf.read(_HEADER)
            stored = zf.read(f"__{SIGNED if signed else PLAIN}__").decode("ascii", "replace")
            obj = json.loads(header)
            version = check_header(obj, label, kind, versions, "a file")
            shapes = obj.get("arrays")
            if not isinstance(shapes, dict) or set(shapes) != {
                    n[:-4] for n in names if n.endswith(".npy")}:
                raise bad(label, name, "its arrays do not match its header")
            arrays: dict[str, np.ndarray] = {}
            for array, (dtype, shape) in shapes.items():
                arr = np.load(io.BytesIO(zf.read(array + ".npy")), allow_pickle=False)
                if arr.dtype.str != dtype or list(arr.shape) != list(shape):
                    raise bad(label, name, f"array {array!r} does not match its header")
                arrays[array] = arr
    except DataError:
        raise
    except FileNotFoundError:
        raise DataError(f"{label} does not exist.") from None
    except (OSError, zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, ValueError,
            TypeError, KeyError, UnicodeDecodeError, NotImplementedError, RuntimeError) as exc:
        # a corrupt zip directory can name an unknown compression method (NotImplementedError)
        # or an encrypted member (RuntimeError)
        raise bad(label, name, unreadable(path, exc)) from None
    return Opened(str(obj["kind"]), version, obj.get("meta"), signed, stored,
                  lambda k: _zip_digest(header, arrays, k), arrays)


def write_zip(path: str | Path, kind: str, version: int, meta: Mapping[str, Any],
              arrays: Mapping[str, np.ndarray], key: bytes | None, mode: int | None = None
              ) -> Path:
    """Write a binary dpfreq file signed under ``key`` (None: a plain digest), through a
    temporary name renamed over ``path``; ``mode``: the permission bits to give it."""
    arrays = {k: np.ascontiguousarray(v) for k, v in arrays.items()}
    for name, arr in arrays.items():
        if arr.dtype.kind not in _ALLOWED_KINDS:
            raise TypeError(f"array {name!r} has dtype {arr.dtype}; only numeric arrays are saved")
    shapes = {k: [v.dtype.str, list(v.shape)] for k, v in arrays.items()}
    header_obj = {"format": _FORMAT, "kind": kind, "version": int(version), "meta": meta,
                  "arrays": shapes}
    header = json.dumps(header_obj, separators=(",", ":")).encode()
    digest = _zip_digest(header, arrays, key)
    out = Path(path)
    tmp = out.with_name(out.name + ".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(_HEADER, header)
        zf.writestr(f"__{SIGNED if key else PLAIN}__", digest)
        for name, arr in arrays.items():
            buf = io.BytesIO()
            np.save(buf, arr, allow_pickle=False)
            zf.writestr(name + ".npy", buf.getvalue())
    if mode is not None:
        os.chmod(tmp, mode)
    tmp.replace(out)
    return out


def open_text(text: str | bytes, label: str, kind: str | None,
              versions: tuple[int, ...] | None) -> Opened:
    """Parse text written by :func:`seal_text` (``kind`` or ``versions`` None: any)."""
    try:
        obj = json.loads(text)
    except (ValueError, TypeError, UnicodeDecodeError):
        raise bad(label, kind or "saved", "not JSON") from None
    version = check_header(obj, label, kind, versions, "text")
    payload = obj.get("payload")
    if not isinstance(payload, dict):
        raise bad(label, kind or "saved", "it has no payload")
    signed, name = SIGNED in obj, str(obj["kind"])
    return Opened(name, version, payload, signed, obj.get(SIGNED if signed else PLAIN),
                  lambda k: _json_digest(payload, name, version, k))


def seal_text(payload: Mapping[str, Any], kind: str, version: int, key: bytes | None) -> str:
    """JSON text of ``payload`` with its header and digest under ``key`` (None: plain)."""
    digest = _json_digest(payload, kind, int(version), key)
    return json.dumps({"format": _FORMAT, "kind": kind, "version": int(version),
                       "payload": payload, SIGNED if key else PLAIN: digest}, sort_keys=True)


def replace_file(path: Path, data: bytes, mode: int) -> None:
    """Replace ``path`` by ``data`` atomically (a temporary file beside it, given ``mode``,
    then renamed over it)."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.chmod(tmp, mode)
    tmp.replace(path)


def _held(path: str | Path) -> str | None:
    """What a file dpfreq wrote holds (``"'params' (a dpfreq text file)"``), None for any
    other file: the kind in the header of a binary (zip) file or of a text (JSON) file."""
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as zf:
                obj = json.loads(zf.read(_HEADER))
            form = "binary"
        else:
            obj = json.loads(Path(path).read_text(encoding="utf-8"))
            form = "text"
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, zlib.error, EOFError,
            NotImplementedError, RuntimeError):
        return None
    if not isinstance(obj, dict) or obj.get("format") != _FORMAT or "kind" not in obj:
        return None
    return f"{str(obj['kind'])!r} (a dpfreq {form} file)"


def unreadable(path: str | Path, exc: BaseException) -> str:
    """Why a file cannot be read, in words: what it holds when dpfreq wrote it for another
    reader, else what is wrong with it (never a Python exception's name)."""
    held = _held(path)
    if held is not None:
        return f"it holds a {held}"
    if isinstance(exc, UnicodeDecodeError):
        return "it is not UTF-8 text"
    if isinstance(exc, OSError) and exc.strerror:
        return f"it cannot be opened ({exc.strerror.lower()})"
    return "it is unreadable or truncated"
