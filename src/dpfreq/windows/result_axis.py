"""The released curves of a window release and the instants of their windows, shared by the
release's table and its figure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.windows.structures.chooser import family_label

__all__ = ["curve_families", "period_bounds"]


def curve_families(windows: tuple[Any, ...]) -> list[tuple[Any, str]]:
    """``(family, label)`` of every released family with a curve (all but ``"all"``)."""
    return [(w, family_label("rolling" if not isinstance(w, str) else w,
                             None if isinstance(w, str) else int(w)))
            for w in windows if w != "all"]


def period_bounds(axis: Mapping[str, Any], t1: NDArray[np.int64],
                  t2: NDArray[np.int64]) -> tuple[Any, Any]:
    """First and last instant of windows ``[t1, t2]`` on a timestamp axis (dates for whole
    days starting at midnight), or the period numbers themselves."""
    if axis.get("kind") != "timestamp":
        return t1, t2
    start = np.datetime64(axis["start"], "us")
    step = np.timedelta64(int(axis["period_us"]), "us")
    first = start + (t1 - 1) * step
    last = start + t2 * step - np.timedelta64(1, "us")
    if int(axis["period_us"]) % 86_400_000_000 == 0 and start == start.astype("datetime64[D]"):
        return first.astype("datetime64[D]"), last.astype("datetime64[D]")
    return first, last
