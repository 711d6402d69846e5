"""The memory engine (numpy): the reference oracle of the engine conformance suite."""

from dpfreq.engines.memory.engine import MemoryEngine

__all__ = ["MemoryEngine"]
