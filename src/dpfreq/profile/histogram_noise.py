"""Noising a histogram over a public domain: one exact discrete Laplace draw per item.

This is the one implementation used by :class:`~dpfreq.profile.ProfileSketch` (in memory), by
:class:`~dpfreq.profile.DistributedProfileSketch` (block by block on Spark executors) and by
``release_profile``'s sketch methods (folded straight into the counts of noisy values).

The domain's items ``0..d−1`` are cut into blocks of :data:`NOISE_BLOCK` items. Block ``b``'s
noise is ``sample_discrete_laplace(γ, size, rng=keyed_generator(key, "profile-sketch-block",
b))``: ChaCha20 keyed by dpfreq's one injective key derivation, sampled by the exact integer
sampler of :mod:`dpfreq.noise`. The noise of an item therefore depends only on the master key
and the item's position — not on how the work is scheduled, partitioned or retried — so the
in-memory and the distributed sketch draw the same noise from the same key, and a recomputed
Spark task reproduces its block exactly.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.noise import sample_discrete_laplace
from dpfreq.rng import ResolvedRNG, keyed_generator, new_secret_key

__all__ = [
    "BLOCK_LABEL",
    "NOISE_BLOCK",
    "block_noise",
    "domain_noise",
    "master_key",
    "noisy_profile_counts_from_classes",
    "noisy_window_counts",
]

NOISE_BLOCK = 1 << 20  # items per keyed noise stream
BLOCK_LABEL = "profile-sketch-block"


def master_key(resolved: ResolvedRNG) -> bytes:
    """The 32-byte master key of the noise: from the OS for the secure default, from the
    (seeded, testing-only) generator otherwise."""
    return resolved.generator.bytes(32) if resolved.seeded else new_secret_key()


def block_noise(key: bytes, block: int, size: int, gamma: Fraction) -> NDArray[np.int64]:
    """The exact ``DLap(e^{−γ})`` noise of the ``size`` items of block ``block`` (callers
    always ask for whole blocks; the last block of a domain is shorter, at a fixed size)."""
    return sample_discrete_laplace(gamma, size, rng=keyed_generator(key, BLOCK_LABEL, block))


def domain_noise(key: bytes, size: int, gamma: Fraction, *,
                 block_size: int = NOISE_BLOCK) -> NDArray[np.int64]:
    """The noise of items ``0..size−1`` (all blocks, concatenated) as one int64 array."""
    out = np.empty(size, dtype=np.int64)
    for block, lo in enumerate(range(0, size, block_size)):
        hi = min(size, lo + block_size)
        out[lo:hi] = block_noise(key, block, hi - lo, gamma)
    return out


def noisy_window_counts(values: NDArray[np.int64], *, max_count: int,
                        B: int) -> NDArray[np.int64]:
    """Counts of ``values`` at each ``t ∈ [−B .. n+B]`` (position ``t + B``); values outside the
    window are not counted. ``values`` is consumed (clipped and shifted in place)."""
    n, b = max_count, B
    np.clip(values, -b - 1, n + b + 1, out=values)
    values += b + 1
    return np.bincount(values, minlength=n + 2 * b + 3)[1:-1].astype(np.int64)


def noisy_profile_counts_from_classes(
    classes: NDArray[np.int64], *, max_count: int, B: int, gamma: Any,
    generator: np.random.Generator,
) -> NDArray[np.int64]:
    """Counts of ``k + Z`` on ``[−B .. n+B]`` for ``classes[k]`` items of clamped count ``k``.

    The items are laid out class by class (``k = 0, 1, …, n``) on positions ``0..d−1`` and get
    the noise of :func:`block_noise` under a master key of 32 bytes drawn from ``generator``
    (the secure default or a seeded one). Only one block is held at a time, so memory is
    ``O(n + B + block)`` whatever ``d``. The result has the law of
    ``noisy_profile_counts(h + Z, max_count=n, B=B)`` for any histogram ``h`` with these class
    sizes (items are exchangeable in the profile), and depends only on the class sizes.
    """
    n, b = max_count, B
    key = generator.bytes(32)
    cls = np.asarray(classes, dtype=np.int64)
    ends = np.cumsum(cls)
    starts = ends - cls
    values = np.arange(n + 1, dtype=np.int64)
    total = int(ends[-1]) if ends.size else 0
    out = np.zeros(n + 2 * b + 1, dtype=np.int64)
    for block, lo in enumerate(range(0, total, NOISE_BLOCK)):
        size = min(total - lo, NOISE_BLOCK)
        per_class = np.clip(ends - lo, 0, size) - np.clip(starts - lo, 0, size)
        z = block_noise(key, block, size, gamma)
        z += np.repeat(values, per_class)
        out += noisy_window_counts(z, max_count=n, B=b)
    return out
