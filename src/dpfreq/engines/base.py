"""The engine protocol: where exact aggregates are computed.

Every engine computes the same small, *exact* (noise-free) aggregates and returns numpy arrays.
They are never shown to the user: a system adds noise before anything leaves the library.
``memory`` (numpy) is the reference oracle, ``duckdb`` the embedded default for files and SQL,
``spark`` the cluster engine. One conformance suite (``tests/engines``) demands identical
aggregates from all of them. Besides the core :class:`Engine` protocol, an engine declares
capabilities by satisfying small protocols (:class:`Summarizing`: the window summaries of an
event log, grouped and bounded, in one query; :class:`GroupedCounting`; :class:`ReportSumming`;
:class:`DomainTables`); the arguments of the larger calls are request objects
(:class:`SummaryRequest`, :class:`CountRequest`, with a :class:`Grouping`).

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
zeros); list, struct and map columns, nulls and NaN are refused with the same message. Every
engine reads a CSV file's first line as its header (never sniffed; ``.tsv``: tab-separated),
which must name each column once; a column missing from a CSV source is reported without that
line's fields, which are data when the file has no header (:func:`dpfreq.engines.column_error`).

Errors: an unknown column, an unreadable or empty file, or values of the wrong type raise
:class:`dpfreq.errors.DataError` whose message names the column and the rule it breaks, never a
count, value, time or row from the data (set ``DPFREQ_DEBUG=1`` to have those appended for the
data owner); never a traceback from deep inside numpy, DuckDB or Spark.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from dpfreq.engines.requests import (
    CountRequest,
    GroupedPrevalences,
    Summaries,
    SummaryRequest,
    TimeBuckets,
)

__all__ = [
    "DomainTables",
    "Engine",
    "GroupedCounting",
    "ItemCounts",
    "OccurrenceTimes",
    "Prevalences",
    "ReportSumming",
    "ReportSums",
    "Summarizing",
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


@runtime_checkable
class Engine(Protocol):
    """What every engine implements: per-item counts, count-of-counts and occurrence times.
    All methods are keyword-only after ``source``.

    Engines compute exact, noise-free aggregates; only the systems add noise, so engines never
    hand anything to the user. Obtain one with :func:`dpfreq.engines.get_engine`. What an
    engine can do beyond this is said by the capability protocols it also satisfies
    (:class:`Summarizing`, :class:`GroupedCounting`, :class:`ReportSumming`,
    :class:`DomainTables`): a system checks ``isinstance(engine, Summarizing)`` and says which
    engine it needs when the check fails.

    Attributes
    ----------
    name : str
        The engine's registry name (``"memory"``, ``"duckdb"``, ``"spark"``, ...).

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

    def occurrence_times(
        self, source: Any, *, item: str, time: str, k_max: int | None = None
    ) -> OccurrenceTimes:
        """Per-item sorted event times (optionally only the first ``k_max`` per item)."""
        ...


@runtime_checkable
class Summarizing(Protocol):
    """An engine that computes the window summaries of an event log where the data lives.

    Examples
    --------
    >>> from dpfreq.engines import get_engine
    >>> isinstance(get_engine("duckdb"), Summarizing)
    True
    """

    name: str

    def summaries(self, source: Any, request: SummaryRequest) -> Summaries:
        """Bucket ``request.time`` into periods, keep the listed groups and bound each item to
        ``m`` of them (``request.grouping``), and sum the summaries ``request.specs`` per
        group; the events themselves never leave the engine."""
        ...


@runtime_checkable
class GroupedCounting(Protocol):
    """An engine that computes per-group count-of-counts after the grouped bounding.

    Examples
    --------
    >>> from dpfreq.engines import get_engine
    >>> isinstance(get_engine("memory"), GroupedCounting)
    True
    """

    name: str

    def grouped_count_of_counts(self, source: Any, request: CountRequest
                                ) -> GroupedPrevalences:
        """Per-group prevalences of the items' row counts after each item keeps at most
        ``m`` of its groups (``request.grouping``; :mod:`dpfreq.engines.grouping`)."""
        ...


@runtime_checkable
class ReportSumming(Protocol):
    """An engine that validates and sums longitudinal reports where they live.

    Examples
    --------
    >>> from dpfreq.engines import get_engine
    >>> isinstance(get_engine("memory"), ReportSumming)
    True
    """

    name: str

    def report_sums(
        self, source: Any, *, param_id: str | None, interval_counts: tuple[int, ...]
    ) -> ReportSums:
        """Validate longitudinal reports (wire columns ``device, order, interval, bit`` and an
        optional ``param_id``; identifiers read as text) where they live, then sum the bits per
        (order, interval): ``param_id`` is the one served (None: not checked) and
        ``interval_counts[h]`` the number of intervals of order h. The rules and their order
        are in :mod:`dpfreq.engines.reports`; a broken rule rejects the whole source."""
        ...


@runtime_checkable
class DomainTables(Protocol):
    """An engine that holds tables keyed by a public integer domain too large for one machine
    (the Spark engine: :class:`dpfreq.engines.spark.tables.SparkTables`).

    Examples
    --------
    >>> from dpfreq.engines import get_engine
    >>> isinstance(get_engine("memory"), DomainTables)
    False
    """

    name: str

    def tables(self) -> Any:
        """The engine's ε-free table operations (domain tables, joins, reductions, files)."""
        ...
