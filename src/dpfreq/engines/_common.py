"""Helpers shared by the engines: argument checks and the numpy finishing steps.

Every engine reduces its source to small numpy arrays and then calls the same finishing
functions here, so that ordering, clamping and dtypes are identical across engines.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import check_int, message
from dpfreq.engines.base import (
    ItemCounts,
    ItemReducer,
    ItemReduction,
    OccurrenceTimes,
    Prevalences,
    TimeBuckets,
)
from dpfreq.engines.periods import wall_clock_us
from dpfreq.errors import DEBUG_VARIABLE, DataError, ParameterError, debug_enabled

__all__ = [
    "DEBUG_VARIABLE",
    "NULL_RULE",
    "TIME_RULE",
    "bucket_events",
    "bucket_periods",
    "check_column_name",
    "check_k_max",
    "check_max_count",
    "check_time_kind",
    "data_error",
    "dataframe_kind",
    "debug_enabled",
    "finish_item_counts",
    "finish_occurrence_times",
    "missing_column",
    "nested_error",
    "null_error",
    "prevalences_from_counts",
    "quote_ident",
    "quote_literal",
    "reduce_events",
    "reduce_occurrences",
    "reduce_sorted",
    "sorted_codes",
    "sum_entries",
]

IntArray = NDArray[np.int64]
_EMPTY = np.zeros(0, dtype=np.int64)


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


def quote_ident(name: str) -> str:
    """An SQL identifier quoted (double quotes, inner ones doubled)."""
    return '"' + name.replace('"', '""') + '"'


def quote_literal(text: str) -> str:
    """An SQL string literal (single quotes, inner ones doubled)."""
    return "'" + text.replace("'", "''") + "'"


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


def _sort_pairs(idx: NDArray[np.int64], t: NDArray[np.int64]
                ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(idx, t) pairs sorted by (idx, t): one int64 sort of the packed key ``idx·span + t``
    when it fits (several times faster than a lexsort), else a lexsort. Same output."""
    lo, hi = int(t.min()), int(t.max())
    span = hi - lo + 1
    if int(idx.min()) >= 0 and (int(idx.max()) + 1) * span < 1 << 62:
        key = np.sort(idx * span + (t - lo))
        return key // span, key % span + lo
    order = np.lexsort((t, idx))
    return idx[order], t[order]


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
        idx, t = _sort_pairs(idx, t)
    if k_max is not None and len(idx):
        starts = np.flatnonzero(np.r_[True, idx[1:] != idx[:-1]])
        sizes = np.diff(np.r_[starts, len(idx)])
        rank = np.arange(len(idx)) - np.repeat(starts, sizes)
        keep = rank < k_max
        idx, t = idx[keep], t[keep]
    return OccurrenceTimes(item_index=idx, times=t, n_items=int(n_items),
                           n_events=int(n_events), time_kind=time_kind)


#: Environment variable that turns on debug details in data errors (``DPFREQ_DEBUG=1``).
#: The rule every engine states for nulls and NaN in item and time columns.
NULL_RULE = "free of nulls and NaN"
#: The rule for time columns.
TIME_RULE = "integer or timestamp/date valued"


def data_error(func: str, column: str, rule: str, got: Any, detail: Any = None) -> DataError:
    """A DataError naming the column and the rule it breaks, the same from every engine.

    ``got`` must not depend on the data's values (say "null value(s)", a type, a kind);
    ``detail`` may (a count, a value, a row) and is appended, with ``func`` (the engine method
    that found it), only in debug mode (:func:`debug_enabled`).
    """
    text = f"column {column!r} of the source must be {rule}; got {got}"
    if detail is not None and debug_enabled():
        text += f" [debug, {func}: {detail}]"
    return DataError(text + ".")


def null_error(func: str, column: str, detail: Any = None) -> DataError:
    """Nulls or NaN in an item or time column (one message from every engine)."""
    return data_error(func, column, NULL_RULE, "null or NaN value(s)", detail)


def nested_error(func: str, column: str) -> DataError:
    """A list, array, struct or map column where scalar values are needed."""
    return data_error(func, column, "a column of scalar values (integers, text, numbers or "
                      "dates)", "a nested (list, struct or map) column")


def missing_column(func: str, column: str, available: Any) -> DataError:
    """An unknown column (the column names are the schema, not private data)."""
    del func  # the same message from every engine
    return DataError(f"column {column!r} is not in the source; available: "
                     f"{', '.join(map(str, available))}.")


def dataframe_kind(source: Any) -> str | None:
    """``"pandas"``, ``"polars"`` or ``"arrow"`` for a DataFrame or Arrow table, else None.

    Recognized by class, without importing pandas, Polars or pyarrow.
    """
    cls = type(source)
    module, name = cls.__module__, cls.__name__
    if module.startswith("pandas") and name == "DataFrame":
        return "pandas"
    if module.startswith("polars") and name == "DataFrame":
        return "polars"
    if module.startswith("pyarrow") and name in ("Table", "RecordBatch"):
        return "arrow"
    return None


# -- per-item reductions (Engine.reduce_items) ------------------------------------------------
def check_time_kind(kind: str, buckets: TimeBuckets, column: str, func: str) -> None:
    """The time column's kind must be what the buckets expect."""
    if kind != buckets.time_kind:
        rule = ("integer periods (the buckets give a horizon only)" if buckets.start_us is None
                else f"integer epochs (time_unit={buckets.time_unit!r} given; leave it out for "
                "a timestamp column)" if buckets.time_unit
                else "timestamps or dates (the buckets give start and period; integer epochs "
                "need time_unit)")
        raise data_error(func, column, rule, f"time kind {kind!r}")


def bucket_periods(times: IntArray, buckets: TimeBuckets) -> IntArray:
    """Period of each time: the time itself, or ``⌊(w − start)/period⌋ + 1`` (floor) of its
    wall-clock time ``w`` (:mod:`dpfreq.engines.periods`: epoch unit and zone applied)."""
    if buckets.start_us is None:
        return np.asarray(times, dtype=np.int64)
    assert buckets.period_us is not None
    out: IntArray = wall_clock_us(times, buckets) - buckets.start_us
    return out // buckets.period_us + 1


def bucket_events(codes: IntArray, times: IntArray, buckets: TimeBuckets, *,
                  drop: bool) -> tuple[IntArray, IntArray, int, int | None]:
    """Bucket, range-check, sort by (item, period) and make item codes dense.

    Returns ``(codes, periods, n_out_of_range, first_out_of_range)``; ``first_out_of_range``
    is the period of the first event outside ``1..horizon`` in the order given. Events outside
    are dropped with ``drop``; without it, and if there are any, nothing else is done (empty
    arrays). Codes must satisfy ``(max code + 1)·(horizon + 1) < 2**63``.
    """
    periods = bucket_periods(times, buckets)
    codes = np.asarray(codes, dtype=np.int64)
    bad = (periods < 1) | (periods > buckets.horizon)
    n_bad = int(bad.sum())
    first = int(periods[int(np.flatnonzero(bad)[0])]) if n_bad else None
    if n_bad and not drop:
        return _EMPTY, _EMPTY.copy(), n_bad, first
    if n_bad:
        codes, periods = codes[~bad], periods[~bad]
    if codes.size == 0:
        return codes, periods, n_bad, first
    # one int64 sort of the combined key (item, period) is several times faster than lexsort
    span = buckets.horizon + 1
    key = np.sort(codes * span + periods)
    return sorted_codes(key // span), key % span, n_bad, first


def sorted_codes(keys: NDArray[Any]) -> IntArray:
    """Dense codes 0, 1, 2, ... of sorted keys (equal keys contiguous), in their order."""
    codes = np.zeros(len(keys), dtype=np.int64)
    if len(keys) > 1:
        np.cumsum(np.asarray(keys[1:] != keys[:-1], dtype=bool), out=codes[1:])
    return codes


def sum_entries(slots: IntArray, keys: IntArray,
                weights: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """Sum ``weights`` per (slot, key); sorted by (slot, key), zero sums left out."""
    s = np.asarray(slots, dtype=np.int64)
    k = np.asarray(keys, dtype=np.int64)
    w = np.asarray(weights, dtype=np.int64)
    if s.size == 0:
        return _EMPTY, _EMPTY.copy(), _EMPTY.copy()
    kmax = int(k.max()) + 1
    if int(k.min()) >= 0 and int(s.min()) >= 0 and (int(s.max()) + 1) * kmax < 1 << 62:
        order = np.argsort(s * kmax + k, kind="stable")
    else:
        order = np.lexsort((k, s))
    s, k, w = s[order], k[order], w[order]
    new = np.ones(s.size, dtype=np.bool_)
    new[1:] = (s[1:] != s[:-1]) | (k[1:] != k[:-1])
    starts = np.flatnonzero(new)
    sums = np.add.reduceat(w, starts)
    nz = sums != 0
    return s[starts][nz], k[starts][nz], sums[nz].astype(np.int64)


def reduce_sorted(codes: IntArray, periods: IntArray, reducer: ItemReducer,
                  chunk: int = 1 << 20) -> tuple[IntArray, IntArray, IntArray]:
    """Run ``reducer`` on chunks of about ``chunk`` events cut at item boundaries and sum.

    ``codes`` are sorted (equal codes contiguous), ``periods`` sorted within each code. The
    chunking changes speed and memory only: a reducer's outputs are sums over items.
    """
    n = int(codes.size)
    parts = []
    lo = 0
    while lo < n:
        hi = min(n, lo + chunk)
        if hi < n:  # move the cut back to the start of the item straddling it
            hi = int(np.searchsorted(codes, codes[hi], side="left"))
            if hi <= lo:
                hi = int(np.searchsorted(codes, codes[lo], side="right"))
        c = codes[lo:hi]
        parts.append(reducer(c - c[0], periods[lo:hi]))
        lo = hi
    if not parts:
        return _EMPTY, _EMPTY.copy(), _EMPTY.copy()
    if len(parts) == 1:
        return sum_entries(*parts[0])
    return sum_entries(*(np.concatenate(v) for v in zip(*parts, strict=True)))


def reduce_events(codes: IntArray, times: IntArray, *, buckets: TimeBuckets,
                  reducer: ItemReducer, drop_out_of_range: bool) -> ItemReduction:
    """:meth:`Engine.reduce_items` on an event log held in numpy arrays (any item codes)."""
    dense, periods, n_bad, first = bucket_events(codes, times, buckets, drop=drop_out_of_range)
    if n_bad and not drop_out_of_range:
        return ItemReduction(slots=_EMPTY, keys=_EMPTY.copy(), weights=_EMPTY.copy(),
                             n_events=0, n_out_of_range=n_bad, first_out_of_range=first)
    s, k, w = reduce_sorted(dense, periods, reducer)
    return ItemReduction(slots=s, keys=k, weights=w, n_events=int(dense.size),
                         n_out_of_range=n_bad, first_out_of_range=first)


def reduce_occurrences(engine: Any, source: Any, *, item: str, time: str,
                       buckets: TimeBuckets, reducer: ItemReducer, drop_out_of_range: bool,
                       func: str) -> ItemReduction:
    """The generic :meth:`Engine.reduce_items`: ``occurrence_times`` to numpy, then
    :func:`reduce_events` (every event passes through the calling process)."""
    check_column_name(item, "item", func)
    check_column_name(time, "time", func)
    occ = engine.occurrence_times(source, item=item, time=time, k_max=None)
    check_time_kind(occ.time_kind, buckets, time, func)
    return reduce_events(occ.item_index, occ.times, buckets=buckets, reducer=reducer,
                         drop_out_of_range=drop_out_of_range)


def check_event_counts(func: str, item: str, time: str, n: int, ni: int, nt: int,
                        nf: int) -> None:
    """Rows ``n``, non-null items ``ni`` and times ``nt``, fractional times ``nf``: refuse
    nulls and fractional times (the checks every event reader makes first)."""
    if ni < n:
        raise null_error(func, item, f"{n - ni} value(s)")
    if nt < n:
        raise null_error(func, time, f"{n - nt} value(s)")
    if nf:
        raise data_error(func, time, TIME_RULE, "fractional or out-of-range value(s)",
                         f"{nf} value(s)")
