"""The in-memory engine (numpy): the reference oracle of the conformance suite (DESIGN.md §6).

The source is a mapping ``{column name: 1-d array-like}`` with columns of equal length. All
work is vectorized (``np.unique`` with ``return_counts``/``return_inverse``, ``np.lexsort``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import message
from dpfreq.engines._common import (
    check_column_name,
    check_k_max,
    check_max_count,
    data_error,
    finish_item_counts,
    finish_occurrence_times,
    prevalences_from_counts,
    reduce_occurrences,
)
from dpfreq.engines.base import (
    ItemCounts,
    ItemReducer,
    ItemReduction,
    OccurrenceTimes,
    Prevalences,
    ReportSums,
    TimeBuckets,
)
from dpfreq.errors import DataError, ParameterError

__all__ = ["MemoryEngine"]


def _is_null(x: Any) -> bool:
    if x is None:
        return True
    try:
        return bool(x != x)  # NaN, NaT
    except (TypeError, ValueError):
        return False


class MemoryEngine:
    """Exact aggregates of in-memory columns with numpy.

    Parameters
    ----------
    **options
        None are recognized; unknown options raise :class:`~dpfreq.errors.ParameterError`.
    """

    name = "memory"

    def __init__(self, **options: Any) -> None:
        if options:
            raise ParameterError(message("options", "MemoryEngine", "empty (no options)",
                                         sorted(options)))

    # -- column access -------------------------------------------------------------------
    @staticmethod
    def _column(source: Any, column: str, func: str) -> NDArray[Any]:
        if not isinstance(source, Mapping):
            raise ParameterError(message("source", func, "a mapping of column name to 1-d array",
                                         type(source).__name__))
        if column not in source:
            raise DataError(f"column {column!r} of {func} is not in the source; available: "
                            f"{', '.join(map(str, source))}.")
        try:
            arr = np.asarray(source[column])
        except (TypeError, ValueError) as exc:
            raise data_error(func, column, "a 1-d array", type(source[column]).__name__) from exc
        if arr.ndim != 1:
            raise data_error(func, column, "a 1-d array", f"shape {arr.shape}")
        lengths = {len(np.asarray(v)) for v in source.values()} if len(source) > 1 else set()
        if len(lengths) > 1:
            raise DataError(f"source of {func} must have columns of equal length; "
                            f"got lengths {sorted(lengths)}.")
        return arr

    @staticmethod
    def _check_no_nulls(arr: NDArray[Any], column: str, func: str) -> None:
        if arr.dtype.kind == "f":
            bad = np.isnan(arr)
        elif arr.dtype.kind in "mM":
            bad = np.isnat(arr)
        elif arr.dtype.kind == "O":
            bad = np.fromiter((_is_null(x) for x in arr), dtype=bool, count=len(arr))
        else:
            return
        if bad.any():
            raise data_error(func, column, "free of nulls",
                             f"{int(bad.sum())} null value(s), first at row {int(np.argmax(bad))}")

    def _items(self, source: Any, item: str, func: str) -> NDArray[Any]:
        """Item keys: int64 for integer columns, else a numpy str array."""
        arr = self._column(source, item, func)
        self._check_no_nulls(arr, item, func)
        if arr.dtype.kind in "iu":
            return arr.astype(np.int64, copy=False)
        if arr.dtype.kind == "b":  # the text SQL engines give booleans
            return np.where(arr, "true", "false")
        if len(arr) == 0 and arr.dtype.kind in "fO":
            return np.zeros(0, dtype=np.int64)
        if arr.dtype.kind == "O" and all(isinstance(x, int | np.integer) and
                                         not isinstance(x, bool) for x in arr):
            return arr.astype(np.int64)
        return arr.astype(str)

    def _times(self, source: Any, time: str, func: str) -> tuple[NDArray[np.int64], str]:
        arr = self._column(source, time, func)
        self._check_no_nulls(arr, time, func)
        kind = arr.dtype.kind
        if kind in "iu":
            return arr.astype(np.int64, copy=False), "integer"
        if kind == "M":
            return arr.astype("datetime64[us]").astype(np.int64), "timestamp_us"
        if kind == "f" and np.all(arr == np.floor(arr)):
            return arr.astype(np.int64), "integer"
        if len(arr) == 0:
            return np.zeros(0, dtype=np.int64), "integer"
        if kind == "O":
            try:
                conv = np.asarray(arr.tolist())
            except (TypeError, ValueError):
                conv = arr
            if conv.dtype.kind in "iuM":
                return self._times({time: conv}, time, func)
        raise data_error(func, time, "integer or timestamp/date valued",
                         f"values of dtype {arr.dtype}")

    # -- protocol --------------------------------------------------------------------------
    def item_counts(self, source: Any, *, item: str) -> ItemCounts:
        """Exact number of rows per distinct value of column ``item``."""
        func = "MemoryEngine.item_counts"
        check_column_name(item, "item", func)
        keys = self._items(source, item, func)
        uniq, counts = np.unique(keys, return_counts=True)
        return finish_item_counts(uniq, counts)

    def count_of_counts(self, source: Any, *, item: str,
                        max_count: int | None = None) -> Prevalences:
        """Exact prevalences of the per-item counts (clamped at ``max_count``)."""
        func = "MemoryEngine.count_of_counts"
        max_count = check_max_count(max_count, func)
        return prevalences_from_counts(self.item_counts(source, item=item).counts, max_count)

    def occurrence_times(self, source: Any, *, item: str, time: str,
                         k_max: int | None = None) -> OccurrenceTimes:
        """Per-item sorted event times (only each item's first ``k_max`` if set)."""
        func = "MemoryEngine.occurrence_times"
        check_column_name(item, "item", func)
        check_column_name(time, "time", func)
        k_max = check_k_max(k_max, func)
        keys = self._items(source, item, func)
        times, kind = self._times(source, time, func)
        uniq, inv = np.unique(keys, return_inverse=True)  # codes in sorted-key order
        return finish_occurrence_times(inv.reshape(-1), times, n_items=len(uniq),
                                       n_events=len(keys), time_kind=kind, k_max=k_max)

    def reduce_items(self, source: Any, *, item: str, time: str, buckets: TimeBuckets,
                     reducer: ItemReducer, drop_out_of_range: bool = False) -> ItemReduction:
        """Per-item reduction of the bucketed events (generic: :meth:`occurrence_times`, then
        numpy chunks of whole items; see :func:`dpfreq.engines._common.reduce_events`)."""
        return reduce_occurrences(self, source, item=item, time=time, buckets=buckets,
                                  reducer=reducer, drop_out_of_range=drop_out_of_range,
                                  func="MemoryEngine.reduce_items")

    def report_sums(self, source: Any, *, param_id: str | None,
                    interval_counts: tuple[int, ...]) -> ReportSums:
        """Validate longitudinal reports with numpy and sum them per (order, interval).

        See :meth:`dpfreq.engines.base.Engine.report_sums`; the rules are in
        :mod:`dpfreq.engines.reports`.
        """
        from dpfreq.engines.reports import check_report_args, memory_report_sums

        param_id, counts = check_report_args(param_id, interval_counts,
                                             f"{type(self).__name__}.report_sums")
        return memory_report_sums(source, param_id=param_id, interval_counts=counts)
