"""ChaCha20 streams per node and the Canonne–Kamath–Steinke samplers run on them, in numpy.

The keyed node-noise construction of :mod:`dpfreq.windows.lazy_noise` before the AES one
(``scheme="chacha20-cks"``), kept so that releases saved with it keep their noise, and the
stream source of the keyed discrete Gaussian:

* every node owns its own random stream, ChaCha20 (RFC 7539 block function, 20 rounds) keyed
  with a 256-bit key, nonce = the 64-bit node id, counter = block number. The block function is
  evaluated with numpy ``uint32`` arithmetic over all pending nodes at once, and is checked
  against the RFC 7539 test vector;
* the exact samplers of :mod:`dpfreq.noise` (Bernoulli(exp(−u/t)) by rational trials,
  geometric(e^{−1}) count, rejection of the signed zero; the discrete Gaussian by rejection from
  the discrete Laplace) run in vectorized rounds, each node consuming words of its own stream in a
  fixed order. No floating point touches a sampled value; bounded uniforms are drawn by
  rejection on 63-bit words, so they are exactly uniform given ideal stream words.

Each node's output depends only on its own stream, so results do not depend on which other nodes
are drawn in the same batch. Cost: about 0.8–1.2 µs per node (two ChaCha blocks at ~0.18 µs each
plus the sampler's rounds).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.errors import ParameterError

__all__ = ["Streams", "chacha20_blocks", "discrete_gaussian_rows", "discrete_laplace_rows"]

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


class Streams:
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


def _bern_exp_le1(st: Streams, rows: NDArray[np.int64], num: NDArray[np.int64],
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


def _geometric_e1(st: Streams, rows: NDArray[np.int64]) -> NDArray[np.int64]:
    v = np.zeros(rows.shape[0], dtype=np.int64)
    alive = np.arange(rows.shape[0])
    while alive.size:
        ok = _bern_exp_le1(st, rows[alive], np.ones(alive.size, dtype=np.int64), 1)
        alive = alive[ok]
        v[alive] += 1
    return v


def discrete_laplace_rows(st: Streams, rows: NDArray[np.int64], s: int,
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



def _bern_exp_general(st: Streams, rows: NDArray[np.int64], num: NDArray[np.int64],
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


def discrete_gaussian_rows(st: Streams, n: int, t: int, u: int) -> NDArray[np.int64]:
    """One discrete Gaussian draw (σ² = t·u) per stream row ``0..n−1`` (CKS 2020, Alg. 3)."""
    out = np.empty(n, dtype=np.int64)
    pending = np.arange(n, dtype=np.int64)
    while pending.size:
        y = discrete_laplace_rows(st, pending, 1, t)
        num = (np.abs(y) - u) ** 2
        c = _bern_exp_general(st, pending, num, 2 * t * u)
        out[pending[c]] = y[c]
        pending = pending[~c]
    return out
