"""Helpers shared by the engines: argument checks and the numpy finishing steps.

Every engine reduces its source to small numpy arrays and then calls the same finishing
functions here, so that ordering, clamping and dtypes are identical across engines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import check_int, message
from dpfreq.engines.base import ItemCounts, OccurrenceTimes, Prevalences, TimeBuckets
from dpfreq.engines.periods import wall_clock_us
from dpfreq.errors import (
    DEBUG_VARIABLE,
    DataError,
    ParameterError,
    debug_enabled,
    innermost_caller,
    public_caller,
)

#: file names every engine reads as CSV (``.tsv``: tab-separated; ``.gz``: compressed) and as
#: Parquet (a directory or glob of Parquet files also reads as Parquet)
CSV_SUFFIXES = (".csv", ".tsv", ".csv.gz", ".tsv.gz")
PARQUET_SUFFIXES = (".parquet", ".pq")

__all__ = [
    "CSV_SUFFIXES",
    "DEBUG_VARIABLE",
    "NULL_RULE",
    "PARQUET_SUFFIXES",
    "TIME_RULE",
    "bucket_periods",
    "check_column_name",
    "check_k_max",
    "check_max_count",
    "check_not_empty",
    "check_time_kind",
    "csv_header",
    "data_error",
    "dataframe_kind",
    "debug_enabled",
    "finish_item_counts",
    "finish_occurrence_times",
    "missing_column",
    "missing_file",
    "nested_error",
    "null_error",
    "prevalences_from_counts",
    "quote_ident",
    "quote_literal",
    "sorted_codes",
]

IntArray = NDArray[np.int64]
_EMPTY = np.zeros(0, dtype=np.int64)


def check_column_name(value: Any, param: str) -> str:
    """A column name: a non-empty string."""
    if not isinstance(value, str) or not value:
        raise ParameterError(message(param, "a non-empty column name (str)", value))
    return value


def check_max_count(value: Any) -> int | None:
    """``max_count``: None or an integer >= 1."""
    if value is None:
        return None
    return check_int(value, "max_count", minimum=1)


def check_k_max(value: Any) -> int | None:
    """``k_max``: None or an integer >= 1."""
    if value is None:
        return None
    return check_int(value, "k_max", minimum=1)


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


def data_error(column: str, rule: str, got: Any, detail: Any = None) -> DataError:
    """A DataError naming the column and the rule it breaks, the same from every engine.

    ``got`` must not depend on the data's values (say "null value(s)", a type, a kind);
    ``detail`` may (a count, a value, a row) and is appended, with the engine method that found
    it (:func:`~dpfreq.errors.innermost_caller`), only in debug mode (:func:`debug_enabled`).
    """
    text = f"column {column!r} of the source must be {rule}; got {got}"
    if detail is not None and debug_enabled():
        text += f" [debug, {innermost_caller()}: {detail}]"
    return DataError(text + ".")


def null_error(column: str, detail: Any = None) -> DataError:
    """Nulls or NaN in an item or time column (one message from every engine)."""
    return data_error(column, NULL_RULE, "null or NaN value(s)", detail)


def nested_error(column: str) -> DataError:
    """A list, array, struct or map column where scalar values are needed."""
    return data_error(column, "a column of scalar values (integers, text, numbers or "
                      "dates)", "a nested (list, struct or map) column")


def missing_column(column: str, names: Any, *, header: bool) -> DataError:
    """An unknown column, the same message from every engine.

    ``header``: the names are the first line of a text (CSV) file, which may be a line of data
    when the file has no header: the message then names none of them, only how many there are
    and what the first line must be. Otherwise (Parquet, DataFrames, tables: a schema, not
    data) the names are listed.
    """
    names = [str(n) for n in names]
    if header:
        return DataError(f"column {column!r} is not in the header of the CSV source (its "
                         f"first line, {len(names)} names); the first line of a CSV file must "
                         "name its columns.")
    return DataError(f"column {column!r} is not in the source; available: "
                     f"{', '.join(names)}.")


def csv_header(fields: Any) -> list[str]:
    """The column names of a CSV source from the fields of its first line (which every engine
    reads as the header, never sniffing whether there is one): a byte order mark before the
    first name is dropped; a line without fields, an empty name or a name given twice (in any
    case: the engines resolve names regardless of case) is refused without quoting the line,
    which may be data."""
    names = ["" if f is None else str(f) for f in fields]
    if names:
        names[0] = names[0].removeprefix("\ufeff")
    problem = ("is empty" if not names else
               "has an empty name" if any(not n.strip() for n in names) else
               "repeats a name" if len({n.lower() for n in names}) < len(names) else None)
    if problem is not None:
        raise DataError("the header of the CSV source (its first line) must name each column "
                        f"once; it {problem}.")
    return names


def check_not_empty(path: Path, text: str) -> None:
    """Refuse a 0-byte local file, the same way on every engine and under every call: what file
    (``text``, as given), that it is empty, and what its first line must be. A path that is not
    a local file (a directory, glob or URI) is left to the engine's reader."""
    if not path.is_file() or path.stat().st_size > 0:
        return
    lower = text.lower()
    rule = ("a Parquet file" if lower.endswith(PARQUET_SUFFIXES)
            else "a CSV file whose first line names its columns" if lower.endswith(CSV_SUFFIXES)
            else "a CSV file whose first line names its columns, or a Parquet file")
    raise DataError(f"file {text!r} of the source must be {rule}; got an empty file (0 bytes).")


#: what :func:`~dpfreq.errors.public_caller` gives when no call of the user names the source:
#: no public call under way (``"dpfreq"``), or an engine or one of its methods called directly
_NOT_THE_USERS_CALL = frozenset({"dpfreq", "DuckDBEngine", "MemoryEngine", "SparkEngine"})


def source_owner() -> str:
    """How a refusal of the source names it: ``source of <the public call the user made>``
    (``source of release_profile``), or just ``source`` when an engine is called directly or
    no public call is under way (an engine's method is not a call the user needs named).

    Examples
    --------
    >>> source_owner()
    'source'
    """
    func = public_caller()
    return "source" if func.partition(".")[0] in _NOT_THE_USERS_CALL else f"source of {func}"


def missing_file(text: str) -> DataError:
    """The refusal of a local source file that does not exist (``text``, as given), the same on
    every engine (named by :func:`source_owner`).

    Examples
    --------
    >>> print(missing_file("events.csv"))
    source: file 'events.csv' does not exist.
    """
    return DataError(f"{source_owner()}: file {text!r} does not exist.")


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


# -- event logs ---------------------------------------------------------------------------
def check_time_kind(kind: str, buckets: TimeBuckets, column: str) -> None:
    """The time column's kind must be what the buckets expect."""
    if kind != buckets.time_kind:
        rule = ("integer periods (the buckets give a horizon only)" if buckets.start_us is None
                else f"integer epochs (time_unit={buckets.time_unit!r} given; leave it out for "
                "a timestamp column)" if buckets.time_unit
                else "timestamps or dates (the buckets give start and period; integer epochs "
                "need time_unit)")
        raise data_error(column, rule, f"time kind {kind!r}")


def bucket_periods(times: IntArray, buckets: TimeBuckets) -> IntArray:
    """Period of each time: the time itself, or ``⌊(w − start)/period⌋ + 1`` (floor) of its
    wall-clock time ``w`` (:mod:`dpfreq.engines.periods`: epoch unit and zone applied)."""
    if buckets.start_us is None:
        return np.asarray(times, dtype=np.int64)
    assert buckets.period_us is not None
    out: IntArray = wall_clock_us(times, buckets) - buckets.start_us
    return out // buckets.period_us + 1


def sorted_codes(keys: NDArray[Any]) -> IntArray:
    """Dense codes 0, 1, 2, ... of sorted keys (equal keys contiguous), in their order."""
    codes = np.zeros(len(keys), dtype=np.int64)
    if len(keys) > 1:
        np.cumsum(np.asarray(keys[1:] != keys[:-1], dtype=bool), out=codes[1:])
    return codes


def check_event_counts(item: str, time: str, n: int, ni: int, nt: int,
                        nf: int) -> None:
    """Rows ``n``, non-null items ``ni`` and times ``nt``, fractional times ``nf``: refuse
    nulls and fractional times (the checks every event reader makes first)."""
    if ni < n:
        raise null_error(item, f"{n - ni} value(s)")
    if nt < n:
        raise null_error(time, f"{n - nt} value(s)")
    if nf:
        raise data_error(time, TIME_RULE, "fractional or out-of-range value(s)",
                         f"{nf} value(s)")
