"""Shared fixtures: seeded generators (STYLE.md rule 17)."""

from __future__ import annotations

import hashlib

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
