"""Shared fixtures: seeded generators (STYLE.md rule 17)."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import pytest


@pytest.fixture
def seed(request: pytest.FixtureRequest) -> int:
    """A stable per-test seed derived from the test's node id (same test ⇒ same seed)."""
    digest = hashlib.sha256(request.node.nodeid.encode()).digest()
    return int.from_bytes(digest[:8], "little")


@pytest.fixture
def rng(seed: int) -> np.random.Generator:
    """A seeded generator for the test (never the secure default, never global state)."""
    return np.random.Generator(np.random.PCG64(seed))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test that starts Spark (marked ``spark`` or using the ``spark`` fixture) says so in
    its node id, which is all the scheduler below sees."""
    hidden = [item.nodeid for item in items
              if (item.get_closest_marker("spark") or "spark" in getattr(item, "fixturenames", ()))
              and "spark" not in item.nodeid.lower()]
    if hidden:
        raise pytest.UsageError(f"Spark tests without 'spark' in their node id: {hidden}")


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, absent without it
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``-n N`` (``--dist load``), all Spark tests run on one worker, first.

    A local Spark session is a JVM that takes ~10 s of CPU to start and warm up, and two of
    them on a 2-core machine slow each other and every other test. xdist's load-scope
    scheduler hands out work units: here the Spark tests are one unit (the largest, so it is
    sent first) and every other test is a unit of its own.
    """
    if config.getoption("dist", "no") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    if not callable(getattr(LoadScopeScheduling, "_split_scope", None)):  # xdist's own hook
        raise pytest.UsageError("pytest-xdist no longer has LoadScopeScheduling._split_scope: "
                                "update the Spark scheduler in tests/conftest.py")

    class SparkOnOneWorker(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "spark" if "spark" in nodeid.lower() else nodeid

    return SparkOnOneWorker(config, log)
