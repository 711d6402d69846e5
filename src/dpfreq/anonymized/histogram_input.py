"""Reading an anonymized histogram into prevalence form (in-memory forms and weighted tables).

Accepted in memory:

* a mapping ``{count r: prevalence φ_r}`` (keys and values integers ``>= 1``);
* a 1-d array of per-label counts (every entry an integer ``>= 1``; labels are dropped);
* :class:`dpfreq.engines.base.Prevalences` or any object with ``counts`` and ``prevalences``
  arrays (for example an :class:`~dpfreq.anonymized.AnonymizedHistogramRelease`).

The empty histogram (empty mapping or array) is valid.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import check_count_array, message
from dpfreq.errors import DataError

__all__ = ["as_prevalences", "read_weighted", "total_of"]

_I64 = NDArray[np.int64]

_FORMS = ("a mapping {count: prevalence}, an array of per-label counts or an object with "
          "counts and prevalences arrays")


def _finish(counts: _I64, prev: _I64, param: str) -> tuple[_I64, _I64]:
    if counts.shape != prev.shape:
        raise DataError(message(f"{param}.prevalences",
                                f"an array of the same length as {param}.counts",
                                "arrays of different lengths"))
    order = np.argsort(counts, kind="stable")
    counts, prev = counts[order], prev[order]
    if counts.size > 1:
        dup = np.flatnonzero(counts[1:] == counts[:-1])
        if dup.size:
            raise DataError(message(f"{param}.counts", "distinct counts",
                                    "a count listed twice"))
    return counts.astype(np.int64, copy=False), prev.astype(np.int64, copy=False)


def as_prevalences(obj: Any, param: str = "source") -> tuple[_I64, _I64]:
    """``(counts, prevalences)`` of a histogram: counts strictly increasing, both int64 ``>= 1``.

    Parameters
    ----------
    obj : mapping, array-like or object with ``counts``/``prevalences``
        The histogram (see the module docstring).
    param : str
        Parameter name for error messages.

    Raises
    ------
    DataError
        Non-integer, NaN, zero or negative counts or prevalences, repeated counts, mismatched
        lengths, or an object of another kind (strings, ``None``).
    """
    if hasattr(obj, "counts") and hasattr(obj, "prevalences"):
        counts = check_count_array(obj.counts, f"{param}.counts", minimum=1)
        prev = check_count_array(obj.prevalences, f"{param}.prevalences", minimum=1)
        return _finish(counts, prev, param)
    if isinstance(obj, Mapping):
        keys = list(obj.keys())
        vals = list(obj.values())
        try:
            key_arr = np.array(keys) if keys else np.zeros(0, np.int64)
            val_arr = np.array(vals) if vals else np.zeros(0, np.int64)
        except (TypeError, ValueError) as exc:
            raise DataError(message(param, _FORMS, type(obj).__name__)) from exc
        counts = check_count_array(key_arr, f"{param} (counts, the keys)", minimum=1)
        prev = check_count_array(val_arr, f"{param} (prevalences, the values)", minimum=1)
        return _finish(counts, prev, param)
    if obj is None or isinstance(obj, str | bytes):
        raise DataError(message(param, _FORMS, obj))
    per_label = check_count_array(obj, f"{param} (per-label counts)", minimum=1)
    if per_label.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    counts, prev = np.unique(per_label, return_counts=True)
    return counts.astype(np.int64), prev.astype(np.int64)


def total_of(counts: _I64, prevalences: _I64) -> int:
    """``n = Σ_r r·φ_r`` as an exact Python integer."""
    if counts.size == 0:
        return 0
    return int(np.dot(counts.astype(object), prevalences.astype(object)))


def read_weighted(engine: Any, source: Any, *, item: str, count: str) -> tuple[_I64, _I64]:
    """Prevalence form of a pre-aggregated ``item,count`` table (rows of one item added up).

    Uses the engine's ``occurrence_times`` with the count column as an integer "time": one
    ``(item code, count)`` pair per row reaches this process (``O(rows)`` memory), and the
    per-item sums are exact int64 sums (the total is checked to stay below ``2**62`` first).

    Raises
    ------
    DataError
        A count column that is not integer valued, or a negative count (the message names the
        column, not the value).
    """
    try:
        occ = engine.occurrence_times(source, item=item, time=count)
    except DataError as exc:
        raise DataError(message(count, "a column of non-negative integer counts",
                                "a column of another type or with nulls")) from exc
    if occ.time_kind != "integer":
        raise DataError(message(count, "a column of non-negative integer counts",
                                "timestamps or dates"))
    weights = np.asarray(occ.times, dtype=np.int64)
    if weights.size and int(weights.min()) < 0:
        raise DataError(message(count, "a column of non-negative integer counts",
                                "a negative count"))
    if weights.size and int(weights.max()) > 2**52:
        raise DataError(message(count, "a column of counts at most 2**52",
                                "a larger count"))
    if weights.size and float(weights.astype(np.float64).sum()) > 2.0**62:
        raise DataError(message(count, "a column of counts whose total is at most 2**52",
                                "a larger total"))
    codes = np.asarray(occ.item_index, dtype=np.int64)
    per_item = np.zeros(int(occ.n_items), dtype=np.int64)
    np.add.at(per_item, codes, weights)  # exact: the total is below 2**62
    per_item = per_item[per_item > 0]
    if per_item.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if int(per_item.max()) > 2**52:
        raise DataError(message(count, "counts whose per-item totals are at most 2**52",
                                "a larger total"))
    counts, prev = np.unique(per_item.astype(np.int64), return_counts=True)
    return counts.astype(np.int64), prev.astype(np.int64)
