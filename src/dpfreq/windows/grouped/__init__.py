"""Window counts per group: the release (:mod:`~dpfreq.windows.grouped.release`), its plan
(:mod:`~dpfreq.windows.grouped.plan`), its result (:mod:`~dpfreq.windows.grouped.result`),
the budget across groups (:mod:`~dpfreq.windows.grouped.budget`), the recorded fields
(:mod:`~dpfreq.windows.grouped.fields`) and the shared keyed node noise
(:mod:`~dpfreq.windows.grouped.noise`)."""

from dpfreq.windows.grouped.plan import GroupedWindowCountsPlan
from dpfreq.windows.grouped.result import GroupedWindowRelease

__all__ = ["GroupedWindowCountsPlan", "GroupedWindowRelease"]
