"""The shared virtual-ID space: a keyed hash places each user in the same register at every party.

The parties share a secret **hash key** (32 random bytes, :func:`new_hash_key`); whoever merges
does not hold it, so registers cannot be traced back to user ids without it. From the key:

* the **mapping prefix** ``k``: the first 16 bytes of ``derive_key(key, "crossparty",
  "register-hash")`` (:func:`dpfreq.rng.derive_key`, an injective encoding of what it keys),
  written as 32 hex digits;
* the **fingerprint** ``derive_key(key, "crossparty", "key-id")``, first 16 bytes in hex: public,
  written in the parameters (:attr:`CrossPartyParams.key_id`) so that sketches made with
  different keys are refused. It reveals nothing usable about the key (HMAC-SHA256 output).

A user id is first written as bytes, the same in every engine: an integer in decimal
(``-12``, ``7``), text as its UTF-8 bytes (a CSV identifier column is text, so ``007`` stays
``007``). Its digest is the **secret-prefix SHA-256** ``D = SHA-256(k ‖ bytes)``, in hex; its
first 15 hex digits are the user's **VID** ``v = int(D[0:15], 16)``, uniform on ``[0, 2^60)``.
The user is sampled when ``lo <= v < hi`` (:attr:`CrossPartyParams.sampling_bounds`), and its
register is ``v mod R``. The parameters keep at least ``2^20 R`` VIDs in the sampling interval,
so within it every register receives a share of the VIDs equal to ``1/R`` up to a relative
``2^-20``. DuckDB's ``sha256`` and Spark's ``sha2`` compute exactly the same digest as
:mod:`hashlib`.

Why a secret prefix and not HMAC: HMAC protects a *published* digest against length extension
(computing ``SHA-256(k ‖ m ‖ pad ‖ x)`` from ``SHA-256(k ‖ m)``). Here no digest is ever
published — whoever merges sees noisy registers only, a 20-odd-bit function of each digest,
blurred by noise — so there is nothing to extend, and mapping a user id to its register without
``k`` means finding a 128-bit key from SHA-256 outputs one never sees. The prefix and a short id
fit one SHA-256 block (HMAC needs four), which is what keeps a build within twice the time of
the engine's own per-user ``GROUP BY``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import message
from dpfreq.artifacts import write_private
from dpfreq.crossparty.params import SAMPLING_BITS, CrossPartyParams
from dpfreq.errors import DataError, ParameterError, public_errors
from dpfreq.rng import derive_key, new_secret_key

__all__ = ["HASH_KEY_BYTES", "VidHash", "key_fingerprint", "new_hash_key", "read_hash_key",
           "user_bytes", "vid_hash", "write_hash_key"]

HASH_KEY_BYTES = 32
_PREFIX_BYTES = 16  # of the derived mapping key: 32 hex digits, the secret prefix
_HEX = SAMPLING_BITS // 4  # hex digits per 60-bit number


def new_hash_key() -> bytes:
    """32 bytes from the operating system: a new shared hash key for one group of parties.

    Returns
    -------
    bytes
        The key. Share it among the parties only (never with whoever merges), and keep it as
        secret as the logs: with it, registers can be traced back to user ids.

    Examples
    --------
    >>> key = new_hash_key()
    >>> len(key), key != new_hash_key()
    (32, True)
    """
    return new_secret_key()


def _check_key(key: Any) -> bytes:
    if not isinstance(key, bytes | bytearray) or len(key) < HASH_KEY_BYTES:
        raise ParameterError(message("key", f"a hash key of at least {HASH_KEY_BYTES} "
                                     "bytes", type(key).__name__))
    return bytes(key)


@public_errors("key_fingerprint")
def key_fingerprint(key: bytes) -> str:
    """The public fingerprint of a hash key: 32 hex digits (a keyed derivation, not the key).

    Parameters
    ----------
    key : bytes
        The shared hash key (at least 32 bytes).

    Returns
    -------
    str
        The value of :attr:`CrossPartyParams.key_id` for this key.

    Raises
    ------
    ParameterError
        If ``key`` is not at least 32 bytes.

    Examples
    --------
    >>> key_fingerprint(bytes(32))
    'a2e50872eb2d3f075183bea387a82b41'
    """
    return derive_key(_check_key(key), "crossparty", "key-id")[:16].hex()


@public_errors("write_hash_key")
def write_hash_key(path: str | Path, key: bytes) -> Path:
    """Write ``key`` as hex text to a new file of mode 0600 (owner only).

    Examples
    --------
    >>> import os, tempfile
    >>> path = write_hash_key(os.path.join(tempfile.mkdtemp(), "hash.key"), bytes(32))
    >>> read_hash_key(path) == bytes(32)
    True
    """
    out = Path(path)
    write_private(out, (_check_key(key).hex() + "\n").encode("ascii"))
    return out


def read_hash_key(path: str | Path) -> bytes:
    """The hash key in a file written by :func:`write_hash_key` (hex text).

    Raises
    ------
    DataError
        If the file is missing, unreadable, or not at least 32 bytes written in hex (its
        content is never shown).

    Examples
    --------
    >>> import os, tempfile
    >>> path = write_hash_key(os.path.join(tempfile.mkdtemp(), "hash.key"), new_hash_key())
    >>> len(read_hash_key(path))
    32
    """
    try:
        text = Path(path).read_text(encoding="ascii").strip()
        key = bytes.fromhex(text)
    except FileNotFoundError:
        raise DataError(f"{path} does not exist.") from None
    except (OSError, UnicodeDecodeError, ValueError):
        raise DataError(f"{path} is not a hash key file (hex text of at least "
                        f"{HASH_KEY_BYTES} bytes).") from None
    if len(key) < HASH_KEY_BYTES:
        raise DataError(f"{path} is not a hash key file (hex text of at least "
                        f"{HASH_KEY_BYTES} bytes).")
    return key


def user_bytes(user: Any) -> bytes:
    """The bytes a user id is hashed as: an integer in decimal, text as UTF-8.

    Raises
    ------
    DataError
        For any other type (floats, booleans, missing values): user ids must be integers or
        text, the same in every engine.

    Examples
    --------
    >>> user_bytes(7), user_bytes(np.int64(-12)), user_bytes("007")
    (b'7', b'-12', b'007')
    """
    if isinstance(user, str):
        return user.encode("utf-8", "surrogatepass")
    if isinstance(user, int | np.integer) and not isinstance(user, bool | np.bool_):
        return str(int(user)).encode("ascii")
    raise DataError("user ids must be integers or text (the same bytes in every engine); "
                    f"got a {type(user).__name__}.")


@dataclass(frozen=True)
class VidHash:
    """The keyed hash of one measurement, in the form every engine evaluates.

    Attributes
    ----------
    prefix : str
        The secret prefix ``k`` (32 hex digits; never shown).
    registers : int
        ``R``.
    lo, hi : int
        The sampling bounds on the 60-bit sampling coordinate.

    Examples
    --------
    >>> params = CrossPartyParams(
    ...     measurement="m", registers=8, sampling_start=0, sampling_width=1, max_frequency=3,
    ...     epsilon_reach=1.0, epsilon_frequency=None, hash="sha256-prefix/v1",
    ...     key_id=key_fingerprint(bytes(32)))
    >>> vh = vid_hash(bytes(32), params)
    >>> sampled, registers = vh.locate([1, 2, "a"])
    >>> sampled.tolist(), bool(((registers >= 0) & (registers < 8)).all())
    ([True, True, True], True)
    """

    prefix: str
    registers: int
    lo: int
    hi: int

    def __repr__(self) -> str:  # the prefix is secret
        return f"VidHash(registers={self.registers}, lo={self.lo}, hi={self.hi})"

    def digest(self, user: Any) -> str:
        """The hex digest ``SHA-256(k ‖ user_bytes(user))`` (the reference)."""
        return hashlib.sha256(self.prefix.encode("ascii") + user_bytes(user)).hexdigest()

    def locate(self, users: Iterable[Any]) -> tuple[NDArray[np.bool_], NDArray[np.int64]]:
        """``(sampled, register)`` of each user (registers of unsampled users are computed
        too). One Python-level SHA-256 per user: the reference, used by the memory engine."""
        start = hashlib.sha256(self.prefix.encode("ascii"))
        coords: list[int] = []
        regs: list[int] = []
        for user in users:
            h = start.copy()
            h.update(user_bytes(user))
            vid = int(h.hexdigest()[:_HEX], 16)
            coords.append(vid)
            regs.append(vid % self.registers)
        u = np.array(coords, dtype=np.int64)
        return (u >= self.lo) & (u < self.hi), np.array(regs, dtype=np.int64)


@public_errors("vid_hash")
def vid_hash(key: bytes, params: CrossPartyParams) -> VidHash:
    """The keyed hash of ``params`` under ``key``, after checking the key's fingerprint.

    Raises
    ------
    ParameterError
        If ``key`` is not at least 32 bytes or its fingerprint is not ``params.key_id``.

    Examples
    --------
    >>> params = CrossPartyParams(
    ...     measurement="m", registers=8, sampling_start=0, sampling_width=1, max_frequency=3,
    ...     epsilon_reach=1.0, epsilon_frequency=None, hash="sha256-prefix/v1", key_id="0" * 32)
    >>> vid_hash(bytes(32), params)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dpfreq.errors.ParameterError: key of vid_hash must be the hash key whose fingerprint ...
    """
    raw = _check_key(key)
    if key_fingerprint(raw) != params.key_id:
        raise ParameterError(message("key", "the hash key whose fingerprint the "
                                     "parameters name (key_id)", "another key"))
    prefix = derive_key(raw, "crossparty", "register-hash")[:_PREFIX_BYTES].hex()
    lo, hi = params.sampling_bounds
    return VidHash(prefix=prefix, registers=params.registers, lo=lo, hi=hi)
