"""The optional signing key of saved artefacts and ledgers, and the digests made with it.

Without a key, dpfreq protects saved files with a plain SHA-256 digest: it detects accidental
corruption and careless edits, but anyone who edits a file can recompute it. A team that needs
to detect deliberate edits sets ``DPFREQ_ARTIFACT_KEY`` to a secret of at least 32 bytes,
written in hexadecimal (64 or more hex digits, e.g. the output of
``python -c "import secrets; print(secrets.token_hex(32))"``). dpfreq then signs with
HMAC-SHA256 under that key (:mod:`hmac`, the standard library's implementation), which nobody
without the key can recompute.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from typing import Any

from dpfreq.errors import ParameterError

__all__ = ["KEY_BYTES", "KEY_VARIABLE", "OLD_KEY_VARIABLE", "digest", "hasher", "key_in",
           "old_key_refusal", "signing_key"]

KEY_VARIABLE = "DPFREQ_ARTIFACT_KEY"
#: the key a rotation (``dpfreq resign``) verifies with, in the format of ``KEY_VARIABLE``
OLD_KEY_VARIABLE = "DPFREQ_ARTIFACT_KEY_OLD"
KEY_BYTES = 32


def signing_key() -> bytes | None:
    """The key in ``DPFREQ_ARTIFACT_KEY`` (None when unset or empty); a malformed or short
    key is a one-line :class:`~dpfreq.errors.ParameterError` (its value is never shown)."""
    return key_in(KEY_VARIABLE)


def key_in(variable: str) -> bytes | None:
    """The key in the environment variable ``variable``, checked as :func:`signing_key`
    checks ``DPFREQ_ARTIFACT_KEY``."""
    text = os.environ.get(variable, "").strip()
    if not text:
        return None
    try:
        key = bytes.fromhex(text)
    except ValueError:
        raise ParameterError(f"{variable} must be a key of at least {KEY_BYTES} bytes "
                             "written in hexadecimal; got text that is not hexadecimal.") from None
    if len(key) < KEY_BYTES:
        raise ParameterError(f"{variable} must be a key of at least {KEY_BYTES} bytes "
                             f"written in hexadecimal; got {len(key)} bytes.")
    return key


def hasher(key: bytes | None) -> Any:
    """An incremental HMAC-SHA256 under ``key``, or a plain SHA-256 when ``key`` is None
    (both have ``update`` and ``hexdigest``)."""
    return hashlib.sha256() if key is None else hmac.new(key, digestmod=hashlib.sha256)


def digest(key: bytes | None, data: bytes) -> str:
    """HMAC-SHA256 of ``data`` under ``key``, or its plain SHA-256 when ``key`` is None (hex)."""
    h = hasher(key)
    h.update(data)
    return str(h.hexdigest())


def old_key_refusal(signed: bool, old: bytes | None) -> str | None:
    """Why a file or ledger that is ``signed`` (or not) cannot be verified under the old key
    ``old`` of a rotation (None: unsigned) — None when its state matches the key's."""
    if signed and old is None:
        return (f"it is signed (HMAC-SHA256): set {OLD_KEY_VARIABLE} to the key it was "
                "signed with")
    if not signed and old is not None:
        return (f"it is not signed (a plain SHA-256 digest): re-sign unsigned files apart, "
                f"with {OLD_KEY_VARIABLE} unset and from_unsigned=True, after checking them "
                "by other means")
    return None
