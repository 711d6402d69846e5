"""Engines: where exact aggregates are computed, and the registry that picks one.

Systems reach engines only through :func:`get_engine`, the protocol and request types
re-exported here, :func:`column_error` (the one message for a column missing from a source an
engine read) and :func:`id_kind`, :func:`id_key` and :func:`id_error` (the one rule of an id
column's type) with :func:`id_keys` (that rule applied to a numpy column), never through an
engine package. Each engine is a package (``dpfreq.engines.memory``, ``.duckdb``, ``.spark``)
with one :class:`EngineEntry` in the registry (:data:`ENGINES`): its class, imported lazily so
that a missing optional dependency (pyspark) only matters when that engine is asked for and then
raises :class:`~dpfreq.errors.EngineUnavailableError` naming the pip extra, and its command-line
options.
"""

from __future__ import annotations

from dpfreq.engines import base, requests
from dpfreq.engines._common import CSV_SUFFIXES, PARQUET_SUFFIXES
from dpfreq.engines.base import (
    DomainTables,
    Engine,
    GroupedCounting,
    ItemCounts,
    OccurrenceTimes,
    Prevalences,
    ReportSumming,
    ReportSums,
    Summarizing,
    TimeBuckets,
)
from dpfreq.engines.columns import ID_RULE, column_error, id_error, id_key, id_kind
from dpfreq.engines.numpy_ids import id_keys
from dpfreq.engines.registry import (
    ENGINES,
    EngineEntry,
    EngineOption,
    get_engine,
    infer_engine_name,
    register_engine,
    require_capability,
)
from dpfreq.engines.requests import (
    SUMMARY_FAMILIES,
    CountRequest,
    GroupedPrevalences,
    Grouping,
    Summaries,
    SummaryRequest,
    SummarySpec,
)

# the registry, the protocols (dpfreq.engines.base), the request types (.requests), the
# missing-column error and the id-column rule (.columns)
__all__ = [
    "CSV_SUFFIXES",
    "ENGINES",
    "ID_RULE",
    "PARQUET_SUFFIXES",
    "SUMMARY_FAMILIES",
    "CountRequest",
    "DomainTables",
    "Engine",
    "EngineEntry",
    "EngineOption",
    "GroupedCounting",
    "GroupedPrevalences",
    "Grouping",
    "ItemCounts",
    "OccurrenceTimes",
    "Prevalences",
    "ReportSumming",
    "ReportSums",
    "Summaries",
    "Summarizing",
    "SummaryRequest",
    "SummarySpec",
    "TimeBuckets",
    "column_error",
    "get_engine",
    "id_error",
    "id_key",
    "id_keys",
    "id_kind",
    "infer_engine_name",
    "register_engine",
    "require_capability",
]
assert set(base.__all__) | set(requests.__all__) <= set(__all__)
