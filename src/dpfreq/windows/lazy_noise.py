"""Lazy keyed node noise: exact discrete Laplace as a deterministic function of (key, node id).

Spec: ``time_windows.md`` §2.4 (lazy noise) and pitfall 8. A 2d dyadic tree over ``T`` periods
has ``(2D−1)²`` nodes, far too many to draw up front, so node noise is drawn on demand and is a
deterministic function of a secret key, a structure id and the node id: the same node always
gets the same noise (never redrawn), in any batch, in any order, after a save/load.

Construction (vectorized over many nodes at once):

* every node owns its own random stream, ChaCha20 (RFC 7539 block function, 20 rounds) keyed
  with ``SHA-256(secret key ‖ structure id)``, nonce = the 64-bit node id, counter = block
  number. The block function is evaluated with numpy ``uint32`` arithmetic over all pending
  nodes at once, and is checked against the RFC 7539 test vector;
* the exact Canonne–Kamath–Steinke discrete Laplace sampler (the algorithm of
  :mod:`dpfreq.noise`: Bernoulli(exp(−u/t)) by rational trials, geometric(e^{−1}) count,
  rejection of the signed zero) runs in vectorized rounds, each node consuming words of its own
  stream in a fixed order. No floating point touches a sampled value; bounded uniforms are
  drawn by rejection on 63-bit words, so they are exactly uniform given ideal stream words.

Because each node's output depends only on its own stream, results do not depend on which other
nodes are drawn in the same batch.

Throughput (benchmarks/bench_windows.py, 2-core machine): about 0.8–1.2 µs per fresh node
(two ChaCha blocks at ~0.18 µs each plus the sampler's vectorized rounds); cached nodes cost a
sorted look-up. 10^5 random windows over T = 2^16 touch ~6.5·10^6 distinct 2d nodes, so the
first ask runs at ~1.5·10^4 windows/s and repeated asks at ~1.4·10^5 windows/s. Going faster
on first asks needs a compiled kernel for ChaCha20 + the sampler (same values) — numpy's
per-element cost is the floor here.
"""

from __future__ import annotations

import hashlib
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import message
from dpfreq.errors import ParameterError
from dpfreq.noise import MAX_DENOMINATOR

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

_CONST = (0x61707865, 0x3320646E, 0x79622D32, 0x6B206574)
_U32 = np.uint32
_SAFE = 1 << 62


def _xor_rotl(d: NDArray[np.uint32], a: NDArray[np.uint32], n: int,
              tmp: NDArray[np.uint32]) -> None:
    """In place: ``d = rotl(d ^ a, n)`` (``tmp`` is scratch space of the same shape)."""
    np.bitwise_xor(d, a, out=d)
    np.right_shift(d, _U32(32 - n), out=tmp)
    np.left_shift(d, _U32(n), out=d)
    np.bitwise_or(d, tmp, out=d)


def _quarter4(a: NDArray[np.uint32], b: NDArray[np.uint32], c: NDArray[np.uint32],
              d: NDArray[np.uint32], tmp: NDArray[np.uint32]) -> None:
    """Four ChaCha quarter rounds at once: row ``i`` of ``a, b, c, d`` is one quarter round."""
    np.add(a, b, out=a)
    _xor_rotl(d, a, 16, tmp)
    np.add(c, d, out=c)
    _xor_rotl(b, c, 12, tmp)
    np.add(a, b, out=a)
    _xor_rotl(d, a, 8, tmp)
    np.add(c, d, out=c)
    _xor_rotl(b, c, 7, tmp)


_CHUNK = 4096  # blocks per vectorized pass (keeps the 16 state rows in cache)
_SAMPLE_CHUNK = 1 << 18  # nodes sampled together (their word buffers stay small)


def chacha20_blocks(
    key_words: NDArray[np.uint32], counter: NDArray[np.uint32], nonce: NDArray[np.uint32]
) -> NDArray[np.uint32]:
    """The ChaCha20 block function (RFC 7539 §2.3) for many (counter, nonce) pairs at once.

    Parameters
    ----------
    key_words : array of 8 uint32
        The 256-bit key as little-endian words.
    counter : array of n uint32
        Block counters.
    nonce : array of shape (n, 3), uint32
        Nonces as little-endian words.

    Returns
    -------
    numpy.ndarray of shape (n, 16), uint32
        The serialized block as words (little-endian byte order within each word).
    """
    return _chacha_rows(key_words, counter, nonce).T.copy()


def _chacha_rows(key_words: NDArray[np.uint32], counter: NDArray[np.uint32],
                 nonce: NDArray[np.uint32]) -> NDArray[np.uint32]:
    """:func:`chacha20_blocks` as a (16, n) array (word by row), computed in chunks."""
    n = counter.shape[0]
    out = np.empty((16, n), dtype=_U32)
    for lo in range(0, n, _CHUNK):
        hi = min(n, lo + _CHUNK)
        out[:, lo:hi] = _chacha_chunk(key_words, counter[lo:hi], nonce[lo:hi])
    return out


def _chacha_chunk(key_words: NDArray[np.uint32], counter: NDArray[np.uint32],
                  nonce: NDArray[np.uint32]) -> NDArray[np.uint32]:
    """ChaCha20 blocks of one chunk as a (16, n) array (state word by row)."""
    n = counter.shape[0]
    init = np.empty((16, n), dtype=_U32)
    init[0:4] = np.asarray(_CONST, dtype=_U32)[:, None]
    init[4:12] = np.asarray(key_words, dtype=_U32)[:, None]
    init[12] = counter
    init[13:16] = nonce.T
    state = init.copy()
    # column round: quarter rounds on the columns (0,4,8,12) … (3,7,11,15), i.e. on the four
    # row groups at once; diagonal round: the same after rotating groups b, c, d by 1, 2, 3
    a, b, c, d = state[0:4], state[4:8], state[8:12], state[12:16]
    tmp = np.empty((4, n), dtype=_U32)
    bd, cd, dd = (np.empty((4, n), dtype=_U32) for _ in range(3))
    for _ in range(10):
        _quarter4(a, b, c, d, tmp)
        bd[0:3], bd[3] = b[1:4], b[0]  # rows 5, 6, 7, 4
        cd[0:2], cd[2:4] = c[2:4], c[0:2]  # rows 10, 11, 8, 9
        dd[0], dd[1:4] = d[3], d[0:3]  # rows 15, 12, 13, 14
        _quarter4(a, bd, cd, dd, tmp)
        b[1:4], b[0] = bd[0:3], bd[3]
        c[2:4], c[0:2] = cd[0:2], cd[2:4]
        d[3], d[0:3] = dd[0], dd[1:4]
    state += init
    return state


class _Streams:
    """One ChaCha20 stream per node; ``words(rows)`` returns the next 64-bit word of each row.

    Words are buffered ``_BLOCKS`` ChaCha blocks (``8·_BLOCKS`` words) at a time per node; the
    buffer size changes speed only, never the sequence of words a node sees.
    """

    _BLOCKS = 2

    def __init__(self, key_words: NDArray[np.uint32], node_ids: NDArray[np.uint64]) -> None:
        self.key_words = key_words
        n = node_ids.shape[0]
        self.nonce = np.zeros((n, 3), dtype=_U32)
        self.nonce[:, 0] = (node_ids & np.uint64(0xFFFFFFFF)).astype(_U32)
        self.nonce[:, 1] = (node_ids >> np.uint64(32)).astype(_U32)
        self.block = np.zeros(n, dtype=_U32)
        self.width = 8 * self._BLOCKS
        self.n = n
        # column-major buffer: word w of row r at w·n + r
        self.buf = self._fill(np.arange(n)).ravel()
        self.ptr = np.zeros(n, dtype=np.int64)

    def _fill(self, rows: NDArray[np.int64]) -> NDArray[np.uint64]:
        """The next ``_BLOCKS`` blocks of each row as 64-bit words, shape (width, len(rows))."""
        nb, m = self._BLOCKS, rows.shape[0]
        counters = (self.block[rows][None, :] + np.arange(nb, dtype=_U32)[:, None]).ravel()
        nonces = np.tile(self.nonce[rows], (nb, 1))
        st = _chacha_rows(self.key_words, counters, nonces).reshape(8, 2, nb, m)
        self.block[rows] += _U32(nb)
        # 64-bit word i of block b = st[2i] | st[2i+1] << 32: interleave the two halves in
        # memory and read them as one little-endian uint64 (the values do not depend on the host)
        pairs = np.empty((nb, 8, m, 2), dtype="<u4")
        pairs[..., 0] = st[:, 0].transpose(1, 0, 2)
        pairs[..., 1] = st[:, 1].transpose(1, 0, 2)
        out: NDArray[np.uint64] = pairs.view("<u8").reshape(self.width, m).astype(np.uint64,
                                                                                  copy=False)
        return out

    def words(self, rows: NDArray[np.int64]) -> NDArray[np.uint64]:
        pos = self.ptr[rows]
        full = pos == self.width
        if full.any():
            fr = rows[full]
            self.buf.reshape(self.width, self.n)[:, fr] = self._fill(fr)
            pos[full] = 0
        self.ptr[rows] = pos + 1
        out: NDArray[np.uint64] = self.buf[pos * self.n + rows]
        return out

    def below(self, rows: NDArray[np.int64], bound: Any) -> NDArray[np.int64]:
        """Exactly uniform integers in ``[0, bound)`` (bound <= 2^62), one per row."""
        b = np.broadcast_to(np.asarray(bound, dtype=np.uint64), rows.shape)
        limit = (np.uint64(1 << 63) // b) * b
        w = self.words(rows) >> np.uint64(1)
        ok = w < limit
        if ok.all():  # the usual case: one word per row
            res: NDArray[np.int64] = (w % b).astype(np.int64)
            return res
        out = np.empty(rows.shape[0], dtype=np.int64)
        pending = np.arange(rows.shape[0])
        while pending.size:
            ok = w < limit[pending]
            out[pending[ok]] = (w[ok] % b[pending[ok]]).astype(np.int64)
            pending = pending[~ok]
            if pending.size:
                w = self.words(rows[pending]) >> np.uint64(1)
        return out


def _bern_exp_le1(st: _Streams, rows: NDArray[np.int64], num: NDArray[np.int64],
                  den: int) -> NDArray[np.bool_]:
    """Bernoulli(exp(−num/den)) per row, 0 <= num <= den (rational trials, as dpfreq.noise)."""
    out = np.empty(rows.shape[0], dtype=np.bool_)
    alive = np.arange(rows.shape[0])
    k = 1
    while alive.size:
        if den * k > _SAFE:  # pragma: no cover - probability below 1/(2^30)!
            raise ParameterError("lazy discrete Laplace: trial counter overflow")
        a = st.below(rows[alive], den * k) < num[alive]
        out[alive[~a]] = k % 2 == 1
        alive = alive[a]
        k += 1
    return out


def _geometric_e1(st: _Streams, rows: NDArray[np.int64]) -> NDArray[np.int64]:
    v = np.zeros(rows.shape[0], dtype=np.int64)
    alive = np.arange(rows.shape[0])
    while alive.size:
        ok = _bern_exp_le1(st, rows[alive], np.ones(alive.size, dtype=np.int64), 1)
        alive = alive[ok]
        v[alive] += 1
    return v


def _discrete_laplace(st: _Streams, n: int, s: int, t: int) -> NDArray[np.int64]:
    return _discrete_laplace_rows(st, np.arange(n, dtype=np.int64), s, t)


def _discrete_laplace_rows(st: _Streams, rows: NDArray[np.int64], s: int,
                           t: int) -> NDArray[np.int64]:
    """One discrete Laplace draw (γ = s/t) per stream row, in the order of ``rows``."""
    n = rows.shape[0]
    out = np.empty(n, dtype=np.int64)
    pos = np.full(int(rows.max()) + 1 if n else 0, -1, dtype=np.int64)
    pos[rows] = np.arange(n)
    pending = rows.copy()
    while pending.size:
        if t == 1:
            u = np.zeros(pending.size, dtype=np.int64)
            idx = pending
            retry = pending[:0]
        else:
            u = st.below(pending, t)
            d = _bern_exp_le1(st, pending, u, t)
            idx, retry, u = pending[d], pending[~d], u[d]
        v = _geometric_e1(st, idx)
        y = (u + t * v) // s
        b = st.below(idx, 2)
        reject = (b == 1) & (y == 0)
        acc = ~reject
        out[pos[idx[acc]]] = (1 - 2 * b[acc]) * y[acc]
        pending = np.concatenate((retry, idx[reject]))
    return out


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
        At most this many drawn nodes are kept for reuse (default ``2^22``; 0 disables).

    Notes
    -----
    ``noise(ids)`` returns the same values for the same ids on every call. Drawn nodes are
    cached (sorted id and value arrays, vectorized look-up, at most ``cache_limit`` nodes;
    when full the cache restarts from the latest batch); the cache changes speed only, never
    values, since every value is a function of (key, structure, node id) alone.
    """

    _CACHE_LIMIT = 1 << 22
    _RECENT_MIN = 1 << 16  # the recent tier is merged into the large one past this size

    def __init__(self, key: bytes, structure: int, gamma: Fraction,
                 cache_limit: int | None = None, scheme: str = LAPLACE_SCHEME) -> None:
        if scheme not in LAPLACE_SCHEMES:
            raise ParameterError(message("scheme", "KeyedDiscreteLaplace",
                                         f"one of {LAPLACE_SCHEMES}", scheme))
        self.scheme = scheme
        if not isinstance(key, bytes | bytearray) or len(key) < 16:
            raise ParameterError(message("key", "KeyedDiscreteLaplace", "at least 16 bytes",
                                         key))
        g = Fraction(gamma)
        if g <= 0 or g.denominator > MAX_DENOMINATOR:
            raise ParameterError(message("gamma", "KeyedDiscreteLaplace",
                                         "a fraction > 0 with denominator <= 2^32", gamma))
        h = hashlib.sha256(b"dpfreq.windows.lazy_noise\x00" + bytes(key)
                           + int(structure).to_bytes(16, "little", signed=True)).digest()
        self._key_words = np.frombuffer(h, dtype="<u4").astype(_U32)
        self.gamma = g
        self.structure = int(structure)
        self.cache_limit = self._CACHE_LIMIT if cache_limit is None else int(cache_limit)
        self._ids = np.zeros(0, dtype=np.int64)  # large tier: sorted ids and their values
        self._vals = np.zeros(0, dtype=np.int64)
        self._rids = np.zeros(0, dtype=np.int64)  # recent tier (small, cheap to insert into)
        self._rvals = np.zeros(0, dtype=np.int64)
        self.n_drawn = 0  # nodes sampled so far (cache misses), for tests and benchmarks

    def noise(self, node_ids: Any) -> NDArray[np.int64]:
        """Noise of each node id (non-negative integers < 2^63); same id ⇒ same value."""
        ids = np.asarray(node_ids, dtype=np.int64)
        if ids.size and ids.min() < 0:
            raise ParameterError(message("node_ids", "KeyedDiscreteLaplace.noise",
                                         "non-negative integers", node_ids))
        flat = ids.ravel()
        uniq, inverse = np.unique(flat, return_inverse=True)
        vals = self._draw(uniq)
        return vals[inverse].reshape(ids.shape)

    def noise_unique(self, ids: Any) -> NDArray[np.int64]:
        """:meth:`noise` for ids that are already sorted and distinct (skips the unique pass)."""
        arr = np.asarray(ids, dtype=np.int64)
        if arr.size and (arr[0] < 0 or np.any(arr[1:] <= arr[:-1])):
            raise ParameterError(message("ids", "KeyedDiscreteLaplace.noise_unique",
                                         "sorted distinct non-negative integers", "other"))
        return self._draw(arr)

    def _sample(self, st: _Streams, n: int) -> NDArray[np.int64]:
        return _discrete_laplace(st, n, self.gamma.numerator, self.gamma.denominator)

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
                st = _Streams(self._key_words, part.astype(np.uint64))
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


def _bern_exp_general(st: _Streams, rows: NDArray[np.int64], num: NDArray[np.int64],
                      den: int) -> NDArray[np.bool_]:
    """Bernoulli(exp(−num/den)) for any num >= 0: ⌊num/den⌋ Bernoulli(e^{−1}) then the rest."""
    whole = num // den
    frac = num % den
    out = np.ones(rows.shape[0], dtype=np.bool_)
    alive = np.arange(rows.shape[0])
    r = 0
    while True:
        todo = alive[whole[alive] > r]
        if not todo.size:
            break
        ok = _bern_exp_le1(st, rows[todo], np.ones(todo.size, dtype=np.int64), 1)
        out[todo[~ok]] = False
        alive = np.setdiff1d(alive, todo[~ok], assume_unique=True)
        r += 1
    if alive.size:
        ok = _bern_exp_le1(st, rows[alive], frac[alive], den)
        out[alive[~ok]] = False
    return out


def _discrete_gaussian(st: _Streams, n: int, t: int, u: int) -> NDArray[np.int64]:
    out = np.empty(n, dtype=np.int64)
    pending = np.arange(n, dtype=np.int64)
    while pending.size:
        y = _discrete_laplace_rows(st, pending, 1, t)
        num = (np.abs(y) - u) ** 2
        c = _bern_exp_general(st, pending, num, 2 * t * u)
        out[pending[c]] = y[c]
        pending = pending[~c]
    return out


class KeyedDiscreteGaussian(KeyedDiscreteLaplace):
    """Exact discrete Gaussian noise per node id, a deterministic function of (key, structure).

    The target ``sigma2_min`` is rounded up by :func:`gaussian_sigma2`; the value used is
    ``self.sigma2``. Streams are separated from the Laplace ones by a different label.
    """

    def __init__(self, key: bytes, structure: int, sigma2_min: float) -> None:
        super().__init__(key, structure, Fraction(1))
        self.sigma2, self._t, self._u = gaussian_sigma2(sigma2_min)
        h = hashlib.sha256(b"dpfreq.windows.lazy_gaussian\x00" + bytes(key)
                           + int(structure).to_bytes(16, "little", signed=True)).digest()
        self._key_words = np.frombuffer(h, dtype="<u4").astype(_U32)

    def _sample(self, st: _Streams, n: int) -> NDArray[np.int64]:
        return _discrete_gaussian(st, n, self._t, self._u)
