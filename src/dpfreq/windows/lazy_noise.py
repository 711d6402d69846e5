"""Lazy keyed node noise: exact discrete noise as a deterministic function of (key, node id).

Spec: ``time_windows.md`` §2.4 (lazy noise) and pitfall 8. A 2d dyadic tree over ``T`` periods
has ``(2D−1)²`` nodes, far too many to draw up front, so node noise is drawn on demand and is a
deterministic function of a secret key, a structure id and the node id: the same node always
gets the same noise (never redrawn), in any batch, in any order, after a save/load.

Discrete Laplace, scheme ``"aes256-table"`` (the default, :data:`LAPLACE_SCHEME`):

* the node's randomness is ``AES-256_K(node id ‖ 0)`` (one 128-bit block; ``K`` =
  SHA-256 of a label, the secret key and the structure id), computed for a whole batch of node
  ids by one ECB call of OpenSSL through ``cryptography`` (AES as a pseudorandom function on
  distinct inputs; AES-NI makes this ~5 ns per node);
* its first 64-bit word drives the exact inverse-cdf sampler of :mod:`dpfreq.noise`
  (``_table_sample``: 63 bits against rigorous integer thresholds ``⌊2^63 Pr[|Z| > k]⌋``, the
  64th bit the sign). Beyond the table's K thresholds (K <= 4096, so this is common for large
  noise scales) ``|Z| = K + G`` with ``G`` geometric (memoryless), drawn the same way from the
  geometric table on the first word of ``AES_K(id ‖ t)``, t = 1, 2, …, vectorized over the
  nodes still in the tail. A word landing exactly on a threshold (probability ~2^-63) is settled
  by further bits of a per-node ChaCha20 stream (:func:`dpfreq.rng.keyed_generator` under a
  separately derived key). So the output law is exactly the discrete Laplace pmf given ideal
  PRF outputs, and no floating point decides a value. (For γ > ~44 no threshold fits 63 bits
  and the per-node stream sampler below is used instead.)

Each value costs ~20–30 ns, less than a cache look-up, so values are recomputed, never cached;
:meth:`KeyedDiscreteLaplace.noise` is element-wise and needs no sorting of ids.

Scheme ``"chacha20-cks"`` (:data:`LEGACY_LAPLACE_SCHEME`): releases saved before the scheme was
recorded drew node noise with a ChaCha20 stream per node and the Canonne–Kamath–Steinke
rejection sampler in vectorized rounds (:mod:`dpfreq.windows._chacha_streams`, ~1 µs per node,
cached). It stays available so that their noise never changes; the discrete Gaussian (zCDP
releases) still uses those streams.

Measured (``benchmarks/bench_windows.py --only speed --baseline-rev e86e79f``, 2-core machine):
10^5 random arbitrary windows over T = 2^16 (two 2d trees, ~1.3·10^7 node values) are answered at
~1.3·10^5 windows/s on the first ask, against 2.6·10^3/s with the legacy scheme in the same run.
"""

from __future__ import annotations

import hashlib
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._exact_inverse import inverse_table
from dpfreq._validate import message
from dpfreq.errors import ParameterError
from dpfreq.noise import MAX_DENOMINATOR
from dpfreq.rng import keyed_generator
from dpfreq.windows._chacha_streams import (
    Streams,
    chacha20_blocks,
    discrete_gaussian_rows,
    discrete_laplace_rows,
)

__all__ = [
    "LAPLACE_SCHEME",
    "LAPLACE_SCHEMES",
    "LEGACY_LAPLACE_SCHEME",
    "KeyedDiscreteGaussian",
    "KeyedDiscreteLaplace",
    "chacha20_blocks",
    "discrete_gaussian_variance",
    "gaussian_sigma2",
]

#: the keyed discrete-Laplace constructions: the current one, and the one releases saved before
#: the scheme was recorded used (kept so that their noise never changes)
LAPLACE_SCHEME = "aes256-table"
LEGACY_LAPLACE_SCHEME = "chacha20-cks"
LAPLACE_SCHEMES = (LAPLACE_SCHEME, LEGACY_LAPLACE_SCHEME)

_SAMPLE_CHUNK = 1 << 18  # nodes sampled together by the stream samplers (buffers stay small)
_AES_CHUNK = 1 << 16  # node ids per AES call + table pass (temporaries stay in cache)


def _check_key(key: Any, func: str) -> bytes:
    if not isinstance(key, bytes | bytearray) or len(key) < 16:
        raise ParameterError(message("key", func, "at least 16 bytes", key))
    return bytes(key)


def _derive(label: bytes, key: bytes, structure: int) -> bytes:
    return hashlib.sha256(label + b"\x00" + key
                          + int(structure).to_bytes(16, "little", signed=True)).digest()


def _check_ids(node_ids: Any, func: str) -> NDArray[np.int64]:
    try:
        ids = np.asarray(node_ids)
    except (TypeError, ValueError) as exc:
        raise ParameterError(message("node_ids", func, "integers", type(node_ids).__name__)) \
            from exc
    if ids.size and ids.dtype.kind not in "iu":
        raise ParameterError(message("node_ids", func, "integers", str(ids.dtype)))
    ids = ids.astype(np.int64, copy=False)
    if ids.size and ids.min() < 0:
        raise ParameterError(message("node_ids", func, "non-negative integers", node_ids))
    return ids


def _merge(a_ids: NDArray[np.int64], a_vals: NDArray[np.int64], b_ids: NDArray[np.int64],
           b_vals: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Merge two sorted, disjoint (id, value) tables into one sorted table (linear time)."""
    if a_ids.size == 0:
        return b_ids.copy(), b_vals.copy()
    if b_ids.size == 0:
        return a_ids, a_vals
    pos_b = np.searchsorted(a_ids, b_ids) + np.arange(b_ids.size)
    from_a = np.ones(a_ids.size + b_ids.size, dtype=np.bool_)
    from_a[pos_b] = False
    ids = np.empty(from_a.size, dtype=np.int64)
    vals = np.empty(from_a.size, dtype=np.int64)
    ids[pos_b], vals[pos_b] = b_ids, b_vals
    ids[from_a], vals[from_a] = a_ids, a_vals
    return ids, vals



class _CachedStreamNoise:
    """Per-node noise drawn from ChaCha20 streams (:mod:`dpfreq.windows._chacha_streams`),
    with a cache of drawn nodes (sorted id and value arrays, vectorized look-up, at most
    ``cache_limit`` nodes; when full the cache restarts from the latest batch). The cache changes
    speed only, never values: every value is a function of (key, structure, node id) alone."""

    _CACHE_LIMIT = 1 << 22
    _RECENT_MIN = 1 << 16  # the recent tier is merged into the large one past this size

    def __init__(self, key_words: NDArray[np.uint32], cache_limit: int | None) -> None:
        self._key_words = key_words
        self.cache_limit = self._CACHE_LIMIT if cache_limit is None else int(cache_limit)
        self._ids = np.zeros(0, dtype=np.int64)  # large tier: sorted ids and their values
        self._vals = np.zeros(0, dtype=np.int64)
        self._rids = np.zeros(0, dtype=np.int64)  # recent tier (small, cheap to insert into)
        self._rvals = np.zeros(0, dtype=np.int64)
        self.n_drawn = 0  # nodes sampled so far (cache misses), for tests and benchmarks

    def _sample(self, st: Streams, n: int) -> NDArray[np.int64]:  # pragma: no cover - abstract
        raise NotImplementedError

    def noise(self, node_ids: Any) -> NDArray[np.int64]:
        """Noise of each node id (non-negative integers < 2^63); same id ⇒ same value."""
        ids = np.asarray(node_ids, dtype=np.int64)
        if ids.size and ids.min() < 0:
            raise ParameterError(message("node_ids", f"{type(self).__name__}.noise",
                                         "non-negative integers", node_ids))
        flat = ids.ravel()
        uniq, inverse = np.unique(flat, return_inverse=True)
        vals = self._draw(uniq)
        return vals[inverse].reshape(ids.shape)

    def noise_unique(self, ids: Any) -> NDArray[np.int64]:
        """:meth:`noise` for ids that are already sorted and distinct (skips the unique pass)."""
        arr = np.asarray(ids, dtype=np.int64)
        if arr.size and (arr[0] < 0 or np.any(arr[1:] <= arr[:-1])):
            raise ParameterError(message("ids", f"{type(self).__name__}.noise_unique",
                                         "sorted distinct non-negative integers", "other"))
        return self._draw(arr)

    def _draw(self, uniq: NDArray[np.int64]) -> NDArray[np.int64]:
        """Values of sorted unique ids: cached ones looked up, the others sampled and cached."""
        if uniq.size == 0:
            return np.zeros(0, dtype=np.int64)
        out = np.empty(uniq.size, dtype=np.int64)
        miss = np.ones(uniq.size, dtype=np.bool_)
        for ids, vals in ((self._ids, self._vals), (self._rids, self._rvals)):
            if ids.size and miss.any():
                at = np.flatnonzero(miss)
                pos = np.searchsorted(ids, uniq[at])
                ok = pos < ids.size
                ok[ok] = ids[pos[ok]] == uniq[at[ok]]
                out[at[ok]] = vals[pos[ok]]
                miss[at[ok]] = False
        missing = uniq[miss]
        if missing.size:
            # nodes are sampled in chunks (each node's value depends on its own stream only,
            # so the chunking changes memory traffic, never values)
            fresh = np.empty(missing.size, dtype=np.int64)
            for lo in range(0, missing.size, _SAMPLE_CHUNK):
                part = missing[lo:lo + _SAMPLE_CHUNK]
                st = Streams(self._key_words, part.astype(np.uint64))
                fresh[lo:lo + part.size] = self._sample(st, part.size)
            out[miss] = fresh
            self.n_drawn += int(missing.size)
            self._remember(missing, fresh)
        return out

    def _remember(self, ids: NDArray[np.int64], vals: NDArray[np.int64]) -> None:
        """Add sorted new ids to the cache: a small recent tier (cheap inserts) merged into the
        large tier when it outgrows a quarter of it; everything is dropped when full."""
        limit = self.cache_limit
        if limit <= 0:
            return
        if self._ids.size + self._rids.size + ids.size > limit:
            keep = min(ids.size, limit)
            self._ids, self._vals = ids[:keep].copy(), vals[:keep].copy()
            self._rids, self._rvals = ids[:0].copy(), vals[:0].copy()
            return
        self._rids, self._rvals = _merge(self._rids, self._rvals, ids, vals)
        if self._rids.size > max(self._RECENT_MIN, self._ids.size // 4):
            self._ids, self._vals = _merge(self._ids, self._vals, self._rids, self._rvals)
            self._rids, self._rvals = self._rids[:0].copy(), self._rvals[:0].copy()

    @property
    def cache_size(self) -> int:
        """Number of nodes currently cached."""
        return int(self._ids.size + self._rids.size)


class _LegacyLaplace(_CachedStreamNoise):
    """Scheme ``"chacha20-cks"``: CKS rejection sampler on a ChaCha20 stream per node."""

    def __init__(self, key: bytes, structure: int, gamma: Fraction,
                 cache_limit: int | None) -> None:
        h = _derive(b"dpfreq.windows.lazy_noise", key, structure)
        super().__init__(np.frombuffer(h, dtype="<u4").astype(np.uint32), cache_limit)
        self.gamma = gamma

    def _sample(self, st: Streams, n: int) -> NDArray[np.int64]:
        return discrete_laplace_rows(st, np.arange(n, dtype=np.int64), self.gamma.numerator,
                                     self.gamma.denominator)


class KeyedDiscreteLaplace:
    """Exact discrete Laplace noise per node id, a deterministic function of (key, structure).

    Parameters
    ----------
    key : bytes
        Secret key (>= 16 bytes). Whoever holds it can remove the noise: keep it secret.
    structure : int
        Identifies the tree (or family of trees) so that different structures get independent
        noise under one key.
    gamma : Fraction
        ``Pr[Z = z] ∝ exp(−γ|z|)``; γ = ε/(ℓ1 sensitivity), denominator <= 2^32.
    cache_limit : int, optional
        Legacy scheme only: at most this many drawn nodes are kept for reuse (default ``2^22``;
        0 disables). The default scheme recomputes values (cheaper than a look-up).
    scheme : {"aes256-table", "chacha20-cks"}
        The construction (module docstring). The default is :data:`LAPLACE_SCHEME`; the legacy
        one reproduces releases saved before the scheme was recorded.

    Notes
    -----
    ``noise(ids)`` returns the same values for the same ids on every call, whatever the batch.
    Privacy rests on the key being secret and on AES (resp. ChaCha20) being a pseudorandom
    function: given ideal PRF outputs every value is an exact, independent ``DLap(γ)`` draw.
    """

    elementwise: bool

    def __init__(self, key: bytes, structure: int, gamma: Fraction,
                 cache_limit: int | None = None, scheme: str = LAPLACE_SCHEME) -> None:
        func = "KeyedDiscreteLaplace"
        key = _check_key(key, func)
        if scheme not in LAPLACE_SCHEMES:
            raise ParameterError(message("scheme", func, f"one of {LAPLACE_SCHEMES}", scheme))
        try:
            g = Fraction(gamma)
        except (TypeError, ValueError) as exc:
            raise ParameterError(message("gamma", func, "a fraction > 0", gamma)) from exc
        if g <= 0 or g.denominator > MAX_DENOMINATOR:
            raise ParameterError(message("gamma", func,
                                         "a fraction > 0 with denominator <= 2^32", gamma))
        self.gamma = g
        self.structure = int(structure)
        self.scheme = scheme
        self.elementwise = scheme == LAPLACE_SCHEME
        self._legacy = (_LegacyLaplace(key, self.structure, g, cache_limit)
                        if scheme == LEGACY_LAPLACE_SCHEME else None)
        self._aes_key = _derive(b"dpfreq.windows.lazy_noise.aes256-table", key, self.structure)
        self._rare_key = _derive(b"dpfreq.windows.lazy_noise.aes256-table.rare", key,
                                 self.structure)
        self._rare_words = np.frombuffer(self._rare_key, dtype="<u4").astype(np.uint32)
        self._computed = 0

    @property
    def n_drawn(self) -> int:
        """Node values computed so far (legacy scheme: cache misses)."""
        return self._legacy.n_drawn if self._legacy is not None else self._computed

    @property
    def cache_size(self) -> int:
        """Nodes currently cached (always 0 for the default scheme, which does not cache)."""
        return self._legacy.cache_size if self._legacy is not None else 0

    def noise(self, node_ids: Any) -> NDArray[np.int64]:
        """Noise of each node id (non-negative integers < 2^63); same id ⇒ same value."""
        if self._legacy is not None:
            return self._legacy.noise(node_ids)
        ids = _check_ids(node_ids, "KeyedDiscreteLaplace.noise")
        return self._values(ids.ravel()).reshape(ids.shape)

    def noise_unique(self, ids: Any) -> NDArray[np.int64]:
        """:meth:`noise` for ids that are already sorted and distinct (checked)."""
        if self._legacy is not None:
            return self._legacy.noise_unique(ids)
        arr = np.asarray(ids).ravel()
        if arr.size and (arr.dtype.kind not in "iu" or arr[0] < 0
                         or np.any(arr[1:] <= arr[:-1])):
            raise ParameterError(message("ids", "KeyedDiscreteLaplace.noise_unique",
                                         "sorted distinct non-negative integers", "other"))
        return self._values(arr.astype(np.int64, copy=False))

    def _words(self, enc: Any, ids: NDArray[np.int64], tag: int) -> NDArray[np.uint64]:
        """First 64-bit word of ``AES_K(id ‖ tag)`` per id (little-endian, host independent)."""
        block = np.zeros((ids.size, 2), dtype="<u8")
        block[:, 0] = ids
        block[:, 1] = tag
        ct = enc.update(memoryview(block).cast("B"))  # type: ignore[arg-type]
        return np.frombuffer(ct, dtype="<u8")[::2].astype(np.uint64)

    def _values(self, ids: NDArray[np.int64]) -> NDArray[np.int64]:
        """Element-wise values of a flat id array (chunked AES + exact table inversion)."""
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

        out = np.empty(ids.size, dtype=np.int64)
        if ids.size == 0:
            return out
        self._computed += int(ids.size)
        tab = inverse_table(self.gamma, True)
        if tab.size == 0:  # γ > ~44: no threshold fits 63 bits; the stream sampler, per node
            st = Streams(self._rare_words, ids.astype(np.uint64))
            return discrete_laplace_rows(st, np.arange(ids.size, dtype=np.int64),
                                         self.gamma.numerator, self.gamma.denominator)
        geo = inverse_table(self.gamma, False)
        enc = Cipher(algorithms.AES(self._aes_key), modes.ECB()).encryptor()
        for lo in range(0, ids.size, _AES_CHUNK):
            part = ids[lo:lo + _AES_CHUNK]
            raw = self._words(enc, part, 0)
            words = raw >> np.uint64(1)
            mag = self._invert(tab, words, part, 0)
            # beyond the table: |Z| = K + G with G ~ Geometric(α) (memoryless), drawn from the
            # geometric table on the word of block tag t = 1, 2, …, itself continued the same way
            tail = np.flatnonzero(mag == tab.size)
            t = 1
            while tail.size:
                g = self._invert(geo, self._words(enc, part[tail], t) >> np.uint64(1),
                                 part[tail], t)
                mag[tail] += g
                tail = tail[g == geo.size]
                t += 1
            neg = (raw & np.uint64(1)).astype(np.bool_)
            np.negative(mag, out=mag, where=neg)
            out[lo:lo + part.size] = mag
        return out

    def _invert(self, tab: Any, words: NDArray[np.uint64], nodes: NDArray[np.int64],
                tag: int) -> NDArray[np.int64]:
        """``#{k < K : 2^63 S(k) > W + R}`` per word W (R uniform in [0, 1), needed only when
        W equals a threshold, probability ~2^-63, and then drawn from the node's own fallback
        stream); the exactness argument is that of :func:`dpfreq.noise._table_sample`."""
        m = tab.count_above(words)
        settle = np.flatnonzero((m < tab.size) & (tab.at[m] == words))
        for i in settle.tolist():
            gen = keyed_generator(self._rare_key, int(nodes[i]), tag)
            if tab.resolve(int(words[i]), int(m[i]), gen):
                m[i] += 1
        return m


# ----------------------------------------------------------------------------------------------
# discrete Gaussian (Canonne–Kamath–Steinke 2020, Algorithm 3), for zCDP releases


def gaussian_sigma2(sigma2_min: float) -> tuple[int, int, int]:
    """Round a target variance parameter up to ``σ² = t·u`` (integers, ``t = ⌊√σ²⌋ + 1``).

    Returns ``(σ², t, u)``. With σ² a multiple of ``t`` the acceptance exponent
    ``(|Y| − σ²/t)²/(2σ²)`` becomes ``(|Y| − u)²/(2tu)``, a fraction with a small denominator.
    Rounding σ² up only adds noise, so the privacy guarantee is kept.
    """
    import math

    if not sigma2_min > 0:
        raise ParameterError(message("sigma2", "gaussian_sigma2", "> 0", sigma2_min))
    t = math.isqrt(math.ceil(sigma2_min)) + 1
    u = max(1, math.ceil(sigma2_min / t))
    return t * u, t, u


def discrete_gaussian_variance(sigma2: int) -> float:
    """Variance of the discrete Gaussian ``Pr[z] ∝ exp(−z²/(2σ²))`` (numerically exact)."""
    import math

    if sigma2 >= 10_000:  # the gap to σ² is below e^{−2π²σ²}: far under double precision
        return float(sigma2)
    half = int(40 * math.sqrt(sigma2)) + 10
    z = np.arange(-half, half + 1, dtype=np.float64)
    w = np.exp(-(z**2) / (2.0 * sigma2))
    return float(np.sum(w * z**2) / np.sum(w))


class KeyedDiscreteGaussian(_CachedStreamNoise):
    """Exact discrete Gaussian noise per node id, a deterministic function of (key, structure).

    The target ``sigma2_min`` is rounded up by :func:`gaussian_sigma2`; the value used is
    ``self.sigma2``. Each node draws from its own ChaCha20 stream (keyed from a label different
    from the Laplace ones); drawn nodes are cached (``cache_limit`` as for the legacy Laplace).
    """

    elementwise = False

    def __init__(self, key: bytes, structure: int, sigma2_min: float,
                 cache_limit: int | None = None) -> None:
        key = _check_key(key, "KeyedDiscreteGaussian")
        self.sigma2, self._t, self._u = gaussian_sigma2(sigma2_min)
        h = _derive(b"dpfreq.windows.lazy_gaussian", key, structure)
        super().__init__(np.frombuffer(h, dtype="<u4").astype(np.uint32), cache_limit)
        self.structure = int(structure)

    def _sample(self, st: Streams, n: int) -> NDArray[np.int64]:
        return discrete_gaussian_rows(st, n, self._t, self._u)
