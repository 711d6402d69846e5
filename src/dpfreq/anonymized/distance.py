"""Distances between anonymized histograms: sorted ℓ1 (earth mover) and sorted ℓ2².

Both are computed from the prevalence (compact) form in ``O(t1 + t2)`` after the inputs are
sorted (``t`` = number of distinct counts), without expanding a histogram to its ``n`` counts, so
they score releases of billions of elements in microseconds.

Accepted inputs (each argument independently)
---------------------------------------------
* an :class:`~dpfreq.anonymized.AnonymizedHistogramRelease` (anything with ``counts`` and
  ``prevalences`` arrays, e.g. :class:`dpfreq.engines.base.Prevalences`);
* a mapping ``{count r: prevalence φ_r}``;
* a 1-d array of per-label counts (every entry ``>= 1``; labels are dropped).

Counts and prevalences must be integers ``>= 1`` and counts distinct (the validation of
:func:`~dpfreq.anonymized.release_anonymized_histogram`); the empty histogram is valid.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._docstrings import fill_doc
from dpfreq.anonymized.histogram_input import as_prevalences
from dpfreq.errors import public_errors

__all__ = [
    "cumulative_sup_between",
    "l1_between",
    "sorted_l1_distance",
    "sorted_l2_squared_distance",
]

_I64 = NDArray[np.int64]


def _suffix_at(counts: _I64, prev: _I64, points: _I64) -> _I64:
    """Cumulative prevalences ``φ_{r+} = #{elements with count >= r}`` at each of ``points``."""
    suffix = np.concatenate([np.cumsum(prev[::-1])[::-1], np.zeros(1, np.int64)])
    return suffix[np.searchsorted(counts, points, side="left")]


#: The parameters of both distances (see dpfreq._docstrings).
_PAIR = """Parameters
----------
first, second : release, mapping {count: prevalence} or array of per-label counts
    The two histograms (see the module docstring)."""


@fill_doc(pair=_PAIR)
@public_errors("sorted_l1_distance")
def sorted_l1_distance(first: Any, second: Any) -> int:
    """Sorted ℓ1 (earth mover) distance between two anonymized histograms.

    ``ℓ1(h1, h2) = Σ_i |n_(i)(h1) − n_(i)(h2)|`` over the descending sorted counts, zero-padded to
    a common length; equivalently (layer cake) ``Σ_{r≥1} |φ_{r+}(h1) − φ_{r+}(h2)|``, which is
    how it is computed: walk the merged distinct counts ``k_1 < k_2 < …`` and add
    ``|Φ1(k_j) − Φ2(k_j)| · (k_j − k_{j−1})`` (``k_0 = 0``; ``Φ`` is constant on
    ``(k_{j−1}, k_j]``).

    [[pair]]

    Returns
    -------
    int
        The distance (the minimum over labelings of the per-label ℓ1 distance).

    Raises
    ------
    DataError
        If an input is not a histogram (non-integer or non-positive counts, negative
        prevalences, repeated counts).

    Notes
    -----
    ``O(t1 + t2)`` arithmetic on the prevalence form (plus the sort of the merged keys), never
    ``O(n)``. Pure and deterministic: it releases nothing by itself; scoring a release against the
    raw data is for simulations and benchmarks only.

    Examples
    --------
    >>> sorted_l1_distance([3, 8, 8], {1: 1, 2: 1, 8: 1, 9: 1})
    3
    """
    c1, p1 = as_prevalences(first, "first")
    c2, p2 = as_prevalences(second, "second")
    return l1_between(c1, p1, c2, p2)


def l1_between(counts1: _I64, prevalences1: _I64, counts2: _I64, prevalences2: _I64) -> int:
    """Sorted ℓ1 distance of two validated prevalence forms (counts strictly increasing)."""
    keys = np.union1d(counts1, counts2)
    if keys.size == 0:
        return 0
    gaps = np.diff(keys, prepend=np.int64(0))
    diff = np.abs(_suffix_at(counts1, prevalences1, keys)
                  - _suffix_at(counts2, prevalences2, keys))
    return int(np.dot(diff, gaps))


def cumulative_sup_between(counts1: _I64, prevalences1: _I64, counts2: _I64,
                           prevalences2: _I64) -> int:
    """``max_r |φ_{r+}(h1) − φ_{r+}(h2)|``: the largest difference, over all ``r >= 1``, in the
    number of items with count at least ``r`` (validated prevalence forms)."""
    keys = np.union1d(counts1, counts2)
    if keys.size == 0:
        return 0
    diff = np.abs(_suffix_at(counts1, prevalences1, keys) - _suffix_at(counts2, prevalences2, keys))
    return int(diff.max())


def _rank_runs(counts: _I64, prev: _I64) -> tuple[_I64, _I64]:
    """Descending run form: ``ends[j]`` = rank (exclusive) where the run of ``values[j]`` ends."""
    values = counts[::-1]
    ends = np.cumsum(prev[::-1])
    return values, ends


@fill_doc(pair=_PAIR)
@public_errors("sorted_l2_squared_distance")
def sorted_l2_squared_distance(first: Any, second: Any) -> float:
    """Sorted ℓ2² distance ``Σ_i (n_(i)(h1) − n_(i)(h2))²`` (Hay et al.'s metric).

    The descending sorted count vectors (zero-padded to a common length) are never expanded:
    each histogram is a list of runs (count, prevalence); the rank breakpoints of both are merged
    and every merged segment contributes ``length · (v1 − v2)²``.

    [[pair]]

    Returns
    -------
    float
        The distance (float64: squares of counts near 10^9 overflow int64 sums).

    Raises
    ------
    DataError
        If an input is not a histogram.

    Notes
    -----
    ``O(t1 + t2)`` after sorting. As for ℓ1, matching sorted to sorted minimizes the per-label
    ℓ2² distance over labelings (rearrangement inequality).

    Examples
    --------
    >>> sorted_l2_squared_distance([3, 8, 8], [1, 2, 8, 9])
    3.0
    """
    c1, p1 = as_prevalences(first, "first")
    c2, p2 = as_prevalences(second, "second")
    v1, e1 = _rank_runs(c1, p1)
    v2, e2 = _rank_runs(c2, p2)
    bounds = np.union1d(e1, e2)
    if bounds.size == 0:
        return 0.0
    starts = np.concatenate([np.zeros(1, np.int64), bounds[:-1]])
    lengths = (bounds - starts).astype(np.float64)

    def value_at(values: _I64, ends: _I64) -> NDArray[np.float64]:
        idx = np.searchsorted(ends, starts, side="right")
        padded = np.concatenate([values, np.zeros(1, np.int64)]).astype(np.float64)
        return padded[idx]

    delta = value_at(v1, e1) - value_at(v2, e2)
    return float(np.dot(lengths, delta * delta))
