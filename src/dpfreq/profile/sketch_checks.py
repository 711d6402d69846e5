"""Checks and exact arithmetic of :class:`dpfreq.profile.ProfileSketch` updates: the explicit
domain keys, the increments of an update, their exact per-counter sums and the int64 guard, and
the refusal to add two sketches."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any, NoReturn

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import check_count_array, message
from dpfreq.errors import DataError, ParameterError

__all__ = ["check_keys", "fits_int64", "group_sums", "increments", "merge_refused"]

INT64_MAX = int(np.iinfo(np.int64).max)
INCREMENT_LIMIT = 1 << 52


def merge_refused(op: str, other: object, cls: type) -> NoReturn:
    """Raise the refusal of ``op`` (``+``, ``+=``, ``merge``) of a sketch of class ``cls``."""
    if not isinstance(other, cls):
        raise ParameterError(
            f"{op} of ProfileSketch and {type(other).__name__} is not defined: add occurrence "
            "counts with update(items, counts) (the noise stays the one drawn at creation)."
        )
    raise ParameterError(
        f"{op} of ProfileSketch is refused: two independently noised sketches cannot be added. "
        "The sum would carry two discrete Laplace draws per item (noise law DLap * DLap, twice "
        "the variance), while the reconstruction's kernel assumes exactly one DLap(e^-γ) per "
        "counter, so the profile and its error statement would be wrong. Use one "
        "sketch and update() it with all the data instead."
    )


def check_keys(keys: Any) -> NDArray[Any]:
    """The explicit domain keys as an int64 or str array (distinct, non-empty, 1-d)."""
    rule = "a non-empty 1-d sequence of distinct integers or strings"
    if not isinstance(keys, np.ndarray) and isinstance(keys, Sequence):
        ints = all(isinstance(k, numbers.Integral) and not isinstance(k, bool | np.bool_)
                   for k in keys)
        if not ints and not all(isinstance(k, str) for k in keys):
            kinds = sorted({type(k).__name__ for k in keys})
            raise ParameterError(message("keys", rule, f"keys of types {kinds}"))
    try:
        arr = np.asarray(keys)
    except (TypeError, ValueError) as exc:
        raise ParameterError(message("keys", rule, type(keys).__name__)) from exc
    if arr.ndim != 1 or arr.size == 0:
        raise ParameterError(message("keys", rule, f"array of shape {arr.shape}"))
    if arr.dtype.kind in "iu":
        if arr.dtype == np.uint64 and arr.max() > np.iinfo(np.int64).max:
            raise ParameterError(message("keys", rule, "integers beyond the int64 range"))
        arr = arr.astype(np.int64)
    elif arr.dtype.kind == "U":
        pass
    elif arr.dtype.kind == "O" and all(isinstance(k, str) for k in arr):
        arr = arr.astype(str)
    else:
        raise ParameterError(message("keys", rule, f"keys of dtype {arr.dtype}"))
    if np.unique(arr).size != arr.size:
        raise ParameterError(message("keys", rule, "duplicate keys"))
    return arr


def increments(counts: Any, size: int) -> NDArray[np.int64]:
    """Non-negative integer increments below 2^52, broadcast to ``size`` (no value printed)."""
    rule = "non-negative integers below 2^52"
    try:
        if np.ndim(counts) == 0:
            c = check_count_array(np.atleast_1d(np.asarray(counts)), "counts")
            inc = np.broadcast_to(c, (size,))
        else:
            inc = check_count_array(counts, "counts")
    except DataError:
        raise DataError(message("counts", rule, "a negative, non-integral or "
                                "non-numeric entry")) from None
    if inc.size != size:
        raise DataError(message("counts", f"a scalar or {size} counts (one per item)",
                                f"{inc.size} counts"))
    if inc.size and int(inc.max()) >= INCREMENT_LIMIT:
        raise DataError(message("counts", rule, "an entry of 2^52 or more"))
    return inc


def group_sums(idx: NDArray[np.int64], inc: NDArray[np.int64]
                ) -> tuple[NDArray[np.int64], NDArray[Any]]:
    """Distinct indexes and the exact sum of their increments (int64 when that is exact,
    Python integers otherwise)."""
    uniq, inverse = np.unique(idx, return_inverse=True)
    if float(inc.sum(dtype=np.float64)) < 2.0**62:  # every partial sum is exact in int64
        sums = np.zeros(uniq.size, dtype=np.int64)
        np.add.at(sums, inverse, inc)
        return uniq, sums
    exact = np.zeros(uniq.size, dtype=object)
    np.add.at(exact, inverse, inc.astype(object))
    return uniq, exact


def fits_int64(cells: NDArray[np.int64], sums: NDArray[Any]) -> bool:
    """Whether ``cells + sums`` stays within int64 for every entry (checked exactly)."""
    if sums.dtype == object:
        return all(int(c) + int(s) <= INT64_MAX for c, s in zip(cells.tolist(), sums.tolist(),
                                                                 strict=True))
    return bool(np.all(cells <= INT64_MAX - sums))
