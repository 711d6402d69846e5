"""Parameter validation at the public boundary.

One checker per parameter kind, one message shape everywhere::

    "<param> of <function> must be <rule>; got <value!r>."

Every checker returns the normalized value (a Python ``float``/``int`` or a numpy array) so that
callers write ``epsilon = check_epsilon(epsilon, "epsilon")``; the function a message names is
the public call under way (:func:`dpfreq.errors.public_caller`, set by
:func:`dpfreq.errors.public_errors`), never an argument.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.errors import DataError, ParameterError, PrivacyWarning, debug_enabled, public_caller

__all__ = [
    "DELTA_CEILING",
    "EPSILON_MAX",
    "EPSILON_MIN",
    "MAX_COUNT_MINIMUM",
    "check_choice",
    "check_confidence",
    "check_count_array",
    "check_delta",
    "check_epsilon",
    "check_int",
    "check_max_count",
    "check_open_unit",
    "check_positive_float",
    "check_unit",
    "message",
    "warn_large_delta",
]


def message(param: str, rule: str, value: Any, *, of: str | None = None) -> str:
    """Format the single error-message shape used by every dpfreq check.

    The function named is the public call under way (:func:`~dpfreq.errors.public_caller`);
    ``of`` names another owner of ``param`` where there is one (the label of a file read).
    """
    shown = value.item() if isinstance(value, np.generic) else value
    if isinstance(value, np.ndarray) and value.size > 8:
        shown = f"array of shape {value.shape} and dtype {value.dtype}"
    return f"{param} of {of or public_caller()} must be {rule}; got {shown!r}."


def _is_real_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_)


def check_positive_float(value: Any, param: str, *, allow_inf: bool = False) -> float:
    """A finite real number > 0 (``bool`` and strings are rejected)."""
    rule = "a number > 0" if allow_inf else "a finite number > 0"
    if not _is_real_number(value):
        raise ParameterError(message(param, rule, value))
    x = float(value)
    if math.isnan(x) or x <= 0 or (math.isinf(x) and not allow_inf):
        raise ParameterError(message(param, rule, value))
    return x


EPSILON_MIN = 1e-6
EPSILON_MAX = 1000.0


def check_epsilon(value: Any, param: str = "epsilon") -> float:
    """A privacy parameter ε in ``[EPSILON_MIN, EPSILON_MAX]`` = [1e-6, 1000]. Never defaulted.

    Below 1e-6 no release is useful and the noise tables grow without bound; above 1000 the
    guarantee ``e^ε`` is meaningless and overflows double precision. Systems may narrow the
    range further where their own arithmetic needs it (and say so in the message).
    """
    rule = f"a number in [{EPSILON_MIN:g}, {EPSILON_MAX:g}]"
    if not _is_real_number(value):
        raise ParameterError(message(param, rule, value))
    x = float(value)
    if math.isnan(x) or not EPSILON_MIN <= x <= EPSILON_MAX:
        raise ParameterError(message(param, rule, value))
    return x


def check_confidence(value: Any, param: str = "confidence") -> float:
    """A confidence level in (0, 1), e.g. 0.95: the probability an interval or bound holds."""
    return check_open_unit(value, param)


def check_unit(value: Any, choices: Iterable[str],
               refused: Mapping[str, str] | None = None) -> str:
    """The unit of privacy: one of ``choices`` (never defaulted where there is more than one).

    ``refused`` maps a unit of the vocabulary that the public call does not support to the one-line
    reason, which the error then gives instead of the bare list of choices.
    """
    options = tuple(choices)
    if value is None:
        raise ParameterError(message("unit", "given explicitly, one of " +
                                     ", ".join(repr(c) for c in options) +
                                     " (the unit of privacy has no default)", value))
    if refused and isinstance(value, str) and value in refused:
        raise ParameterError(message("unit", "one of " +
                                     ", ".join(repr(c) for c in options) +
                                     f" ({refused[value]})", value))
    return str(check_choice(value, "unit", options))


#: The largest δ any release, budget or ledger accepts. A δ of 10^-3 already lets a mechanism
#: publish one record in a thousand outright; no DP practice accepts more.
DELTA_CEILING = 1e-3


def check_delta(value: Any, param: str = "delta") -> float:
    """A privacy parameter δ in [0, :data:`DELTA_CEILING`] (δ = 10^-3 at most)."""
    rule = ("a number in [0, 1e-3] (a larger delta lets a release publish one record in a "
            "thousand outright)")
    if not _is_real_number(value):
        raise ParameterError(message(param, rule, value))
    x = float(value)
    if math.isnan(x) or not 0.0 <= x <= DELTA_CEILING:
        raise ParameterError(message(param, rule, value))
    return x


#: The smallest public count cap of a profile: ``max_count = 0`` puts every item in one class
#: and releases a profile of nothing. The command line's ``--max-count`` takes the same minimum.
MAX_COUNT_MINIMUM = 1


def check_max_count(value: Any) -> int:
    """The public count cap ``n`` of a profile: an integer >= :data:`MAX_COUNT_MINIMUM`."""
    return check_int(value, "max_count", minimum=MAX_COUNT_MINIMUM)


def warn_large_delta(delta: float, size: int, what: str) -> None:
    """Warn (:class:`~dpfreq.errors.PrivacyWarning`) when ``0 < δ`` and ``δ >= 1/size``.

    ``size`` is a *public* number of units the release covers (the domain size, a declared
    item count; never one counted in the data, which would make the warning itself a leak), and
    ``what`` names it. A mechanism allowed δ may publish each unit outright with probability δ,
    so at ``δ >= 1/size`` it may publish one of them in expectation: the δ is legal (it is below
    :data:`DELTA_CEILING`) but protects nobody in particular.
    """
    if delta > 0 and delta * size >= 1:
        warnings.warn(PrivacyWarning(
            f"delta of {public_caller()} is {delta:g}, at least 1/{size:,} (one over {what}): a "
            f"mechanism allowed this delta may publish one of the {size:,} outright; choose delta "
            f"well below 1/{size:,}."), stacklevel=3)


def check_open_unit(value: Any, param: str) -> float:
    """A probability strictly inside (0, 1), e.g. a failure probability η."""
    rule = "a number in (0, 1)"
    if not _is_real_number(value):
        raise ParameterError(message(param, rule, value))
    x = float(value)
    if math.isnan(x) or not 0.0 < x < 1.0:
        raise ParameterError(message(param, rule, value))
    return x


def check_int(
    value: Any,
    param: str,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
) -> int:
    """An integer (Python or numpy, or an integral float such as ``1e6`` up to 2^53, where
    every integer is exact; bools are rejected) within bounds: the same values the command
    line accepts."""
    parts = ["an integer"]
    if minimum is not None:
        parts.append(f">= {minimum}")
    if maximum is not None:
        parts.append(f"<= {maximum}")
    rule = " ".join(parts[:1]) + (" " + " and ".join(parts[1:]) if len(parts) > 1 else "")
    if isinstance(value, float | np.floating):
        as_float = float(value)
        if math.isfinite(as_float) and as_float.is_integer() and abs(as_float) <= 2**53:
            value = int(as_float)
    if not isinstance(value, numbers.Integral) or isinstance(value, bool | np.bool_):
        raise ParameterError(message(param, rule, value))
    x = int(value)
    if (minimum is not None and x < minimum) or (maximum is not None and x > maximum):
        raise ParameterError(message(param, rule, value))
    return x


def check_choice(value: Any, param: str, choices: Iterable[Any]) -> Any:
    """One of a fixed set of choices (compared with ``==``; strings are case-sensitive)."""
    options = tuple(choices)
    try:
        ok = value in options
    except TypeError:
        ok = False
    if not ok:
        listed = ", ".join(repr(c) for c in options)
        raise ParameterError(message(param, f"one of {listed}", value))
    return value


def _debug_detail(value: Any) -> str:
    """`` [debug: value]`` when ``DPFREQ_DEBUG`` is set, else ``""`` (keeps data out of errors)."""
    return f" [debug: {value!r}]" if debug_enabled() else ""


def check_count_array(
    value: Any,
    param: str,
    *,
    ndim: int = 1,
    minimum: int = 0,
    allow_empty: bool = True,
) -> NDArray[np.int64]:
    """An array of integer counts ``>= minimum`` (default: non-negative), returned as int64.

    Floats are accepted only when every entry is integral (e.g. counts read from a CSV);
    NaN, infinities, fractional values, booleans and objects are rejected. The message says
    which rule an entry breaks, not its value (the entries are data); with ``DPFREQ_DEBUG`` set,
    the first offending value is appended.
    """
    rule = f"a {ndim}-d array of integers >= {minimum}"
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise DataError(message(param, rule, type(value).__name__)) from exc
    if arr.ndim != ndim:
        raise DataError(message(param, rule, f"array with {arr.ndim} dimension(s)"))
    if arr.size == 0:
        if not allow_empty:
            raise DataError(message(param, rule + " (non-empty)", "an empty array"))
        return np.zeros(arr.shape, dtype=np.int64)
    if arr.dtype == np.bool_ or arr.dtype.kind not in "iuf":
        raise DataError(message(param, rule, f"array of dtype {arr.dtype}"))
    if arr.dtype.kind == "f":
        arr = arr.astype(np.float64, copy=False)  # float16/32: no overflow in the checks below
        bad = ~np.isfinite(arr) | (arr != np.floor(arr))
        if bad.any():
            first = float(arr.flat[int(np.flatnonzero(bad.ravel())[0])])
            raise DataError(message(param, rule, "a non-integral entry (fractional, nan "
                                    "or inf)" + _debug_detail(first)))
        if np.abs(arr).max() >= 2.0**63:
            raise DataError(message(param, rule, "entries beyond the int64 range"))
    if arr.dtype.kind == "u" and arr.size and arr.max() > np.iinfo(np.int64).max:
        raise DataError(message(param, rule, "entries beyond the int64 range"))
    out = arr.astype(np.int64, copy=False)
    below = out < minimum
    if below.any():
        first = int(out.flat[int(np.flatnonzero(below.ravel())[0])])
        raise DataError(message(param, rule,
                                f"an entry below {minimum}" + _debug_detail(first)))
    return out
