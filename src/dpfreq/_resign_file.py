"""Re-signing one dpfreq file, binary or text, under a new key (:mod:`dpfreq.resign`).

The file is parsed and its digest verified under the old key; only then is it written again,
with the same kind, version, parameters and arrays, signed under the new key (a temporary file
beside it renamed over it, with the file's permission bits). Two kinds of files are refused:
public protocol parameters, which are sealed for parties that do not hold the key and are never
signed, and the two files of a reach stream's state, whose manifest records its per-item file's
digest (re-sign the stream's directory instead).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from dpfreq._seal import (
    Opened,
    bad,
    check_digest,
    open_text,
    open_zip,
    replace_file,
    seal_text,
    write_zip,
)
from dpfreq._signing import old_key_refusal
from dpfreq.artifacts import read_text_file
from dpfreq.errors import DataError

__all__ = ["ITEMS_KIND", "PUBLIC_KINDS", "STREAM_KIND", "check_old", "resign_file"]

#: kinds sealed for parties that do not hold the key (``seal_json(..., sign=False)``)
PUBLIC_KINDS = ("crossparty-params", "crossparty-shuffle-params", "dpfreq.longitudinal.params")
#: the kinds of a reach stream's manifest and of its memory engine's per-item file
#: (:mod:`dpfreq.stream.state`, :mod:`dpfreq.stream.items.memory`)
STREAM_KIND, ITEMS_KIND = "reach-stream", "reach-stream-items"


def check_old(label: str, opened: Opened, old: bytes | None) -> None:
    """Refuse in one line a parsed file whose digest does not verify under the old key
    ``old`` (None: unsigned, a plain SHA-256)."""
    why = old_key_refusal(opened.signed, old)
    if why is not None:
        raise DataError(f"{label} cannot be re-signed: {why}.")
    check_digest(label, opened.kind, opened.signed, opened.stored, old, opened.compute)


def resign_file(path: Path, old: bytes | None, new: bytes | None) -> str:
    """Verify the dpfreq file ``path`` under ``old`` and write it again signed under ``new``
    (None: plain SHA-256); returns its kind. Nothing is written when it does not verify."""
    label = str(path)
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        raise DataError(f"{label} does not exist.") from None
    binary = zipfile.is_zipfile(path)
    raw = "" if binary else read_text_file(path, "a dpfreq file")
    opened = open_zip(path, None, None) if binary else open_text(raw, label, None, None)
    if opened.kind in PUBLIC_KINDS:
        raise DataError(f"{label} holds public protocol parameters ({opened.kind}), which are "
                        "never signed: it needs no re-signing.")
    if opened.kind in (STREAM_KIND, ITEMS_KIND):
        raise DataError(f"{label} is part of a reach stream's state: re-sign the stream's "
                        "directory instead.")
    check_old(label, opened, old)
    if not isinstance(opened.meta, dict):
        raise bad(label, opened.kind, "its header has no parameters")
    if binary:
        write_zip(path, opened.kind, opened.version, opened.meta, opened.arrays, new, mode)
    else:
        text = seal_text(opened.meta, opened.kind, opened.version, new)
        replace_file(path, (text + "\n" * raw.endswith("\n")).encode("utf-8"), mode)
    return opened.kind
