"""Additive secret shares modulo ``2^32`` and the framed messages that carry them.

A vector ``x`` of ``n`` integers is split into two shares whose sum modulo ``2^32`` is ``x``:

* the **seed share**: 32 random bytes ``k``; it stands for the mask ``M(k)``, ``n`` words of
  AES-256 in counter mode under a key derived from ``k`` (the keystream read as little-endian
  ``uint32``);
* the **vector share**: ``x − M(k) mod 2^32``.

Each share alone is uniformly distributed whatever ``x`` (the seed is uniform bytes; the
vector share is ``x`` minus a pseudorandom mask, indistinguishable from uniform without ``k``),
so a worker holding one share of a party learns nothing about the party's registers. The seed
share costs 32 bytes to send instead of ``4n``. The keystream is AES's, through OpenSSL
(:mod:`cryptography`): the same bytes on every machine and every version of numpy, which the
two workers and the parties need, as they expand each other's seeds.

Messages travel as **frames**: ``MAGIC ‖ len(header) (4 bytes, big-endian) ‖ header ‖
payload``, the header a JSON object naming its ``kind`` and the payload's ``sha256``; decoding
checks all of it and refuses anything else in one line.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.errors import DataError
from dpfreq.rng import derive_key

__all__ = ["MAGIC", "MAX_HEADER", "SEED_BYTES", "Frame", "decode_frame", "encode_frame",
           "expand_mask", "split_vector"]

MAGIC = b"DPFQSHF1"
MAX_HEADER = 1 << 16
SEED_BYTES = 32


def expand_mask(seed: bytes, size: int, label: str) -> NDArray[np.uint32]:
    """The mask ``M(seed)``: ``size`` words of AES-256-CTR keystream under
    ``derive_key(seed, "shuffle-mask", label)`` (zero nonce), as little-endian ``uint32``.

    Examples
    --------
    >>> m = expand_mask(bytes(32), 4, "example")
    >>> m.dtype, m.shape, bool((m == expand_mask(bytes(32), 4, "example")).all())
    (dtype('uint32'), (4,), True)
    """
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    key = derive_key(seed, "shuffle-mask", label)
    enc = Cipher(algorithms.AES(key), modes.CTR(bytes(16))).encryptor()
    stream = enc.update(bytes(4 * size)) + enc.finalize()
    return np.frombuffer(stream, dtype="<u4").astype(np.uint32, copy=False)


def split_vector(values: NDArray[Any], seed: bytes, label: str) -> NDArray[np.uint32]:
    """The vector share ``values − M(seed) mod 2^32`` (the seed is the other share).

    Examples
    --------
    >>> x = np.array([0, 1, 5, 2**32 - 1], dtype=np.int64)
    >>> share = split_vector(x, bytes(32), "example")
    >>> ((share + expand_mask(bytes(32), 4, "example")) == x.astype(np.uint32)).all()
    np.True_
    """
    x = np.asarray(values).astype(np.uint32)
    return x - expand_mask(seed, x.size, label)


@dataclass(frozen=True)
class Frame:
    """A decoded message: its header (checked JSON object) and payload bytes."""

    header: dict[str, Any]
    payload: bytes


def encode_frame(header: dict[str, Any], payload: bytes) -> bytes:
    """``MAGIC ‖ length ‖ header JSON (with the payload's sha256) ‖ payload``.

    Examples
    --------
    >>> frame = decode_frame(encode_frame({"kind": "example"}, b"abc"), kinds=("example",))
    >>> frame.header["kind"], frame.payload
    ('example', b'abc')
    """
    head = dict(header)
    head["sha256"] = hashlib.sha256(payload).hexdigest()
    text = json.dumps(head, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return MAGIC + len(text).to_bytes(4, "big") + text + payload


def decode_frame(data: bytes, *, kinds: tuple[str, ...], label: str = "the message") -> Frame:
    """Check and split a frame; DataError (one line) for anything malformed.

    Examples
    --------
    >>> decode_frame(b"garbage", kinds=("example",))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dpfreq.errors.DataError: the message is not a dpfreq shuffle frame: ...
    """
    def bad(reason: str) -> DataError:
        return DataError(f"{label} is not a dpfreq shuffle frame: {reason}.")

    if len(data) < len(MAGIC) + 4 or data[:len(MAGIC)] != MAGIC:
        raise bad("it does not start with the frame marker")
    size = int.from_bytes(data[len(MAGIC):len(MAGIC) + 4], "big")
    start = len(MAGIC) + 4
    if size > MAX_HEADER or start + size > len(data):
        raise bad("its header length is out of range")
    try:
        header = json.loads(data[start:start + size].decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise bad("its header is not JSON") from None
    if not isinstance(header, dict) or header.get("kind") not in kinds:
        raise bad(f"its header is not a JSON object of kind {' or '.join(kinds)}")
    payload = data[start + size:]
    if header.get("sha256") != hashlib.sha256(payload).hexdigest():
        raise bad("its payload does not match its checksum")
    return Frame(header=header, payload=payload)
