"""Reading an in-memory event log for :func:`~dpfreq.windows.release_window_counts`: item codes
and raw times from arrays, with the checks and messages of the release (engine sources are
reduced by :meth:`dpfreq.engines.base.Engine.reduce_items`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import message
from dpfreq.errors import DataError, ParameterError

__all__: list[str] = []

_FUNC = "release_window_counts"
IntArray = NDArray[np.int64]


def _integer_times(raw: Any, column: str) -> IntArray:
    arr = np.asarray(raw)
    if arr.dtype == np.bool_ or arr.dtype.kind not in "iuf":
        raise DataError(message(f"time column {column!r}", _FUNC, "integer periods 1..T (or "
                                "timestamps with start/end/period)", f"dtype {arr.dtype}"))
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr) | (arr != np.floor(arr))
        if bad.any():
            raise DataError(message(f"time column {column!r}", _FUNC, "integer periods",
                                    f"entry {arr[np.flatnonzero(bad)[0]]!r}"))
    return arr.astype(np.int64)


def _timestamp_times(raw: Any, column: str) -> IntArray:
    arr = np.asarray(raw)
    if arr.dtype.kind == "M":
        out = arr.astype("datetime64[us]")
    else:
        try:
            out = np.asarray(arr, dtype="datetime64[us]")
        except (TypeError, ValueError) as exc:
            raise DataError(message(f"time column {column!r}", _FUNC, "timestamps",
                                    f"dtype {arr.dtype}")) from exc
    if arr.dtype.kind in "iuf" or np.isnat(out).any():
        raise DataError(message(f"time column {column!r}", _FUNC, "timestamps without "
                                "missing values", "integers or NaT"))
    return out.astype(np.int64)


def _array_log(source: Any, item: Any, time: Any, axis: Any) -> tuple[IntArray, IntArray]:
    """Item codes (not necessarily dense) and raw times of a mapping or (items, times) pair."""
    if isinstance(source, Mapping):
        if item is None or time is None:
            raise ParameterError(message("item/time", _FUNC, "column names of the source",
                                         (item, time)))
        for col in (item, time):
            if col not in source:
                raise DataError(message("source", _FUNC, f"a mapping with column {col!r}",
                                        sorted(map(str, source))))
        items_raw, times_raw = source[item], source[time]
    else:
        if len(source) != 2:
            raise ParameterError(message("source", _FUNC, "a pair (items, times) of arrays",
                                         type(source).__name__))
        items_raw, times_raw = source
        item = item or "item"
        time = time or "time"
    items = np.asarray(items_raw)
    if items.ndim != 1 or np.ndim(times_raw) != 1 or len(items) != len(times_raw):
        raise DataError(message("source", _FUNC, "1-d item and time columns of equal length",
                                (np.shape(items_raw), np.shape(times_raw))))
    if items.dtype == object and any(v is None for v in items.tolist()):
        raise DataError(message(f"item column {item!r}", _FUNC, "without missing values",
                                "None"))
    lo = int(items.min()) if items.size and items.dtype.kind in "iu" else 0
    if (items.size and items.dtype.kind in "iu"
            and (int(items.max()) - lo + 1) * (axis.horizon + 2) < 1 << 62):
        # integer ids: offsets from the minimum are codes already (made dense by bucket_events
        # after its sort, which saves np.unique's own sort of the whole log)
        codes = items.astype(np.int64) - lo
    else:
        codes = None
    try:
        if codes is None:
            _, codes = np.unique(items, return_inverse=True)
    except TypeError as exc:
        raise DataError(message(f"item column {item!r}", _FUNC, "comparable values",
                                str(items.dtype))) from exc
    codes = codes.astype(np.int64).ravel()
    times = (_integer_times(times_raw, str(time)) if axis.start_us is None
             else _timestamp_times(times_raw, str(time)))
    return codes, times


def _range_error(n_bad: int, first: int | None, horizon: int) -> DataError:
    return DataError(message("time", _FUNC, f"inside the public range (periods 1..{horizon}"
                             "; pass out_of_range='drop' to drop such events)",
                             f"{n_bad} event(s) outside, first at period {first}"))
