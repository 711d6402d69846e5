"""The grammar of the public API (README, "One grammar"), checked over every system.

Signatures: every public ``release_*``/``simulate_*`` function and every sketch constructor
takes ``epsilon`` keyword-only and without a default; central releases (``release_*`` and the
sketches) take ``accountant``; data comes first as ``source``; where a system offers more than one
unit of privacy, or refuses some (profile, windows, anonymized), ``unit`` is required; the
confidence level is ``confidence`` (never ``eta``, ``beta`` or ``level``); randomness is the
keyword-only ``rng``.

Results: every release type has ``value, error, epsilon, delta, unit, mechanism`` and
``to_json, to_pandas, plot``; one small release of each system is built and used.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from dpfreq.release import RELATIONS, ErrorStatement, Release

SYSTEMS = ("profile", "anonymized", "windows", "longitudinal", "stream")
MULTI_UNIT = {"profile", "windows", "anonymized", "stream"}  # systems whose callers name the unit
OLD_NAMES = {"eta", "beta", "level", "label", "periods", "changes", "user", "alpha"}
UNITS = set(RELATIONS)  # the documented relations (docs/theory/relations.md)
SURFACE_FIELDS = ("value", "error", "epsilon", "delta", "unit", "mechanism")
SURFACE_METHODS = ("to_json", "to_pandas", "plot")


def _public(system: str) -> dict[str, Any]:
    module = importlib.import_module(f"dpfreq.{system}")
    return {name: getattr(module, name) for name in module.__all__}


def _entry_points() -> list[Any]:
    """(system, name, callable, central) for each release, simulation and sketch constructor."""
    out = []
    for system in SYSTEMS:
        for name, obj in _public(system).items():
            if name.startswith(("release_", "simulate_")):
                out.append(pytest.param(system, name, obj, name.startswith("release_"),
                                        id=f"{system}.{name}"))
            elif isinstance(obj, type) and name.endswith(("Sketch", "Stream")):
                func = getattr(obj, "create", obj)
                out.append(pytest.param(system, name, func, True, id=f"{system}.{name}"))
    return out


ENTRY_POINTS = _entry_points()


def _parameters(func: Callable[..., Any]) -> dict[str, inspect.Parameter]:
    return dict(inspect.signature(func).parameters)


def test_every_system_has_entry_points() -> None:
    systems = {p.values[0] for p in ENTRY_POINTS}
    assert systems == set(SYSTEMS)


@pytest.mark.parametrize(("system", "name", "func", "central"), ENTRY_POINTS)
def test_signature_grammar(system: str, name: str, func: Callable[..., Any],
                           central: bool) -> None:
    params = _parameters(func)
    problems = []
    eps = params.get("epsilon")
    if eps is None or eps.kind is not inspect.Parameter.KEYWORD_ONLY:
        problems.append("epsilon must be keyword-only")
    elif eps.default is not inspect.Parameter.empty:
        problems.append("epsilon must have no default")
    if central and "accountant" not in params:
        problems.append("a central release takes accountant=")
    # the sketches support one unit (one event: the noisy histogram's sensitivity is per
    # occurrence), so they state it in their releases instead of taking it as an argument
    if system in MULTI_UNIT and not name.endswith("Sketch"):
        unit = params.get("unit")
        if unit is None:
            problems.append("unit= is required (the system offers or refuses several units)")
        elif unit.default is not inspect.Parameter.empty:
            problems.append("unit must have no default")
    old = sorted(OLD_NAMES & set(params))
    if old:
        problems.append(f"old parameter names {old} (use confidence, item, horizon, ...)")
    rng = params.get("rng")
    if rng is None or rng.kind is not inspect.Parameter.KEYWORD_ONLY:
        problems.append("rng= must be keyword-only")
    if name.startswith("release_"):
        first = next(iter(params.values()), None)
        if first is None or first.name != "source" or first.kind not in (
                inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            problems.append("the data comes first, as the positional source")
        for kw in ("engine", "confidence"):
            if kw not in params:
                problems.append(f"{kw}= missing")
    assert not problems, f"{system}.{name}: " + "; ".join(problems)


def _release_types() -> list[Any]:
    out = []
    for system in SYSTEMS:
        for name, obj in _public(system).items():
            if isinstance(obj, type) and issubclass(obj, Release):
                out.append(pytest.param(obj, id=f"{system}.{name}"))
    return out


@pytest.mark.parametrize("cls", _release_types())
def test_release_type_surface(cls: type) -> None:
    fields = {f.name for f in dataclasses.fields(cls)}
    missing = [f for f in SURFACE_FIELDS if f not in fields and not hasattr(cls, f)]
    missing += [m for m in SURFACE_METHODS if not callable(getattr(cls, m, None))]
    assert not missing, f"{cls.__name__} lacks {missing}"
    assert dataclasses.is_dataclass(cls)
    assert cls.__dataclass_params__.frozen  # type: ignore[attr-defined]


# -- one release of each system, used through the common surface ------------------------------
def _profile() -> Any:
    from dpfreq.profile import release_profile

    return release_profile(np.array([1, 2, 2, 3, 1]), domain_size=12, max_count=3,
                           epsilon=1.0, unit="event", rng=1)


def _anonymized() -> Any:
    from dpfreq.anonymized import release_anonymized_histogram

    return release_anonymized_histogram(np.array([1, 2, 2, 3, 1]), epsilon=1.0, rng=1, unit="event")


def _windows() -> Any:
    from dpfreq.windows import release_window_counts

    log = {"item": np.array([1, 1, 2, 3, 3, 3]), "time": np.array([1, 2, 2, 3, 4, 4])}
    return release_window_counts(log, item="item", time="time", horizon=4, epsilon=1.0,
                                 unit="event", k_values=[1, 2], rng=1, windows=["cumulative"])


def _longitudinal() -> Any:
    from dpfreq.longitudinal import simulate_longitudinal

    return simulate_longitudinal(devices=40, horizon=8, max_changes=2, epsilon=1.0,
                                 method="futurerand", rng=1)


def _stream() -> Any:
    import tempfile

    from dpfreq.stream import ReachStream

    s = ReachStream.create(tempfile.mkdtemp() + "/s", item="item", time="time", horizon=4,
                           k_values=[1, 2], unit="event", epsilon=1.0, delta=0.0,
                           method="auto", late="error", engine="memory", rng=1)
    return s.append({"item": np.array([1, 1, 2, 3]), "time": np.array([1, 2, 2, 2])},
                    through=2)[-1]


RELEASES = {"profile": _profile, "anonymized": _anonymized, "windows": _windows,
            "longitudinal": _longitudinal, "stream": _stream}


@pytest.mark.parametrize("system", list(RELEASES))
def test_release_surface_in_use(system: str) -> None:
    pd = pytest.importorskip("pandas")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rel = RELEASES[system]()
    assert isinstance(rel, Release)
    assert rel.unit in UNITS
    assert rel.epsilon == 1.0
    assert rel.delta >= 0
    assert isinstance(rel.mechanism, str)
    assert rel.mechanism
    assert isinstance(rel.error, ErrorStatement)
    assert 0 < rel.error.confidence < 1
    assert json.loads(rel.to_json())["unit"] == rel.unit
    assert json.loads(rel.to_json())["relation"] == RELATIONS[rel.unit] == rel.relation
    table = rel.to_pandas()
    assert isinstance(table, pd.DataFrame)
    assert table.attrs["relation"] == RELATIONS[rel.unit]
    assert len(table.columns) >= 1
    fig_before = set(plt.get_fignums())
    ax = rel.plot()
    assert ax is not None
    for num in set(plt.get_fignums()) - fig_before:
        plt.close(num)


def _arrays(obj: Any) -> list[np.ndarray]:
    if isinstance(obj, np.ndarray):
        return [obj]
    if isinstance(obj, dict):
        return [a for v in obj.values() for a in _arrays(v)]
    if isinstance(obj, list | tuple):
        return [a for v in obj for a in _arrays(v)]
    return []


@pytest.mark.parametrize("system", list(RELEASES))
def test_released_arrays_are_read_only(system: str) -> None:
    """A release records what was published: its value and error arrays cannot be edited."""
    rel = RELEASES[system]()
    err = rel.error
    arrays = _arrays(rel.value) + _arrays([err.value, err.lower, err.upper, err.band_lower,
                                           err.band_upper])
    assert arrays
    for a in arrays:
        with pytest.raises(ValueError, match="read-only"):
            a[...] = 0


def test_the_callers_arrays_stay_writable() -> None:
    """Freezing a release's arrays makes read-only views; what the caller passed is untouched."""
    value, lower = np.array([10, 4]), np.array([8.0, 2.0])
    err = ErrorStatement(kind="interval", confidence=0.9, value=np.array([2.0, 2.0]),
                         description="d", lower=lower, upper=np.array([12.0, 6.0]))
    rel = Release(value={"a": value}, epsilon=1.0, unit="event", mechanism="m", seeded=True,
                  error=err)
    assert value.flags.writeable
    assert lower.flags.writeable
    assert not rel.value["a"].flags.writeable
    assert not rel.error.lower.flags.writeable
    value[0] = 11
    assert rel.value["a"][0] == 11  # a view: no copy of the data


def test_every_unit_names_a_documented_relation() -> None:
    """Each release's ``unit`` is a word of :data:`RELATIONS`; the words are documented on one
    page, and each system's releases (profile at all three of its units) state the relation."""
    from pathlib import Path

    from dpfreq.profile import release_profile

    page = (Path(__file__).resolve().parents[1] / "docs" / "theory" / "relations.md").read_text()
    for word, relation in RELATIONS.items():
        assert f"`{word}`" in page, word
        assert relation in page, relation
    for system, make in RELEASES.items():
        rel = make()
        assert rel.unit in RELATIONS, system
        assert rel.mechanism_params.get("relation", rel.relation) == RELATIONS[rel.unit], system
    for unit in ("event", "item", "item_replace"):
        rel = release_profile(np.array([3, 1, 0, 2]), domain_size=10, max_count=4,
                              epsilon=1.0, unit=unit, rng=7)
        assert (rel.unit, rel.mechanism_params["relation"]) == (unit, RELATIONS[unit])
