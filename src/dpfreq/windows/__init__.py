"""dpfreq.windows: private reach and k+ reach over time windows (Ghazi, Kumar, Manurangsi,
Nelson, "Private counting of distinct and k-occurring items in time windows", ITCS 2023).

:func:`release_window_counts` releases, :func:`plan_window_counts` predicts its error from public
parameters. The building blocks (the trees and counters of :mod:`dpfreq.windows.noise.trees`, the keyed
noise sources of :mod:`dpfreq.windows.noise.keyed`, the period parser of
:mod:`dpfreq.windows.params`) stay in their modules."""

from dpfreq.windows.state import WindowAnswer
from dpfreq.windows.api import release_window_counts
from dpfreq.windows.grouped.release import GroupedWindowCountsPlan
from dpfreq.windows.grouped.result import GroupedWindowRelease
from dpfreq.windows.plan import WindowCountsPlan, plan_window_counts
from dpfreq.windows.result import WindowCountsRelease

__all__ = [
    "GroupedWindowCountsPlan",
    "GroupedWindowRelease",
    "WindowAnswer",
    "WindowCountsPlan",
    "WindowCountsRelease",
    "plan_window_counts",
    "release_window_counts",
]
