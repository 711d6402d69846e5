"""In-memory event logs for :func:`~dpfreq.windows.release_window_counts`: an ``(items, times)``
pair or a mapping of columns becomes a mapping the memory engine reduces, with its time column
typed for the public time axis (integer periods, or timestamps in UTC microseconds).

Messages never quote values of the data (item ids, times, counts): they say what is wrong.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import message
from dpfreq.engines import Summarizing, get_engine, require_capability
from dpfreq.errors import DataError, ParameterError
from dpfreq.windows.params import TimeAxis

__all__ = ["engine_source", "range_error", "summarizing_engine"]

_FAR = float(1 << 62)  # integer times beyond this are certainly outside any horizon


def range_error(axis: TimeAxis, time: Any = None) -> DataError:
    """Events fall outside the public range: the rule, the public range (periods, and their
    wall-clock span in the axis' zone) and a SQL query that finds such rows in the source —
    never a count or a time of the data."""
    col = f'"{time}"' if isinstance(time, str) else "<time column>"
    if axis.start_us is None:
        where = f"{col} < 1 OR {col} > {axis.horizon}"
        rule = f"inside the public range: integer periods 1..{axis.horizon}"
    else:
        assert axis.period_us is not None
        first = np.datetime64(axis.start_us, "us")
        stop = np.datetime64(axis.start_us + axis.horizon * axis.period_us, "us")
        rule = (f"inside the public range: wall-clock time in {axis.timezone} from "
                f"{_clock(first)} (included) to {_clock(stop)} (excluded), periods "
                f"1..{axis.horizon}")
        low, high = axis.utc_bounds()
        if axis.time_unit is not None:  # integer epochs: the bounds in that unit
            per = {"s": 1_000_000, "ms": 1_000, "us": 1, "ns": 1}[axis.time_unit]
            lo, hi = (low // per, -(-high // per)) if axis.time_unit != "ns" else (
                low * 1000, high * 1000)
            where = f"{col} < {lo} OR {col} >= {hi}"
        else:
            where = (f"{col} < '{_clock(np.datetime64(low, 'us'))}' OR {col} >= "
                     f"'{_clock(np.datetime64(high, 'us'))}'")
    utc = "SET TimeZone = 'UTC'; " if axis.start_us is not None and axis.time_unit is None else ""
    hint = (" Pass out_of_range='drop' to drop such events (a public rule on rows: the "
            "release then covers the range only), or find them in the source, e.g. in "
            f"DuckDB: {utc}SELECT * FROM <source> WHERE {where}.")
    return DataError(message("time", rule, "events outside the range") + hint)


def _clock(us: np.datetime64) -> str:
    """``YYYY-MM-DD HH:MM:SS`` of a timestamp (whole seconds)."""
    return str(us.astype("datetime64[s]")).replace("T", " ")


def _integer_times(raw: Any, column: str, epochs: bool = False) -> NDArray[np.int64]:
    arr = np.asarray(raw)
    rule = ("integer epochs (time_unit given; leave it out for timestamps)" if epochs
            else "integer periods 1..T (or timestamps with start/end/period)")
    if arr.dtype == np.bool_ or arr.dtype.kind not in "iuf":
        raise DataError(message(f"time column {column!r}", rule, f"dtype {arr.dtype}"))
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr) & (arr == np.floor(arr))):
        raise DataError(message(f"time column {column!r}", rule,
                                "missing, infinite or fractional values"))
    if arr.dtype.kind == "i":
        return arr.astype(np.int64)
    # floats and unsigned beyond ±2^62 are outside every horizon and every epoch range: map
    # them to ±2^62 (also outside) instead of letting a cast wrap them into the range
    f = arr.astype(np.float64)
    far = np.abs(f) > _FAR
    out = np.where(far, 0, arr).astype(np.int64)
    out[far] = np.where(f[far] > 0, 1 << 62, -(1 << 62))
    return out


def _timestamp_times(raw: Any, column: str) -> NDArray[Any]:
    arr = np.asarray(raw)
    if arr.dtype.kind == "M":
        out = arr.astype("datetime64[us]")
    elif arr.dtype.kind in "OUS":
        out = _parse_timestamps(arr, column)
    else:
        raise DataError(message(f"time column {column!r}", "timestamps or dates",
                                f"dtype {arr.dtype}"))
    if np.isnat(out).any():
        raise DataError(message(f"time column {column!r}", "timestamps without "
                                "missing values", "missing values"))
    return out


def _parse_timestamps(arr: NDArray[Any], column: str) -> NDArray[Any]:
    """Text or objects to UTC ``datetime64[us]`` (UTC offsets applied, no numpy warnings)."""
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is installed with every extra
        pd = None
    try:
        if pd is not None:
            idx = pd.to_datetime(arr.ravel(), utc=True, format="ISO8601")
            out: NDArray[Any] = idx.tz_localize(None).to_numpy(dtype="datetime64[us]")
            return out
        with warnings.catch_warnings():  # pragma: no cover
            warnings.simplefilter("ignore")
            return np.asarray(arr, dtype="datetime64[us]")
    except (TypeError, ValueError, OverflowError) as exc:
        raise DataError(message(f"time column {column!r}", "timestamps or dates",
                                "values that are not")) from exc


def _check_items(raw: Any, column: str) -> NDArray[Any]:
    """The item column; a float column (NaN or not) is left to the engine, which refuses it
    by its type (:mod:`dpfreq.engines.numpy_ids`)."""
    items = np.asarray(raw)
    missing = items.dtype.kind == "O" and any(v is None or (isinstance(v, float) and v != v)
                                              for v in items.tolist())
    if missing:
        raise DataError(message(f"item column {column!r}", "free of missing values "
                                "(None, NaN)", "missing values"))
    return items


def engine_source(source: Any, item: Any, time: Any, axis: TimeAxis) -> tuple[Any, str, str]:
    """``(source, item, time)`` for :func:`dpfreq.engines.get_engine`: in-memory logs become a
    mapping of typed columns (the memory engine's input); other sources pass through."""
    if isinstance(source, tuple | list):
        if len(source) != 2:
            raise ParameterError(message("source", "a pair (items, times) of arrays",
                                         type(source).__name__))
        item, time = item or "item", time or "time"
        if item == time:
            raise ParameterError(message("item/time", "two different names",
                                         (item, time)))
        cols: dict[str, Any] = {item: source[0], time: source[1]}
    elif isinstance(source, Mapping):
        if item is None or time is None:
            raise ParameterError(message("item/time", "column names of the source",
                                         (item, time)))
        cols = dict(source)
    else:
        if item is None or time is None:
            raise ParameterError(message("item/time", "column names for a file, SQL or "
                                         "table source", (item, time)))
        return source, item, time
    for col in (item, time):
        if col not in cols:
            raise DataError(message("source", f"a mapping with column {col!r}",
                                    sorted(map(str, cols))))
    if np.ndim(cols[item]) != 1 or np.ndim(cols[time]) != 1 \
            or len(cols[item]) != len(cols[time]):
        raise DataError(message("source", "1-d item and time columns of equal length",
                                "columns of other shapes or lengths"))
    items = _check_items(cols[item], str(item))
    times = (_integer_times(cols[time], str(time), bool(axis.time_unit))
             if axis.start_us is None or axis.time_unit
             else _timestamp_times(cols[time], str(time)))
    return {str(item): items, str(time): times}, str(item), str(time)


def summarizing_engine(engine: Any, source: Any) -> Summarizing:
    """The engine for ``source`` (:func:`dpfreq.engines.get_engine`), which must compute window
    summaries (:class:`~dpfreq.engines.Summarizing`); otherwise a one-line error naming it."""
    return require_capability(get_engine(engine, source), Summarizing,
                              "window summaries (memory, duckdb, spark)")
