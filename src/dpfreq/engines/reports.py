"""Validated sums of longitudinal reports: the rules every engine applies, and the numpy one.

A reports source has one row per report with the wire columns ``device`` (an identifier, read
as text), ``order``, ``interval``, ``bit`` and an optional ``param_id`` (text). Every engine's
``report_sums(source, *, param_id, interval_counts)`` rejects the whole source with one
:class:`~dpfreq.errors.DataError` on the first broken rule, in this order:

1. the source is readable and has the columns ``device, order, interval, bit``;
2. ``order``, ``interval`` and ``bit`` hold 64-bit integers (integer or boolean columns;
   floating values without a fractional part; text matching ``[+-]?[0-9]{1,18}`` up to
   surrounding white space);
3. no null ``device``, ``order``, ``interval`` or ``bit``;
4. every ``param_id`` (when the column exists) equals the one served;
5. ``order`` in ``0..len(interval_counts)−1``; ``interval`` in ``1..interval_counts[order]``;
   ``bit`` in {0, 1};
6. no duplicate (device, order, interval); no device reporting two orders.

Messages say which rule was broken and never quote values, counts or ids from the data. Only
the per-(order, interval) sums and counts and the number of devices per order leave the engine.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.engines.base import ReportSums
from dpfreq.errors import DataError, ParameterError, public_caller

__all__ = [
    "ID_COLUMNS",
    "INT_TEXT",
    "REQUIRED_COLUMNS",
    "TWO_63",
    "VALUE_COLUMNS",
    "check_columns",
    "check_report_args",
    "finish_reports",
    "memory_report_sums",
    "raise_group_rules",
    "raise_row_rules",
    "report_error",
    "unreadable_source",
]

REQUIRED_COLUMNS = ("device", "order", "interval", "bit")
VALUE_COLUMNS = ("order", "interval", "bit")
ID_COLUMNS = ("device", "param_id")
#: an integer literal accepted in a text column (18 digits always fit in 64 bits)
INT_TEXT = r"\s*[+-]?[0-9]{1,18}\s*"
_INT_TEXT = re.compile(INT_TEXT)
TWO_63 = 9.223372036854775808e18


def report_error(rule: str) -> DataError:
    """The one message shape of a rejected reports source."""
    return DataError(f"reports rejected: {rule}")


def unreadable_source(exc: BaseException) -> DataError:
    """Rule 1 broken by an engine error while reading: only the kind of failure is shown (the
    text before the first ``:`` of the engine's message, else the exception's class), never
    the message itself, which may quote the data."""
    line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    kind = line.split(":", 1)[0] if ":" in line else type(exc).__name__
    return report_error(f"the source cannot be read ({kind}).")


def check_report_args(param_id: Any, interval_counts: Any) -> tuple[str | None,
                                                                   tuple[int, ...]]:
    """Validate the public arguments of ``report_sums``."""
    func = public_caller()
    if param_id is not None and not isinstance(param_id, str):
        raise ParameterError(f"param_id of {func} must be a string or None; got "
                             f"{type(param_id).__name__}.")
    try:
        counts = tuple(int(c) for c in interval_counts)
    except (TypeError, ValueError):
        counts = ()
    if not counts or any(c < 1 for c in counts):
        raise ParameterError(f"interval_counts of {func} must be a non-empty sequence of "
                             "integers >= 1 (intervals per order).")
    return param_id, counts


def check_columns(columns: list[str]) -> None:
    for c in REQUIRED_COLUMNS:
        if c not in columns:
            raise report_error(f"the columns must include device, order, interval and bit; "
                               f"{c!r} is missing.")


def raise_row_rules(nonint: dict[str, int], nulls: int, other_pid: int, bad: tuple[int, int, int],
                    orders: int) -> None:
    """Rules 2-5 in order, from counts of offending rows (the counts are not shown)."""
    for c in VALUE_COLUMNS:
        if nonint.get(c):
            raise report_error(f"column {c!r} must hold integers.")
    if nulls:
        raise report_error("a report has a null device, order, interval or bit.")
    if other_pid:
        raise report_error("a report has another (or a null) param_id than the parameters "
                           "served.")
    if bad[0]:
        raise report_error(f"order must be in 0..{orders - 1}.")
    if bad[1]:
        raise report_error("interval must be in 1..(intervals of its order).")
    if bad[2]:
        raise report_error("bit must be 0 or 1.")


def raise_group_rules(dups: int, multi: int) -> None:
    """Rule 6 from counts of offending groups (not shown)."""
    if dups:
        raise report_error("duplicate reports (same device, order and interval).")
    if multi:
        raise report_error("a device reports more than one order (a device is enrolled with "
                           "one order).")


def finish_reports(order: Any, interval: Any, sums: Any, counts: Any,
                   devices_per_order: Any) -> ReportSums:
    """Sort grouped sums by (order, interval) into a :class:`ReportSums`."""
    h = np.asarray(order, dtype=np.int64)
    j = np.asarray(interval, dtype=np.int64)
    perm = np.lexsort((j, h))
    return ReportSums(order=h[perm], interval=j[perm],
                      sums=np.asarray(sums, dtype=np.int64)[perm],
                      counts=np.asarray(counts, dtype=np.int64)[perm],
                      devices_per_order=np.asarray(devices_per_order, dtype=np.int64))


def _as_int64(arr: NDArray[Any], column: str) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """Integer values and the null mask of one value column (rule 2 raised here)."""
    if arr.dtype.kind in "iub":
        return arr.astype(np.int64), np.zeros(arr.size, dtype=bool)
    if arr.dtype.kind == "f":
        null = np.isnan(arr)
        ok = null | ((np.abs(arr) < TWO_63) & (arr == np.trunc(arr)))
        if not ok.all():
            raise_row_rules({column: 1}, 0, 0, (0, 0, 0), 1)
        return np.where(null, 0, arr).astype(np.int64), null
    values = arr.tolist()
    null = _nulls(arr)
    out = np.zeros(arr.size, dtype=np.int64)
    for i, v in enumerate(values):
        if null[i]:
            continue
        exact = ((isinstance(v, bool | int | np.integer) and -(2**63) <= int(v) < 2**63)
                 or (isinstance(v, float) and abs(v) < TWO_63 and v == int(v))
                 or (isinstance(v, str) and _INT_TEXT.fullmatch(v) is not None))
        if not exact:
            raise_row_rules({column: 1}, 0, 0, (0, 0, 0), 1)
        out[i] = int(v)
    return out, null


def _nulls(arr: NDArray[Any]) -> NDArray[np.bool_]:
    """None and NaN entries of an object column (elementwise in numpy, no Python loop)."""
    obj = arr.astype(object, copy=False)
    nulls: NDArray[np.bool_] = np.asarray(np.equal(obj, np.array(None)) | (obj != obj),
                                         dtype=np.bool_)
    return nulls


def _ids(arr: NDArray[Any]) -> tuple[NDArray[Any], NDArray[np.bool_]]:
    """Identifiers as text (object array of str) and their null mask."""
    if arr.dtype.kind in "US":
        return arr.astype(str).astype(object), np.zeros(arr.size, dtype=bool)
    null = _nulls(arr)
    text = arr.astype(str).astype(object)
    text[null] = ""
    return text, null


def memory_report_sums(source: Any, *, param_id: str | None,
                       interval_counts: tuple[int, ...]) -> ReportSums:
    """The rules and sums with numpy on a mapping ``{column: 1-d array}``."""
    if not isinstance(source, Mapping):
        raise ParameterError(f"source of report_sums must be a mapping of column name to 1-d "
                             f"array for the memory engine; got {type(source).__name__}.")
    check_columns([str(c) for c in source])
    cols = {c: np.asarray(source[c]).ravel() for c in (*REQUIRED_COLUMNS, "param_id")
            if c in source}
    if len({a.size for a in cols.values()}) > 1:
        raise report_error("the columns must have equal lengths.")
    ints, nulls = {}, np.zeros(cols["device"].size, dtype=bool)
    for c in VALUE_COLUMNS:
        ints[c], null = _as_int64(cols[c], c)
        nulls |= null
    dev, dnull = _ids(cols["device"])
    nulls |= dnull
    other = 0
    if "param_id" in cols:
        pid, pnull = _ids(cols["param_id"])
        other = int(np.any(pnull | (pid != param_id))) if param_id is not None else 0
    h, j, b = ints["order"], ints["interval"], ints["bit"]
    sizes = np.asarray(interval_counts, dtype=np.int64)
    bad_h = (h < 0) | (h >= sizes.size)
    jmax = sizes[np.where(bad_h, 0, h)]
    bad_j = ~bad_h & ((j < 1) | (j > jmax))
    raise_row_rules({}, int(nulls.any()), other,
                    (int(bad_h.any()), int(bad_j.any()), int(np.any((b != 0) & (b != 1)))),
                    sizes.size)
    if h.size == 0:
        z = np.zeros(0, dtype=np.int64)
        return finish_reports(z, z, z, z, np.zeros(sizes.size, dtype=np.int64))
    _, dcode = np.unique(dev, return_inverse=True)
    triples = np.stack([dcode.ravel(), h, j], axis=1)
    if np.unique(triples, axis=0).shape[0] != h.size:
        raise_group_rules(1, 0)
    pairs = np.unique(np.stack([dcode.ravel(), h], axis=1), axis=0)
    if np.unique(pairs[:, 0]).size != pairs.shape[0]:
        raise_group_rules(0, 1)
    devices = np.bincount(pairs[:, 1], minlength=sizes.size)
    uniq, inv, counts = np.unique(np.stack([h, j], axis=1), axis=0, return_inverse=True,
                                  return_counts=True)
    sums = np.bincount(inv.ravel(), weights=b, minlength=len(uniq)).astype(np.int64)
    return finish_reports(uniq[:, 0], uniq[:, 1], sums, counts, devices)
