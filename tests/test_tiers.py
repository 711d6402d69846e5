"""The tier markers of tests/conftest.py: what the developer tier (-m "not slow") leaves out."""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


def _marks(item: pytest.Item) -> set[str]:
    return {m.name for m in item.iter_markers()}


def test_tier_markers_follow_the_directories(request: pytest.FixtureRequest) -> None:
    items = request.session.items
    assert items
    for item in items:
        rel = item.path.resolve().relative_to(TESTS)
        marks = _marks(item)
        if "spark" in getattr(item, "fixturenames", ()) or "spark" in marks:
            assert {"spark", "slow", "xdist_group"} <= marks, item.nodeid
        if rel.parts[0] == "server":
            assert {"server", "slow"} <= marks, item.nodeid
        if rel.parts[0] in ("statistical", "audit") or "statistical" in marks:
            assert {"statistical", "slow"} <= marks, item.nodeid
        if rel.name.startswith("test_docs"):
            assert "docs" in marks, item.nodeid
    assert "slow" not in _marks(request.node)  # this test is in the developer tier
