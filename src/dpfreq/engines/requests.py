"""The request objects of the larger engine calls, and what those calls return.

A window release asks an engine for :class:`Summaries` with a :class:`SummaryRequest`; a
grouped profile or histogram asks for :class:`GroupedPrevalences` with a :class:`CountRequest`;
both may carry a :class:`Grouping` (the group column, the public groups, the bound ``m`` and
the key of the bounding rank). The engines' protocols are in :mod:`dpfreq.engines.base`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "SUMMARY_FAMILIES",
    "CountRequest",
    "GroupedPrevalences",
    "Grouping",
    "Summaries",
    "SummaryRequest",
    "SummarySpec",
    "TimeBuckets",
]


@dataclass(frozen=True)
class TimeBuckets:
    """Public bucketing of a time column into periods ``1..horizon``.

    ``start_us is None``: the column holds integer periods already. Otherwise it holds
    timestamps (microseconds since the epoch) and period ``g`` is
    ``[start_us + (g-1)·period_us, start_us + g·period_us)``, i.e.
    ``g = ⌊(t − start_us) / period_us⌋ + 1`` (floor division, also before ``start_us``).

    Attributes
    ----------
    horizon : int
        Number of periods.
    start_us : int or None
        Start of period 1 in microseconds since the epoch; None for integer periods.
    period_us : int or None
        Length of a period in microseconds; None for integer periods.
    time_unit : {"s", "ms", "us", "ns"} or None
        With ``start_us``: the column holds integer epochs in this unit (converted to a UTC
        timestamp before bucketing) instead of timestamps. None: timestamps.
    timezone : str
        IANA zone of the period boundaries: each time (an instant) is converted to its
        wall-clock time in this zone before bucketing, so ``start_us`` and ``period_us`` are
        wall-clock times (a daily period starts at local midnight; a DST day has 23 or 25
        hours). ``"UTC"`` for integer periods.

    Examples
    --------
    >>> TimeBuckets(horizon=12).time_kind
    'integer'
    >>> day_us = 86_400 * 10**6
    >>> TimeBuckets(horizon=7, start_us=0, period_us=day_us).time_kind  # 7 days from 1970-01-01
    'timestamp_us'
    """

    horizon: int
    start_us: int | None = None
    period_us: int | None = None
    time_unit: str | None = None
    timezone: str = "UTC"

    @property
    def time_kind(self) -> str:
        """The ``time_kind`` (see :class:`OccurrenceTimes`) the time column must have."""
        return "integer" if self.start_us is None or self.time_unit else "timestamp_us"


#: The summary families an engine computes (see :class:`SummarySpec`).
SUMMARY_FAMILIES = ("cumulative", "rolling", "all")


@dataclass(frozen=True, order=True)
class SummarySpec:
    """One summary of an event log's per-item occurrence sequences, summed over items.

    The items' events are bucketed into periods ``1..T`` and sorted per item (and group);
    ``τ_1 <= τ_2 <= ...`` are an item's periods with repeats, ``τ_0 = 0``. The engines compute
    the sums over items of (the windows system reads them as the reductions of Ghazi, Kumar,
    Manurangsi and Nelson 2023; :mod:`dpfreq.engines.memory.summaries` is the readable
    reference):

    * ``"cumulative"``: the histogram over periods of ``τ_k`` (items with ``>= k`` events);
      key = the period;
    * ``"all"``: for every event ``s >= k`` of an item, the point ``(τ_{s−k}, τ_s)`` with
      weight +1 and ``(τ_{s−k+1}, τ_s)`` with weight −1; key = ``x·(T+2) + y``, equal points
      summed, zero sums left out;
    * ``"rolling"`` of width ``W``: blocks ``b = 0..⌊T/W⌋`` of the periods
      ``[(b−1)W+1, (b+1)W]`` (local times ``1..2W``); per (item, block) with local times
      ``l_1 <= .. <= l_n`` (``l_0 = 0``, ``l_j = 2W+1`` beyond ``n``) and ``r = 0..n``, the pair
      ``a = l_r``, ``c = min(l_{r+1}, l_{r+k} − W)`` when ``l_r < l_{r+1}`` and
      ``l_r + W < l_{r+k}``; key ``b·(W+2) + a`` for ``a``, ``(n_b + b)·(W+2) + c`` for ``c``
      and ``2·n_b·(W+2) + b`` once per (item, block) with an event (``n_b`` blocks).

    Slot 0 of a :class:`Summaries` is always the number of events per period (key = period);
    slot ``i >= 1`` is the ``i``-th spec of the request.

    Examples
    --------
    >>> SummarySpec("rolling", 1, 7).to_json()
    ['rolling', 1, 7]
    """

    family: str
    k: int
    width: int = 0

    def to_json(self) -> list[Any]:
        """``[family, k, width]``."""
        return [self.family, self.k, self.width]

    @classmethod
    def from_json(cls, v: Any) -> SummarySpec:
        """The spec of :meth:`to_json`'s list."""
        return cls(str(v[0]), int(v[1]), int(v[2]))


@dataclass(frozen=True)
class Grouping:
    """How a request groups the rows, and the bounding of each item's groups.

    Attributes
    ----------
    column : str
        The group column (read as text: integers in decimal).
    groups : tuple of str or None
        The public groups (rows of other groups are dropped); None: every group of the data
        (private names: only private partition selection may publish them).
    max_groups_per_item : int or None
        ``m``: each item keeps at most ``m`` of its groups, the ``m`` of smallest keyed rank
        (:mod:`dpfreq.engines.grouping`); None bounds nothing (one row lies in one group).
    key : bytes or None
        The secret (or seeded) key of the rank, at least 16 bytes; needed only with ``m``.

    Examples
    --------
    >>> Grouping("campaign", ("c1", "c2"), 2, bytes(16)).bounded
    True
    >>> Grouping("campaign", None, None).bounded
    False
    """

    column: str
    groups: tuple[str, ...] | None
    max_groups_per_item: int | None
    key: bytes | None = None

    @property
    def bounded(self) -> bool:
        """Whether each item is bounded to ``max_groups_per_item`` groups."""
        return self.max_groups_per_item is not None


@dataclass(frozen=True)
class SummaryRequest:
    """What :meth:`Summarizing.summaries` computes: the summaries ``specs`` of the log's
    events bucketed by ``buckets``, per group of ``grouping`` (None: one group, the whole log).

    Attributes
    ----------
    item, time : str
        The item and time columns.
    buckets : TimeBuckets
        The public bucketing of the time column into periods ``1..horizon``.
    specs : tuple of SummarySpec
        The summaries (slots ``1..len(specs)``; slot 0 is the events per period, before the
        bounding of a grouped request).
    drop_out_of_range : bool
        Drop events outside ``1..horizon``; otherwise, if there are any, nothing is summed.
    grouping : Grouping or None
        The group column and bounding; None for an ungrouped log.
    checked : bool
        The caller has checked these rows in an earlier request to the same engine (a grouped
        release checks the rows before any bounding and before its spend, then asks for the
        bounded summaries): the engine then makes neither the column checks nor slot 0 (the
        result has no slot-0 entries, and its counts of events are 0).

    Examples
    --------
    >>> from dpfreq.engines import TimeBuckets
    >>> SummaryRequest("user", "day", TimeBuckets(30), (SummarySpec("cumulative", 1),)).horizon
    30
    """

    item: str
    time: str
    buckets: TimeBuckets
    specs: tuple[SummarySpec, ...]
    drop_out_of_range: bool = False
    grouping: Grouping | None = None
    checked: bool = False

    @property
    def horizon(self) -> int:
        """``T``, the number of periods."""
        return int(self.buckets.horizon)


@dataclass(frozen=True)
class Summaries:
    """The result of :meth:`Summarizing.summaries`: summed ``(group, slot, key) -> weight``.

    Exact, never shown: a system noises what it publishes.

    Attributes
    ----------
    groups : tuple of str or None
        The public groups of the request, in order (None for an ungrouped request: one group).
    group_index, slots, keys : numpy.ndarray of int64
        Index into ``groups`` (0 ungrouped), slot and key of each entry; sorted by
        (group, slot, key).
    weights : numpy.ndarray of int64
        The summed weight of each entry, non-zero.
    n_events : int
        Events (of listed groups) inside ``1..horizon``, before the bounding.
    n_out_of_range : int
        Events (of listed groups) outside ``1..horizon``.
    n_pairs, n_pairs_kept : int
        Distinct (item, group) pairs before and after the bounding (0 when nothing is
        bounded).

    Examples
    --------
    >>> from dpfreq.engines import get_engine
    >>> from dpfreq.engines import TimeBuckets
    >>> req = SummaryRequest("item", "time", TimeBuckets(3), (SummarySpec("cumulative", 1),))
    >>> s = get_engine("memory").summaries({"item": ["a", "a", "b"], "time": [2, 1, 2]}, req)
    >>> s.entries(0)[0].tolist(), s.entries(0)[1].tolist(), s.entries(0)[2].tolist()
    ([0, 0, 1, 1], [1, 2, 1, 2], [1, 2, 1, 1])
    """

    groups: tuple[str, ...] | None
    group_index: NDArray[np.int64]
    slots: NDArray[np.int64]
    keys: NDArray[np.int64]
    weights: NDArray[np.int64]
    n_events: int
    n_out_of_range: int
    n_pairs: int = 0
    n_pairs_kept: int = 0

    def entries(self, g: int) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
        """``(slots, keys, weights)`` of group ``g`` (0 for an ungrouped request)."""
        lo, hi = np.searchsorted(self.group_index, [g, g + 1])
        return self.slots[lo:hi], self.keys[lo:hi], self.weights[lo:hi]


@dataclass(frozen=True)
class CountRequest:
    """What :meth:`GroupedCounting.grouped_count_of_counts` computes: per group, the
    count-of-counts of the items' row counts (clamped at ``max_count``; None: no clamp) after
    the bounding of ``grouping``.

    ``per_item="groups"`` counts instead, for each item of a group, the number of groups the
    item kept after the bounding (what a set-union partition selection weighs,
    :mod:`dpfreq.grouped.set_union`); it needs a bounded grouping. ``per_item="distinct_groups"``
    counts, for each item of a group, the number ``g_i`` of distinct groups (of the listed
    groups, or every group) the item holds in the data (what a grouped release's dropped-fraction
    estimate sums, :mod:`dpfreq.grouped.dropped`); it needs an unbounded grouping (``g_i`` is
    about the data before the cap).

    Examples
    --------
    >>> CountRequest("user", Grouping("site", None, 2, bytes(16)), max_count=5).max_count
    5
    """

    item: str
    grouping: Grouping
    max_count: int | None = None
    per_item: str = "rows"


@dataclass(frozen=True)
class GroupedPrevalences:
    """Per-group count-of-counts of the bounded data, sparse (exact, never shown).

    Attributes
    ----------
    groups : tuple of str
        The public groups, in the order given; with ``groups=None`` the groups of the data that
        keep at least one item, sorted (private until selected).
    group_index : numpy.ndarray of int64
        Index into ``groups`` of each entry.
    counts : numpy.ndarray of int64
        The (clamped) per-item count of each entry, ``>= 1``.
    prevalences : numpy.ndarray of int64
        Number of items of that group with that count.
    n_pairs, n_pairs_kept : int
        Distinct (item, group) pairs before and after the bounding (0 when nothing is
        bounded).

    Examples
    --------
    >>> from dpfreq.engines import get_engine
    >>> req = CountRequest("user", Grouping("site", ("a", "b"), None))
    >>> gp = get_engine("memory").grouped_count_of_counts(
    ...     {"user": [1, 1, 2], "site": ["a", "a", "b"]}, req)
    >>> gp.group_index.tolist(), gp.counts.tolist(), gp.prevalences.tolist()
    ([0, 1], [2, 1], [1, 1])
    """

    groups: tuple[str, ...]
    group_index: NDArray[np.int64]
    counts: NDArray[np.int64]
    prevalences: NDArray[np.int64]
    n_pairs: int = 0
    n_pairs_kept: int = 0
