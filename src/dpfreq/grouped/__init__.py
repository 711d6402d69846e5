"""Grouped releases: the same release per group, with each item's contribution bounded."""

from dpfreq.grouped.result import GroupedRelease

__all__ = ["GroupedRelease"]
