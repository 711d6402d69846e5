"""The engine protocol: where exact aggregates are computed.

Every engine computes the same small, *exact* (noise-free) aggregates and returns numpy arrays.
They are never shown to the user: a system adds noise before anything leaves the library.
``memory`` (numpy) is the reference oracle, ``duckdb`` the embedded default for files and SQL,
``spark`` the cluster engine. One conformance suite (``tests/engines``) demands identical
aggregates from all of them. ``reduce_items`` sums a system's per-item numpy reduction (an
:data:`ItemReducer`, e.g. the window summaries) over items where the data lives.

Source kinds
------------
* ``duckdb``: a CSV or Parquet path (``str``/``pathlib.Path``), a pandas, Polars or Arrow table
  (scanned in place, without a copy), a ``duckdb.DuckDBPyRelation``, or a SQL string
  ``"SELECT ..."`` / table name (run on an in-memory connection, or the ``connection`` the
  engine was created with).
* ``memory``: a mapping ``{column name: 1-d array-like}`` (all columns of equal length), or any
  ``duckdb`` source, read into such columns first.
* ``spark``: a ``pyspark.sql.DataFrame``, a Parquet/CSV path or URI (``hdfs://``, ``s3a://``),
  a SQL string ``"SELECT ..."`` (``spark.sql``), a catalog table name (``spark.table``), or a
  pandas, Polars or Arrow table (copied into Spark).

Every engine types columns alike: an item column of integers gives integer keys, any other
scalar column text keys; an item column read from CSV is always text (identifiers keep leading
zeros); list, struct and map columns, nulls and NaN are refused with the same message.

Errors: an unknown column, an unreadable or empty file, or values of the wrong type raise
:class:`dpfreq.errors.DataError` whose message names the column and the rule it breaks, never a
count, value, time or row from the data (set ``DPFREQ_DEBUG=1`` to have those appended for the
data owner); never a traceback from deep inside numpy, DuckDB or Spark.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "Engine",
    "ItemCounts",
    "ItemReducer",
    "ItemReduction",
    "OccurrenceTimes",
    "Prevalences",
    "ReportSums",
    "TimeBuckets",
]


@dataclass(frozen=True)
class ItemCounts:
    """Per-item exact counts of the items that occur (count >= 1), sorted by key.

    Attributes
    ----------
    keys : numpy.ndarray
        The item values as they appear in the data: int64 for integer columns, an object
        array of ``str`` otherwise.
    counts : numpy.ndarray of int64
        Number of rows of each item, same length as ``keys``.

    Examples
    --------
    >>> from dpfreq.engines import get_engine
    >>> ic = get_engine("memory").item_counts({"item": ["b", "a", "b"]}, item="item")
    >>> ic.keys.tolist(), ic.counts.tolist()
    (['a', 'b'], [1, 2])
    """

    keys: NDArray[Any]
    counts: NDArray[np.int64]


@dataclass(frozen=True)
class Prevalences:
    """Count-of-counts in sparse form: ``prevalences[i]`` items occur exactly ``counts[i]`` times.

    Attributes
    ----------
    counts : numpy.ndarray of int64
        Strictly increasing, every entry >= 1; with ``max_count`` set, items with more
        occurrences are clamped into the entry ``max_count``. Length 0 for an empty source.
    prevalences : numpy.ndarray of int64
        Number of items with each count, same length.

    Examples
    --------
    Item 2 occurs once, items 1 and 3 twice each:

    >>> from dpfreq.engines import get_engine
    >>> p = get_engine("memory").count_of_counts({"item": [1, 1, 2, 3, 3]}, item="item")
    >>> p.counts.tolist(), p.prevalences.tolist()
    ([1, 2], [1, 2])
    >>> p = get_engine("memory").count_of_counts({"item": [1, 1, 2, 3, 3]}, item="item",
    ...                                          max_count=1)
    >>> p.counts.tolist(), p.prevalences.tolist()
    ([1], [3])
    """

    counts: NDArray[np.int64]
    prevalences: NDArray[np.int64]


@dataclass(frozen=True)
class OccurrenceTimes:
    """Occurrence times per item, sorted by (item, time).

    With ``k_max`` set, only each item's first ``k_max`` events (ties in time kept in a
    deterministic order) are returned.

    Attributes
    ----------
    item_index : numpy.ndarray of int64
        Dense item code of each event, in ``0..n_items-1`` (in order of sorted item key).
    times : numpy.ndarray of int64
        Each event's time: integer columns as they are; timestamps and dates as microseconds
        since the Unix epoch (UTC).
    n_items : int
        Number of distinct items.
    n_events : int
        Number of events read, before truncation to ``k_max`` per item.
    time_kind : {"integer", "timestamp_us"}
        How ``times`` is to be read.

    Examples
    --------
    >>> from dpfreq.engines import get_engine
    >>> events = {"item": ["a", "b", "a"], "time": [5, 1, 2]}
    >>> ot = get_engine("memory").occurrence_times(events, item="item", time="time")
    >>> ot.item_index.tolist(), ot.times.tolist(), ot.n_items, ot.n_events, ot.time_kind
    ([0, 0, 1], [2, 5, 1], 2, 3, 'integer')
    >>> get_engine("memory").occurrence_times(events, item="item", time="time",
    ...                                       k_max=1).times.tolist()
    [2, 1]
    """

    item_index: NDArray[np.int64]
    times: NDArray[np.int64]
    n_items: int
    n_events: int
    time_kind: str  # "integer" or "timestamp_us"


@dataclass(frozen=True)
class ReportSums:
    """Validated longitudinal reports, summed per (order, interval).

    Attributes
    ----------
    order, interval : numpy.ndarray of int64
        The (order, interval) pairs that have reports, sorted.
    sums : numpy.ndarray of int64
        Number of 1 bits reported for each pair.
    counts : numpy.ndarray of int64
        Number of reports for each pair.
    devices_per_order : numpy.ndarray of int64
        Number of distinct devices of each order (one entry per order).

    Examples
    --------
    >>> from dpfreq.engines import get_engine
    >>> reports = {"device": ["a", "b"], "order": [0, 0], "interval": [1, 1], "bit": [1, 0]}
    >>> rs = get_engine("memory").report_sums(reports, param_id=None, interval_counts=(2, 1))
    >>> rs.sums.tolist(), rs.counts.tolist(), rs.devices_per_order.tolist()
    ([1], [2], [2, 0])
    """

    order: NDArray[np.int64]
    interval: NDArray[np.int64]
    sums: NDArray[np.int64]
    counts: NDArray[np.int64]
    devices_per_order: NDArray[np.int64] = field(
        default_factory=lambda: np.zeros(0, dtype=np.int64))


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


#: A per-item reduction, run on chunks of *whole* items: ``reducer(codes, periods)`` gets dense
#: item codes ``0..m-1`` and periods in ``1..horizon``, sorted by (code, period), and returns
#: int64 arrays ``(slots, keys, weights)``; the engine sums the weights per (slot, key) over all
#: chunks. It must be picklable (the Spark engine runs it on the executors).
ItemReducer = Callable[[NDArray[np.int64], NDArray[np.int64]],
                       tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]]


@dataclass(frozen=True)
class ItemReduction:
    """Result of :meth:`Engine.reduce_items`: summed ``(slot, key) -> weight`` entries.

    When events are outside ``1..horizon`` and dropping was not asked for, nothing is reduced
    (the arrays are empty).

    Attributes
    ----------
    slots, keys : numpy.ndarray of int64
        The (slot, key) pairs, sorted and unique.
    weights : numpy.ndarray of int64
        The summed weight of each pair, non-zero.
    n_events : int
        Number of events inside ``1..horizon`` that were reduced.
    n_out_of_range : int
        Number of events outside ``1..horizon``.
    first_out_of_range : int or None
        Period of the first event outside, in (item key, time) order; None if there is none.

    Examples
    --------
    A reducer that counts events per period (slot 0, key = period, weight 1 per event):

    >>> from dpfreq.engines import get_engine
    >>> def per_period(codes, periods):
    ...     return np.zeros_like(periods), periods, np.ones_like(periods)
    >>> events = {"item": ["a", "a", "b", "b"], "time": [1, 2, 2, 9]}
    >>> r = get_engine("memory").reduce_items(events, item="item", time="time",
    ...                                       buckets=TimeBuckets(horizon=3), reducer=per_period,
    ...                                       drop_out_of_range=True)
    >>> r.keys.tolist(), r.weights.tolist(), r.n_events, r.n_out_of_range
    ([1, 2], [1, 2], 3, 1)
    """

    slots: NDArray[np.int64]
    keys: NDArray[np.int64]
    weights: NDArray[np.int64]
    n_events: int
    n_out_of_range: int
    first_out_of_range: int | None


@runtime_checkable
class Engine(Protocol):
    """What every engine implements. All methods are keyword-only after ``source``.

    Engines compute exact, noise-free aggregates; only the systems add noise, so engines never
    hand anything to the user. Obtain one with :func:`dpfreq.engines.get_engine`.

    Attributes
    ----------
    name : str
        ``"memory"``, ``"duckdb"`` or ``"spark"``.

    Examples
    --------
    >>> from dpfreq.engines import get_engine
    >>> engine = get_engine("memory")
    >>> isinstance(engine, Engine), engine.name
    (True, 'memory')
    >>> engine.item_counts({"item": [7, 7, 3]}, item="item").counts.tolist()
    [1, 2]
    """

    name: str

    def item_counts(self, source: Any, *, item: str) -> ItemCounts:
        """Exact number of rows per distinct value of column ``item`` (nulls are an error)."""
        ...

    def count_of_counts(
        self, source: Any, *, item: str, max_count: int | None = None
    ) -> Prevalences:
        """Exact prevalences of the per-item counts (optionally clamped at ``max_count``)."""
        ...

    def grouped_count_of_counts(
        self, source: Any, *, item: str, group: str, groups: Any,
        max_groups_per_item: int | None, hash_key: bytes, max_count: int | None
    ) -> Any:
        """Per-group prevalences after each item keeps at most ``max_groups_per_item`` of the
        listed ``groups`` (chosen by the keyed rank of
        :mod:`dpfreq.engines.grouping_memory`); returns a ``GroupedPrevalences``.
        ``groups=None``: every group of the data (private names, for partition selection);
        ``max_groups_per_item=None``: no bound; ``max_count=None``: no clamp."""
        ...

    def grouped_reduce_items(
        self, source: Any, *, item: str, time: str, group: str, groups: Any,
        max_groups_per_item: int | None, hash_key: Any, buckets: TimeBuckets,
        reducer: ItemReducer, drop_out_of_range: bool = False,
    ) -> Any:
        """:meth:`reduce_items` per listed group, after each item keeps at most
        ``max_groups_per_item`` of its groups (None: no bound); returns a ``GroupedReduction``
        (:mod:`dpfreq.engines.grouping_windows`)."""
        ...

    def occurrence_times(
        self, source: Any, *, item: str, time: str, k_max: int | None = None
    ) -> OccurrenceTimes:
        """Per-item sorted event times (optionally only the first ``k_max`` per item)."""
        ...

    def report_sums(
        self, source: Any, *, param_id: str | None, interval_counts: tuple[int, ...]
    ) -> ReportSums:
        """Validate longitudinal reports (wire columns ``device, order, interval, bit`` and an
        optional ``param_id``; identifiers read as text) where they live, then sum the bits per
        (order, interval): ``param_id`` is the one served (None: not checked) and
        ``interval_counts[h]`` the number of intervals of order h. The rules and their order
        are in :mod:`dpfreq.engines.reports`; a broken rule rejects the whole source."""
        ...

    def reduce_items(
        self, source: Any, *, item: str, time: str, buckets: TimeBuckets,
        reducer: ItemReducer, drop_out_of_range: bool = False,
    ) -> ItemReduction:
        """Bucket ``time`` into periods, group the events by ``item`` and sum ``reducer``'s
        per-item outputs; the events themselves never leave the engine."""
        ...
