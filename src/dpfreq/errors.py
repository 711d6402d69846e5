"""Exception and warning types raised by dpfreq.

Every exception subclasses a builtin so that callers can catch either the dpfreq type or the
builtin one (``ParameterError`` is a ``ValueError``; ``EngineUnavailableError`` is an
``ImportError``).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import sys
from collections.abc import Callable, Iterator
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
    "innermost_caller",
    "public_call",
    "public_caller",
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
    ...     print("refused; spent", acct.spent.epsilon)
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

#: The public calls under way, outermost first (``("release_profile",
#: "DuckDBEngine.count_of_counts")``). A ContextVar, not a global: every thread starts with its
#: own empty value and every asyncio task runs in a copy of its creator's context, so the
#: collection service's concurrent requests and Spark driver threads never see another call's
#: name; :func:`public_errors` resets it on the way out, also when the call raises.
_CALLS: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("dpfreq_public_calls",
                                                                           default=())
#: The name a message gives when no public call is under way (an internal helper called
#: directly): ``epsilon of dpfreq must be ...`` still reads as one line.
_NO_CALLER = "dpfreq"


def public_caller() -> str:
    """The public function the user called, for ``"<param> of <function> ..."`` messages.

    The outermost call decorated with :func:`public_errors` wins: ``release_profile`` calling
    ``DuckDBEngine.count_of_counts`` names ``release_profile``. Outside any public call it is
    ``"dpfreq"``.

    Examples
    --------
    >>> @public_errors("release_demo")
    ... def release_demo():
    ...     return public_caller()
    >>> release_demo(), public_caller()
    ('release_demo', 'dpfreq')
    """
    calls = _CALLS.get()
    return calls[0] if calls else _NO_CALLER


def innermost_caller() -> str:
    """The innermost public call under way (the engine method that read the data, say), for
    debug details only; ``"dpfreq"`` outside any public call.

    Examples
    --------
    >>> innermost_caller()
    'dpfreq'
    """
    calls = _CALLS.get()
    return calls[-1] if calls else _NO_CALLER


@contextlib.contextmanager
def public_call(name: str) -> Iterator[None]:
    """Run a block as the public call ``name`` (what :func:`public_errors` does for a function;
    the command line runs each command as ``dpfreq <command>``).

    Examples
    --------
    >>> with public_call("dpfreq profile"):
    ...     public_caller()
    'dpfreq profile'
    >>> public_caller()
    'dpfreq'
    """
    token = _CALLS.set((*_CALLS.get(), name))
    try:
        yield
    finally:
        _CALLS.reset(token)


def public_errors(name: str) -> Callable[[_F], _F]:
    """Decorate a public function so that the messages of the checks it runs name it.

    The validators (:mod:`dpfreq._validate`) and the helpers below them take no caller name:
    they read :func:`public_caller`, which this decorator sets for the duration of the call.
    The outermost public call wins (``release_profile`` calling an engine method names
    ``release_profile``); :func:`innermost_caller` keeps the innermost for debug details.

    Examples
    --------
    >>> from dpfreq._validate import check_epsilon
    >>> @public_errors("release_demo")
    ... def release_demo(epsilon):
    ...     return check_epsilon(epsilon)
    >>> try:
    ...     release_demo(-1.0)
    ... except ParameterError as exc:
    ...     print(exc)
    epsilon of release_demo must be a number in [1e-06, 1000]; got -1.0.
    """
    def decorate(func: _F) -> _F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            token = _CALLS.set((*_CALLS.get(), name))  # as public_call, without its overhead
            try:
                return func(*args, **kwargs)
            finally:
                _CALLS.reset(token)

        return wrapper  # type: ignore[return-value]

    return decorate
