"""Re-signing a reach stream's state under a new key (:func:`dpfreq.resign.resign`).

A state directory (:mod:`dpfreq.stream.state`) holds two signed things: the manifest, and the
digest of the current per-item file that the manifest records (HMAC-SHA256 under the key,
:mod:`dpfreq.stream.items.files`); the memory engine's per-item file (``.npz``) is moreover a
signed artefact itself. Under the stream's exclusive lock (:mod:`dpfreq.stream.lock`: no append
runs meanwhile), each is verified under the old key before anything is written. Then, the way
an append commits: the memory engine's per-item file is written again under the next
generation's name (a DuckDB or Spark Parquet file keeps its bytes: only its digest changes), the
manifest — the next generation, the per-item file's name and its digest under the new key — is
written to a temporary name and renamed over the old one (the commit), and the previous
per-item file is removed. A crash before the rename leaves the stream as it was.

Nothing else changes: the periods, noisy rows, noise key and half-widths are the manifest's, so
every answer stays the same and appends go on from the same budget, charged at creation. The
new generation makes a :class:`~dpfreq.stream.ReachStream` opened before the rotation re-read
the state before its next append.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from dpfreq._resign_file import ITEMS_KIND, STREAM_KIND, check_old
from dpfreq._seal import Opened, open_zip, write_zip
from dpfreq.errors import DataError
from dpfreq.stream.items.files import keyed_digest, remove_items
from dpfreq.stream.lock import state_lock
from dpfreq.stream.state import manifest_of

__all__ = ["resign_stream"]


def resign_stream(path: Path, old: bytes | None, new: bytes | None) -> None:
    """Verify the stream state in the directory ``path`` under ``old`` and re-sign it under
    ``new`` (None: plain SHA-256), holding its lock; a one-line DataError naming the file that
    fails, nothing changed, when it does not verify."""
    manifest = manifest_of(path)
    with state_lock(path):
        opened = open_zip(manifest, STREAM_KIND, None)
        check_old(str(manifest), opened, old)
        meta = opened.meta
        try:
            generation, name, digest = (int(meta["generation"]), meta["items_file"],
                                        meta["items_digest"])
        except (KeyError, TypeError, ValueError):
            raise DataError(f"{path} is not a valid reach stream: its manifest has a missing "
                            "or malformed field.") from None
        items = None if name is None else path / str(name)
        kept = None if items is None else _verified_items(items, digest, old)
        generation += 1
        if kept is not None and items is not None:
            fresh = items.with_name(f"items-{generation}{items.suffix}")
            write_zip(fresh, kept.kind, kept.version, kept.meta, kept.arrays, new,
                      items.stat().st_mode & 0o7777)
            name, items = fresh.name, fresh
        write_zip(manifest, opened.kind, opened.version,
                  {**meta, "generation": generation, "items_file": name,
                   "items_digest": None if items is None else keyed_digest(items, new)},
                  opened.arrays, new, manifest.stat().st_mode & 0o7777)
        if kept is not None:
            remove_items(path / str(meta["items_file"]))


def _verified_items(items: Path, digest: object, old: bytes | None) -> Opened | None:
    """Check the per-item file (or directory) against the manifest's digest under ``old``;
    the parsed file when it is a signed artefact itself (memory engine), else None."""
    if not (items.is_file() or items.is_dir()):
        raise DataError(f"{items} cannot be re-signed: the stream's per-item file is missing.")
    if keyed_digest(items, old) != digest:
        raise DataError(f"{items} cannot be re-signed: it does not match the stream's manifest "
                        "under the old key (edited, from another generation, or signed with "
                        "another key).")
    if not (items.is_file() and zipfile.is_zipfile(items)):
        return None
    kept = open_zip(items, ITEMS_KIND, None)
    check_old(str(items), kept, old)
    return kept
