"""Optional compiled passes for the windows' keyed node noise (extra ``fast``: numba).

With numba installed (``pip install 'dpfreq[fast]'``) the per-node work of the keyed discrete
Laplace (:mod:`dpfreq.windows.noise.keyed`), the listing of the lower level pairs of
:class:`~dpfreq.windows.noise.dominance.DominanceNoise` and the exact counts of
:class:`~dpfreq.windows.data.dominance_count.DominanceCounter` run as compiled loops
(:mod:`dpfreq.windows.noise.kernel_jit`) instead of chains of numpy passes. The values are the
same integers bit for bit: the compiled loop makes the same integer comparisons with the same
tables, and hands every node whose value needs more than one word (a word on a threshold, a
magnitude beyond the table) back to the numpy path, which computes it from the same keyed words.

Loading numba and the compiled kernels costs a few tenths of a second (and seconds the first
time ever, when the kernels are compiled and cached), so nothing here loads them on import:
:func:`start` loads them in a background thread (called when a release builds its noise
sources, ahead of the first ask) and :func:`loaded` returns them only once they are ready, never
waiting: until then, and without numba, the numpy path runs. Compiled kernels are cached next
to this module, or, when that directory is read-only, in numba's per-user cache directory
(``NUMBA_CACHE_DIR`` overrides both).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from types import ModuleType
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["MIN_IDS", "TAG_A", "TAG_DIGIT", "dominance_counts", "geometric", "grid_ids", "laplace",
           "level_list", "load", "loaded", "lower_pairs", "lower_sums", "start", "tail_tags",
           "upper_row"]

#: batches below this many node ids keep the numpy path (a compiled call costs microseconds)
MIN_IDS = 512
_CHUNK = 1 << 14  # node ids per AES call + compiled pass
#: tag offsets of the words of a geometric tail (``_NodePRF.geometric`` in lazy_noise)
TAG_A, TAG_DIGIT = 1 << 30, 1 << 29

_lock = threading.Lock()  # guards the start of the loading thread (held briefly)
_load_lock = threading.Lock()  # held while loading: :func:`start` never waits for it
_state: dict[str, Any] = {"module": None, "thread": None, "failed": False}


def load() -> ModuleType | None:
    """Import the compiled kernels and make them ready (compile or load from the cache), in
    this thread; None without numba or if they cannot be built."""
    with _load_lock:
        if _state["module"] is not None or _state["failed"]:
            return _state["module"]
        try:
            if importlib.util.find_spec("numba") is None or sys.byteorder != "little":
                raise ImportError("numba")  # the kernels read AES words as native uint64
            mod = importlib.import_module("dpfreq.windows.noise.kernel_jit")
            _warm(mod)
        except Exception:  # any failure of the optional extra leaves the numpy path
            _state["failed"] = True
            return None
        _state["module"] = mod
        return mod


def _warm(mod: ModuleType) -> None:
    """One call of each kernel with the argument types of real calls (compiles or loads the
    cache), then no more compiling: a call with other types would raise, never stall."""
    ct = np.zeros(4, dtype=np.uint64)
    i64 = np.zeros(2, dtype=np.int64)
    u64 = np.zeros(2, dtype=np.uint64)
    mod.laplace_words(ct, 1, np.int64(40), np.int64(0), u64, i64, u64, u64, 1,
                      np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64))
    digits = np.zeros(1, dtype=np.uint64)
    digits.setflags(write=False)  # as the cached digit thresholds
    mod.geometric_words(ct, 1, 1, digits, np.int64(40), np.int64(0), u64, i64, u64, u64, 1,
                        np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64))
    mod.fill_blocks(i64, i64, np.zeros(8, dtype=np.uint64))
    starts = np.zeros(3, dtype=np.int64)
    mod.lower_blocks(i64, i64, 0, 1, 1, 2, u64, 2, 1, starts)
    mod.laplace_sums(ct, starts, 1, 1, np.int64(40), np.int64(0), u64, i64, u64, u64, 1,
                     np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64))
    for dtype in (np.int32, np.int64):  # the two layouts of the merge-sort tree's levels
        mod.dominance_counts(level_list([np.zeros(2, dtype=dtype)]),
                             level_list([np.zeros(1, dtype=dtype)]), 0, i64, i64,
                             np.zeros(1, dtype=np.int64), i64, i64, np.zeros(2, dtype=np.int64))
    mod.grid_ids(i64, i64, 4, np.zeros(40, dtype=np.int64))
    mod.upper_row(np.zeros(8, dtype=np.int64), np.zeros(2, dtype=np.int64), 2, 2, 1, 1,
                  np.zeros(2, dtype=np.int64))
    mod.upper_sums(i64, i64, i64, i64, i64, i64, i64, np.zeros(2, dtype=np.int64))
    _warm_laws(mod)
    for name in mod.__all__:  # a call with other argument types raises instead of compiling
        getattr(mod, name).disable_compile()


def start() -> None:
    """Load the kernels in a background thread (once per process; no-op without numba)."""
    with _lock:
        if _state["thread"] is not None or _state["module"] is not None or _state["failed"]:
            return
        if importlib.util.find_spec("numba") is None:
            _state["failed"] = True
            return
        thread = threading.Thread(target=load, name="dpfreq-node-kernel", daemon=True)
        _state["thread"] = thread
    thread.start()


def loaded() -> ModuleType | None:
    """The kernels if they are ready; never waits (None while loading or without numba)."""
    mod: ModuleType | None = _state["module"]
    return mod


def _encrypt(kern: ModuleType, enc: Any, ids: NDArray[np.int64], tags: NDArray[np.int64],
             buf: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """The AES blocks of ``_NodePRF.words`` in :mod:`dpfreq.windows.noise.keyed`: ``(id ‖ tag)``
    little-endian for every id and every tag (id-major); returns the ciphertext words (the
    block of id ``i`` and tag ``j`` starts at word ``2(i·len(tags) + j)``)."""
    n = ids.size * tags.size
    kern.fill_blocks(ids, tags, buf)
    ct = buf[2 * n:4 * n + 2]  # update_into wants one block to spare
    enc.update_into(buf[:2 * n].view(np.uint8), ct.view(np.uint8))
    return ct


def laplace(kern: ModuleType, enc: Any, ids: NDArray[np.int64], tag: int,
            tables: tuple[Any, ...]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Signed discrete Laplace values of ``ids`` from the words of ``tag`` by the compiled
    pass, and the positions it leaves to the caller: a tie (value 0 there) or a magnitude
    beyond the table (value ``±K`` there: add the geometric tail with that sign).

    ``tables``: ``(shift, key0, thr, base, ascending, at, size)`` of the magnitude's
    :class:`~dpfreq._exact_inverse.InverseTable` (``InverseTable.bucket_arrays``).
    """
    return _chunked(kern, kern.laplace_words, enc, ids, np.array([tag], dtype=np.int64),
                    tables)


def geometric(kern: ModuleType, enc: Any, ids: NDArray[np.int64], tags: NDArray[np.int64],
              digits: NDArray[np.uint64], tables: tuple[Any, ...]
              ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``G = (A << m) + B`` per id by the compiled pass, ``m = len(tags) − 1``: the word of
    ``tags[0]`` gives ``A`` (by the table ``tables`` of ``γ·2^m``), the word of ``tags[1 + j]``
    the digit ``j`` of ``B`` (threshold ``digits[j]``); and the positions the caller must
    recompute (an ``A`` beyond its table's first word, or a tie)."""
    return _chunked(kern, kern.geometric_words, enc, ids, tags,
                    (tags.size - 1, digits, *tables))


def tail_tags(tag0: int, m: int) -> NDArray[np.int64]:
    """The tags of a geometric tail's words: the first word of ``A`` (``tag0 + TAG_A``), then
    the ``m`` digit words of ``B`` (``tag0 + TAG_DIGIT + j``)."""
    return tag0 + np.concatenate(([TAG_A], TAG_DIGIT + np.arange(m))).astype(np.int64)


def _chunked(kern: ModuleType, kernel: Any, enc: Any, ids: NDArray[np.int64],
             tags: NDArray[np.int64], args: tuple[Any, ...]
             ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``kernel(ct, n, *args, out, flagged)`` over chunks of ids (the AES words of every id and
    tag of a chunk in one call): the values and the flagged positions of all ids."""
    ids = np.ascontiguousarray(ids, dtype=np.int64)
    tags = np.ascontiguousarray(tags, dtype=np.int64)
    n = ids.size
    out = np.empty(n, dtype=np.int64)
    flagged = np.empty(n, dtype=np.int64)
    n_flag = 0
    step = max(1, _CHUNK // tags.size)
    buf = np.empty(4 * min(n, step) * tags.size + 2, dtype="<u8")
    for lo in range(0, n, step):
        part = ids[lo:lo + step]
        ct = _encrypt(kern, enc, part, tags, buf)
        f = kernel(ct, part.size, *args, out[lo:], flagged[n_flag:])
        flagged[n_flag:n_flag + f] += lo
        n_flag += f
    return out, flagged[:n_flag]


def lower_pairs(kern: ModuleType, xs: NDArray[np.int64], ys: NDArray[np.int64], split: int,
                levels: int, domain: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Node ids of the lower level pairs of every query (query-major) and the first id of
    each query (and one past the last), by the compiled listing of :func:`lower_sums` (one
    id per word)."""
    xs, ys = np.ascontiguousarray(xs, dtype=np.int64), np.ascontiguousarray(ys, dtype=np.int64)
    cap = xs.size * levels * max(0, min(levels, split))
    ids = np.empty(max(cap, 1), dtype="<u8")
    starts = np.empty(xs.size + 1, dtype=np.int64)
    kern.lower_blocks(xs, ys, 0, split, levels, domain, ids, 1, cap, starts)
    return ids[:starts[-1]].view(np.int64), starts


def level_list(arrays: list[NDArray[Any]]) -> Any:
    """The per-level arrays (one dtype) as the typed list the compiled counts take (no copies;
    call only once the kernels are loaded: it imports numba)."""
    from numba.typed import List

    out = List()
    for a in arrays:
        out.append(np.ascontiguousarray(a))
    return out


def dominance_counts(kern: ModuleType, lines: Any, samples: Any, shift: int,
                     start: NDArray[np.int64], before: NDArray[np.int64],
                     node_off: NDArray[np.int64], xs1: NDArray[np.int64],
                     ys: NDArray[np.int64]) -> NDArray[np.int64]:
    """Exact dominance counts of the queries ``(xs1 − 1, ys)`` from the merge-sort tree of
    :class:`~dpfreq.windows.data.dominance_count.DominanceCounter` (``lines``, ``samples``: its
    levels as :func:`level_list`, int32 or int64; ``2^shift`` pairs per line), by the compiled
    pass."""
    out = np.zeros(xs1.size, dtype=np.int64)
    kern.dominance_counts(lines, samples, int(shift), start, before, node_off,
                          np.ascontiguousarray(xs1, dtype=np.int64),
                          np.ascontiguousarray(ys, dtype=np.int64), out)
    return out


def lower_sums(kern: ModuleType, xs: NDArray[np.int64], ys: NDArray[np.int64], split: int,
               levels: int, domain: int, passes: list[tuple[Any, tuple[Any, ...], int]]
               ) -> tuple[NDArray[np.int64], list[tuple[NDArray[np.int64], NDArray[np.int64]]],
                          int]:
    """``Σ_i sign_i · Σ`` of the keyed discrete Laplace values of tree ``i`` over the lower
    level pairs of every query, in one compiled listing per chunk of blocks shared by the
    trees (their ids are the same; each tree encrypts them under its own key).

    ``passes``: ``(cipher, tables, sign)`` per tree (``KeyedDiscreteLaplace.word_pass``).
    Returns the sums without the flagged nodes, per tree the flagged ``(node ids, queries)``
    (a tie or a tail) whose ``sign_i · value`` the caller adds, and the number of nodes.
    """
    xs, ys = np.ascontiguousarray(xs, dtype=np.int64), np.ascontiguousarray(ys, dtype=np.int64)
    cap = max(_CHUNK, levels * levels)
    buf = np.zeros(4 * cap + 2, dtype="<u8")  # the blocks (tag words 0), then the ciphertext
    blocks, ct = buf[:2 * cap], buf[2 * cap:]
    starts = np.empty(xs.size + 1, dtype=np.int64)
    sums = np.zeros(xs.size, dtype=np.int64)
    flagged = np.empty(cap, dtype=np.int64)
    left: list[list[tuple[NDArray[np.int64], NDArray[np.int64]]]] = [[] for _ in passes]
    q = total = 0
    while q < xs.size:
        end = kern.lower_blocks(xs, ys, q, split, levels, domain, blocks, 2, cap, starts)
        n = int(starts[end - q])
        total += n
        for (enc, tables, sign), out in zip(passes, left, strict=True) if n else ():
            enc.update_into(blocks[:2 * n].view(np.uint8), ct[:2 * n + 2].view(np.uint8))
            f = kern.laplace_sums(ct, starts, end - q, sign, *tables, sums[q:], flagged)
            if f:
                pos = flagged[:f]
                out.append((blocks[2 * pos].view(np.int64),
                            q + np.searchsorted(starts[:end - q + 1], pos, side="right") - 1))
        q = end
    empty = np.zeros(0, dtype=np.int64)
    return sums, [(np.concatenate([a for a, _ in o]) if o else empty,
                   np.concatenate([b for _, b in o]) if o else empty) for o in left], total


def grid_ids(kern: ModuleType, pairs: list[tuple[int, int]], domain: int) -> NDArray[np.int64]:
    """Node ids of the level pairs ``(ℓx, ℓy)`` of ``pairs``, one grid after the other, each
    row-major (``D >> ℓx`` rows of ``D >> ℓy`` ids), by the compiled pass."""
    lxs = np.array([p[0] for p in pairs], dtype=np.int64)
    lys = np.array([p[1] for p in pairs], dtype=np.int64)
    out = np.empty(int(np.sum((domain >> lxs) * (domain >> lys))), dtype=np.int64)
    kern.grid_ids(lxs, lys, int(domain), out)
    return out


def upper_row(kern: ModuleType, grids: dict[tuple[int, int], NDArray[np.int64]], levels: int,
              domain: int, lx: int, b: int) -> NDArray[np.int64]:
    """The row table of ``ℓx`` over the upper pairs ``ℓy >= b`` (``grids[(ℓx, ℓy)]``), flat
    and row-major (``D >> ℓx`` rows of ``(D >> b) + 1``), by the compiled pass."""
    parts = [grids[(lx, ly)].ravel() for ly in range(b, levels)]
    offs = np.zeros(levels, dtype=np.int64)
    offs[b:] = np.cumsum([0] + [p.size for p in parts[:-1]])
    out = np.empty((domain >> lx) * ((domain >> b) + 1), dtype=np.int64)
    kern.upper_row(np.concatenate(parts), offs, int(levels), int(domain), int(lx), int(b), out)
    return out


def _warm_laws(mod: ModuleType) -> None:
    """The calls of :mod:`dpfreq.windows.laws.sums` (Chernoff radii, the Dirichlet search)."""
    f64 = np.zeros(2, dtype=np.float64)
    i64 = np.ones(2, dtype=np.int64)
    lam = np.ones(2, dtype=np.float64)
    lam.setflags(write=False)  # as the cached grid
    mod.chernoff_floor(i64, lam, lam, 1.0, f64)
    mod.dirichlet_search(f64, np.array([0, 1, 2]), 4 * i64, i64, f64, 0.5, i64,
                         np.zeros(2, dtype=np.int64))
