"""The per-item state of a reach stream, kept in the engine that holds it.

:func:`item_store` gives the store of an engine — :class:`~dpfreq.stream.items.memory.MemoryItems`
(numpy arrays, the reference), :class:`~dpfreq.stream.items.duckdb.DuckDBItems` (Parquet files
updated by DuckDB SQL) or :class:`~dpfreq.stream.items.spark.SparkItems` (Parquet directories
updated by Spark SQL). A store's ``read`` aggregates an append's events where they are (DuckDB:
:func:`read_events`; Spark: :func:`~dpfreq.stream.items.spark_events.read_spark_events`) and
its ``update`` applies the update rule of :mod:`dpfreq.stream.items.update`.
"""

from typing import Any

from dpfreq.stream.items.duckdb import DuckDBItems
from dpfreq.stream.items.memory import MemoryItems
from dpfreq.stream.items.reader import AppendSpec, EventTable, read_events
from dpfreq.stream.items.spark import SparkItems
from dpfreq.stream.items.spark_events import SparkEvents
from dpfreq.stream.items.update import UpdatePlan, UpdateResult

__all__ = ["AppendSpec", "DuckDBItems", "EventTable", "MemoryItems", "SparkEvents", "SparkItems",
           "UpdatePlan", "UpdateResult", "item_store", "read_events"]

_STORES = {"memory": MemoryItems, "duckdb": DuckDBItems, "spark": SparkItems}


def item_store(engine: str) -> Any:
    """The store of ``engine`` (``"memory"``, ``"duckdb"`` or ``"spark"``)."""
    return _STORES[engine]()
