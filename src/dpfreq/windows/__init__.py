"""dpfreq.windows: private reach and k+ reach over time windows (Ghazi, Kumar, Manurangsi,
Nelson, "Private counting of distinct and k-occurring items in time windows", ITCS 2023)."""

from dpfreq.windows.answers import WindowAnswer
from dpfreq.windows.counts import parse_period, release_window_counts
from dpfreq.windows.grouped import GroupedWindowCountsPlan
from dpfreq.windows.grouped_result import GroupedWindowRelease
from dpfreq.windows.lazy_noise import KeyedDiscreteGaussian, KeyedDiscreteLaplace
from dpfreq.windows.planning import WindowCountsPlan, plan_window_counts
from dpfreq.windows.result import WindowCountsRelease
from dpfreq.windows.tree import (
    DominanceCounter,
    OnlineCounter,
    Tree1D,
    Tree2DNoise,
    TreeBary,
    consistent_tree,
)

__all__ = [
    "DominanceCounter",
    "GroupedWindowCountsPlan",
    "GroupedWindowRelease",
    "KeyedDiscreteGaussian",
    "KeyedDiscreteLaplace",
    "OnlineCounter",
    "Tree1D",
    "Tree2DNoise",
    "TreeBary",
    "WindowAnswer",
    "WindowCountsPlan",
    "WindowCountsRelease",
    "consistent_tree",
    "parse_period",
    "plan_window_counts",
    "release_window_counts",
]
