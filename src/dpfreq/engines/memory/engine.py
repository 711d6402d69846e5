"""The in-memory engine (numpy): the reference oracle of the engine conformance suite.

The source is a mapping ``{column name: 1-d array-like}`` with columns of equal length. Any
other source the DuckDB engine reads (CSV/Parquet paths, SQL, relations, pandas, Polars and
Arrow tables) is read through DuckDB into such columns first, with the same typing rules (an
item column read from CSV is text), so ``engine="memory"`` works on files too. All work is
vectorized (``np.unique`` with ``return_counts``/``return_inverse``, ``np.lexsort``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

import dpfreq.engines._common as common
from dpfreq._validate import message
from dpfreq.engines import base
from dpfreq.engines.columns import column_error
from dpfreq.engines.numpy_ids import id_keys
from dpfreq.errors import DataError, ParameterError, innermost_caller, public_caller, public_errors

__all__ = ["MemoryEngine"]

_NESTED = (list, tuple, dict, set, frozenset, np.ndarray)
_INT64_LIMIT = 2.0**63


def _is_null(x: Any) -> bool:
    """None, NaN, NaT and pandas' ``NA`` (whose comparisons are neither true nor false)."""
    if x is None:
        return True
    try:
        return bool(x != x)  # NaN, NaT
    except (TypeError, ValueError):
        return type(x).__name__ == "NAType"


def _types(arr: NDArray[Any]) -> set[type]:
    """The Python types present in an object column (one C-level pass, no Python loop)."""
    return set(map(type, arr))


#: element types that can never be a null (the common text and integer id columns)
_NEVER_NULL = frozenset({str, int, np.int64, np.int32})


class MemoryEngine:
    """Exact aggregates of in-memory columns with numpy.

    Parameters
    ----------
    **options
        None are recognized; unknown options raise :class:`~dpfreq.errors.ParameterError`.
    """

    name = "memory"

    @public_errors("MemoryEngine")
    def __init__(self, **options: Any) -> None:
        if options:
            raise ParameterError(message("options", "empty (no options)",
                                         sorted(options)))

    # -- column access -------------------------------------------------------------------
    @staticmethod
    def _table(source: Any, columns: list[str],
               text_columns: tuple[str, ...] = ()) -> dict[str, NDArray[Any]]:
        """The named columns as 1-d numpy arrays of equal length."""
        if not isinstance(source, Mapping):
            if type(source).__module__.startswith("pyspark"):
                raise ParameterError(message("source", "not a Spark DataFrame (use "
                                             "engine='spark')", type(source).__name__))
            from dpfreq.engines.duckdb.engine import DuckDBEngine

            return DuckDBEngine().read_columns(source, columns, text_columns=text_columns)
        out = {}
        for column in columns:
            if column not in source:
                raise column_error(source, column)
            try:
                arr = np.asarray(source[column])
            except (TypeError, ValueError) as exc:  # ragged nested lists
                raise common.nested_error(column) from exc
            if arr.ndim > 1 or arr.dtype.kind == "V":
                raise common.nested_error(column)
            if arr.ndim != 1:
                raise common.data_error(column, "a 1-d array", f"shape {arr.shape}")
            out[column] = arr
        lengths = {len(np.asarray(v)) for v in source.values()} if len(source) > 1 else set()
        if len(lengths) > 1:
            detail = (f" [debug, {innermost_caller()}: lengths {sorted(lengths)}]"
                      if common.debug_enabled() else "")
            raise DataError(f"the source's columns must have equal lengths; got columns of "
                            f"different lengths{detail}.")
        return out

    @staticmethod
    def _check_no_nulls(arr: NDArray[Any], column: str) -> None:
        """Refuse nulls, NaN and NaT (and nested values in object columns)."""
        if arr.dtype.kind == "f":
            bad = np.isnan(arr)
        elif arr.dtype.kind in "mM":
            bad = np.isnat(arr)
        elif arr.dtype.kind == "O":
            types = _types(arr)
            if any(issubclass(t, _NESTED) for t in types):
                raise common.nested_error(column)
            if types <= _NEVER_NULL:  # the usual text/integer columns: no per-row test
                return
            bad = np.fromiter((_is_null(x) for x in arr), dtype=bool, count=len(arr))
        else:
            return
        if bad.any():
            raise common.null_error(column, f"{int(bad.sum())} value(s), first at row "
                                    f"{int(np.argmax(bad))}")

    def _items(self, arr: NDArray[Any], item: str) -> NDArray[Any]:
        """Keys of an id column (an item, a group): int64 or a numpy str array, by the one
        rule of every engine (:mod:`dpfreq.engines.numpy_ids`: a type that holds no id is
        refused first, as the SQL engines refuse it by its type); nulls refused."""
        if arr.dtype.kind == "O":
            self._check_no_nulls(arr, item)
        return id_keys(arr, item)

    def _times(self, arr: NDArray[Any], time: str) -> tuple[NDArray[np.int64], str]:
        self._check_no_nulls(arr, time)
        kind = arr.dtype.kind
        if kind in "iu":
            return arr.astype(np.int64, copy=False), "integer"
        if kind == "M":
            return arr.astype("datetime64[us]").astype(np.int64), "timestamp_us"
        if kind == "f":
            ok = np.isfinite(arr) & (np.abs(arr) < _INT64_LIMIT)
            ok[ok] = arr[ok] == np.floor(arr[ok])
            if not ok.all():
                raise common.data_error(time, common.TIME_RULE,
                                        "fractional or out-of-range value(s)",
                                        f"{int((~ok).sum())} value(s)")
            return arr.astype(np.int64), "integer"
        if len(arr) == 0:
            return np.zeros(0, dtype=np.int64), "integer"
        if kind == "O":
            try:
                conv = np.asarray(arr.tolist())
            except (TypeError, ValueError):
                conv = arr
            if conv.dtype.kind in "iuM":
                return self._times(conv, time)
        raise common.data_error(time, common.TIME_RULE, f"values of dtype {arr.dtype}")

    # -- protocol --------------------------------------------------------------------------
    @public_errors("MemoryEngine.item_counts")
    def item_counts(self, source: Any, *, item: str) -> base.ItemCounts:
        """Exact number of rows per distinct value of column ``item``."""
        common.check_column_name(item, "item")
        keys = self._items(self._table(source, [item], (item,))[item], item)
        uniq, counts = np.unique(keys, return_counts=True)
        return common.finish_item_counts(uniq, counts)

    @public_errors("MemoryEngine.count_of_counts")
    def count_of_counts(self, source: Any, *, item: str,
                        max_count: int | None = None) -> base.Prevalences:
        """Exact prevalences of the per-item counts (clamped at ``max_count``)."""
        max_count = common.check_max_count(max_count)
        return common.prevalences_from_counts(self.item_counts(source, item=item).counts, max_count)

    @public_errors("MemoryEngine.grouped_count_of_counts")
    def grouped_count_of_counts(self, source: Any, request: base.CountRequest
                                ) -> base.GroupedPrevalences:
        """Per-group prevalences of the bounded data
        (:mod:`dpfreq.engines.memory.grouping`)."""
        from dpfreq.engines.memory.grouping import memory_grouped_count_of_counts

        return memory_grouped_count_of_counts(self, source, request)

    @public_errors("MemoryEngine.summaries")
    def summaries(self, source: Any, request: base.SummaryRequest) -> base.Summaries:
        """The summaries of ``request`` (per group, after the bounding) in numpy
        (:mod:`dpfreq.engines.memory.summaries`)."""
        from dpfreq.engines.grouping import check_summary_request
        from dpfreq.engines.memory.grouping import memory_summaries

        return memory_summaries(self, source, check_summary_request(request))

    @public_errors("MemoryEngine.occurrence_times")
    def occurrence_times(self, source: Any, *, item: str, time: str,
                         k_max: int | None = None) -> base.OccurrenceTimes:
        """Per-item sorted event times (only each item's first ``k_max`` if set)."""
        common.check_column_name(item, "item")
        common.check_column_name(time, "time")
        k_max = common.check_k_max(k_max)
        cols = self._table(source, list(dict.fromkeys([item, time])), (item,))
        keys = self._items(cols[item], item)
        times, kind = self._times(cols[time], time)
        uniq, inv = np.unique(keys, return_inverse=True)  # codes in sorted-key order
        return common.finish_occurrence_times(inv.reshape(-1), times, n_items=len(uniq),
                                              n_events=len(keys), time_kind=kind, k_max=k_max)

    @public_errors("MemoryEngine.report_sums")
    def report_sums(self, source: Any, *, param_id: str | None,
                    interval_counts: tuple[int, ...]) -> base.ReportSums:
        """Validate longitudinal reports with numpy and sum them per (order, interval).

        See :meth:`dpfreq.engines.base.Engine.report_sums`; the rules are in
        :mod:`dpfreq.engines.reports`.
        """
        from dpfreq.engines.reports import check_report_args, memory_report_sums

        param_id, counts = check_report_args(param_id, interval_counts)
        if not isinstance(source, Mapping):  # a file, SQL or DataFrame: read by DuckDB
            source = self._raw_columns(source, ("device", "param_id"))
        return memory_report_sums(source, param_id=param_id, interval_counts=counts)

    @staticmethod
    def _raw_columns(source: Any,
                     text_columns: tuple[str, ...]) -> dict[str, NDArray[Any]]:
        """Every column of a non-mapping source as it is, nulls as ``None`` (object arrays),
        for checks that name their own rules."""
        func = public_caller()
        import duckdb

        from dpfreq.engines.duckdb.engine import DuckDBEngine

        rel = DuckDBEngine().relation(source, text_columns=text_columns)
        try:
            fetched = rel.fetchnumpy()
        except duckdb.Error as exc:
            raise DataError(f"{func}: cannot read the source ({type(exc).__name__}).") from exc
        out: dict[str, NDArray[Any]] = {}
        for name, arr in fetched.items():
            if isinstance(arr, np.ma.MaskedArray):
                mask = np.ma.getmaskarray(arr)
                arr = np.ma.getdata(arr).astype(object)
                arr[mask] = None
            out[str(name)] = np.asarray(arr)
        return out
