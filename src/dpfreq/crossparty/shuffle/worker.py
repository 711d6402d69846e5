"""The workers' side: sum the parties' shares, add dummy registers, shuffle, hand out.

Two workers, at positions 0 and 1, each hold one share of every party's registers. For each
histogram the measurement asks for (an *entity*: the union of the included parties, or one
party alone) each worker:

1. sums its shares of the entity's parties modulo ``2^32`` (``R`` words);
2. appends the dummy registers of both workers, in the order ``[worker 0's | worker 1's]``.
   A worker's dummies are ``D[v]`` registers holding ``v`` for every value ``v = 0..V``
   (:mod:`dpfreq.crossparty.shuffle.dummies`); it secret-shares them with the other worker
   through a fresh mask seed: the other worker's share is the mask ``M(seed)``, its own is
   ``dummies − M(seed)``. The other worker learns the seed and the *total* number of dummies,
   never how many hold each value, and the two kinds of registers look alike to it (uniform
   words);
3. permutes the ``R + N_0 + N_1`` words with the permutation both derive from their two
   32-byte secrets (:func:`shared_order`; the aggregator holds neither);
4. sends the permuted words to the aggregator.

The two outputs sum to the permuted union registers and dummies. Everything a worker sends is
a deterministic function of what it stored (the shares, its draws, the other's public draws),
so a restarted worker sends the same bytes again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.crossparty.shuffle.dummies import DummyLaw, sample_dummies
from dpfreq.crossparty.shuffle.shares import SEED_BYTES, expand_mask
from dpfreq.errors import DataError, public_errors
from dpfreq.rng import RNGLike, derive_key, resolve_rng

__all__ = ["PeerDraws", "WorkerDraws", "draw_worker", "dummy_label", "shared_order",
           "sum_shares", "worker_output"]


def dummy_label(param_id: str, position: int, entity: int) -> str:
    """The label of worker ``position``'s dummy mask for ``entity``.

    Examples
    --------
    >>> dummy_label("ab", 1, 0)
    'dummies|ab|1|0'
    """
    return f"dummies|{param_id}|{position}|{entity}"


@dataclass(frozen=True, repr=False)
class WorkerDraws:
    """Everything random a worker draws for one measurement (drawn once, stored, reused).

    Attributes
    ----------
    position : int
        0 or 1.
    secret : bytes
        The worker's 32-byte contribution to the shared permutation.
    dummies : tuple of numpy.ndarray of int64
        Per measured entity, the dummy count of every value ``0..V`` (secret: the noise).
    masks : tuple of bytes
        Per measured entity, the seed of the other worker's share of these dummies.

    Examples
    --------
    >>> from dpfreq.crossparty.shuffle.dummies import calibrate_dummies
    >>> draws = draw_worker(calibrate_dummies(1.0, 1e-6), [3, 6], position=0, rng=0)
    >>> [d.size for d in draws.dummies], len(draws.public()["dummies"])
    ([4, 7], 2)
    >>> WorkerDraws.from_dict(draws.to_dict()).dummies[1].tolist() == draws.dummies[1].tolist()
    True
    """

    position: int
    secret: bytes
    dummies: tuple[NDArray[np.int64], ...]
    masks: tuple[bytes, ...]

    def __repr__(self) -> str:
        return f"WorkerDraws(position={self.position}, entities={len(self.dummies)})"

    def public(self) -> dict[str, Any]:
        """What the other worker receives: the secret, and per entity the total number of
        dummies and the mask seed (never the counts per value)."""
        return {"position": self.position, "secret": self.secret.hex(),
                "dummies": [{"count": int(d.sum()), "mask": m.hex()}
                            for d, m in zip(self.dummies, self.masks, strict=True)]}

    def to_dict(self) -> dict[str, Any]:
        """Every draw as JSON-ready values (for the worker's own database: secret)."""
        return {**self.public(), "counts": [d.tolist() for d in self.dummies]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WorkerDraws:
        """The draws stored by :meth:`to_dict`."""
        return cls(position=int(data["position"]), secret=bytes.fromhex(data["secret"]),
                   dummies=tuple(np.asarray(c, dtype=np.int64) for c in data["counts"]),
                   masks=tuple(bytes.fromhex(d["mask"]) for d in data["dummies"]))


@dataclass(frozen=True, repr=False)
class PeerDraws:
    """What a worker knows of the other worker's draws (:meth:`WorkerDraws.public`).

    Examples
    --------
    >>> from dpfreq.crossparty.shuffle.dummies import calibrate_dummies
    >>> draws = draw_worker(calibrate_dummies(1.0, 1e-6), [3], position=1, rng=0)
    >>> peer = PeerDraws.from_public(draws.public(), entities=1)
    >>> peer.position, peer.counts == (int(draws.dummies[0].sum()),)
    (1, True)
    """

    position: int
    secret: bytes
    counts: tuple[int, ...]
    masks: tuple[bytes, ...]

    def __repr__(self) -> str:
        return f"PeerDraws(position={self.position}, entities={len(self.counts)})"

    @classmethod
    def from_public(cls, data: Any, *, entities: int, label: str = "the other worker's draws"
                    ) -> PeerDraws:
        """Check and read :meth:`WorkerDraws.public` (DataError when malformed)."""
        try:
            secret = bytes.fromhex(data["secret"])
            rows = data["dummies"]
            counts = tuple(int(r["count"]) for r in rows)
            masks = tuple(bytes.fromhex(r["mask"]) for r in rows)
            position = int(data["position"])
        except (KeyError, TypeError, ValueError):
            raise DataError(f"{label} are malformed.") from None
        if (position not in (0, 1) or len(secret) != SEED_BYTES or len(counts) != entities
                or any(c < 0 or c > 1 << 31 for c in counts)
                or any(len(m) != SEED_BYTES for m in masks)):
            raise DataError(f"{label} are malformed.")
        return cls(position=position, secret=secret, counts=counts, masks=masks)


@public_errors("draw_worker")
def draw_worker(law: DummyLaw, values: Sequence[int], *, position: int,
                rng: RNGLike = None) -> WorkerDraws:
    """Draw a worker's secret, and per entity (``values``: its largest value ``V``) its mask
    seed and its dummy counts of every value ``0..V`` (exact law ``law``).

    Examples
    --------
    >>> from dpfreq.crossparty.shuffle.dummies import calibrate_dummies
    >>> draw_worker(calibrate_dummies(1.0, 1e-6), [2], position=0, rng=1).dummies[0].size
    3
    """
    gen = resolve_rng(rng).generator
    secret = gen.bytes(SEED_BYTES)
    masks = tuple(gen.bytes(SEED_BYTES) for _ in values)
    dummies = tuple(sample_dummies(law, int(v) + 1, rng=gen) for v in values)
    return WorkerDraws(position=position, secret=secret, dummies=dummies, masks=masks)


def shared_order(secret0: bytes, secret1: bytes, label: str, size: int) -> NDArray[np.intp]:
    """The permutation both workers apply: positions sorted by ``size`` random 64-bit keys,
    AES-256-CTR keystream under ``derive_key(secret0, "shuffle-permutation", secret1,
    label)``.

    Uniform over the permutations as long as the keys are distinct (a tie, of probability
    below ``size² / 2^65``, is broken by position). Whoever lacks either secret cannot tell
    where any word went.

    Examples
    --------
    >>> order = shared_order(bytes(32), bytes(range(32)), "x", 5)
    >>> sorted(order.tolist())
    [0, 1, 2, 3, 4]
    """
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    key = derive_key(secret0, "shuffle-permutation", secret1, label)
    enc = Cipher(algorithms.AES(key), modes.CTR(bytes(16))).encryptor()
    keys = np.frombuffer(enc.update(bytes(8 * size)) + enc.finalize(), dtype="<u8")
    return np.argsort(keys, kind="stable")


def sum_shares(words: Sequence[NDArray[np.uint32]], registers: int) -> NDArray[np.uint32]:
    """The sum modulo ``2^32`` of shares of ``registers`` words (zeros for none).

    Examples
    --------
    >>> a = np.array([2**32 - 1, 5], dtype=np.uint32)
    >>> sum_shares([a, np.array([2, 1], dtype=np.uint32)], 2).tolist()
    [1, 6]
    """
    total = np.zeros(registers, dtype=np.uint32)
    for w in words:
        np.add(total, w, out=total)
    return total


def worker_output(combined: NDArray[np.uint32], *, own: WorkerDraws, peer: PeerDraws,
                  entity: int, index: int, param_id: str) -> NDArray[np.uint32]:
    """Worker ``own.position``'s output for one entity (see the module docstring).

    Parameters
    ----------
    combined : numpy.ndarray of uint32
        The sum of this worker's shares of the entity's parties.
    own, peer : WorkerDraws, PeerDraws
        This worker's draws and what it knows of the other's.
    entity : int
        The entity's number in the parameters (0: the union; ``i + 1``: party ``i``).
    index : int
        The entity's place among the measured ones (its draws' index).
    param_id : str
        The parameters' id (labels of the masks and of the permutation).

    Examples
    --------
    >>> from dpfreq.crossparty.shuffle.dummies import calibrate_dummies
    >>> law = calibrate_dummies(1.0, 1e-6)
    >>> w0 = draw_worker(law, [2], position=0, rng=1)
    >>> w1 = draw_worker(law, [2], position=1, rng=2)
    >>> x = np.array([0, 1, 2, 1], dtype=np.uint32)
    >>> mask = np.array([7, 8, 9, 10], dtype=np.uint32)
    >>> y0 = worker_output(x - mask, own=w0, peer=PeerDraws.from_public(w1.public(),
    ...                    entities=1), entity=0, index=0, param_id="p")
    >>> y1 = worker_output(mask, own=w1, peer=PeerDraws.from_public(w0.public(), entities=1),
    ...                    entity=0, index=0, param_id="p")
    >>> hist = np.bincount(y0 + y1)
    >>> (hist - w0.dummies[0] - w1.dummies[0]).tolist()  # the registers' own histogram
    [1, 2, 1]
    """
    counts = own.dummies[index]
    values = np.repeat(np.arange(counts.size, dtype=np.uint32), counts)
    mine = values - expand_mask(own.masks[index], values.size,
                                dummy_label(param_id, own.position, entity))
    theirs = expand_mask(peer.masks[index], peer.counts[index],
                         dummy_label(param_id, peer.position, entity))
    parts = [combined, mine, theirs] if own.position == 0 else [combined, theirs, mine]
    assembled = np.concatenate(parts).astype(np.uint32, copy=False)
    secrets = (own.secret, peer.secret) if own.position == 0 else (peer.secret, own.secret)
    order = shared_order(*secrets, f"{param_id}|{entity}", assembled.size)
    return assembled[order]
