"""Shared fixtures (seeded generators, STYLE.md rule 17) and the markers of the test tiers.

Tiers (README, "Tests"):

* developer tier, ``python -m pytest -q -n 2 -m "not slow"``: everything but the tests below;
* full suite, ``python -m pytest -q -n 2 --dist loadgroup`` (CI, ``.ci/run``): every test.

Markers applied here by where a test lives, so a new test file is classified without editing it:

* ``spark``: a test that starts a local Spark session (marked ``spark``, using the ``spark``
  fixture, or in ``tests/engines/test_spark_*.py``); also ``slow``. These and every test with
  "spark" in its node id are in the xdist group ``spark``, so under ``--dist loadgroup`` they
  run on one worker (one JVM: a local session takes ~10 s of CPU to start, and two of them on
  2 cores slow every other test);
* ``server``: the collection-service tests (``tests/server/``); also ``slow`` (real servers in
  subprocesses, PostgreSQL clusters, kill -9 crash runs);
* ``docs``: the executed documentation pages and the Sphinx build (``tests/test_docs*.py``);
  the Sphinx build is also ``slow``;
* ``slow`` also: every test measured at ``SLOW_SECONDS`` or more (``tests/durations.json``);
* ``statistical``: every test of ``tests/statistical/`` and ``tests/audit/`` (seeded tests
  against exact laws, privacy audits; α ≤ 1e-6 per assertion), with the tests marked so
  elsewhere; all of them are ``slow``: they are sized by power calculations, not for speed.

Order: the modules holding a test measured at ``FIRST_SECONDS`` or more run first, by their
longest test, each with its tests longest first; the other modules follow as collected. Under
``--dist loadgroup`` xdist hands out the ``spark`` group first (the largest group) and then
single tests in this order, so the long tests are spread over both workers early and the run
ends with short tests on both: no long serial tail.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from pathlib import Path

import numpy as np
import pytest

_TESTS = Path(__file__).resolve().parent

#: A test measured at or above this many seconds (setup + call + teardown, 2 quiet cores, in
#: ``durations.json``, refreshed by ``tests/durations.py``) is ``slow``: out of the developer tier.
SLOW_SECONDS = 0.5
#: Modules with a test measured at or above this many seconds run first (see the docstring).
FIRST_SECONDS = 2.0
_DURATIONS: dict[str, float] = json.loads((_TESTS / "durations.json").read_text(encoding="utf-8"))
#: The node ids collected in this session, before any deselection (``tests/test_tiers.py``).
COLLECTED: set[str] = set()


def _importable(*modules: str) -> bool:
    try:
        for module in modules:
            importlib.import_module(module)
    except ImportError:
        return False
    return True


#: Without the [server] extra the service tests are not collected (their conftest and modules
#: import FastAPI, SQLAlchemy and httpx); the report header says so.
_SERVER_EXTRA = _importable("fastapi", "sqlalchemy", "httpx")
collect_ignore = [] if _SERVER_EXTRA else ["server"]


def pytest_report_header(config: pytest.Config) -> list[str]:
    lines = [] if _SERVER_EXTRA else ["tests/server not collected: the [server] extra is not "
                                      "installed"]
    if config.getoption("dist", "no") == "loadgroup" and pytest.version_tuple >= (9, 2):
        lines.append("pytest >= 9.2: xdist may ignore the 'spark' group (pytest-xdist#1386), "
                     "so each worker may start its own Spark session; the test extra caps "
                     "pytest < 9.2")
    return lines


@pytest.fixture
def seed(request: pytest.FixtureRequest) -> int:
    """A stable per-test seed derived from the test's node id (same test ⇒ same seed)."""
    digest = hashlib.sha256(request.node.nodeid.encode()).digest()
    return int.from_bytes(digest[:8], "little")


@pytest.fixture
def rng(seed: int) -> np.random.Generator:
    """A seeded generator for the test (never the secure default, never global state)."""
    return np.random.Generator(np.random.PCG64(seed))


def _is_spark(item: pytest.Item, rel: Path) -> bool:
    return (item.get_closest_marker("spark") is not None
            or "spark" in getattr(item, "fixturenames", ())
            or rel.name.startswith("test_spark"))


@pytest.hookimpl(tryfirst=True)  # before xdist reads the xdist_group marks (--dist loadgroup)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Apply the tier markers by directory and file (see the module docstring)."""
    for item in items:
        try:
            rel = item.path.resolve().relative_to(_TESTS)
        except ValueError:  # a test outside tests/ (a doctest of src/, say)
            continue
        if _is_spark(item, rel):
            item.add_marker(pytest.mark.spark)
            item.add_marker(pytest.mark.slow)
        if _is_spark(item, rel) or "spark" in item.nodeid.lower():
            item.add_marker(pytest.mark.xdist_group("spark"))
        if _DURATIONS.get(item.nodeid, 0.0) >= SLOW_SECONDS:
            item.add_marker(pytest.mark.slow)
        if rel.parts[0] in ("statistical", "audit"):
            item.add_marker(pytest.mark.statistical)
        if item.get_closest_marker("statistical") is not None:
            item.add_marker(pytest.mark.slow)
        if rel.parts[0] == "server":
            item.add_marker(pytest.mark.server)
            item.add_marker(pytest.mark.slow)
        if rel.name.startswith("test_docs"):
            item.add_marker(pytest.mark.docs)
            if rel.name == "test_docs_build.py":
                item.add_marker(pytest.mark.slow)
    COLLECTED.update(item.nodeid for item in items)  # before -m/-k/--lf deselect any
    _longest_first(items)


def _longest_first(items: list[pytest.Item]) -> None:
    """The modules holding a test measured at ``FIRST_SECONDS`` or more first, by their longest
    test, each with its tests longest first; then the other modules as collected. A module's
    tests stay together, so a module-scoped fixture is still set up once per worker."""
    def seconds(item: pytest.Item) -> float:
        return _DURATIONS.get(item.nodeid, 0.0)

    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    longest = {name: max(map(seconds, tests)) for name, tests in modules.items()}
    first = sorted((m for m in modules if longest[m] >= FIRST_SECONDS), key=lambda m: -longest[m])
    items[:] = [item for m in first for item in sorted(modules[m], key=lambda i: -seconds(i))]
    items += [item for m in modules if longest[m] < FIRST_SECONDS for item in modules[m]]


@pytest.fixture(autouse=True)
def _no_signing_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests see no DPFREQ_ARTIFACT_KEY from the developer's shell (it signs every saved file
    and ledger); the tests of signing set it themselves."""
    monkeypatch.delenv("DPFREQ_ARTIFACT_KEY", raising=False)
