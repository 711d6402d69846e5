"""Contribution bounding over groups and per-group count-of-counts (numpy reference).

The bounding rule, identical on every engine: after keeping only the rows of the listed groups,
each item keeps the (at most) ``m`` of its groups with the smallest rank

    ``rank(item, group) = first 16 hex digits of MD5(hex(key) ‖ 0x1f ‖ item ‖ 0x1f ‖ group)``

(``item`` and ``group`` as text: integers in decimal), ties broken by the group's text. The
key is a 32-byte sub-key from :func:`dpfreq.rng.derive_key`, secret unless the release is
seeded. Why uniform: for a fixed item the strings hashed for its groups are distinct, so under
a random key their ranks behave as independent uniform 64-bit numbers; the ``m`` smallest of
i.i.d. uniform values form a uniformly random ``m``-subset (every ordering is equally likely),
up to ties of probability ``< k² / 2^64``. MD5 is used as a keyed pseudo-random function here
(not for collision resistance) because DuckDB (``md5``) and Spark SQL (``md5``) compute it
natively, so the data never leaves the engine; this module is the readable reference.

Each item's kept set depends only on the key and that item's own rows, so adding or removing
one item changes the bounded data of at most ``m`` groups, each by that item's rows alone.

Two relaxed forms serve other callers: ``groups=None`` keeps every group of the data and returns
the names of the groups that keep at least one item (private names: only private partition
selection, :mod:`dpfreq.grouped.selection`, may publish them); ``max_groups_per_item=None``
bounds nothing (event-level releases, where every row lies in one group) and
``max_count=None`` clamps nothing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import check_int, message
from dpfreq.errors import DataError, ParameterError

__all__ = ["GroupedPrevalences", "check_group_args", "kept_pairs",
           "memory_grouped_count_of_counts", "pair_rank"]

SEP = "\x1f"


@dataclass(frozen=True)
class GroupedPrevalences:
    """Per-group count-of-counts of the bounded data, sparse.

    Attributes
    ----------
    groups : tuple of str
        The public groups, in the order given; with ``groups=None`` the groups of the data that
        keep at least one item, sorted (private until selected).
    group_index : numpy.ndarray of int64
        Index into ``groups`` of each entry.
    counts : numpy.ndarray of int64
        The (clamped) per-item count of each entry, ``>= 1``.
    prevalences : numpy.ndarray of int64
        Number of items of that group with that count.
    """

    groups: tuple[str, ...]
    group_index: NDArray[np.int64]
    counts: NDArray[np.int64]
    prevalences: NDArray[np.int64]


def check_group_args(item: Any, group: Any, groups: Any, max_groups_per_item: Any,
                     hash_key: Any, max_count: Any,
                     func: str) -> tuple[str, tuple[str, ...] | None, int | None, str, int | None]:
    """Validate the engine arguments (the same for every engine); returns (group, groups as
    text or None for all, m or None for no bound, key hex, n or None for no clamp)."""
    if not isinstance(group, str) or not group:
        raise ParameterError(message("group", func, "a non-empty column name (str)", group))
    if not isinstance(item, str) or not item or item == group:
        raise ParameterError(message("item", func, "a column name other than group", item))
    names: tuple[str, ...] | None = None
    if groups is not None:
        if isinstance(groups, str | bytes) or not hasattr(groups, "__iter__"):
            raise ParameterError(message("groups", func, "a list of group names or None",
                                         groups))
        names = tuple(dict.fromkeys(str(g) for g in groups))
        if not names:
            raise ParameterError(message("groups", func, "a non-empty list of group names",
                                         groups))
    m = None if max_groups_per_item is None else check_int(
        max_groups_per_item, "max_groups_per_item", func, minimum=1)
    if not isinstance(hash_key, bytes) or len(hash_key) < 16:
        raise ParameterError(message("hash_key", func, "at least 16 bytes", "a shorter key"))
    n = None if max_count is None else check_int(max_count, "max_count", func, minimum=1)
    return group, names, m, hash_key.hex(), n


def pair_rank(key_hex: str, item: str, group: str) -> str:
    """The bounding rank of one (item, group) pair: 16 hex digits (the spec of the SQL)."""
    return hashlib.md5(f"{key_hex}{SEP}{item}{SEP}{group}".encode()).hexdigest()[:16]


def kept_pairs(key_hex: str, items: NDArray[Any], names: tuple[str, ...],
               pi: NDArray[np.int64], pg: NDArray[np.int64], m: int) -> NDArray[np.bool_]:
    """Which distinct (item, group) pairs the bounding keeps: pair ``j`` is item ``items[pi[j]]``
    (text) in group ``names[pg[j]]``; each item keeps its ``m`` pairs of smallest rank. An item
    with at most ``m`` pairs keeps them all: only the pairs of the others are hashed."""
    keep = np.ones(pi.size, dtype=np.bool_)
    if not pi.size:
        return keep
    over = np.flatnonzero(np.bincount(pi)[pi] > m)
    if not over.size:
        return keep
    oi, og = pi[over], pg[over]
    # reference oracle: one hash per distinct (item, group) pair of a bounded item (the SQL
    # engines do it in SQL)
    ranks = np.array([pair_rank(key_hex, items[i], names[g]) for i, g in zip(oi, og, strict=True)],
                     dtype="U16")
    order = np.lexsort((np.asarray(names, dtype=str)[og], ranks, oi))
    ps = oi[order]
    first = np.searchsorted(ps, ps, side="left")
    sub = np.empty(oi.size, dtype=np.bool_)
    sub[order] = (np.arange(ps.size) - first) < m
    keep[over] = sub
    return keep


def _as_text(arr: NDArray[Any]) -> NDArray[Any]:
    """Keys as text: integers in decimal, text unchanged."""
    return np.asarray(arr).astype(str)


def _per_group_prevalences(pg: NDArray[np.int64], pc: NDArray[np.int64], names: tuple[str, ...],
                           n: int | None) -> GroupedPrevalences:
    """Count-of-counts per group of the kept (group index, count) pairs, sorted."""
    c = pc if n is None else np.minimum(pc, n)
    if pg.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return GroupedPrevalences(groups=names, group_index=empty, counts=empty,
                                  prevalences=empty)
    cells, prev = np.unique(np.stack([pg, c], axis=1), axis=0, return_counts=True)
    return GroupedPrevalences(groups=names, group_index=cells[:, 0].astype(np.int64),
                              counts=cells[:, 1].astype(np.int64),
                              prevalences=prev.astype(np.int64))


def memory_grouped_count_of_counts(engine: Any, source: Any, *, item: str, group: str,
                                   groups: Any, max_groups_per_item: int | None,
                                   hash_key: bytes,
                                   max_count: int | None) -> GroupedPrevalences:
    """Bound each item to ``m`` groups and count-of-counts per group (numpy)."""
    func = "MemoryEngine.grouped_count_of_counts"
    group, listed, m, key_hex, n = check_group_args(item, group, groups, max_groups_per_item,
                                                    hash_key, max_count, func)
    cols = engine._table(source, [item, group], func, (item, group))
    items = _as_text(engine._items(cols[item], item, func))
    gvals = engine._items(cols[group], group, func)
    if gvals.size == 0 and items.size:
        raise DataError(message("group", func, "a column with values", "an empty column"))
    gtext = _as_text(gvals)
    uniq_g, g_inv = np.unique(gtext, return_inverse=True)
    names = tuple(str(g) for g in uniq_g) if listed is None else listed
    pos = {g: i for i, g in enumerate(names)}
    gidx = np.fromiter((pos.get(g, -1) for g in uniq_g), dtype=np.int64)
    code = gidx[g_inv.reshape(-1)] if uniq_g.size else np.zeros(0, dtype=np.int64)
    keep = code >= 0
    items, code = items[keep], code[keep]
    uniq_i, i_inv = np.unique(items, return_inverse=True)
    width = max(len(names), 1)
    pair = i_inv.reshape(-1).astype(np.int64) * width + code
    up, pc = np.unique(pair, return_counts=True)
    pi, pg = up // width, up % width
    if m is not None:
        kept = kept_pairs(key_hex, uniq_i, names, pi, pg, m)
        pg, pc = pg[kept], pc[kept]
    out = _per_group_prevalences(pg.astype(np.int64), pc.astype(np.int64), names, n)
    if listed is not None:
        return out
    # groups of the data: only those that keep an item, re-indexed in sorted order
    present = np.unique(out.group_index)
    return GroupedPrevalences(groups=tuple(names[i] for i in present),
                              group_index=np.searchsorted(present, out.group_index),
                              counts=out.counts, prevalences=out.prevalences)
