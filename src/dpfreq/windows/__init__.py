"""dpfreq.windows: private reach and k+ reach over time windows (Ghazi, Kumar, Manurangsi,
Nelson, "Private counting of distinct and k-occurring items in time windows", ITCS 2023).

:func:`release_window_counts` releases, :func:`plan_window_counts` predicts its error from public
parameters. The building blocks live in sub-packages by concept: the exact summaries of the log
(:mod:`dpfreq.windows.data`), the layouts of the trees and counters
(:mod:`dpfreq.windows.layouts`), the keyed node noise (:mod:`dpfreq.windows.noise`), the exact
laws of answers and bands (:mod:`dpfreq.windows.laws`), the structures and their chooser
(:mod:`dpfreq.windows.structures`) and grouped releases (:mod:`dpfreq.windows.grouped`)."""

from dpfreq.windows.api import release_window_counts
from dpfreq.windows.grouped.plan import GroupedWindowCountsPlan
from dpfreq.windows.grouped.result import GroupedWindowRelease
from dpfreq.windows.plan import WindowCountsPlan, plan_window_counts
from dpfreq.windows.result import WindowCountsRelease
from dpfreq.windows.state import WindowAnswer

__all__ = [
    "GroupedWindowCountsPlan",
    "GroupedWindowRelease",
    "WindowAnswer",
    "WindowCountsPlan",
    "WindowCountsRelease",
    "plan_window_counts",
    "release_window_counts",
]
