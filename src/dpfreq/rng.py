"""Randomness policy: where every random draw of dpfreq comes from.

* ``rng=None`` (the default everywhere) gives a numpy :class:`~numpy.random.Generator` over a
  cryptographically secure bit generator: randomgen's ChaCha20 (20 rounds, SIMD) keyed with
  256 bits from :func:`os.urandom`. The keyed streams below are ChaCha20 too, so randomgen
  supplies one cipher; AES is used only through ``cryptography`` (OpenSSL), as the keyed PRF of
  the windows' lazy node noise (:mod:`dpfreq.windows.noise.keyed`). randomgen is kept because
  numpy has no secure bit generator of its own and a numpy ``Generator`` needs a C-level one.
* An ``int`` seed or an existing ``Generator`` gives reproducible output for tests and
  simulations; such a release is marked ``seeded=True`` and must not be used in production.

:func:`resolve_rng` is the only place in dpfreq that creates generators from user arguments;
:func:`keyed_generator` derives deterministic CSPRNG streams from a secret key (lazy noise, Spark
partitions). numpy's global state, :mod:`random` and ``RandomState`` are never used.
"""

from __future__ import annotations

import hmac
import numbers
import os
from dataclasses import dataclass

import numpy as np
import randomgen

from dpfreq._validate import message
from dpfreq.errors import ParameterError, public_errors

__all__ = [
    "RNGLike",
    "ResolvedRNG",
    "derive_key",
    "keyed_generator",
    "new_secret_key",
    "resolve_rng",
    "secure_generator",
]

RNGLike = int | np.random.Generator | None


@dataclass(frozen=True)
class ResolvedRNG:
    """A generator together with whether it is reproducible (seeded) or the secure default.

    Attributes
    ----------
    generator : numpy.random.Generator
        The generator to draw from.
    seeded : bool
        True for a user seed or generator (reproducible, not for production); recorded in the
        release as ``seeded``.

    Examples
    --------
    >>> r = resolve_rng(7)
    >>> r.seeded, isinstance(r.generator, np.random.Generator)
    (True, True)
    """

    generator: np.random.Generator
    seeded: bool


def secure_generator() -> np.random.Generator:
    """A new generator over a CSPRNG keyed from :func:`os.urandom` (ChaCha20).

    Returns
    -------
    numpy.random.Generator
        A fresh, unpredictable generator: ChaCha20 (20 rounds) with a 256-bit key, counter 0.

    Examples
    --------
    >>> draws = secure_generator().integers(0, 6, size=1000)
    >>> bool(((draws >= 0) & (draws < 6)).all())
    True
    """
    key = int.from_bytes(os.urandom(32), "little")
    return np.random.Generator(randomgen.ChaCha(key=key, counter=0, rounds=20))


def new_secret_key() -> bytes:
    """32 bytes of key material from the operating system (for :func:`keyed_generator`).

    Returns
    -------
    bytes
        32 bytes from :func:`os.urandom`; keep them secret, as the noise derived from them is
        only private while the key is.

    Examples
    --------
    >>> key = new_secret_key()
    >>> len(key), key != new_secret_key()
    (32, True)
    """
    return os.urandom(32)


#: ints below this in absolute value have far fewer than the 4300 digits ``str`` refuses
_FAST_INT = 1 << 64


def _encode_part(part: str | int | bytes) -> bytes:
    """One labelled, length-prefixed field of the canonical encoding used by :func:`derive_key`."""
    # the common cases first (plain ints, ASCII strs), with the same bytes as below
    if isinstance(part, int) and type(part) is int and -_FAST_INT < part < _FAST_INT:
        body = str(part).encode("ascii")
        return b"i" + len(body).to_bytes(8, "big") + body
    if isinstance(part, str) and type(part) is str and part.isascii():
        body = part.encode("ascii")
        return b"s" + len(body).to_bytes(8, "big") + body
    if isinstance(part, bool):
        raise ParameterError(message("part", "a str, an int or bytes", part))
    if isinstance(part, str):
        try:
            tag, body = b"s", part.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate has no UTF-8 encoding
            raise ParameterError(message("part", "a str encodable as UTF-8 (no "
                                         "lone surrogates)", "a str with a lone surrogate")
                                 ) from None
    elif isinstance(part, numbers.Integral):
        try:
            tag, body = b"i", str(int(part)).encode("ascii")
        except ValueError:  # beyond Python's limit on int -> str conversion
            raise ParameterError(message("part", "an int of at most 4300 decimal "
                                         "digits", f"an int of {int(part).bit_length()} bits")
                                 ) from None
    elif isinstance(part, bytes | bytearray):
        tag, body = b"b", bytes(part)
    else:
        raise ParameterError(message("part", "a str, an int or bytes", part))
    return tag + len(body).to_bytes(8, "big") + body


@public_errors("derive_key")
def derive_key(key: bytes, *parts: str | int | bytes) -> bytes:
    """A 32-byte sub-key for what ``parts`` names, derived from a secret ``key``.

    ``HMAC-SHA256(key, "dpfreq-kdf-1" ‖ enc(part_1) ‖ … ‖ enc(part_m))`` where ``enc`` writes a
    type tag, an 8-byte length and the bytes of each part (integers in decimal, strings in
    UTF-8). The encoding is injective — two different tuples of parts never encode to the same
    bytes, whatever their number, types or sizes — so distinct structures (release, family, k,
    tree, node block, ...) get computationally independent sub-keys: they can only share one by
    a collision of HMAC-SHA256. This is the one key-derivation construction of dpfreq; every
    keyed noise stream (window trees, distributed sketch blocks, sub-domain sampling, the
    longitudinal devices' draws) goes through it.

    Parameters
    ----------
    key : bytes
        The secret master key, at least 16 bytes (:func:`new_secret_key` gives 32).
    *parts : str, int or bytes
        What the sub-key is for, e.g. ``("tree", k, block)``.

    Returns
    -------
    bytes
        The 32-byte sub-key.

    Raises
    ------
    ParameterError
        If ``key`` is not at least 16 bytes, or a part is not a str, an int or bytes.

    Examples
    --------
    >>> k = bytes(32)
    >>> derive_key(k, "tree", 1, 12) != derive_key(k, "tree", 11, 2)
    True
    >>> len(derive_key(k, "x"))
    32
    """
    if not isinstance(key, bytes | bytearray) or len(key) < 16:
        raise ParameterError(message("key", "at least 16 bytes", type(key).__name__))
    body = b"dpfreq-kdf-1" + b"".join(_encode_part(p) for p in parts)
    return hmac.digest(bytes(key), body, "sha256")  # = hmac.new(...).digest(), one-shot


@public_errors("keyed_generator")
def keyed_generator(key: bytes, *parts: str | int | bytes) -> np.random.Generator:
    """A deterministic CSPRNG stream identified by ``(key, *parts)``.

    ChaCha20 (20 rounds) keyed with :func:`derive_key` ``(key, "generator", *parts)``: the same
    key and parts always give the same output; different parts give computationally independent
    streams. The key must be secret for the noise to protect privacy; a seeded key is for
    testing only.

    Parameters
    ----------
    key : bytes
        The secret master key, at least 16 bytes (:func:`new_secret_key`).
    *parts : str, int or bytes
        What the stream is for (e.g. ``"profile-sketch-block", 3``).

    Returns
    -------
    numpy.random.Generator
        A ChaCha20 generator starting at counter 0.

    Raises
    ------
    ParameterError
        As :func:`derive_key`.

    Examples
    --------
    >>> key = bytes(range(32))  # a fixed key: for this example only, never in production
    >>> a = keyed_generator(key, "block", 0).integers(0, 2**32, size=4)
    >>> b = keyed_generator(key, "block", 0).integers(0, 2**32, size=4)
    >>> c = keyed_generator(key, "block", 1).integers(0, 2**32, size=4)
    >>> bool((a == b).all()), bool((a == c).all())
    (True, False)
    """
    if not isinstance(key, bytes | bytearray) or len(key) < 16:
        raise ParameterError(message("key", "at least 16 bytes",
                                     type(key).__name__))
    derived = int.from_bytes(derive_key(key, "generator", *parts), "little")
    return np.random.Generator(randomgen.ChaCha(key=derived, counter=0, rounds=20))


def resolve_rng(rng: RNGLike) -> ResolvedRNG:
    """Normalize an ``rng`` argument.

    Parameters
    ----------
    rng : None, int or numpy.random.Generator
        ``None`` selects the secure default (:func:`secure_generator`). An ``int`` >= 0 seeds a
        reproducible generator (PCG64); a ``Generator`` is used as is. Both are marked seeded.

    Returns
    -------
    ResolvedRNG
        The generator and the ``seeded`` flag to record in the release.

    Raises
    ------
    ParameterError
        If ``rng`` is none of the above (e.g. a negative seed, a float or a ``RandomState``).

    Examples
    --------
    >>> resolve_rng(None).seeded, resolve_rng(42).seeded
    (False, True)
    >>> int(resolve_rng(42).generator.integers(100)) == int(resolve_rng(42).generator.integers(100))
    True
    """
    if rng is None:
        return ResolvedRNG(secure_generator(), seeded=False)
    if isinstance(rng, np.random.Generator):
        return ResolvedRNG(rng, seeded=True)
    if isinstance(rng, numbers.Integral) and not isinstance(rng, bool | np.bool_) and rng >= 0:
        return ResolvedRNG(np.random.Generator(np.random.PCG64(int(rng))), seeded=True)
    raise ParameterError(
        message("rng", "None (secure default), an integer seed >= 0 or a "
                "numpy.random.Generator", rng)
    )
