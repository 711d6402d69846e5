"""Digests of the per-item files a stream's manifest points to, and their removal.

The manifest (an integrity-checked artefact, signed when ``DPFREQ_ARTIFACT_KEY`` is set) records
the digest of the per-item state of its generation: SHA-256 of the file's bytes, or HMAC-SHA256
under the artefact key when it is set (:mod:`dpfreq._signing`). A generation written by Spark is
a directory of part files: its digest covers every data file in sorted name order (name, length
and bytes of each; Spark's hidden ``.crc`` and ``_SUCCESS`` files, which Spark skips when it
reads, are left out). Loading checks it, so a per-item file or part file from another
generation, edited, added, removed or renamed, is refused in one line.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from dpfreq._signing import OLD_KEY_VARIABLE, hasher, signing_key
from dpfreq.errors import DataError

__all__ = ["check_digest", "check_rows_visible", "file_digest", "keyed_digest", "remove_items"]

_CHUNK = 1 << 22


def _data_files(path: Path) -> list[Path]:
    """The files Spark reads in a directory: not hidden (``.``) nor metadata (``_``)."""
    return sorted((p for p in path.rglob("*") if p.is_file()
                   and not any(part.startswith((".", "_")) for part in
                               p.relative_to(path).parts)),
                  key=lambda p: p.relative_to(path).as_posix())


def file_digest(path: Path) -> str:
    """SHA-256 (or HMAC-SHA256 under the artefact key) of the file's bytes, or of a directory's
    data files (each file's relative name, length and bytes, in sorted order), in hex."""
    return keyed_digest(path, signing_key())


def keyed_digest(path: Path, key: bytes | None) -> str:
    """:func:`file_digest` under ``key`` (None: SHA-256), whatever the environment holds."""
    h = hasher(key)
    files = _data_files(path) if path.is_dir() else [path]
    for f in files:
        if path.is_dir():
            name = f.relative_to(path).as_posix().encode()
            h.update(len(name).to_bytes(8, "big") + name + f.stat().st_size.to_bytes(8, "big"))
        with open(f, "rb") as fh:
            while chunk := fh.read(_CHUNK):
                h.update(chunk)
    return str(h.hexdigest())


def check_digest(path: Path, expected: str, label: str) -> None:
    """Refuse a per-item file (or directory) that is missing or whose digest is not the
    manifest's."""
    if not (path.is_file() or path.is_dir()):
        raise DataError(f"{label} is not a valid reach stream: its per-item file "
                        f"{path.name} is missing.")
    if file_digest(path) != expected:
        raise DataError(f"{label} is not a valid reach stream: its per-item file {path.name} "
                        "does not match the manifest (edited, from another generation, or "
                        "signed with another key: after a key rotation, carry the stream over "
                        f"with 'dpfreq resign', the old key in {OLD_KEY_VARIABLE}).")


def check_rows_visible(path: Path, rows: int, label: str) -> None:
    """Refuse a Spark generation whose data files, read here (Parquet footers only), do not
    hold the ``rows`` pairs the job counted: the directory is not one the driver and the
    executors share (a local path with a cluster master leaves each part file on the disk of
    the executor that wrote it), so a manifest naming it would lose the per-item state. Runs
    before the manifest is written: the stream keeps its previous generation."""
    import pyarrow.parquet as pq

    seen = sum(pq.ParquetFile(f).metadata.num_rows for f in _data_files(path))
    if seen != rows:
        raise DataError(f"{label} cannot keep its state in {path.parent}: the Spark job wrote "
                        "part files this process cannot read there. Use a directory the Spark "
                        "driver and every executor share (a local path works with a local "
                        "master only); the stream is unchanged.")


def remove_items(path: Path) -> None:
    """Remove a superseded generation's per-item file or directory (if still there)."""
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
