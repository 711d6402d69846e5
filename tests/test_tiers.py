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


def test_durations_name_only_collected_tests(request: pytest.FixtureRequest) -> None:
    """A renamed or deleted test leaves no stale id in durations.json: an id of a missing file,
    or of a collected file that no longer holds it, fails here (``python tests/durations.py
    --prune`` drops them)."""
    conftest = request.config.pluginmanager.get_plugin(str(TESTS / "conftest.py"))
    assert conftest is not None
    whole_files = all("::" not in str(arg) for arg in request.config.args)
    files = {nodeid.split("::")[0] for nodeid in conftest.COLLECTED}
    root = TESTS.parent
    stale = sorted(nodeid for nodeid in conftest._DURATIONS
                   if not (root / nodeid.split("::")[0]).is_file()
                   or (whole_files and nodeid.split("::")[0] in files
                       and nodeid not in conftest.COLLECTED))
    assert not stale, (f"{len(stale)} stale ids in tests/durations.json (python "
                       f"tests/durations.py --prune drops them): {stale[:5]}")


def test_longest_tests_run_first(request: pytest.FixtureRequest) -> None:
    """The conftest's order: the modules with a test of FIRST_SECONDS or more first, by their
    longest test, and each module's tests together."""
    if request.config.getoption("failedfirst", False) or request.config.getoption("newfirst",
                                                                                   False):
        pytest.skip("--ff/--nf reorder the tests after the conftest")
    conftest = request.config.pluginmanager.get_plugin(str(TESTS / "conftest.py"))
    assert conftest is not None
    order: list[str] = []  # the modules, each time the next test is of another module
    longest: dict[str, float] = {}
    for item in request.session.items:
        nodeid = item.nodeid.rsplit("@", 1)[0] if item.nodeid.rfind("@") > item.nodeid.rfind(
            "]") else item.nodeid
        module = nodeid.split("::")[0]
        if not order or order[-1] != module:
            order.append(module)
        longest[module] = max(longest.get(module, 0.0), conftest._DURATIONS.get(nodeid, 0.0))
    assert len(order) == len(longest), "a module's tests are not together"
    seconds = [longest[m] for m in order]
    n_first = sum(s >= conftest.FIRST_SECONDS for s in seconds)
    assert seconds[:n_first] == sorted(seconds, reverse=True)[:n_first]
