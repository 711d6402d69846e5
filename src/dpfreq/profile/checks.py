"""Validation shared by the profile reconstructions and baselines: norms, noisy counters and
the reconstruction's memory."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq import resources
from dpfreq._validate import message
from dpfreq.errors import DataError, ParameterError
from dpfreq.profile.bounds import reconstruction_memory
from dpfreq.resources import check_memory, format_bytes

__all__ = ["check_reconstruction_memory", "integer_array", "norm_name"]


def norm_name(norm: Any) -> str:
    """Normalize ``norm`` to ``"1"``, ``"2"`` or ``"inf"`` (ParameterError otherwise)."""
    rule = "one of 1, 2, 'inf' (or float('inf'))"
    if isinstance(norm, bool | np.bool_):
        raise ParameterError(message("norm", rule, norm))
    if isinstance(norm, str):
        key = norm.strip().lower()
        if key in ("1", "2"):
            return key
        if key in ("inf", "infinity", "max"):
            return "inf"
        raise ParameterError(message("norm", rule, norm))
    try:
        x = float(norm)
    except (TypeError, ValueError):
        raise ParameterError(message("norm", rule, norm)) from None
    if x == 1.0:
        return "1"
    if x == 2.0:
        return "2"
    if math.isinf(x) and x > 0:
        return "inf"
    raise ParameterError(message("norm", rule, norm))


def integer_array(value: Any, param: str) -> NDArray[np.signedinteger[Any]]:
    """A 1-d array of integers of any sign (noisy counters); signed integer arrays pass as is.

    Error messages describe the problem (dtype, shape, a non-integral or out-of-range entry)
    without printing the entries: noisy counters are released values, but the same check runs
    on arrays a caller may not mean to show.
    """
    rule = "a 1-d array of integers"
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise DataError(message(param, rule, type(value).__name__)) from exc
    if arr.ndim != 1:
        raise DataError(message(param, rule, f"array with {arr.ndim} dimension(s)"))
    if arr.dtype.kind == "i":
        return arr  # any signed width: used chunk by chunk, never copied
    if arr.dtype.kind == "u" and arr.dtype != np.uint64:
        return arr.astype(np.int64)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.dtype == np.bool_ or arr.dtype.kind not in "fu":
        raise DataError(message(param, rule, f"array of dtype {arr.dtype}"))
    if arr.dtype.kind == "u":
        if arr.max() > np.iinfo(np.int64).max:
            raise DataError(message(param, rule, "entries beyond the int64 range"))
        return arr.astype(np.int64)
    bad = ~np.isfinite(arr) | (arr != np.floor(arr)) | (np.abs(arr) >= 2.0**62)
    if bad.any():
        raise DataError(message(param, rule, "non-integral, infinite or huge entries"))
    return arr.astype(np.int64)


def check_reconstruction_memory(max_count: int, B: int, *, epsilon: float) -> None:
    """Refuse, before allocating, a reconstruction whose window does not fit in memory.

    The message names what the caller typed: ``epsilon`` when the noise window ``2B`` (which
    grows like ``1/ε``) dominates, ``max_count`` otherwise.
    """
    need = reconstruction_memory(max_count, B)
    if max_count < 2 * B:  # the window grows as ε shrinks: ε must be large enough
        free = resources.available_memory_bytes()
        if free > 0 and need > free:
            raise ParameterError(message(
                "epsilon", f"large enough for the reconstruction's noise window of 2B = "
                f"{2 * B} values to fit in memory (needs {format_bytes(need)}, "
                f"{format_bytes(free)} available)", epsilon))
    else:
        check_memory(need, param="max_count", value=max_count,
                     what="the reconstruction's arrays of n + 2B + 1 values")
