"""Every release refuses an unaffordable (ε, δ) before it reads the source.

Each call below asks for more than its accountant or ledger holds. The engines' reading
methods are replaced by a stub that records the call, and one source is a CSV path that does
not exist (reading it would raise a DataError): the call must raise BudgetExceededError, no
engine method may have been called, and nothing may have been spent.

The longitudinal system has no case here: its central step (aggregating device reports) is
post-processing of ε-LDP reports and spends no central budget, so it takes no accountant
(checked below, so a central budget added later must be added to these cases).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpfreq.anonymized import release_anonymized_histogram
from dpfreq.budget import Accountant, PrivacyBudget
from dpfreq.engines.duckdb import DuckDBEngine
from dpfreq.engines.memory import MemoryEngine
from dpfreq.errors import BudgetExceededError, DataError, ParameterError
from dpfreq.ledger import Ledger
from dpfreq.longitudinal import aggregate_reports_file
from dpfreq.profile import release_profile
from dpfreq.windows import release_window_counts

_READERS = ("item_counts", "count_of_counts", "grouped_count_of_counts", "summaries",
            "occurrence_times", "report_sums")
_WINDOWS = {"item": "u", "time": "t", "horizon": 4, "k_values": [1], "windows": ["cumulative"]}
_PROFILE = {"item": "u", "domain_size": 100, "max_count": 3}

# (name, call, ε asked, δ asked, unit); each call takes (source, engine, accountant).
CASES: list[tuple[str, Callable[..., Any], float, float, str]] = [
    ("profile", lambda s, e, a: release_profile(
        s, engine=e, accountant=a, epsilon=1.0, unit="item", **_PROFILE), 1.0, 0.0, "item"),
    ("profile-groups", lambda s, e, a: release_profile(
        s, engine=e, accountant=a, epsilon=1.0, unit="item", group="g", groups=["a"],
        max_groups_per_item=1, **_PROFILE), 1.0, 0.0, "item"),
    ("profile-selection", lambda s, e, a: release_profile(
        s, engine=e, accountant=a, epsilon=1.0, unit="item", group="g", delta=1e-6,
        max_groups_per_item=1, **_PROFILE), 1.0, 1e-6, "item"),
    ("anonymized", lambda s, e, a: release_anonymized_histogram(
        s, item="u", engine=e, accountant=a, epsilon=1.0, unit="event"), 1.0, 0.0, "event"),
    ("anonymized-groups", lambda s, e, a: release_anonymized_histogram(
        s, item="u", engine=e, accountant=a, epsilon=1.0, unit="event", group="g",
        groups=["a"]), 1.0, 0.0, "event"),
    ("anonymized-selection", lambda s, e, a: release_anonymized_histogram(
        s, item="u", engine=e, accountant=a, epsilon=1.0, unit="event", group="g",
        delta=1e-6), 1.0, 1e-6, "event"),
    ("windows", lambda s, e, a: release_window_counts(
        s, engine=e, accountant=a, epsilon=1.0, unit="item", **_WINDOWS), 1.0, 0.0, "item"),
    ("windows-delta", lambda s, e, a: release_window_counts(
        s, engine=e, accountant=a, epsilon=1.0, delta=1e-6, unit="item", **_WINDOWS),
     1.0, 1e-6, "item"),
    ("windows-groups", lambda s, e, a: release_window_counts(
        s, engine=e, accountant=a, epsilon=1.0, unit="item", group="g", groups=["a"],
        max_groups_per_item=1, **_WINDOWS), 1.0, 0.0, "item"),
    ("windows-selection", lambda s, e, a: release_window_counts(
        s, engine=e, accountant=a, epsilon=1.0, delta=1e-6, unit="item", group="g",
        max_groups_per_item=1, **_WINDOWS), 1.0, 1e-6, "item"),
]


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The engine reading methods called during the test (each replaced by a recorder)."""
    calls: list[str] = []
    for cls in (MemoryEngine, DuckDBEngine):
        for name in _READERS:
            def record(self: Any, *args: Any, _n: str = f"{cls.__name__}.{name}",
                       **kwargs: Any) -> Any:
                calls.append(_n)
                raise RuntimeError(f"{_n} read the source before the budget check")
            monkeypatch.setattr(cls, name, record)
    return calls


def _frame() -> pd.DataFrame:
    return pd.DataFrame({"u": np.array([1, 2, 2, 3]), "t": np.array([1, 2, 3, 4]),
                         "g": ["a", "a", "b", "a"]})


def _sources(tmp_path: Path) -> list[tuple[Any, str | None]]:
    """(source, engine): a DataFrame on each engine, and a CSV path that does not exist."""
    missing = tmp_path / "missing.csv"
    assert not missing.exists()
    return [(_frame(), "memory"), (_frame(), "duckdb"), (str(missing), None)]


def _short(eps: float, dlt: float) -> PrivacyBudget:
    """A budget just short of (ε, δ): ε short when δ = 0, else δ short (ε covered)."""
    return PrivacyBudget(eps / 2) if dlt == 0 else PrivacyBudget(2 * eps, dlt / 2)


@pytest.mark.parametrize(("name", "call", "eps", "dlt", "unit"), CASES,
                         ids=[c[0] for c in CASES])
def test_accountant_refuses_before_read(name: str, call: Callable[..., Any], eps: float,
                                        dlt: float, unit: str, reads: list[str],
                                        tmp_path: Path) -> None:
    for source, engine in _sources(tmp_path):
        for acct in (Accountant(_short(eps, dlt)), Accountant(_short(eps, dlt), unit=unit)):
            with pytest.raises(BudgetExceededError):
                call(source, engine, acct)
            assert reads == [], f"{name} read the source before refusing: {reads}"
            assert (acct.spent.epsilon, acct.spent.delta) == (0.0, 0.0)
            assert acct.ledger == []


@pytest.mark.parametrize(("name", "call", "eps", "dlt", "unit"), CASES,
                         ids=[c[0] for c in CASES])
def test_ledger_refuses_before_read(name: str, call: Callable[..., Any], eps: float,
                                    dlt: float, unit: str, reads: list[str],
                                    tmp_path: Path) -> None:
    ledger = Ledger.create(tmp_path / "budget.sqlite", _short(eps, dlt), unit=unit)
    for source, engine in _sources(tmp_path):
        with pytest.raises(BudgetExceededError):
            call(source, engine, ledger)
        assert reads == [], f"{name} read the source before refusing: {reads}"
        assert (ledger.spent.epsilon, ledger.spent.delta) == (0.0, 0.0)


def test_recorder_catches_a_read(reads: list[str]) -> None:
    """The stubs do see a read: an affordable call reaches the engine."""
    with pytest.raises(RuntimeError, match="read the source"):
        release_profile(_frame(), engine="memory", accountant=Accountant(PrivacyBudget(2.0)),
                        epsilon=1.0, unit="item", **_PROFILE)
    assert reads == ["MemoryEngine.count_of_counts"]


def test_longitudinal_aggregation_spends_no_central_budget() -> None:
    """The device reports are ε-LDP already: aggregating them takes no ε and no accountant."""
    params = inspect.signature(aggregate_reports_file).parameters
    assert "accountant" not in params
    assert "epsilon" not in params


_GROUPED = {"item": "u", "group": "g", "rng": 0}
# (name, call taking an accountant, error, message start): a grouped release refused by its
# plan (public parameters: memory, split, missing groups) before anything is read.
PLAN_REFUSALS: list[tuple[str, Callable[..., Any], type[Exception], str]] = [
    ("profile-memory", lambda a: release_profile(
        _frame(), accountant=a, groups=[f"g{i}" for i in range(10**5)], max_groups_per_item=1,
        domain_size=10**6, max_count=10**5, epsilon=1.0, unit="item", **_GROUPED),
     ParameterError, "max_count of release_profile must be"),
    ("anonymized-split", lambda a: release_anonymized_histogram(
        _frame(), accountant=a, groups=["a"], epsilon=1.0, unit="event", method="privhist",
        split=(0.9, 0.9, 0.9), **_GROUPED),
     ParameterError, "split of release_anonymized_histogram must be"),
    ("windows-no-groups", lambda a: release_window_counts(
        _frame(), accountant=a, time="t", horizon=4, k_values=[1], windows=["cumulative"],
        max_groups_per_item=1, epsilon=1.0, unit="item", **_GROUPED),
     ParameterError, "groups of release_window_counts must be"),
]
# The same, refused by a check on the data (after the budget check, before the spend).
READ_REFUSALS: list[tuple[str, Callable[..., Any], type[Exception], str]] = [
    ("profile-domain", lambda a: release_profile(
        _frame(), accountant=a, groups=["a"], max_groups_per_item=1, domain_size=1,
        max_count=3, epsilon=1.0, unit="item", **_GROUPED),
     DataError, "source of release_profile holds more distinct items"),
    ("anonymized-domain", lambda a: release_anonymized_histogram(
        _frame(), accountant=a, groups=["a"], epsilon=1.0, unit="event", domain_size=1,
        **_GROUPED),
     DataError, "domain_size of release_anonymized_histogram must be"),
    ("windows-range", lambda a: release_window_counts(
        _frame(), accountant=a, time="t", horizon=3, k_values=[1], windows=["cumulative"],
        groups=["a"], max_groups_per_item=1, epsilon=1.0, unit="item", **_GROUPED),
     DataError, "time of release_window_counts must be inside"),
]


@pytest.mark.parametrize(("name", "call", "error", "text"), PLAN_REFUSALS,
                         ids=[c[0] for c in PLAN_REFUSALS])
def test_grouped_plan_refusal_reads_and_spends_nothing(
        name: str, call: Callable[..., Any], error: type[Exception], text: str,
        reads: list[str]) -> None:
    acct = Accountant(PrivacyBudget(10.0, 1e-3))
    with pytest.raises(error, match=f"^{text}"):
        call(acct)
    assert reads == [], f"{name} read the source before refusing: {reads}"
    assert (acct.spent.epsilon, acct.spent.delta) == (0.0, 0.0)
    assert acct.ledger == []


@pytest.mark.parametrize(("name", "call", "error", "text"), READ_REFUSALS,
                         ids=[c[0] for c in READ_REFUSALS])
def test_grouped_read_refusal_spends_nothing(name: str, call: Callable[..., Any],
                                             error: type[Exception], text: str,
                                             tmp_path: Path) -> None:
    acct = Accountant(PrivacyBudget(10.0, 1e-3))
    with pytest.raises(error, match=f"^{text}"):
        call(acct)
    assert (acct.spent.epsilon, acct.spent.delta) == (0.0, 0.0)
    assert acct.ledger == []
    unit = "event" if name.startswith("anonymized") else "item"
    ledger = Ledger.create(tmp_path / "budget.sqlite", PrivacyBudget(10.0, 1e-3), unit=unit)
    with pytest.raises(error, match=f"^{text}"):
        call(ledger)
    assert (ledger.spent.epsilon, ledger.spent.delta) == (0.0, 0.0)
