"""Measuring the rows an append closes: exact row values plus keyed node noise, in integers.

For every k level (structure name ``("cumulative", k, tree)``, the name an offline release
gives its cumulative counter; ``tree`` is 0, or the epoch of a horizon-free counter) and every
period the append closes, the counter's new rows are measured: their exact values from the exact
per-period increments, plus one node noise each, a deterministic function of the stream's secret
key, the structure name and the node id (:mod:`dpfreq.windows.lazy_noise`; never stored, never
redrawn). With ``G`` groups, group ``g``'s node ``v`` takes the counter ``v·G + g`` of the same
keyed source (an injective encoding of (g, v), as grouped window releases do), all groups in one
vectorised call. Only the noisy rows are kept for publishing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["measure_periods"]

IntArray = NDArray[np.int64]


def _noise(counter: Any, key: bytes, k: int, t: int, n_groups: int,
           grouped: bool) -> IntArray:
    cols = []
    for tree, law, ids in counter.rows(t):
        src = law.source(key, ("cumulative", int(k), int(tree)))
        if grouped:
            z = src.noise(ids[None, :] * n_groups + np.arange(n_groups)[:, None])
        else:
            z = np.broadcast_to(src.noise(ids)[None, :], (n_groups, ids.size))
        cols.append(np.asarray(z, dtype=np.int64))
    return np.concatenate(cols, axis=1) if cols else np.zeros((n_groups, 0), dtype=np.int64)


def measure_periods(counter: Any, key: bytes, k_values: tuple[int, ...], exact: IntArray,
                    noisy: IntArray, after: int, through: int, grouped: bool) -> IntArray:
    """The noisy rows ``(K, G, rows)`` after measuring periods ``after + 1 … through``.

    ``exact`` holds the exact increments ``(G, K, periods)`` through ``through``; ``noisy`` the
    rows measured through ``after`` (nothing is re-measured)."""
    n_groups = exact.shape[0]
    out = []
    for j, k in enumerate(k_values):
        prefix = np.concatenate((np.zeros((n_groups, 1), dtype=np.int64),
                                 np.cumsum(exact[:, j, :], axis=1)), axis=1)
        rows = [noisy[j]] if noisy.size else []
        for t in range(after + 1, through + 1):
            values = counter.row_values(prefix, t)
            rows.append(values + _noise(counter, key, k, t, n_groups, grouped))
        out.append(np.concatenate(rows, axis=1) if rows else
                   np.zeros((n_groups, 0), dtype=np.int64))
    return np.stack(out, axis=0)
