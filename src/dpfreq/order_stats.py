"""Finite-sample Monte Carlo quantiles: the order statistic that a fresh exchangeable draw
falls at or below with probability at least the requested level."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["order_quantile"]


def order_quantile(values: NDArray[np.float64], level: float, axis: int | None = None) -> Any:
    """The ``⌈(N + 1)·level⌉``-th smallest of ``N`` values (the largest when that exceeds N).

    For exchangeable draws, a fresh draw falls at or below this order statistic with
    probability at least ``level`` (up to ties): the finite-sample correction of a Monte Carlo
    quantile.

    Examples
    --------
    >>> float(order_quantile(np.arange(1.0, 201.0), 0.9))  # the 181st smallest of 200
    181.0
    """
    a = np.asarray(values, dtype=np.float64)
    if axis is None:
        a = a.ravel()
        axis = 0
    count = a.shape[axis]
    k = min(count, math.ceil((count + 1) * level - 1e-9))
    return np.sort(a, axis=axis).take(k - 1, axis=axis)
