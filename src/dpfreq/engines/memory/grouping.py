"""The memory engine's grouped and summary aggregates (numpy, vectorised over all groups).

Both read the columns once, keep the rows of the listed groups, bound each item to ``m`` of its
groups by the keyed rank of :mod:`dpfreq.engines.grouping` and aggregate per group in one
pass of array operations (one ``np.unique`` of the (item, group) pairs, no loop over groups).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import message
from dpfreq.engines import _common as common
from dpfreq.engines.grouping import check_count_request, check_grouping, kept_pairs
from dpfreq.engines.memory.summaries import summarize_events
from dpfreq.engines.requests import (
    CountRequest,
    GroupedPrevalences,
    Summaries,
    SummaryRequest,
)
from dpfreq.errors import DataError

__all__ = ["memory_grouped_count_of_counts", "memory_summaries"]

IntArray = NDArray[np.int64]
_EMPTY = np.zeros(0, dtype=np.int64)


def _group_codes(values: NDArray[Any], names: tuple[str, ...] | None
                 ) -> tuple[IntArray, tuple[str, ...]]:
    """Index of each value (as text; integers in decimal) into ``names`` (−1 if not listed);
    with ``names=None`` into the sorted groups of the data, which are returned."""
    if values.size == 0:
        return _EMPTY, names or ()
    uniq, inv = np.unique(np.asarray(values).astype(str), return_inverse=True)
    if names is None:
        return inv.reshape(-1).astype(np.int64), tuple(str(g) for g in uniq)
    pos = {g: i for i, g in enumerate(names)}
    idx = np.fromiter((pos.get(str(g), -1) for g in uniq), dtype=np.int64, count=uniq.size)
    out: IntArray = idx[inv.reshape(-1)]
    return out, names


def _bound(items: NDArray[Any], gcode: IntArray, names: tuple[str, ...], m: int | None,
           key_hex: str) -> tuple[IntArray, IntArray, NDArray[np.bool_], int, int]:
    """``(pair of each row, item code of each row, kept flag of each row, pairs, kept pairs)``;
    ``pair = item code · G + group``."""
    uniq, icode = np.unique(items, return_inverse=True)
    icode = icode.reshape(-1).astype(np.int64)
    n_g = max(1, len(names))
    pairs, pair_of_row = np.unique(icode * n_g + gcode, return_inverse=True)
    pair_of_row = pair_of_row.reshape(-1)
    if m is None:  # nothing bounded: the pairs are not counted
        return pairs[pair_of_row], icode, np.ones(items.size, dtype=np.bool_), 0, 0
    keep = kept_pairs(key_hex, uniq.astype(str), names, pairs // n_g, pairs % n_g, m)
    return (pairs[pair_of_row], icode, keep[pair_of_row], int(pairs.size),
            int(keep.sum()))


def memory_summaries(engine: Any, source: Any, request: SummaryRequest) -> Summaries:
    """:meth:`Summarizing.summaries` in numpy (see the module)."""
    req = request
    b = req.buckets
    grouping = req.grouping
    columns = [req.item, req.time] + ([grouping.column] if grouping is not None else [])
    text = (req.item,) + ((grouping.column,) if grouping is not None else ())
    cols = engine._table(source, columns, text)
    items = engine._items(cols[req.item], req.item)
    times, kind = engine._times(cols[req.time], req.time)
    common.check_time_kind(kind, b, req.time)
    names: tuple[str, ...] | None = None
    m, key_hex = None, ""
    if grouping is not None:
        names, m, key_hex = check_grouping(grouping, req.item, (req.time,))
        gvals = engine._items(cols[grouping.column], grouping.column)
        gcode, names = _group_codes(gvals, names)
        listed = gcode >= 0
        items, gcode, times = items[listed], gcode[listed], times[listed]
    else:
        gcode = np.zeros(items.size, dtype=np.int64)
    periods = common.bucket_periods(times, b)
    bad = (periods < 1) | (periods > b.horizon)
    n_bad = int(bad.sum())
    if n_bad and not req.drop_out_of_range:
        return Summaries(names, _EMPTY, _EMPTY.copy(), _EMPTY.copy(), _EMPTY.copy(), 0, n_bad)
    items, gcode, periods = items[~bad], gcode[~bad], periods[~bad]
    n_in = int(items.size)
    if n_in == 0:
        return Summaries(names, _EMPTY, _EMPTY.copy(), _EMPTY.copy(), _EMPTY.copy(), 0, n_bad)
    pair, _, keep, n_pairs, n_kept = _bound(items, gcode, names or ("",), m, key_hex)
    counted = (_EMPTY, _EMPTY) if req.checked else (gcode, periods)
    g, s, k, w = summarize_events(pair[keep], periods[keep], max(1, len(names or ("",))),
                                  req.specs, b.horizon, counted)
    if req.checked:  # the caller checked these rows and counted their events before
        n_in, n_bad = 0, 0
    return Summaries(names, g, s, k, w, n_in, n_bad, n_pairs, n_kept)


def memory_grouped_count_of_counts(engine: Any, source: Any,
                                   request: CountRequest) -> GroupedPrevalences:
    """Per-group count-of-counts after the bounding (numpy)."""
    req, n = check_count_request(request)
    grouping = req.grouping
    listed, m, key_hex = check_grouping(grouping, req.item)
    group = grouping.column
    cols = engine._table(source, [req.item, group], (req.item, group))
    items = engine._items(cols[req.item], req.item)
    gvals = engine._items(cols[group], group)
    if gvals.size == 0 and items.size:
        raise DataError(message("group", "a column with values", "an empty column"))
    gcode, names = _group_codes(gvals, listed)
    keep_rows = gcode >= 0
    items, gcode = items[keep_rows], gcode[keep_rows]
    if items.size == 0:
        return GroupedPrevalences(names if listed is not None else (), _EMPTY, _EMPTY.copy(),
                                  _EMPTY.copy())
    pair, _, keep, n_pairs, n_kept = _bound(items, gcode, names, m, key_hex)
    up, pc = np.unique(pair[keep], return_counts=True)
    n_g = max(1, len(names))
    pg = up % n_g
    if req.per_item != "rows":  # each kept pair counts its item's kept (or distinct) groups
        _, owner, per = np.unique(up // n_g, return_inverse=True, return_counts=True)
        pc = per[owner.reshape(-1)]
    c = pc.astype(np.int64) if n is None else np.minimum(pc, n).astype(np.int64)
    cells, prev = np.unique(np.stack([pg, c], axis=1), axis=0, return_counts=True)
    gi, counts = cells[:, 0].astype(np.int64), cells[:, 1].astype(np.int64)
    if listed is not None:
        return GroupedPrevalences(names, gi, counts, prev.astype(np.int64), n_pairs, n_kept)
    present = np.unique(gi)  # only the data's groups that keep an item, re-indexed
    return GroupedPrevalences(tuple(names[i] for i in present), np.searchsorted(present, gi),
                              counts, prev.astype(np.int64), n_pairs, n_kept)
