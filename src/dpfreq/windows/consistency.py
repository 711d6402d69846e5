"""Post-processing that makes released window counts consistent with what true counts obey.

True k+ reach is non-increasing in k and never negative; the released curves, noised
independently per (family, k), need not be. :func:`consistent_curves` fits them back by
isotonic regression across k and clamping — deterministic, no privacy parameter, no rng
(post-processing of a release costs nothing).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["consistent_curves", "isotonic_columns"]


def consistent_curves(value: Mapping[str, Mapping[int, Any]]
                      ) -> dict[str, dict[int, NDArray[np.int64]]]:
    """``value[family][k]`` (curves over t) made non-increasing in k at every t and at least 0,
    rounded to whole items (see :meth:`dpfreq.windows.WindowCountsRelease.consistent_curves`).

    Examples
    --------
    >>> consistent_curves({"total": {1: np.array([5.0]), 2: np.array([9.0])}})["total"]
    {1: array([7]), 2: array([7])}
    """
    out: dict[str, dict[int, NDArray[np.int64]]] = {}
    for label, by_k in value.items():
        ks = sorted(by_k)
        tab = np.vstack([np.asarray(by_k[k], dtype=np.float64) for k in ks])
        tab = isotonic_columns(tab, increasing=False)  # few k: vectorised over t
        tab = np.rint(np.maximum(tab, 0.0)).astype(np.int64)
        out[label] = {k: tab[i] for i, k in enumerate(ks)}
    return out


def isotonic_columns(tab: NDArray[np.float64], *, increasing: bool) -> NDArray[np.float64]:
    """The least-squares monotone fit of every column of ``tab`` (along axis 0, equal
    weights): non-decreasing with ``increasing``, else non-increasing.

    Vectorised over the columns by the max–min formula of isotonic regression,
    ``f_k = max_{i<=k} min_{j>=k} mean(y[i..j])`` (Barlow et al. 1972), in ``O(K²)`` work per
    column for ``K`` rows; deterministic.

    Examples
    --------
    >>> isotonic_columns(np.array([[1.0], [3.0], [2.0]]), increasing=True).ravel().tolist()
    [1.0, 2.5, 2.5]
    """
    y = np.asarray(tab, dtype=np.float64)
    if not increasing:
        return -isotonic_columns(-y, increasing=True)
    k = y.shape[0]
    if k <= 1:
        return y.copy()
    c = np.concatenate([np.zeros((1, *y.shape[1:])), np.cumsum(y, axis=0)])
    i = np.arange(k)[:, None]
    j = np.arange(k)[None, :]
    length = np.maximum(j - i + 1, 1).reshape(k, k, *([1] * (y.ndim - 1)))
    means = (c[1:][None, :] - c[:-1][:, None]) / length  # means[i, j] = mean(y[i..j])
    means = np.where((j >= i).reshape(k, k, *([1] * (y.ndim - 1))), means, np.inf)
    suffix_min = np.minimum.accumulate(means[:, ::-1], axis=1)[:, ::-1]  # min over j >= k
    lower = np.where((i <= j).reshape(k, k, *([1] * (y.ndim - 1))), suffix_min, -np.inf)
    return np.max(lower, axis=0)
