"""Per-(group, item, period) reductions of an event log, after the grouped bounding (numpy).

:meth:`Engine.grouped_reduce_items` is :meth:`Engine.reduce_items` per group, in one pass over
the source: keep the rows of the listed groups, bucket the times into periods (the range check
applies to those rows), optionally bound each item to ``m`` of its groups by the keyed rank of
:mod:`dpfreq.engines.grouping_memory` (the same rule and key as the grouped profile), then run
the per-item ``reducer`` on the events of each (group, item) and sum its outputs per
(group, slot, key). ``m = None`` keeps every (item, group) pair (unit ``"event"``: one row is in
one group, nothing to bound). This module is the readable reference and holds the numpy steps
every engine shares; DuckDB and Spark compute the filter, the periods and the bounding where the
data lives (:mod:`dpfreq.engines.grouping_windows_duckdb`, ``..._spark``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import check_int, message
from dpfreq.engines import _common as common
from dpfreq.engines.base import ItemReducer, TimeBuckets
from dpfreq.engines.grouping_memory import kept_pairs
from dpfreq.errors import ParameterError

__all__ = ["GroupedReduction", "check_grouped_reduce_args", "empty_reduction", "group_codes",
           "memory_grouped_reduce_items", "reduce_grouped", "reduce_grouped_sorted",
           "sum_grouped"]

IntArray = NDArray[np.int64]
_EMPTY = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class GroupedReduction:
    """Summed ``(group, slot, key) -> weight`` entries of a grouped per-item reduction.

    Attributes
    ----------
    groups : tuple of str
        The public groups, in the order given.
    group_index, slots, keys : numpy.ndarray of int64
        Index into ``groups``, slot and key of each entry; sorted by (group, slot, key).
    weights : numpy.ndarray of int64
        The summed weight of each entry, non-zero.
    n_events : int
        Events of listed groups inside ``1..horizon`` (before the bounding).
    n_out_of_range : int
        Events of listed groups outside ``1..horizon``.
    """

    groups: tuple[str, ...]
    group_index: IntArray
    slots: IntArray
    keys: IntArray
    weights: IntArray
    n_events: int
    n_out_of_range: int

    def entries(self, g: int) -> tuple[IntArray, IntArray, IntArray]:
        """``(slots, keys, weights)`` of group ``g``."""
        lo, hi = np.searchsorted(self.group_index, [g, g + 1])
        return self.slots[lo:hi], self.keys[lo:hi], self.weights[lo:hi]


def check_grouped_reduce_args(item: Any, time: Any, group: Any, groups: Any,
                              max_groups_per_item: Any, hash_key: Any, buckets: Any,
                              func: str) -> tuple[tuple[str, ...], int | None, str]:
    """Validate the engine arguments (every engine); returns (groups as text, m or None, key
    hex; empty without bounding)."""
    for name, col in (("item", item), ("time", time), ("group", group)):
        common.check_column_name(col, name, func)
    if len({item, time, group}) < 3:
        raise ParameterError(message("item/time/group", func, "three different column names",
                                     (item, time, group)))
    if isinstance(groups, str | bytes) or not hasattr(groups, "__iter__"):
        raise ParameterError(message("groups", func, "a list of group names", groups))
    names = tuple(dict.fromkeys(str(g) for g in groups))
    if not names:
        raise ParameterError(message("groups", func, "a non-empty list of group names", groups))
    if not isinstance(buckets, TimeBuckets):
        raise ParameterError(message("buckets", func, "a TimeBuckets", type(buckets).__name__))
    if max_groups_per_item is None:
        return names, None, ""
    m = check_int(max_groups_per_item, "max_groups_per_item", func, minimum=1)
    if not isinstance(hash_key, bytes) or len(hash_key) < 16:
        raise ParameterError(message("hash_key", func, "at least 16 bytes", "a shorter key"))
    return names, m, hash_key.hex()


def empty_reduction(names: tuple[str, ...], n_events: int = 0,
                    n_out_of_range: int = 0) -> GroupedReduction:
    """No entries (an empty source, or events out of range without dropping)."""
    return GroupedReduction(groups=names, group_index=_EMPTY, slots=_EMPTY.copy(),
                            keys=_EMPTY.copy(), weights=_EMPTY.copy(), n_events=n_events,
                            n_out_of_range=n_out_of_range)


def sum_grouped(g: IntArray, s: IntArray, k: IntArray,
                 w: IntArray) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """Sum weights per (group, slot, key), sorted, zero sums left out."""
    if s.size == 0:
        return _EMPTY, _EMPTY.copy(), _EMPTY.copy(), _EMPTY.copy()
    n_slots = int(s.max()) + 1
    cs, k2, w2 = common.sum_entries(g * n_slots + s, k, w)
    return cs // n_slots, cs % n_slots, k2, w2


def reduce_grouped_sorted(gi: IntArray, codes: IntArray, periods: IntArray,
                          reducer: ItemReducer) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """``(group, slot, key, weight)`` summed, from events sorted by (group, pair code, period)
    (``codes`` dense per (group, item) pair, non-decreasing): ``reducer`` runs per group on
    chunks of whole items (:func:`dpfreq.engines._common.reduce_sorted`)."""
    if gi.size == 0:
        return _EMPTY, _EMPTY.copy(), _EMPTY.copy(), _EMPTY.copy()
    cuts = np.concatenate(([0], np.flatnonzero(gi[1:] != gi[:-1]) + 1, [gi.size]))
    parts = []
    for lo, hi in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True):
        s, k, w = common.reduce_sorted(codes[lo:hi] - codes[lo], periods[lo:hi], reducer)
        parts.append((np.full(s.size, int(gi[lo]), dtype=np.int64), s, k, w))
    g, s, k, w = (np.concatenate(v) for v in zip(*parts, strict=True))
    return sum_grouped(g, s, k, w)


def reduce_grouped(gi: IntArray, codes: IntArray, periods: IntArray, reducer: ItemReducer,
                   horizon: int) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """:func:`reduce_grouped_sorted` of unsorted in-range events (``codes``: any non-negative
    item codes; periods in ``1..horizon``)."""
    gi, codes = np.asarray(gi, dtype=np.int64), np.asarray(codes, dtype=np.int64)
    periods = np.asarray(periods, dtype=np.int64)
    if gi.size == 0:
        return reduce_grouped_sorted(gi, codes, periods, reducer)
    span, n_codes = horizon + 1, int(codes.max()) + 1
    if (int(gi.max()) + 1) * n_codes * span < 1 << 62:  # one int64 sort of the combined key
        key = np.sort((gi * n_codes + codes) * span + periods)
        pair, periods = key // span, key % span
        gi = pair // n_codes
    else:
        order = np.lexsort((periods, codes, gi))
        gi, codes, periods = gi[order], codes[order], periods[order]
        pair = gi * 0
        pair[1:] = np.cumsum((gi[1:] != gi[:-1]) | (codes[1:] != codes[:-1]))
    return reduce_grouped_sorted(gi, common.sorted_codes(pair), periods, reducer)


def group_codes(values: NDArray[Any], names: tuple[str, ...]) -> IntArray:
    """Index into ``names`` of each value (as text; integers in decimal), −1 if not listed."""
    if values.size == 0:
        return _EMPTY
    uniq, inv = np.unique(np.asarray(values).astype(str), return_inverse=True)
    pos = {g: i for i, g in enumerate(names)}
    idx = np.fromiter((pos.get(str(g), -1) for g in uniq), dtype=np.int64, count=uniq.size)
    out: IntArray = idx[inv.reshape(-1)]
    return out


def memory_grouped_reduce_items(engine: Any, source: Any, *, item: str, time: str, group: str,
                                groups: Any, max_groups_per_item: int | None, hash_key: Any,
                                buckets: TimeBuckets, reducer: ItemReducer,
                                drop_out_of_range: bool = False) -> GroupedReduction:
    """Filter, bucket, bound and reduce per (group, item) in numpy (see the module)."""
    func = "MemoryEngine.grouped_reduce_items"
    names, m, key_hex = check_grouped_reduce_args(item, time, group, groups, max_groups_per_item,
                                                  hash_key, buckets, func)
    cols = engine._table(source, [item, time, group], func, (item, group))
    items = engine._items(cols[item], item, func)
    gcode = group_codes(engine._items(cols[group], group, func), names)
    times, kind = engine._times(cols[time], time, func)
    common.check_time_kind(kind, buckets, time, func)
    listed = gcode >= 0
    items, gcode = items[listed], gcode[listed]
    periods = common.bucket_periods(times[listed], buckets)
    bad = (periods < 1) | (periods > buckets.horizon)
    n_bad = int(bad.sum())
    if n_bad and not drop_out_of_range:
        return empty_reduction(names, n_out_of_range=n_bad)
    items, gcode, periods = items[~bad], gcode[~bad], periods[~bad]
    n_in = int(items.size)
    uniq, codes = np.unique(items, return_inverse=True)
    codes = codes.reshape(-1).astype(np.int64)
    if m is not None and n_in:
        n_g = len(names)
        pairs, pair_of_row = np.unique(codes * n_g + gcode, return_inverse=True)
        keep = kept_pairs(key_hex, uniq.astype(str), names, pairs // n_g, pairs % n_g, m)
        rows = keep[pair_of_row.reshape(-1)]
        codes, gcode, periods = codes[rows], gcode[rows], periods[rows]
    g, s, k, w = reduce_grouped(gcode, codes, periods, reducer, buckets.horizon)
    return GroupedReduction(groups=names, group_index=g, slots=s, keys=k, weights=w,
                            n_events=n_in, n_out_of_range=n_bad)
