"""Hash sampling of a public domain: keep item ``ℓ`` iff a keyed hash ``g(ℓ) < ρ``.

A :class:`~dpfreq.profile.ProfileSketch` may keep counters for a sample of the domain only. The
sample is chosen by a public, data-independent keyed 64-bit mixing function of the item's
domain index, so it leaves the sketch ε-DP whatever the key; the profile reconstructed is then
that of the sampled items, with an extra sampling error of order ``1/√d'``.
"""

from __future__ import annotations

import hashlib
import math
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import check_int, check_positive_float, message
from dpfreq.errors import ParameterError, public_errors

__all__ = ["check_sample_rate", "sample_domain"]

_HASH_CHUNK = 1 << 22


def check_sample_rate(rate: object, param: str) -> float:
    """A sampling rate ρ in (0, 1]."""
    rho = check_positive_float(rate, param)
    if rho > 1.0:
        raise ParameterError(message(param, "a number in (0, 1]", rate))
    return rho


def _key_words(key: bytes) -> tuple[np.uint64, np.uint64]:
    digest = hashlib.sha256(b"dpfreq.ProfileSketch.sample|" + bytes(key)).digest()
    return (np.uint64(int.from_bytes(digest[:8], "little")),
            np.uint64(int.from_bytes(digest[8:16], "little")))


def _fmix64(x: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """MurmurHash3's 64-bit finalizer (a bijection of uint64 with full avalanche), in place."""
    x ^= x >> np.uint64(33)
    x *= np.uint64(0xFF51AFD7ED558CCD)
    x ^= x >> np.uint64(33)
    x *= np.uint64(0xC4CEB9FE1A85EC53)
    x ^= x >> np.uint64(33)
    return x


def _rate_threshold(rate: float) -> int:
    """``⌊ρ · 2^64⌋`` computed exactly from the binary value of ρ."""
    return math.floor(Fraction(rate) * (1 << 64))


@public_errors("sample_domain")
def sample_domain(domain_size: int, *, rate: float, key: bytes) -> NDArray[np.int64]:
    """The sorted domain indexes ``ℓ ∈ 0..d−1`` kept by hash sampling at rate ρ.

    ``g(ℓ) = fmix64(fmix64(ℓ·φ + k0) ^ k1) / 2^64`` with ``(k0, k1)`` derived from ``key`` by
    SHA-256 and ``φ`` the 64-bit golden-ratio constant; ``ℓ`` is kept iff ``g(ℓ) < ρ``. The
    mixing is a keyed bijection of 64-bit words, so ``|S|`` is close to ``ρd`` and ``S`` looks
    uniform for any fixed key. ``S`` depends only on ``(d, ρ, key)``, never on data, so sampling
    leaves the sketch ε-DP whatever the key; the key needs no secrecy for privacy.
    """
    d = check_int(domain_size, "domain_size", minimum=1)
    rho = check_sample_rate(rate, "rate")
    if not isinstance(key, bytes | bytearray) or len(key) < 8:
        raise ParameterError(message("key", "at least 8 bytes", key))
    if rho == 1.0:
        return np.arange(d, dtype=np.int64)
    k0, k1 = _key_words(bytes(key))
    thr = np.uint64(_rate_threshold(rho))
    parts = []
    with np.errstate(over="ignore"):
        for start in range(0, d, _HASH_CHUNK):
            idx = np.arange(start, min(d, start + _HASH_CHUNK), dtype=np.uint64)
            x = idx * np.uint64(0x9E3779B97F4A7C15)
            x += k0
            x = _fmix64(x)
            x ^= k1
            x = _fmix64(x)
            parts.append(idx[x < thr].astype(np.int64))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
