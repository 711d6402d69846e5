"""Online counters of a reach stream: layouts, node laws and the horizon-free epochs.

:class:`~dpfreq.stream.mechanisms.counter.Counter` (a bounded layout with its node law) and
:class:`~dpfreq.stream.mechanisms.epochs.EpochCounter` (no horizon) are what the stream measures
and answers with; :func:`~dpfreq.stream.mechanisms.candidates.best_counters` calibrates every
method for a horizon, unit and budget.
"""

from dpfreq.stream.mechanisms.candidates import BOUNDED_METHODS, best_counters
from dpfreq.stream.mechanisms.counter import Counter, Part, sum_halfwidth
from dpfreq.stream.mechanisms.epochs import EpochCounter
from dpfreq.stream.mechanisms.law import Budget, NodeLaw, calibrate

__all__ = [
    "BOUNDED_METHODS",
    "Budget",
    "Counter",
    "EpochCounter",
    "NodeLaw",
    "Part",
    "best_counters",
    "calibrate",
    "sum_halfwidth",
]
