"""Engine registry: ``get_engine(name_or_None, source)`` picks where aggregation runs.

Systems reach engines only through :func:`get_engine` (DESIGN.md §2). Engines are imported
lazily so that a missing optional dependency (pyspark) only matters when that engine is asked
for, and then raises :class:`~dpfreq.errors.EngineUnavailableError` naming the pip extra.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpfreq._validate import message
from dpfreq.engines.base import Engine, ItemCounts, OccurrenceTimes, Prevalences, ReportSums
from dpfreq.errors import EngineUnavailableError, ParameterError

__all__ = [
    "ENGINES",
    "Engine",
    "ItemCounts",
    "OccurrenceTimes",
    "Prevalences",
    "ReportSums",
    "get_engine",
    "infer_engine_name",
]

#: engine name -> (module, class name, pip extra or None)
ENGINES: dict[str, tuple[str, str, str | None]] = {
    "memory": ("dpfreq.engines.memory", "MemoryEngine", None),
    "duckdb": ("dpfreq.engines.duckdb", "DuckDBEngine", None),
    "spark": ("dpfreq.engines.spark", "SparkEngine", "spark"),
}


def infer_engine_name(source: Any) -> str:
    """The default engine for a source: mappings → memory, files/SQL/relations → duckdb,
    Spark DataFrames → spark (recognized without importing pyspark)."""
    module = type(source).__module__
    if module.startswith("pyspark"):
        return "spark"
    if module.startswith("duckdb"):
        return "duckdb"
    if isinstance(source, Mapping):
        return "memory"
    if isinstance(source, str | Path):
        return "duckdb"
    raise ParameterError(
        message("source", "get_engine", "a mapping of columns, a CSV/Parquet path, a SQL query, "
                "a DuckDB relation or a Spark DataFrame", type(source).__name__)
    )


def get_engine(name: str | None = None, source: Any = None, **options: Any) -> Engine:
    """Instantiate an engine by name (``"memory"``, ``"duckdb"``, ``"spark"``) or for a source.

    Parameters
    ----------
    name : str or None
        Engine name; ``None`` infers it from ``source`` (:func:`infer_engine_name`).
    source : Any
        The data source, used only when ``name`` is None.
    **options
        Passed to the engine's constructor (e.g. ``connection=`` for DuckDB, ``spark=`` or
        ``master=`` for Spark).
    """
    if name is None:
        name = infer_engine_name(source)
    if name not in ENGINES:
        raise ParameterError(message("engine", "get_engine", "one of " +
                                     ", ".join(repr(n) for n in ENGINES), name))
    module_name, cls_name, extra = ENGINES[name]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if extra is None:
            raise
        raise EngineUnavailableError(
            f"the {name} engine needs an optional dependency ({exc.name}): "
            f"pip install 'dpfreq[{extra}]'"
        ) from exc
    engine: Engine = getattr(module, cls_name)(**options)
    return engine
