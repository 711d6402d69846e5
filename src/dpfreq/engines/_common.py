"""Helpers shared by the engines: argument checks and the numpy finishing steps.

Every engine reduces its source to small numpy arrays and then calls the same finishing
functions here, so that ordering, clamping and dtypes are identical across engines.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import check_int, message
from dpfreq.engines.base import ItemCounts, OccurrenceTimes, Prevalences, ReportSums
from dpfreq.errors import DataError, ParameterError

__all__ = [
    "check_column_name",
    "check_k_max",
    "check_max_count",
    "empty_item_counts",
    "finish_item_counts",
    "finish_occurrence_times",
    "finish_report_sums",
    "prevalences_from_counts",
]


def check_column_name(value: Any, param: str, func: str) -> str:
    """A column name: a non-empty string."""
    if not isinstance(value, str) or not value:
        raise ParameterError(message(param, func, "a non-empty column name (str)", value))
    return value


def check_max_count(value: Any, func: str) -> int | None:
    """``max_count``: None or an integer >= 1."""
    if value is None:
        return None
    return check_int(value, "max_count", func, minimum=1)


def check_k_max(value: Any, func: str) -> int | None:
    """``k_max``: None or an integer >= 1."""
    if value is None:
        return None
    return check_int(value, "k_max", func, minimum=1)


def empty_item_counts() -> ItemCounts:
    return ItemCounts(keys=np.zeros(0, dtype=np.int64), counts=np.zeros(0, dtype=np.int64))


def finish_item_counts(keys: NDArray[Any], counts: NDArray[Any]) -> ItemCounts:
    """Sort (unsorted, distinct) keys and their counts by key; int64 or object-of-str keys."""
    counts = np.asarray(counts, dtype=np.int64)
    if keys.dtype.kind in "iu":
        keys = keys.astype(np.int64, copy=False)
        order = np.argsort(keys, kind="stable")
        return ItemCounts(keys=keys[order], counts=counts[order])
    str_keys = keys.astype(str) if len(keys) else np.zeros(0, dtype="<U1")
    order = np.argsort(str_keys, kind="stable")
    out = np.empty(len(keys), dtype=object)
    out[:] = [str(k) for k in str_keys[order]]
    return ItemCounts(keys=out, counts=counts[order])


def prevalences_from_counts(counts: NDArray[np.int64], max_count: int | None) -> Prevalences:
    """Count-of-counts (sparse) of per-item counts, clamped at ``max_count``."""
    c = np.asarray(counts, dtype=np.int64)
    if max_count is not None:
        c = np.minimum(c, max_count)
    values, prev = np.unique(c, return_counts=True)
    return Prevalences(counts=values.astype(np.int64), prevalences=prev.astype(np.int64))


def finish_occurrence_times(
    item_index: NDArray[Any], times: NDArray[Any], *, n_items: int, n_events: int,
    time_kind: str, k_max: int | None, presorted: bool = False,
) -> OccurrenceTimes:
    """Sort (item_index, time) pairs and keep each item's first ``k_max``.

    ``item_index`` are dense codes in sorted-key order. Pairs with equal (item, time) are equal
    as output, so the order among ties in time does not affect the result.
    """
    idx = np.asarray(item_index, dtype=np.int64)
    t = np.asarray(times, dtype=np.int64)
    if not presorted and len(idx):
        order = np.lexsort((t, idx))
        idx, t = idx[order], t[order]
    if k_max is not None and len(idx):
        starts = np.flatnonzero(np.r_[True, idx[1:] != idx[:-1]])
        sizes = np.diff(np.r_[starts, len(idx)])
        rank = np.arange(len(idx)) - np.repeat(starts, sizes)
        keep = rank < k_max
        idx, t = idx[keep], t[keep]
    return OccurrenceTimes(item_index=idx, times=t, n_items=int(n_items),
                           n_events=int(n_events), time_kind=time_kind)


def finish_report_sums(order: NDArray[Any], interval: NDArray[Any], sums: NDArray[Any],
                       counts: NDArray[Any]) -> ReportSums:
    """Sort grouped report sums by (order, interval)."""
    h = np.asarray(order, dtype=np.int64)
    j = np.asarray(interval, dtype=np.int64)
    perm = np.lexsort((j, h))
    return ReportSums(order=h[perm], interval=j[perm],
                      sums=np.asarray(sums, dtype=np.int64)[perm],
                      counts=np.asarray(counts, dtype=np.int64)[perm])


def data_error(func: str, column: str, rule: str, got: Any) -> DataError:
    """A DataError naming the column."""
    return DataError(f"column {column!r} of {func} must be {rule}; got {got}.")
