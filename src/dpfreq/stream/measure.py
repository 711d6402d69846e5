"""Measuring the rows an append closes: exact row values plus keyed node noise, in integers.

For every k level (structure name ``("cumulative", k, tree)``, the name an offline release
gives its cumulative counter; ``tree`` is 0, or the epoch of a horizon-free counter) and every
period the append closes, the counter's new rows are measured: their exact values from the exact
per-period increments, plus one node noise each, a deterministic function of the stream's secret
key, the structure name and the node id (:mod:`dpfreq.windows.noise`; never stored, never
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


def _noise(law: Any, key: bytes, name: tuple[str | int, ...], ids: IntArray, n_groups: int,
           grouped: bool) -> IntArray:
    """The keyed node noise ``(G, len(ids))`` of one tree: one vectorised call."""
    src = law.source(key, name)
    if grouped:
        z = src.noise(ids[None, :] * n_groups + np.arange(n_groups, dtype=np.int64)[:, None])
    else:
        z = np.broadcast_to(src.noise(ids)[None, :], (n_groups, ids.size))
    return np.asarray(z, dtype=np.int64)


def measure_periods(counter: Any, key: bytes, k_values: tuple[int, ...], exact: IntArray,
                    noisy: IntArray, after: int, through: int, grouped: bool) -> IntArray:
    """The noisy rows ``(K, G, rows)`` after measuring periods ``after + 1 … through``.

    ``exact`` holds the exact increments ``(G, K, periods)`` through ``through``; ``noisy`` the
    rows measured through ``after`` (nothing is re-measured). The rows of each tree are drawn
    in one call per tree."""
    n_groups = exact.shape[0]
    periods = range(after + 1, through + 1)
    rows = [counter.rows(t) for t in periods]  # public: (tree, law, ids) per period
    trees: dict[int, tuple[Any, list[IntArray]]] = {}
    for per_t in rows:
        for tree, law, ids in per_t:
            trees.setdefault(int(tree), (law, []))[1].append(ids)
    out = []
    for j, k in enumerate(k_values):
        prefix = np.concatenate((np.zeros((n_groups, 1), dtype=np.int64),
                                 np.cumsum(exact[:, j, :], axis=1)), axis=1)
        values = [counter.row_values(prefix, t) for t in periods]
        noise = {tree: _noise(law, key, ("cumulative", int(k), tree), np.concatenate(ids),
                              n_groups, grouped) for tree, (law, ids) in trees.items()}
        used = dict.fromkeys(noise, 0)
        new = []
        for per_t, v in zip(rows, values, strict=True):
            cols = []
            for tree, _, ids in per_t:
                cols.append(noise[int(tree)][:, used[int(tree)]:used[int(tree)] + ids.size])
                used[int(tree)] += ids.size
            new.append(v + np.concatenate(cols, axis=1))
        before = [noisy[j]] if noisy.shape[-1] else []
        parts = before + new
        out.append(np.concatenate(parts, axis=1) if parts else
                   np.zeros((n_groups, 0), dtype=np.int64))
    return np.stack(out, axis=0)
