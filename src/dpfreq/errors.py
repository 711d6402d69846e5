"""Exception and warning types raised by dpfreq.

Every exception subclasses a builtin so that callers can catch either the dpfreq type or the
builtin one (``ParameterError`` is a ``ValueError``; ``EngineUnavailableError`` is an
``ImportError``).
"""

from __future__ import annotations

__all__ = [
    "BudgetExceededError",
    "DPFreqError",
    "DPFreqWarning",
    "DataError",
    "EngineUnavailableError",
    "ParameterError",
]


class DPFreqError(Exception):
    """Base class of every error dpfreq raises on purpose."""


class ParameterError(DPFreqError, ValueError):
    """A public parameter (or a value in the data checked against a declared bound) is invalid."""


class DataError(ParameterError):
    """The input data violate a declared, public bound or cannot be read as the stated type."""


class BudgetExceededError(DPFreqError, RuntimeError):
    """An :class:`~dpfreq.budget.Accountant` refused a spend that would exceed its total budget.

    The refusal happens before any noise is drawn.
    """


class EngineUnavailableError(DPFreqError, ImportError):
    """An optional engine's dependency is missing; the message is the pip command to run."""


class DPFreqWarning(UserWarning):
    """Warnings emitted by dpfreq (e.g. a seeded, non-production random source)."""
