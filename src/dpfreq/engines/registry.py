"""The engine registry: one :class:`EngineEntry` per engine, and :func:`get_engine`.

An entry says where the engine's class lives (imported lazily, so that a missing optional
dependency matters only when that engine is asked for), the pip extra that brings its
dependencies, and the command-line options that configure it (each an :class:`EngineOption`
naming a keyword of the engine's constructor). A new engine is one package plus one
:func:`register_engine` call (see ``docs/contributing.md``, "A new engine").
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpfreq._validate import message
from dpfreq.engines import base
from dpfreq.engines._common import dataframe_kind
from dpfreq.errors import EngineUnavailableError, ParameterError, public_errors

__all__ = ["ENGINES", "EngineEntry", "EngineOption", "get_engine", "infer_engine_name",
           "register_engine", "require_capability"]


@dataclass(frozen=True)
class EngineOption:
    """A command-line option of an engine (``--spark-master URL`` → ``master=URL``).

    Attributes
    ----------
    flag : str
        The option as typed (``"--spark-master"``).
    keyword : str
        The keyword of the engine's constructor it sets.
    metavar : str
        The placeholder shown in ``--help``.
    help : str
        One sentence for ``--help``.

    Examples
    --------
    >>> EngineOption("--spark-master", "master", "URL", "The Spark master URL.").keyword
    'master'
    """

    flag: str
    keyword: str
    metavar: str
    help: str


@dataclass(frozen=True)
class EngineEntry:
    """What the registry knows of one engine.

    Attributes
    ----------
    name : str
        The registry name (``engine="duckdb"``, ``--engine duckdb``).
    module, cls : str
        Where the engine class lives (``"dpfreq.engines.duckdb"``, ``"DuckDBEngine"``),
        imported on first use.
    extra : str or None
        The pip extra with its dependencies (``pip install 'dpfreq[spark]'``); None when the
        core install has them.
    summary : str
        One line for ``--help`` and the docs.
    options : tuple of EngineOption
        Command-line options that configure the engine.

    Examples
    --------
    >>> ENGINES["spark"].extra, ENGINES["spark"].options[0].flag
    ('spark', '--spark-master')
    """

    name: str
    module: str
    cls: str
    extra: str | None = None
    summary: str = ""
    options: tuple[EngineOption, ...] = ()

    def load(self) -> type:
        """The engine class (imports its module; a missing extra becomes
        :class:`~dpfreq.errors.EngineUnavailableError` naming the ``pip install``)."""
        try:
            module = importlib.import_module(self.module)
        except ImportError as exc:
            if self.extra is None or not _missing_dependency(exc, self.module):
                raise
            raise EngineUnavailableError(
                f"the {self.name} engine needs an optional dependency ({exc.name}): "
                f"pip install 'dpfreq[{self.extra}]'") from exc
        cls: type = getattr(module, self.cls)
        return cls


def _missing_dependency(exc: ImportError, module: str) -> bool:
    """Whether the import failed for a dependency, not for the engine's own module."""
    name = exc.name or ""
    return not (module == name or (module.startswith(name + ".") and name.startswith("dpfreq")))


class EngineRegistry(dict[str, EngineEntry]):
    """The engine registry: engine name -> :class:`EngineEntry`.

    :func:`register_engine` adds to it; :func:`get_engine` builds an engine from it. A class of its
    own (not a bare ``dict``) so that the registry documents itself wherever it is re-exported.
    """


ENGINES: EngineRegistry = EngineRegistry()


@public_errors("register_engine")
def register_engine(entry: EngineEntry) -> EngineEntry:
    """Add (or replace) an engine in the registry; returns the entry.

    Parameters
    ----------
    entry : EngineEntry
        The engine's entry; its class must satisfy :class:`dpfreq.engines.Engine`.

    Returns
    -------
    EngineEntry
        ``entry``.

    Raises
    ------
    ParameterError
        If ``entry`` is not an :class:`EngineEntry` or its name is not a lowercase word.

    Examples
    --------
    >>> e = register_engine(EngineEntry("numpy-copy", "dpfreq.engines.memory", "MemoryEngine"))
    >>> "numpy-copy" in ENGINES
    True
    >>> del ENGINES["numpy-copy"]
    """
    if not isinstance(entry, EngineEntry):
        raise ParameterError(message("entry", "an EngineEntry",
                                     type(entry).__name__))
    if not entry.name or not entry.name.replace("-", "").replace("_", "").isalnum() \
            or entry.name != entry.name.lower():
        raise ParameterError(message("entry", "an entry whose name is a "
                                     "lowercase word", entry.name))
    ENGINES[entry.name] = entry
    return entry


register_engine(EngineEntry("memory", "dpfreq.engines.memory", "MemoryEngine", None,
                            "numpy in this process (the reference oracle)"))
register_engine(EngineEntry("duckdb", "dpfreq.engines.duckdb", "DuckDBEngine", None,
                            "DuckDB on this machine (files, SQL, DataFrames; the default)"))
register_engine(EngineEntry(
    "spark", "dpfreq.engines.spark", "SparkEngine", "spark",
    "Spark SQL on a cluster (executors need no dpfreq)",
    (EngineOption("--spark-master", "master", "URL",
                  "Spark master URL for --engine spark: local[N], spark://HOST:PORT, yarn or "
                  "k8s://URL (default local[*]; ignored when a session is already active)."),)))


@public_errors("get_engine")
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
        message("source", "a mapping of columns, a CSV/Parquet path, a SQL query, "
                "a DuckDB relation, a pandas, Polars or Arrow table or a Spark DataFrame",
                type(source).__name__)
    )


def _is_spark_session(obj: Any) -> bool:
    """A ``pyspark.sql.SparkSession`` (classic or Connect), recognized without importing pyspark."""
    cls = type(obj)
    return cls.__module__.startswith("pyspark") and cls.__name__ == "SparkSession"


def _names() -> str:
    return ", ".join(repr(n) for n in ENGINES)


@public_errors("get_engine")
def get_engine(name: str | base.Engine | Any = None, source: Any = None,
               **options: Any) -> base.Engine:
    """Instantiate an engine by name (``"memory"``, ``"duckdb"``, ``"spark"``, or any
    registered name) or for a source.

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
                    "options", "empty when an engine instance is given "
                    "(configure the instance instead)", sorted(options)))
            return name
        raise ParameterError(message("engine", f"one of {_names()}, an engine "
                                     "instance or a SparkSession", type(name).__name__))
    if name is None:
        name = infer_engine_name(source)
    if name not in ENGINES:
        raise ParameterError(message("engine", f"one of {_names()}", name))
    engine: base.Engine = ENGINES[name].load()(**options)
    return engine


def require_capability(engine: base.Engine, capability: Any, what: str) -> Any:
    """``engine`` as an engine with ``capability`` (a protocol of :mod:`dpfreq.engines.base`,
    e.g. :class:`~dpfreq.engines.base.Summarizing`), or a one-line error naming the engine and
    ``what`` the call needs.

    Examples
    --------
    >>> from dpfreq.engines.base import Summarizing
    >>> require_capability(get_engine("memory"), Summarizing, "window summaries").name
    'memory'
    """
    if not isinstance(engine, capability):
        raise ParameterError(message("engine", f"an engine that computes {what}",
                                     getattr(engine, "name", type(engine).__name__)))
    return engine
