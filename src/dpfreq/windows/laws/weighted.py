"""The laws of least-squares answers: per prefix, the weights grouped by magnitude, a bound on
the moment generating function of ``Σ_v a_v Z_v`` and the certified laws (public parameters only,
cached per process).
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.windows.laws.sums import WEIGHT_DECIMALS
from dpfreq.windows.layouts.weights import Layout, layout_weights

__all__ = ["consistent_laws", "weight_groups", "weighted_log_mgf"]


@functools.lru_cache(maxsize=8)
def weight_groups(layout: Layout) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per consistent prefix: its distinct ``|a_v|`` (to :data:`WEIGHT_DECIMALS` decimals, each
    group's largest member) and their multiplicities, zero-padded to one width.

    A prefix of a 512-period tree has 1024 weights but about 60 distinct ones up to rounding,
    so the moment generating function below costs a 20th of the weight-by-weight product.
    """
    w = np.sort(np.abs(layout_weights(layout)), axis=1)
    key = np.round(w, WEIGHT_DECIMALS)
    last = np.ones_like(w, dtype=bool)  # the last (largest) member of each group in its row
    last[:, :-1] = key[:, 1:] != key[:, :-1]
    rows, cols = np.nonzero(last)  # row-major: the groups of each row in increasing order
    per_row = last.sum(axis=1)
    starts = np.concatenate(([0], np.cumsum(per_row)[:-1]))
    slot = np.arange(rows.size) - np.repeat(starts, per_row)  # group index within the row
    previous = np.where(slot == 0, -1, np.roll(cols, 1))  # last column of the group before
    values = np.zeros((w.shape[0], int(per_row.max())))
    counts = np.zeros_like(values)
    values[rows, slot] = w[rows, cols]
    counts[rows, slot] = cols - previous
    return values, counts


@functools.lru_cache(maxsize=16)
def weighted_log_mgf(layout: Layout, gamma_num: int, gamma_den: int
                      ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """For each consistent prefix ``x``: a grid ``λ`` and an upper bound on
    ``log E[exp(λ Σ_v a_v Z_v)]``.

    ``a = layout_weights(layout)[x]``, ``Z_v`` i.i.d. ``DLap(γ)``; valid for
    ``λ·max|a_v| < γ``. Each weight is replaced by the largest of its group
    (:func:`weight_groups`); the log-mgf of ``a Z`` grows with ``|a|``, so the sum is never
    below the exact one and the Chernoff bound built on it stays valid. Depends on public
    parameters only (cached per process).
    """
    values, counts = weight_groups(layout)
    g = gamma_num / gamma_den
    alpha = math.exp(-g)
    amax = values.max(axis=1)
    grid = np.geomspace(1e-3, 1 - 1e-6, 32)
    lam = (g / amax)[:, None] * grid[None, :]
    log_m = np.empty_like(lam)
    base = 2 * math.log1p(-alpha)
    for j in range(grid.size):
        u = values * lam[:, j:j + 1]
        log_m[:, j] = (counts * (base - np.log1p(-np.exp(u - g))
                                 - np.log1p(-np.exp(-u - g)))).sum(axis=1)
    log_m += 1e-10 * np.abs(log_m) + 1e-12  # covers the rounding of the sums (~1e-13)
    return lam, log_m


@functools.lru_cache(maxsize=4)
def consistent_laws(layout: Layout, gamma: Fraction | None, sigma2: int | None
                     ) -> dict[int, Any]:
    """Per consistent prefix ``x``: its certified noise law (filled lazily, public only)."""
    return {}
