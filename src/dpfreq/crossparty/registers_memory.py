"""Register frequencies of a log held in memory (numpy and :mod:`hashlib`): the reference.

Impressions per user with :func:`numpy.unique`, one HMAC per distinct user
(:meth:`VidHash.locate`), then the capped sum per register with :func:`numpy.bincount`. The
DuckDB and Spark versions must return exactly the same values (tested on the same logs).
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.crossparty.period_unit import check_time_kind
from dpfreq.crossparty.vid import VidHash
from dpfreq.engines import column_error, id_error, id_keys
from dpfreq.errors import DataError, public_caller

__all__ = ["instant_us", "memory_registers"]

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
#: period bounds lie in -2^62..2^62: a later unsigned time is outside every period
_TIME_LIMIT = 2**62


def instant_us(value: dt.datetime | dt.date) -> int:
    """Microseconds since the Unix epoch of a datetime (naive ones read as UTC) or a date."""
    if not isinstance(value, dt.datetime):
        value = dt.datetime(value.year, value.month, value.day)
    aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
    delta = aware - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _columns(source: Mapping[str, Any], names: list[str]) -> dict[str, NDArray[Any]]:
    func = public_caller()
    out = {}
    for name in names:
        if name not in source:
            raise column_error(source, name)
        arr = np.asarray(source[name])
        if arr.ndim != 1:
            raise DataError(f"column {name!r} of the source of {func} must be one-dimensional.")
        out[name] = _whole_decimals(arr)
    lengths = {arr.size for arr in out.values()}
    if len(lengths) > 1:
        raise DataError(f"the columns of the source of {func} must have equal lengths.")
    return out


def _whole_decimals(arr: NDArray[Any]) -> NDArray[Any]:
    """An object column with each :class:`decimal.Decimal` without a fraction digit (``5``,
    not ``5.0``) as the Python integer it is — DuckDB and Spark read such a column as
    ``DECIMAL(p,0)``, an integer column; a Decimal with a fraction digit stays (refused, as a
    ``DECIMAL(p,s)`` column is)."""
    if arr.dtype.kind != "O" or not any(isinstance(x, decimal.Decimal) for x in arr):
        return arr
    return np.array([int(x) if isinstance(x, decimal.Decimal) and x.is_finite()
                     and x.as_tuple().exponent >= 0 else x  # type: ignore[operator]
                     for x in arr], dtype=object)


def _is_missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def _users(arr: NDArray[Any], name: str) -> NDArray[Any]:
    """The user column as int64 (uint64 when unsigned), or as an object array of str (integers
    mixed with text become their decimal text) or of Python integers beyond int64; nulls and
    floats refused."""
    func = public_caller()
    if arr.dtype.kind == "i":
        return arr.astype(np.int64)
    if arr.dtype.kind == "u":  # kept unsigned: an id above 2^63 is never wrapped negative
        return arr.astype(np.uint64)
    if arr.dtype.kind == "U":
        return arr.astype(object)
    if arr.dtype.kind == "O":
        if any(_is_missing(x) for x in arr):
            raise DataError(f"user column {name!r} of {func} holds missing values (null or "
                            "NaN).")
        kinds = {type(x) for x in arr}
        if kinds <= {str}:
            return arr
        if all(isinstance(x, int | np.integer) and not isinstance(x, bool | np.bool_)
               for x in arr):
            try:
                return arr.astype(np.int64)
            except OverflowError:  # ids beyond int64: kept as exact Python integers
                return np.array([int(x) for x in arr], dtype=object)
        if all(isinstance(x, str) or (isinstance(x, int | np.integer)
                                      and not isinstance(x, bool | np.bool_)) for x in arr):
            # integers and text mixed: all as text (an integer is hashed as its decimal
            # text anyway), as DuckDB reads such a column
            return np.array([x if isinstance(x, str) else str(int(x)) for x in arr],
                            dtype=object)
    raise id_error(arr.dtype, name)


def _times(arr: NDArray[Any], name: str) -> tuple[NDArray[np.int64], bool]:
    """``(times, integer)``: integer times as they are; datetime64 as µs since the epoch;
    anything else refused. ``integer``: whether the column holds integers."""
    func = public_caller()
    if arr.dtype.kind == "u":  # clipped to the period's range: never wrapped negative
        return np.minimum(arr, _TIME_LIMIT).astype(np.int64), True
    if arr.dtype.kind == "i":
        return arr.astype(np.int64), True
    if arr.dtype.kind == "M":
        if np.isnat(arr).any():
            raise DataError(f"time column {name!r} of {func} holds missing values.")
        return arr.astype("datetime64[us]").astype(np.int64), False
    if arr.dtype.kind == "O":
        if any(_is_missing(x) or x is getattr(x, "NaT", object()) for x in arr):
            raise DataError(f"time column {name!r} of {func} holds missing values.")
        if all(isinstance(x, dt.date) for x in arr):  # datetimes (pandas Timestamps), dates
            return np.array([instant_us(x) for x in arr], dtype=np.int64), False
        if all(isinstance(x, int | np.integer) and not isinstance(x, bool | np.bool_)
               for x in arr):  # integers beyond int64: clipped to the period's range
            return np.array([min(max(int(x), -_TIME_LIMIT - 1), _TIME_LIMIT) for x in arr],
                            dtype=np.int64), True
    raise DataError(f"time column {name!r} of {func} must hold integers or timestamps; got "
                    f"dtype {arr.dtype}.")


def _campaigns(arr: NDArray[Any], name: str) -> NDArray[Any]:
    """Campaign names as text: the keys of the one rule of every engine's id columns
    (:func:`dpfreq.engines.id_keys`), an integer as its decimal text."""
    return id_keys(arr, name).astype(str).astype(object)


def memory_registers(source: Mapping[str, Any], spec: Any, vh: VidHash,
                     max_frequency: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``(registers, values)`` of the non-empty registers of a mapping of columns (``spec``: a
    :class:`~dpfreq.crossparty.registers.LogSpec`)."""
    names = [spec.user] + [c for c in (spec.time, spec.campaign) if c is not None]
    cols = _columns(source, list(dict.fromkeys(names)))
    if not cols[spec.user].size:  # no rows: nothing to count, whatever the columns' types
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    users = _users(cols[spec.user], spec.user)
    keep = np.ones(users.size, dtype=bool)
    if spec.time is not None:
        t, integer = _times(cols[spec.time], spec.time)
        check_time_kind(spec, integer)
        keep &= (t >= spec.period[0]) & (t < spec.period[1])
    if spec.campaign is not None:
        names_kept = np.array(spec.campaigns, dtype=object)
        keep &= np.isin(_campaigns(cols[spec.campaign], spec.campaign), names_kept)
    distinct, counts = np.unique(users[keep], return_counts=True)
    sampled, regs = vh.locate(distinct.tolist())
    capped = np.minimum(counts[sampled], max_frequency).astype(np.float64)
    sums = np.bincount(regs[sampled], weights=capped, minlength=vh.registers)
    nonzero = np.flatnonzero(sums)
    return nonzero.astype(np.int64), np.minimum(sums[nonzero], max_frequency).astype(np.int64)
