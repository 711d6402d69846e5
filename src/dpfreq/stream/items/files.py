"""Digests of the per-item files a stream's manifest points to.

The manifest (an integrity-checked artefact, signed when ``DPFREQ_ARTIFACT_KEY`` is set) records
the digest of the per-item file of its generation: SHA-256 of the file's bytes, or HMAC-SHA256
under the artefact key when it is set (:mod:`dpfreq._signing`). Loading checks it, so a per-item
file from another generation, or edited, is refused in one line.
"""

from __future__ import annotations

from pathlib import Path

from dpfreq._signing import hasher, signing_key
from dpfreq.errors import DataError

__all__ = ["check_digest", "file_digest"]

_CHUNK = 1 << 22


def file_digest(path: Path) -> str:
    """SHA-256 (or HMAC-SHA256 under the artefact key) of the file's bytes, in hex."""
    h = hasher(signing_key())
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return str(h.hexdigest())


def check_digest(path: Path, expected: str, label: str) -> None:
    """Refuse a per-item file that is missing or whose digest is not the manifest's."""
    if not path.is_file():
        raise DataError(f"{label} is not a valid reach stream: its per-item file "
                        f"{path.name} is missing.")
    if file_digest(path) != expected:
        raise DataError(f"{label} is not a valid reach stream: its per-item file {path.name} "
                        "does not match the manifest (edited, from another generation, or "
                        "signed with another key).")
