"""Engine registry: ``get_engine(name_or_None, source)`` picks where aggregation runs.

Systems reach engines only through :func:`get_engine` and the protocol types re-exported here,
never through an engine module. Engines are imported lazily so that a missing optional
dependency (pyspark) only matters when that engine is asked for, and then raises
:class:`~dpfreq.errors.EngineUnavailableError` naming the pip extra.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpfreq._validate import message
from dpfreq.engines import base
from dpfreq.engines._common import dataframe_kind
from dpfreq.engines.base import *  # noqa: F403 (the protocol types, re-exported)
from dpfreq.errors import EngineUnavailableError, ParameterError

# the registry, and the protocol types of dpfreq.engines.base (the star import above)
__all__ = ["ENGINES", *base.__all__, "get_engine", "infer_engine_name"]

#: engine name -> (module, class name, pip extra or None)
ENGINES: dict[str, tuple[str, str, str | None]] = {
    "memory": ("dpfreq.engines.memory", "MemoryEngine", None),
    "duckdb": ("dpfreq.engines.duckdb", "DuckDBEngine", None),
    "spark": ("dpfreq.engines.spark", "SparkEngine", "spark"),
}


def infer_engine_name(source: Any) -> str:
    """The default engine for a source: mappings → memory; files, SQL, DuckDB relations and
    pandas/Polars/Arrow tables → duckdb (which scans DataFrames in place, without a copy);
    Spark DataFrames → spark (all recognized without importing pyspark, pandas or Polars).

    Parameters
    ----------
    source : Any
        The data source given to a ``release_*`` function.

    Returns
    -------
    str
        ``"memory"``, ``"duckdb"`` or ``"spark"``.

    Raises
    ------
    ParameterError
        If ``source`` is of no kind an engine reads.

    Examples
    --------
    >>> infer_engine_name({"item": [1, 2, 2]}), infer_engine_name("events.parquet")
    ('memory', 'duckdb')
    >>> infer_engine_name(42)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dpfreq.errors.ParameterError: source of get_engine must be a mapping of columns, ...
    """
    module = type(source).__module__
    if module.startswith("pyspark"):
        return "spark"
    if module.startswith("duckdb") or dataframe_kind(source) is not None:
        return "duckdb"
    if isinstance(source, Mapping):
        return "memory"
    if isinstance(source, str | Path):
        return "duckdb"
    raise ParameterError(
        message("source", "get_engine", "a mapping of columns, a CSV/Parquet path, a SQL query, "
                "a DuckDB relation, a pandas, Polars or Arrow table or a Spark DataFrame",
                type(source).__name__)
    )


def _is_spark_session(obj: Any) -> bool:
    """A ``pyspark.sql.SparkSession`` (classic or Connect), recognized without importing pyspark."""
    cls = type(obj)
    return cls.__module__.startswith("pyspark") and cls.__name__ == "SparkSession"


def get_engine(name: str | base.Engine | Any = None, source: Any = None,
               **options: Any) -> base.Engine:
    """Instantiate an engine by name (``"memory"``, ``"duckdb"``, ``"spark"``) or for a source.

    Parameters
    ----------
    name : str, Engine, SparkSession or None
        Engine name; ``None`` infers it from ``source`` (:func:`infer_engine_name`). An engine
        *instance* (e.g. ``get_engine("spark", master="spark://host:7077")``) is returned as it
        is, so that every ``release_*`` function's ``engine=`` accepts a configured engine; a
        ``SparkSession`` selects the Spark engine on that session.
    source : Any
        The data source, used only when ``name`` is None.
    **options
        Passed to the engine's constructor (e.g. ``connection=`` for DuckDB, ``spark=`` or
        ``master=`` for Spark). Not allowed with an engine instance.

    Returns
    -------
    Engine
        A new engine (or the instance given).

    Raises
    ------
    ParameterError
        Unknown engine name, or options given together with an engine instance.
    EngineUnavailableError
        The engine's optional dependency is missing (the message is the ``pip install`` to run).

    Examples
    --------
    >>> get_engine("memory").name
    'memory'
    >>> eng = get_engine("duckdb")
    >>> get_engine(eng) is eng
    True
    """
    if name is not None and not isinstance(name, str):
        if _is_spark_session(name):
            return get_engine("spark", spark=name, **options)
        if isinstance(name, base.Engine):
            if options:
                raise ParameterError(message(
                    "options", "get_engine", "empty when an engine instance is given "
                    "(configure the instance instead)", sorted(options)))
            return name
        raise ParameterError(message("engine", "get_engine", "one of " +
                                     ", ".join(repr(n) for n in ENGINES) +
                                     ", an engine instance or a SparkSession",
                                     type(name).__name__))
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
    engine: base.Engine = getattr(module, cls_name)(**options)
    return engine

