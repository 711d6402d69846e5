"""The per-item state of a reach stream, kept in the engine that holds it.

:func:`read_events` aggregates an append's events (DuckDB, where they are); :func:`item_store`
gives the store of an engine — :class:`~dpfreq.stream.items.memory.MemoryItems` (numpy arrays,
the reference) or :class:`~dpfreq.stream.items.duckdb.DuckDBItems` (Parquet files updated by
DuckDB SQL) — which applies the update rule of :mod:`dpfreq.stream.items.update`.
"""

from typing import Any

from dpfreq.stream.items.duckdb import DuckDBItems
from dpfreq.stream.items.memory import MemoryItems
from dpfreq.stream.items.reader import AppendSpec, EventTable, read_events
from dpfreq.stream.items.update import UpdatePlan, UpdateResult

__all__ = ["AppendSpec", "DuckDBItems", "EventTable", "MemoryItems", "UpdatePlan",
           "UpdateResult", "item_store", "read_events"]


def item_store(engine: str) -> Any:
    """The store of ``engine`` (``"memory"`` or ``"duckdb"``)."""
    return MemoryItems() if engine == "memory" else DuckDBItems()
