"""The release pipeline (:mod:`dpfreq.pipeline`): its order, and its refusals spend nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import dpfreq.grouped.driver
from dpfreq.anonymized import release_anonymized_histogram
from dpfreq.budget import Accountant, PrivacyBudget
from dpfreq.errors import BudgetExceededError, DataError, ParameterError, public_call
from dpfreq.pipeline import BudgetGate, Charge, Reading, ReleaseSteps, run_release
from dpfreq.profile import release_profile
from dpfreq.rng import ResolvedRNG
from dpfreq.windows import release_window_counts


class _Recording(Accountant):
    """An accountant that records when it is checked and charged (``spend`` checks again
    inside; that check is not recorded)."""

    def __init__(self, log: list[str], total: float, delta: float = 0.0) -> None:
        super().__init__(PrivacyBudget(total, delta))
        self.log = log
        self.spending = False

    def check(self, epsilon: float, delta: float = 0.0, *, unit: str | None = None) -> None:
        if not self.spending:
            self.log.append("check")
        super().check(epsilon, delta, unit=unit)

    def spend(self, epsilon: float, delta: float = 0.0, *, label: str = "",
              unit: str | None = None, source: str | None = None) -> None:
        self.log.append("spend")
        self.spending = True
        try:
            super().spend(epsilon, delta, label=label, unit=unit, source=source)
        finally:
            self.spending = False


class _Steps:
    """Steps that record their calls; ``fail`` names a step that raises a DataError."""

    def __init__(self, log: list[str], fail: str | None = None) -> None:
        self.log = log
        self.fail = fail

    def _step(self, name: str) -> None:
        self.log.append(name)
        if name == self.fail:
            raise DataError(f"source of test must pass {name}; got a bad one.")

    def plan(self) -> str:
        self._step("plan")
        return "plan"

    def charge(self, plan: str) -> Charge:
        self._step("charge")
        return Charge(1.0, 0.0, "event", "test")

    def read(self, plan: str) -> Reading[int]:
        self._step("read")
        return Reading(5, source="memory")

    def draw(self, plan: str, data: int, rng: ResolvedRNG) -> int:
        self._step("draw")
        return data + int(rng.generator.integers(0, 1))

    def build(self, plan: str, noisy: int) -> dict[str, int]:
        self._step("build")
        return {"value": noisy}


def test_run_release_runs_the_steps_in_order() -> None:
    log: list[str] = []
    acct = _Recording(log, 2.0)
    out = run_release(_Steps(log), accountant=acct, rng=0)
    assert out == {"value": 5}
    assert log == ["plan", "charge", "check", "read", "spend", "draw", "build"]
    assert (acct.spent.epsilon, acct.spent.delta) == (1.0, 0.0)
    assert acct.ledger[0]["source"] == "memory"


@pytest.mark.parametrize("fail", ["plan", "charge", "read"])
def test_a_refusal_before_the_spend_spends_and_draws_nothing(fail: str) -> None:
    log: list[str] = []
    acct = _Recording(log, 2.0)
    with pytest.raises(DataError):
        run_release(_Steps(log, fail), accountant=acct, rng=0)
    assert "spend" not in log
    assert "draw" not in log
    assert (acct.spent.epsilon, acct.spent.delta) == (0.0, 0.0)


def test_an_unaffordable_call_reads_nothing() -> None:
    log: list[str] = []
    acct = _Recording(log, 0.5)
    with pytest.raises(BudgetExceededError):
        run_release(_Steps(log), accountant=acct, rng=0)
    assert log == ["plan", "charge", "check"]
    assert (acct.spent.epsilon, acct.spent.delta) == (0.0, 0.0)


@pytest.mark.parametrize(("accountant", "rng"), [("all of it", 0), (None, "seed")])
def test_bad_accountant_or_rng_is_refused_before_any_step(accountant: Any, rng: Any) -> None:
    log: list[str] = []
    with pytest.raises(ParameterError, match="of test must be"), public_call("test"):
        run_release(_Steps(log), accountant=accountant, rng=rng)
    assert log == []


def test_budget_gate_enforces_check_then_one_spend() -> None:
    acct = Accountant(PrivacyBudget(1.0))
    gate = BudgetGate(acct, Charge(0.25, 0.0, "event", "test"))
    with pytest.raises(RuntimeError, match="checked once before"):
        gate.spend()
    gate.check()
    with pytest.raises(RuntimeError, match="already checked"):
        gate.check()
    gate.spend("memory")
    with pytest.raises(RuntimeError, match="checked once before"):
        gate.spend()
    assert (acct.spent.epsilon, acct.spent.delta) == (0.25, 0.0)
    assert [row["source"] for row in acct.ledger] == ["memory"]


def test_budget_gate_without_accountant_records_nothing() -> None:
    gate = BudgetGate(None, Charge(0.25, 0.0, "event", "test"))
    gate.check()
    gate.spend()


_LOG = {"u": np.array([1, 2, 2, 3]), "t": np.array([1, 2, 3, 4]), "g": ["a", "a", "b", "a"]}
_RELEASES: list[tuple[str, Callable[..., Any]]] = [
    ("profile", lambda a, r: release_profile(
        np.array([3, 1, 0]), domain_size=10, max_count=4, epsilon=1.0, unit="item",
        accountant=a, rng=r)),
    ("anonymized", lambda a, r: release_anonymized_histogram(
        {1: 2, 3: 1}, epsilon=1.0, unit="event", accountant=a, rng=r)),
    ("windows", lambda a, r: release_window_counts(
        _LOG, item="u", time="t", horizon=4, epsilon=1.0, unit="event", k_values=[1],
        windows=["cumulative"], accountant=a, rng=r)),
    ("windows-groups", lambda a, r: release_window_counts(
        _LOG, item="u", time="t", horizon=4, epsilon=1.0, unit="event", k_values=[1],
        windows=["cumulative"], group="g", groups=["a", "b"], accountant=a, rng=r)),
]


@pytest.mark.parametrize(("name", "call"), _RELEASES, ids=[n for n, _ in _RELEASES])
def test_a_bad_rng_spends_nothing(name: str, call: Callable[..., Any]) -> None:
    """The random source is checked with the parameters, before anything is spent."""
    acct = Accountant(PrivacyBudget(2.0))
    with pytest.raises(ParameterError, match="rng of"):
        call(acct, "not a seed")
    assert (acct.spent.epsilon, acct.spent.delta) == (0.0, 0.0)
    assert acct.ledger == []
    call(acct, 0)  # the same call with a valid rng is affordable
    assert (acct.spent.epsilon, acct.spent.delta) == (1.0, 0.0)


class _Logged:
    """A release's own steps, recording each call (the accountant records check and spend)."""

    def __init__(self, steps: Any, log: list[str]) -> None:
        self.steps = steps
        self.log = log

    def __getattr__(self, name: str) -> Any:
        step = getattr(self.steps, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            self.log.append(name)
            return step(*args, **kwargs)
        return call


_GROUPED: list[tuple[str, Any, Callable[..., Any]]] = [
    ("profile-groups", dpfreq.grouped.driver, lambda a: release_profile(
        _LOG, item="u", group="g", groups=["a", "b"], max_groups_per_item=1, domain_size=10,
        max_count=4, epsilon=1.0, unit="item", accountant=a, rng=0)),
    ("profile-selection", dpfreq.grouped.driver, lambda a: release_profile(
        _LOG, item="u", group="g", delta=1e-6, max_groups_per_item=1, domain_size=10,
        max_count=4, epsilon=1.0, unit="item", accountant=a, rng=0)),
    ("anonymized-groups", dpfreq.grouped.driver, lambda a: release_anonymized_histogram(
        _LOG, item="u", group="g", groups=["a", "b"], epsilon=1.0, unit="event", accountant=a,
        rng=0)),
    ("anonymized-selection", dpfreq.grouped.driver,
     lambda a: release_anonymized_histogram(
         _LOG, item="u", group="g", delta=1e-6, epsilon=1.0, unit="event", accountant=a,
         rng=0)),
    ("windows-groups", dpfreq.grouped.driver, lambda a: release_window_counts(
        _LOG, item="u", time="t", horizon=4, epsilon=1.0, unit="item", k_values=[1],
        windows=["cumulative"], group="g", groups=["a", "b"], max_groups_per_item=1,
        accountant=a, rng=0)),
    ("windows-selection", dpfreq.grouped.driver, lambda a: release_window_counts(
        _LOG, item="u", time="t", horizon=4, epsilon=1.0, delta=1e-6, unit="item",
        k_values=[1], windows=["cumulative"], group="g", max_groups_per_item=1,
        accountant=a, rng=0)),
]


@pytest.mark.parametrize(("name", "module", "call"), _GROUPED, ids=[n for n, _, _ in _GROUPED])
def test_grouped_releases_run_on_the_pipeline(name: str, module: Any, call: Callable[..., Any],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Every grouped release is run by the one grouped driver on :func:`run_release`, so its
    order is the runner's: every check, the budget check before the read, one spend, then draw
    and build."""
    log: list[str] = []

    def spy(steps: ReleaseSteps[Any, Any, Any, Any], **kwargs: Any) -> Any:
        assert isinstance(steps, dpfreq.grouped.driver.GroupedSteps)
        return run_release(_Logged(steps, log), **kwargs)

    monkeypatch.setattr(module, "run_release", spy)
    acct = _Recording(log, 2.0, 1e-5)
    rel = call(acct)
    assert log == ["plan", "charge", "check", "read", "spend", "draw", "build"]
    assert (acct.spent.epsilon, acct.spent.delta) == (
        1.0, 1e-6 if name.endswith("selection") else 0.0)
    assert len(acct.ledger) == 1
    assert set(rel.groups) <= {"a", "b"}
