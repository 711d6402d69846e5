"""Lazy keyed node noise: exact discrete noise as a deterministic function of (key, node id).

A 2d dyadic tree over ``T`` periods has ``(2D−1)²`` nodes, far too many to draw up front, so
node noise is drawn on demand and is a deterministic function of the release's secret key, the
name of the structure and the node id: the same node always gets the same noise (never
redrawn), in any batch, in any order, after a save/load.

Keys
----
Every sub-key of the windows system comes from :func:`dpfreq.rng.derive_key` (HMAC-SHA256 over
an injective, length-prefixed encoding): ``derive_key(release_key, "windows", scheme, *name)``
where ``name`` is the structure's name, ``(family label, k, tree index)`` in a release. Two
different (scheme, name) pairs never share an encoding, so distinct trees get computationally
independent keys whatever their number (no arithmetic on small integers that could collide).
The eager trees draw from :func:`dpfreq.rng.keyed_generator` under the same kind of name
(:func:`eager_generator`), and so do the rare tie-settling streams below.

Discrete Laplace (:class:`KeyedDiscreteLaplace`, scheme :data:`LAPLACE_SCHEME`)
------------------------------------------------------------------------------
* The node's randomness is ``AES-256_K(id ‖ tag)`` (one 128-bit block, little-endian 64-bit
  id and tag, ``K`` the derived sub-key), computed for a batch of node ids by ECB calls of
  OpenSSL through ``cryptography`` over chunks of ids, into one reused buffer (AES as a
  pseudorandom function on distinct inputs; AES-NI makes this ~3 ns per node).
* The first 64-bit word of tag 0 drives the exact inverse-cdf sampler of :mod:`dpfreq.noise`:
  63 bits against rigorous integer thresholds ``⌊2^63 Pr[|Z| > k]⌋``, the 64th bit the sign.
  Beyond the table's ``K`` thresholds, ``|Z| = K + G`` with ``G`` geometric (memoryless),
  drawn in O(log(1/γ)) words whatever γ (:meth:`_NodePRF.geometric`).
* A word landing exactly on a threshold (probability ~2^-63) is settled by further bits of a
  per-(node, tag) ChaCha20 stream. So the output law is exactly the discrete Laplace pmf given
  ideal PRF outputs, and no floating point decides a value.
* For γ so large that no threshold fits 63 bits (γ > ~43) each node draws from its own
  ChaCha20 stream with the exact sampler of :mod:`dpfreq.noise` (slow, but such γ only occur
  for a handful of nodes: tiny horizons with a large ε).

Discrete Gaussian (:class:`KeyedDiscreteGaussian`, scheme :data:`GAUSSIAN_SCHEME`)
---------------------------------------------------------------------------------
Canonne, Kamath and Steinke (2020), "The discrete Gaussian for differential privacy",
Algorithm 3: with an integer ``σ²`` (a float target is rounded up to ``t·u`` by
:func:`gaussian_sigma2`) and ``t = ⌊√σ²⌋ + 1``, round ``r = 0, 1, …`` draws ``Y ~ DLap(1/t)``
as above on the words of tags ``r·2^32 + j`` and accepts ``Y`` with probability
``exp(−(t|Y| − σ²)²/(2σ²t²))`` (``exp(−(|Y| − u)²/(2tu))`` when ``σ² = t·u``): the 63-bit word
of tag ``r·2^32 + 2^31`` is compared with the exact integer ``⌊2^63 e^{−x}⌋``
(:mod:`dpfreq._exact_inverse`), a tie settled by further stream bits. The accepted ``Y`` has
exactly the law ``Pr[Z = z] ∝ exp(−z²/(2σ²))``. Element-wise, like the Laplace: nothing is
cached.
"""

from __future__ import annotations

import functools
import math
import threading
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._exact_inverse import (
    InverseTable,
    exp_neg_multiple_floor,
    exp_neg_multiple_resolve,
    half_logistic_floor,
    half_logistic_resolve,
    inverse_table,
)
from dpfreq._validate import message
from dpfreq.errors import ParameterError, public_errors
from dpfreq.noise import MAX_DENOMINATOR, gaussian_sigma2, sample_discrete_laplace
from dpfreq.rng import derive_key, keyed_generator
from dpfreq.windows.noise import kernel as node_kernel

__all__ = [
    "EAGER_SCHEME",
    "GAUSSIAN_SCHEME",
    "LAPLACE_SCHEME",
    "KeyedDiscreteGaussian",
    "KeyedDiscreteLaplace",
    "eager_generator",
    "structure_name",
]

#: names of the keyed constructions; each is part of every sub-key it derives
LAPLACE_SCHEME = "aes256-table"
GAUSSIAN_SCHEME = "aes256-cks-gaussian"
EAGER_SCHEME = "chacha20-eager"

_AES_CHUNK = 1 << 12  # node ids per AES call + table pass (temporaries stay in cache)
_BERNOULLI_TAG = 1 << 31  # tag offset of the acceptance word of a Gaussian round
_ROUND_SHIFT = 32  # tag of round r starts at r·2^32

StructureName = tuple[str | int, ...]


def _check_key(key: Any) -> bytes:
    if not isinstance(key, bytes | bytearray) or len(key) < 16:
        raise ParameterError(message("key", "at least 16 bytes", type(key).__name__))
    return bytes(key)


@public_errors("structure_name")
def structure_name(structure: Any) -> StructureName:
    """The canonical name of a structure: a tuple of str and int parts (an int or str alone is
    a one-part name). It is encoded injectively into every sub-key (module docstring)."""
    parts = structure if isinstance(structure, tuple) else (structure,)
    if not parts:
        raise ParameterError(message("structure", "a non-empty name", structure))
    out: list[str | int] = []
    for p in parts:
        if isinstance(p, bool) or not isinstance(p, str | int | np.integer):
            raise ParameterError(message("structure", "an int, a str or a tuple of them",
                                         structure))
        out.append(p if isinstance(p, str) else int(p))
    return tuple(out)


@public_errors("eager_generator")
def eager_generator(key: bytes, structure: Any) -> np.random.Generator:
    """The ChaCha20 stream of an eagerly drawn structure (1d trees, per-query noise)."""
    name = structure_name(structure)
    return keyed_generator(_check_key(key), "windows", EAGER_SCHEME, *name)


def _check_ids(node_ids: Any) -> NDArray[np.int64]:
    try:
        ids = np.asarray(node_ids)
    except (TypeError, ValueError) as exc:
        raise ParameterError(message("node_ids", "integers", type(node_ids).__name__)) \
            from exc
    if ids.size and ids.dtype.kind not in "iu":
        raise ParameterError(message("node_ids", "integers", str(ids.dtype)))
    if ids.size and ids.dtype.kind == "u" and int(ids.max()) >= 1 << 63:
        raise ParameterError(message("node_ids", "integers < 2^63", "larger"))
    ids = ids.astype(np.int64, copy=False)
    if ids.size and ids.min() < 0:
        raise ParameterError(message("node_ids", "non-negative integers", "negative ids"))
    return ids


@functools.lru_cache(maxsize=64)
def _digit_thresholds(gamma: Fraction, m: int) -> NDArray[np.uint64]:
    """``⌊2^63 e^{−γ2^j}/(1 + e^{−γ2^j})⌋`` for ``j < m`` (the digit words of
    :meth:`_NodePRF.geometric`; exact integers, computed once per ``(γ, m)``)."""
    out = np.array([half_logistic_floor(gamma * (1 << j)) for j in range(m)], dtype=np.uint64)
    out.setflags(write=False)
    return out


@functools.lru_cache(maxsize=64)
def _geometric_split(gamma: Fraction) -> tuple[int, InverseTable]:
    """``m`` (the largest with ``γ·2^m <= 1``, at least 0) and the table of ``γ·2^m``
    (:meth:`_NodePRF.geometric`; computed once per γ)."""
    m = 0
    while gamma * (1 << (m + 1)) <= 1:
        m += 1
    return m, inverse_table(gamma * (1 << m), False)


class _NodePRF:
    """AES-256 under ``derive_key(key, "windows", scheme, *name)`` on blocks ``(id ‖ tag)``,
    and the per-(node, tag) ChaCha20 streams that settle ties."""

    def __init__(self, key: bytes, scheme: str, name: StructureName) -> None:
        self.key, self.scheme, self.name = key, scheme, name
        self.aes_key = derive_key(key, "windows", scheme, *name)
        self._local = threading.local()

    def encryptor(self) -> Any:
        """The AES-ECB encryptor, kept per thread (making one costs as much as ~10^4 blocks;
        ECB on whole blocks carries nothing between calls; one must not run in two threads)."""
        if getattr(self._local, "enc", None) is None:
            from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

            self._local.enc = Cipher(algorithms.AES(self.aes_key), modes.ECB()).encryptor()
        return self._local.enc

    @staticmethod
    def words(enc: Any, ids: NDArray[np.int64], tag: Any,
              scratch: NDArray[np.uint64] | None = None) -> NDArray[np.uint64]:
        """First 64-bit word of ``AES_K(id ‖ tag)`` per id (little-endian, host independent);
        ``tag`` is one tag or one per id. ``scratch``: a buffer of at least ``4·len(ids) + 2``
        words to reuse (large temporaries allocated afresh per chunk cost page faults)."""
        n = ids.size
        buf = np.empty(4 * n + 2, dtype="<u8") if scratch is None else scratch[:4 * n + 2]
        block = buf[:2 * n].reshape(n, 2)
        block[:, 0] = ids
        block[:, 1] = tag
        # update_into a buffer of our own: ``update`` builds a new bytes object per call, which
        # costs several times the encryption itself at these sizes
        ct = buf[2 * n:]
        enc.update_into(block.data.cast("B"), ct.view(np.uint8))
        return ct[:2 * n:2].astype(np.uint64)

    def stream(self, node: int, tag: int, role: str) -> np.random.Generator:
        return keyed_generator(self.key, "windows", self.scheme, role, *self.name, node, tag)

    def invert(self, tab: InverseTable, words: NDArray[np.uint64], nodes: NDArray[np.int64],
               tag: int) -> NDArray[np.int64]:
        """``#{k < K : 2^63 S(k) > W + R}`` per word W (R uniform in [0, 1), needed only when
        W equals a threshold, probability ~2^-63, and then drawn from the node's settling
        stream); the exactness argument is that of :func:`dpfreq._exact_sampling.table_sample`."""
        m, settle = tab.count_and_ties(words)
        for i in settle.tolist():
            if tab.resolve(int(words[i]), int(m[i]), self.stream(int(nodes[i]), tag, "settle")):
                m[i] += 1
        return m

    def laplace(self, enc: Any, gamma: Fraction, ids: NDArray[np.int64],
                tag0: int) -> NDArray[np.int64]:
        """Exact ``DLap(γ)`` per id from the words of tags ``tag0, tag0 + 1, …``."""
        tab = inverse_table(gamma, True)
        geo = inverse_table(gamma, False)
        if tab.size == 0 or geo.size == 0:  # γ > ~43: no threshold fits 63 bits
            return np.array([int(sample_discrete_laplace(
                gamma, 1, rng=self.stream(int(i), tag0, "per-node"))[0]) for i in ids.tolist()],
                dtype=np.int64)
        kern = node_kernel.loaded() if ids.size >= node_kernel.MIN_IDS else None
        tables = tab.bucket_arrays() if kern is not None else None
        if kern is None or tables is None:
            return self._laplace_numpy(enc, gamma, tab, ids, tag0)
        # compiled passes (node_kernel): the same values; ties recomputed by the numpy path
        fast, left = node_kernel.laplace(kern, enc, ids, tag0, tables)
        ties, tails = left[fast[left] == 0], left[fast[left] != 0]
        if ties.size:
            fast[ties] = self._laplace_numpy(enc, gamma, tab, ids[ties], tag0)
        m, geo = _geometric_split(gamma)
        geo_tables = geo.bucket_arrays()
        if tails.size and geo_tables is not None:
            extra, redo = node_kernel.geometric(kern, enc, ids[tails],
                                                node_kernel.tail_tags(tag0, m),
                                                _digit_thresholds(gamma, m), geo_tables)
            if redo.size:
                extra[redo] = self.geometric(enc, gamma, ids[tails[redo]], tag0)
            fast[tails] += np.where(fast[tails] < 0, -extra, extra)
        elif tails.size:
            fast[tails] = self._laplace_numpy(enc, gamma, tab, ids[tails], tag0)
        return fast

    def _laplace_numpy(self, enc: Any, gamma: Fraction, tab: InverseTable,
                       ids: NDArray[np.int64], tag0: int) -> NDArray[np.int64]:
        out = np.empty(ids.size, dtype=np.int64)
        tails = []
        scratch = np.empty(4 * min(ids.size, _AES_CHUNK) + 2, dtype=np.uint64)
        for lo in range(0, ids.size, _AES_CHUNK):
            part = ids[lo:lo + _AES_CHUNK]
            raw = self.words(enc, part, tag0, scratch)
            mag = self.invert(tab, raw >> np.uint64(1), part, tag0)
            tail = np.flatnonzero(mag == tab.size)
            if tail.size:
                tails.append(tail + lo)
            neg = (raw & np.uint64(1)).view(np.int64)  # the sign bit: −1 or 0 after negation
            np.negative(neg, out=neg)
            mag ^= neg
            mag -= neg  # −|Z| where the bit is set (two's complement)
            out[lo:lo + part.size] = mag
        if tails:  # beyond the table: |Z| = K + G with G ~ Geometric(α) (memoryless)
            at = np.concatenate(tails)
            extra = np.concatenate([self.geometric(enc, gamma, ids[at[i:i + _AES_CHUNK]], tag0)
                                    for i in range(0, at.size, _AES_CHUNK)])
            out[at] += np.where(out[at] < 0, -extra, extra)  # |Z| = K >= 1 there: sign kept
        return out

    def geometric(self, enc: Any, gamma: Fraction, ids: NDArray[np.int64],
                  tag0: int) -> NDArray[np.int64]:
        """Exact ``G ~ Geometric(e^{−γ})`` per id, in O(log(1/γ)) words whatever γ.

        ``G = M·A + B`` with ``M = 2^m`` (the largest power of two <= max(1, 1/γ)): ``A ~
        Geometric(e^{−γM})`` by the table of γM >= 1/2 on the words of tags
        ``tag0 + 2^30 + t`` (continued memorylessly), and ``B`` on ``[0, M)`` with
        ``Pr[B = b] ∝ e^{−γb} = Π_j (e^{−γ2^j})^{b_j}``: its binary digits are independent,
        ``b_j = 1`` with probability ``e^{−γ2^j}/(1 + e^{−γ2^j})``, each decided exactly by the
        word of tag ``tag0 + 2^29 + j`` against an integer threshold. Independent ``A`` and ``B``
        give ``Pr[G = Ma + b] = (1 − α)α^{Ma+b}`` exactly.
        """
        m, geo = _geometric_split(gamma)
        out = np.zeros(ids.size, dtype=np.int64)
        pending = np.arange(ids.size)
        t = 0
        while pending.size:
            tag = tag0 + node_kernel.TAG_A + t
            a = self.invert(geo, self.words(enc, ids[pending], tag) >> np.uint64(1),
                            ids[pending], tag)
            out[pending] += a
            pending = pending[a == geo.size]
            t += 1
        out <<= m
        if m:  # the m digit words of every id in one AES call
            tags = node_kernel.tail_tags(tag0, m)[1:]
            words = (self.words(enc, np.tile(ids, m), np.repeat(tags, ids.size))
                     >> np.uint64(1)).reshape(m, ids.size)
            thr = _digit_thresholds(gamma, m)[:, None]
            bits = words < thr
            for j, i in zip(*np.nonzero(words == thr), strict=True):
                bits[j, i] = half_logistic_resolve(
                    gamma * (1 << int(j)), int(words[j, i]), 63,
                    self.stream(int(ids[i]), int(tags[j]), "settle"))
            out += (bits.astype(np.int64) << np.arange(m, dtype=np.int64)[:, None]).sum(axis=0)
        return out


class _KeyedNoise:
    """Shared surface: element-wise ``noise(ids)``, ``noise_unique``, ``n_drawn``."""

    elementwise = True

    def __init__(self, key: bytes, structure: Any, scheme: str) -> None:
        key = _check_key(key)
        self.structure = structure_name(structure)
        self.scheme = scheme
        self._prf = _NodePRF(key, scheme, self.structure)
        self.n_drawn = 0  # node values computed so far (recomputed, never cached)

    @property
    def cache_size(self) -> int:
        """Always 0: values are recomputed (cheaper than a look-up)."""
        return 0

    @public_errors("KeyedNoise.noise")
    def noise(self, node_ids: Any) -> NDArray[np.int64]:
        """Noise of each node id (non-negative integers < 2^63); same id ⇒ same value."""
        ids = _check_ids(node_ids)
        flat = ids.ravel()
        out = np.empty(flat.size, dtype=np.int64)
        self.n_drawn += int(flat.size)
        if flat.size:  # the values chunk their AES calls (_AES_CHUNK ids)
            out[:] = self._values(self._prf.encryptor(), flat)
        return out.reshape(ids.shape)

    @public_errors("KeyedNoise.noise_unique")
    def noise_unique(self, ids: Any) -> NDArray[np.int64]:
        """:meth:`noise` for ids that are already sorted and distinct (checked)."""
        arr = np.asarray(ids).ravel()
        if arr.size and (arr.dtype.kind not in "iu" or arr[0] < 0
                         or np.any(arr[1:] <= arr[:-1])):
            raise ParameterError(message("ids",
                                         "sorted distinct non-negative integers", "other"))
        return self.noise(arr)

    def prepare(self) -> None:
        """Build what every draw needs (the cipher, the integer tables of the Laplace step)
        ahead of the first ask; draws nothing."""
        self._prf.encryptor()
        gamma = self._laplace_gamma()
        inverse_table(gamma, True)
        inverse_table(gamma, False)
        m, _ = _geometric_split(gamma)
        if m:
            _digit_thresholds(gamma, m)
        node_kernel.start()  # the optional compiled passes, in the background

    def _laplace_gamma(self) -> Fraction:
        raise NotImplementedError  # pragma: no cover - abstract

    def _values(self, enc: Any, ids: NDArray[np.int64]) -> NDArray[np.int64]:
        raise NotImplementedError  # pragma: no cover - abstract


class KeyedDiscreteLaplace(_KeyedNoise):
    """Exact discrete Laplace noise per node id, a deterministic function of (key, structure).

    Parameters
    ----------
    key : bytes
        Secret key (>= 16 bytes). Whoever holds it can remove the noise: keep it secret.
    structure : int, str or tuple of them
        The structure's name (in a release ``(family label, k, tree index)``): different names
        get independent noise under one key (module docstring).
    gamma : Fraction
        ``Pr[Z = z] ∝ exp(−γ|z|)``; γ = ε/(ℓ1 sensitivity), denominator <= 2^32.

    Notes
    -----
    ``noise(ids)`` returns the same values for the same ids on every call, whatever the batch.
    Privacy rests on the key being secret and on AES being a pseudorandom function: given ideal
    PRF outputs every value is an exact, independent ``DLap(γ)`` draw.

    Examples
    --------
    >>> src = KeyedDiscreteLaplace(bytes(32), ("all", 1, 0), Fraction(1, 3))
    >>> bool((src.noise([5, 9]) == src.noise([5, 9])).all())
    True
    """


    @public_errors("KeyedDiscreteLaplace")
    def __init__(self, key: bytes, structure: Any, gamma: Fraction) -> None:
        try:
            g = Fraction(gamma)
        except (TypeError, ValueError) as exc:
            raise ParameterError(message("gamma", "a fraction > 0", gamma)) from exc
        if g <= 0 or g.denominator > MAX_DENOMINATOR:
            raise ParameterError(message("gamma",
                                         "a fraction > 0 with denominator <= 2^32", gamma))
        super().__init__(key, structure, LAPLACE_SCHEME)
        self.gamma = g

    def _laplace_gamma(self) -> Fraction:
        return self.gamma

    def _values(self, enc: Any, ids: NDArray[np.int64]) -> NDArray[np.int64]:
        return self._prf.laplace(enc, self.gamma, ids, 0)

    def word_pass(self) -> tuple[Any, tuple[Any, ...]] | None:
        """``(cipher, bucket tables)`` for a compiled pass deciding values from their first
        words as :meth:`noise` does (:func:`dpfreq.windows.noise.kernel.lower_sums`; the caller
        adds the values it computes to :attr:`n_drawn`); None when the values need per-node
        streams (γ > ~43) or the table has no buckets."""
        tab, geo = inverse_table(self.gamma, True), inverse_table(self.gamma, False)
        tables = tab.bucket_arrays() if tab.size and geo.size else None
        return None if tables is None else (self._prf.encryptor(), tables)


class KeyedDiscreteGaussian(_KeyedNoise):
    """Exact discrete Gaussian noise per node id, a deterministic function of (key, structure).

    An integer ``sigma2_min`` is the σ² drawn; a float target is rounded up by
    :func:`gaussian_sigma2` (to ``t·u``); the value used is ``self.sigma2``. Each node runs the
    rejection rounds of Canonne–Kamath–Steinke (2020, Algorithm 3) on AES words of its own
    (module docstring): ``Y ~ DLap(1/t)`` with ``t = ⌊√σ²⌋ + 1``, accepted with probability
    ``exp(−(t|Y| − σ²)²/(2σ²t²))`` — at ``σ² = t·u`` the same number as
    ``exp(−(|Y| − u)²/(2tu))``, so those draws are the same bits as before integers were taken
    as given; element-wise, never cached.

    Examples
    --------
    >>> src = KeyedDiscreteGaussian(bytes(32), ("all", 1, 0), 5.5)
    >>> src.sigma2
    6
    """


    @public_errors("KeyedDiscreteGaussian")
    def __init__(self, key: bytes, structure: Any, sigma2_min: float) -> None:
        if (isinstance(sigma2_min, int | np.integer) and not isinstance(sigma2_min, bool)
                and 0 < int(sigma2_min) < 1 << 62):
            self.sigma2 = int(sigma2_min)  # an integer σ² is drawn as given
            self._t = math.isqrt(self.sigma2) + 1
        else:
            self.sigma2, self._t, _ = gaussian_sigma2(sigma2_min)
        super().__init__(key, structure, GAUSSIAN_SCHEME)
        self._gamma = Fraction(1, self._t)
        # the acceptance exponent (t|Y| − σ²)²/(2σ²t²) = d² · step
        self._step = Fraction(1, 2 * self.sigma2 * self._t * self._t)

    def _accept(self, mag: NDArray[np.int64], words: NDArray[np.uint64],
                nodes: NDArray[np.int64], tag: int) -> NDArray[np.bool_]:
        """Bernoulli(exp(−(t|Y| − σ²)²/(2σ²t²))) per node: ``W + R < 2^63 e^{−x}`` exactly."""
        d = np.abs(mag * self._t - self.sigma2)
        uniq, inv = np.unique(d, return_inverse=True)
        # thresholds are at most 2^63: they fit uint64, as do the 63-bit words
        thr = np.array([exp_neg_multiple_floor(self._step, int(v) * int(v))
                        for v in uniq.tolist()], dtype=np.uint64)
        limit = thr[inv.ravel()]
        accept = words < limit
        for i in np.flatnonzero(words == limit).tolist():
            gen = self._prf.stream(int(nodes[i]), tag, "settle")
            accept[i] = exp_neg_multiple_resolve(self._step, int(d[i]) ** 2, int(words[i]), 63,
                                                 gen)
        return accept

    def _laplace_gamma(self) -> Fraction:
        return self._gamma

    def _values(self, enc: Any, ids: NDArray[np.int64]) -> NDArray[np.int64]:
        out = np.empty(ids.size, dtype=np.int64)
        for lo in range(0, ids.size, _AES_CHUNK):
            out[lo:lo + _AES_CHUNK] = self._rounds(enc, ids[lo:lo + _AES_CHUNK])
        return out

    def _rounds(self, enc: Any, ids: NDArray[np.int64]) -> NDArray[np.int64]:
        out = np.empty(ids.size, dtype=np.int64)
        pending = np.arange(ids.size)
        r = 0
        while pending.size:
            tag0 = r << _ROUND_SHIFT
            nodes = ids[pending]
            y = self._prf.laplace(enc, self._gamma, nodes, tag0)
            words = self._prf.words(enc, nodes, tag0 + _BERNOULLI_TAG) >> np.uint64(1)
            ok = self._accept(np.abs(y), words, nodes, tag0 + _BERNOULLI_TAG)
            out[pending[ok]] = y[ok]
            pending = pending[~ok]
            r += 1
        return out
