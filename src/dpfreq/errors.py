"""Exception and warning types raised by dpfreq.

Every exception subclasses a builtin so that callers can catch either the dpfreq type or the
builtin one (``ParameterError`` is a ``ValueError``; ``EngineUnavailableError`` is an
``ImportError``).
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = [
    "DEBUG_VARIABLE",
    "BudgetExceededError",
    "DPFreqError",
    "DPFreqWarning",
    "DataError",
    "EngineUnavailableError",
    "ParameterError",
    "PrivacyWarning",
    "debug_enabled",
    "public_errors",
    "user_stacklevel",
]


class DPFreqError(Exception):
    """Base class of every error dpfreq raises on purpose.

    Catch it to handle any refusal by dpfreq (bad parameter, bad data, exhausted budget,
    missing engine) in one place; anything else escaping dpfreq is a bug.

    Examples
    --------
    >>> from dpfreq import PrivacyBudget
    >>> try:
    ...     PrivacyBudget(epsilon=-1.0)
    ... except DPFreqError as exc:
    ...     print(type(exc).__name__)
    ParameterError
    """


class ParameterError(DPFreqError, ValueError):
    """A public parameter (or a value in the data checked against a declared bound) is invalid.

    The message has one shape everywhere: ``"<param> of <function> must be <rule>; got
    <value>."``. It is a :class:`ValueError`, so code that catches ``ValueError`` catches it too.

    Examples
    --------
    >>> from dpfreq.noise import epsilon_to_fraction
    >>> try:
    ...     epsilon_to_fraction(-1.0)
    ... except ValueError as exc:
    ...     print(exc)
    epsilon of epsilon_to_fraction must be a finite number > 0; got -1.0.
    """


class DataError(ParameterError):
    """The input data violate a declared, public bound or cannot be read as the stated type.

    Its message says which column or file and which rule is broken, never a private value
    (count, identifier or time) from the data.

    Examples
    --------
    >>> from dpfreq.artifacts import open_json
    >>> try:
    ...     open_json("not json", kind="params", versions=(1,))
    ... except DataError as exc:
    ...     print(exc)
    the text is not a valid dpfreq params file: not JSON.
    """


class BudgetExceededError(DPFreqError, RuntimeError):
    """An :class:`~dpfreq.budget.Accountant` refused a spend that would exceed its total budget.

    The refusal happens before any noise is drawn, and nothing is recorded.

    Examples
    --------
    >>> from dpfreq import Accountant, PrivacyBudget
    >>> acct = Accountant(PrivacyBudget(1.0))
    >>> acct.spend(0.75)
    >>> try:
    ...     acct.spend(0.5)
    ... except BudgetExceededError:
    ...     print("refused; spent", acct.spent[0])
    refused; spent 0.75
    """


class EngineUnavailableError(DPFreqError, ImportError):
    """An optional engine's dependency is missing; the message is the pip command to run.

    It is an :class:`ImportError`, so ``except ImportError`` catches it too.

    Examples
    --------
    >>> err = EngineUnavailableError("the spark engine needs pyspark: pip install 'dpfreq[spark]'")
    >>> isinstance(err, ImportError), isinstance(err, DPFreqError)
    (True, True)
    """


class DPFreqWarning(UserWarning):
    """Warnings emitted by dpfreq (e.g. a seeded, non-production random source).

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warnings.warn("seeded random source: not for production", DPFreqWarning)
    >>> caught[0].category is DPFreqWarning, issubclass(DPFreqWarning, UserWarning)
    (True, True)
    """


class PrivacyWarning(DPFreqWarning):
    """A release is allowed, but its privacy parameters protect less than they seem to.

    Raised for a δ > 0 that is at least one over the public number of items (or rows) the
    release covers: a mechanism allowed such a δ may publish one of them outright. The command
    line prints it as one line ``dpfreq: warning: ...`` on stderr.

    Examples
    --------
    >>> issubclass(PrivacyWarning, DPFreqWarning)
    True
    """


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning raised by the caller of this function point at
    the first frame outside the dpfreq package (the user's call), however deep inside dpfreq
    it is raised.

    Examples
    --------
    >>> user_stacklevel()  # called from outside dpfreq: the caller's own frame
    1
    """
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(
            package):
        frame, level = frame.f_back, level + 1
    return level


DEBUG_VARIABLE = "DPFREQ_DEBUG"


def debug_enabled() -> bool:
    """True when ``DPFREQ_DEBUG`` is set to anything but ``""``/``"0"``.

    Error messages are a channel out of the data too: by default a data error says which rule
    was broken in which column, never counts, offending values, times or row numbers. The data
    owner may set ``DPFREQ_DEBUG=1`` to have such details appended.

    Examples
    --------
    >>> import os
    >>> os.environ.pop("DPFREQ_DEBUG", None) and None
    >>> debug_enabled()
    False
    """
    return os.environ.get(DEBUG_VARIABLE, "").strip() not in ("", "0")


_F = TypeVar("_F", bound=Callable[..., Any])
#: Internal callers a message may name as ``<param> of <caller>`` (engine methods such as
#: ``DuckDBEngine.count_of_counts``, and ``get_engine`` choosing the engine for a release).
_INTERNAL = re.compile(r"(?<=\bof )(?:[A-Z]\w*Engine\.\w+|get_engine)\b")


def public_errors(name: str) -> Callable[[_F], _F]:
    """Decorate a public function so that its errors name it, not the engine method that found
    them: ``source of DuckDBEngine.count_of_counts: ...`` reads ``source of release_profile:
    ...`` to its caller (``engine of get_engine`` likewise). The debug detail (``[debug, ...]``)
    keeps the engine method.

    Examples
    --------
    >>> @public_errors("release_demo")
    ... def release_demo():
    ...     raise DataError("source of MemoryEngine.item_counts: file 'x' does not exist.")
    >>> try:
    ...     release_demo()
    ... except DataError as exc:
    ...     print(exc)
    source of release_demo: file 'x' does not exist.
    """
    def decorate(func: _F) -> _F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return func(*args, **kwargs)
            except DPFreqError as exc:
                if len(exc.args) == 1 and isinstance(exc.args[0], str):
                    head, sep, debug = exc.args[0].partition(" [debug, ")
                    exc.args = (_INTERNAL.sub(name, head) + sep + debug,)
                raise

        return wrapper  # type: ignore[return-value]

    return decorate
