"""Engines: where exact aggregates are computed, and the registry that picks one.

Systems reach engines only through :func:`get_engine` and the protocol and request types
re-exported here, never through an engine package. Each engine is a package
(``dpfreq.engines.memory``, ``.duckdb``, ``.spark``) with one :class:`EngineEntry` in the
registry (:data:`ENGINES`): its class, imported lazily so that a missing optional dependency
(pyspark) only matters when that engine is asked for and then raises
:class:`~dpfreq.errors.EngineUnavailableError` naming the pip extra, and its command-line
options.
"""

from __future__ import annotations

from dpfreq.engines import base
from dpfreq.engines.base import *  # noqa: F403 (the protocol types, re-exported)
from dpfreq.engines.registry import (
    ENGINES,
    EngineEntry,
    EngineOption,
    get_engine,
    infer_engine_name,
    register_engine,
)

# the registry, and the protocol types of dpfreq.engines.base (the star import above)
__all__ = sorted(["ENGINES", "EngineEntry", "EngineOption", *base.__all__, "get_engine",
                  "infer_engine_name", "register_engine"])
