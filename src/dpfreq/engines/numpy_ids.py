"""Id columns held in numpy arrays (the memory engine's and the cross-party memory registers'),
read by the one rule of every engine.

A numpy column is typed by its dtype, read as the SQL engines read the same column
(:func:`dpfreq.engines.columns.id_key`): signed integers and unsigned ones of up to 32 bits are
int64 keys; ``uint64`` (``UBIGINT``: not every value fits 64 signed bits) and text are keyed by
their text, an integer by its decimal text. A float, boolean, datetime, timedelta or complex
dtype holds no id and is refused naming its type (``DOUBLE``, ``BOOLEAN``, ...), unless the
column is empty.

An object column has no type but its values': it holds ids when every value is a Python or
numpy integer (not a bool), a ``decimal.Decimal`` without a fraction digit (what a
``DECIMAL(p,0)`` column reads as: the integer it is) or a string. Integers are int64 keys
(their decimal text when one exceeds 64 signed bits); integers mixed with strings are all
keyed by their text, as DuckDB reads such a column. Any other value — a float (even ``1.0``,
whose text is not the integer's), a bool, a ``Decimal`` with a fraction, a date, time or any
other object — makes the column no id, refused naming the values' type.
"""

from __future__ import annotations

import decimal
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.engines.columns import id_error

__all__ = ["id_keys"]

_INTEGERS = (int, np.integer)


def _whole(x: Any) -> bool:
    return bool(x.is_finite()) and int(x.as_tuple().exponent) >= 0


def _object_keys(arr: NDArray[Any], column: str) -> NDArray[Any]:
    """Keys of an object column (module docstring): int64, or an array of ``str``."""
    types = set(map(type, arr))
    if any(issubclass(t, decimal.Decimal) for t in types):
        if not all(_whole(x) for x in arr if isinstance(x, decimal.Decimal)):
            raise id_error("OBJECT (values of type Decimal with a fraction)", column)
        arr = np.array([int(x) if isinstance(x, decimal.Decimal) else x for x in arr],
                       dtype=object)
        types = set(map(type, arr))
    bad = sorted(t.__name__ for t in types if issubclass(t, bool | np.bool_)
                 or not issubclass(t, (*_INTEGERS, str)))
    if bad:
        raise id_error(f"OBJECT (values of type {', '.join(bad)})", column)
    if types <= {str}:  # text alone: numpy's own conversion, no Python call per key
        return arr.astype(str)
    if all(issubclass(t, _INTEGERS) for t in types):
        try:
            return arr.astype(np.int64)
        except OverflowError:  # beyond 64 signed bits: the integers' decimal text
            pass
    return np.array([x if isinstance(x, str) else str(int(x)) for x in arr], dtype=str)


def id_keys(arr: NDArray[Any], column: str) -> NDArray[Any]:
    """The keys of an id column without nulls (module docstring): int64, or a numpy ``str``
    array; a column that holds no id is refused in one line naming its type.

    Examples
    --------
    >>> id_keys(np.array([3, 1], dtype=np.uint8), "item").tolist()
    [3, 1]
    >>> id_keys(np.array([2**63], dtype=np.uint64), "item").tolist()
    ['9223372036854775808']
    >>> id_keys(np.array(["a", 7], dtype=object), "item").tolist()
    ['a', '7']
    >>> id_keys(np.array([1.5]), "item")
    Traceback (most recent call last):
    ...
    dpfreq.errors.DataError: column 'item' of the source must be a column of integers or text ...
    """
    kind = arr.dtype.kind
    if kind == "i" or (kind == "u" and arr.dtype.itemsize < 8):
        return arr.astype(np.int64, copy=False)
    if kind in "uUS":
        return arr.astype(str)
    if len(arr) == 0:
        return np.zeros(0, dtype=np.int64)
    if kind == "O":
        return _object_keys(arr, column)
    raise id_error(arr.dtype, column)
