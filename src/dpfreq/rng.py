"""Randomness policy (DESIGN.md §5).

* ``rng=None`` (the default everywhere) gives a numpy :class:`~numpy.random.Generator` over a
  cryptographically secure bit generator: randomgen's AES counter mode (``AESCounter``, hardware
  AES-NI when the CPU has it) keyed with 128 bits from :func:`os.urandom`, or randomgen's ChaCha20
  keyed with 256 bits when AES-NI is unavailable (software AES would be both slower and prone to
  cache-timing leaks).
* An ``int`` seed or an existing ``Generator`` gives reproducible output for tests and
  simulations; such a release is marked ``seeded=True`` and must not be used in production.

:func:`resolve_rng` is the only place in dpfreq that creates generators from user arguments;
:func:`keyed_generator` derives deterministic CSPRNG streams from a secret key (lazy noise, Spark
partitions). numpy's global state, :mod:`random` and ``RandomState`` are never used.
"""

from __future__ import annotations

import hashlib
import numbers
import os
from dataclasses import dataclass

import numpy as np
import randomgen

from dpfreq._validate import message
from dpfreq.errors import ParameterError

__all__ = [
    "RNGLike",
    "ResolvedRNG",
    "keyed_generator",
    "new_secret_key",
    "resolve_rng",
    "secure_generator",
]

RNGLike = int | np.random.Generator | None


@dataclass(frozen=True)
class ResolvedRNG:
    """A generator together with whether it is reproducible (seeded) or the secure default."""

    generator: np.random.Generator
    seeded: bool


def _aesni_available() -> bool:
    try:
        return bool(randomgen.AESCounter(key=1).use_aesni)
    except Exception:  # pragma: no cover - depends on the CPU and randomgen build
        return False


_USE_AES = _aesni_available()


def secure_generator() -> np.random.Generator:
    """A new generator over a CSPRNG keyed from :func:`os.urandom` (AES-CTR, else ChaCha20)."""
    if _USE_AES:
        key = int.from_bytes(os.urandom(16), "little")
        return np.random.Generator(randomgen.AESCounter(key=key, counter=0))
    key = int.from_bytes(os.urandom(32), "little")  # pragma: no cover - no AES-NI
    return np.random.Generator(randomgen.ChaCha(key=key, counter=0, rounds=20))  # pragma: no cover


def new_secret_key() -> bytes:
    """32 bytes of key material from the operating system (for :func:`keyed_generator`)."""
    return os.urandom(32)


def keyed_generator(key: bytes, *stream: int) -> np.random.Generator:
    """A deterministic CSPRNG stream identified by ``(key, *stream)``.

    The same key and stream identifiers always give the same output; different identifiers give
    computationally independent streams. ChaCha20 is keyed with ``SHA-256(key || ids)``, so the
    stream identifiers can be node ids of a tree (lazy noise) or partition ids (Spark executors).
    The key must be secret for the noise to protect privacy; a seeded key is for testing only.
    """
    if not isinstance(key, bytes | bytearray) or len(key) < 16:
        raise ParameterError(message("key", "keyed_generator", "at least 16 bytes", key))
    h = hashlib.sha256(bytes(key))
    for s in stream:
        h.update(int(s).to_bytes(16, "little", signed=True))
    derived = int.from_bytes(h.digest(), "little")
    return np.random.Generator(randomgen.ChaCha(key=derived, counter=0, rounds=20))


def resolve_rng(rng: RNGLike, func: str = "dpfreq") -> ResolvedRNG:
    """Normalize an ``rng`` argument.

    Parameters
    ----------
    rng : None, int or numpy.random.Generator
        ``None`` selects the secure default (:func:`secure_generator`). An ``int`` >= 0 seeds a
        reproducible generator (PCG64); a ``Generator`` is used as is. Both are marked seeded.
    func : str
        Name of the public function, for the error message.

    Returns
    -------
    ResolvedRNG
        The generator and the ``seeded`` flag to record in the release.
    """
    if rng is None:
        return ResolvedRNG(secure_generator(), seeded=False)
    if isinstance(rng, np.random.Generator):
        return ResolvedRNG(rng, seeded=True)
    if isinstance(rng, numbers.Integral) and not isinstance(rng, bool | np.bool_) and rng >= 0:
        return ResolvedRNG(np.random.Generator(np.random.PCG64(int(rng))), seeded=True)
    raise ParameterError(
        message("rng", func, "None (secure default), an integer seed >= 0 or a "
                "numpy.random.Generator", rng)
    )
