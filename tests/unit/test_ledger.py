"""The SQLite privacy ledger: same accountant interface, exact arithmetic, refusal before noise,
no overspend by concurrent processes, one-line errors for files that are not ledgers."""

from __future__ import annotations

import multiprocessing
import sqlite3
from fractions import Fraction

import numpy as np
import pytest

from dpfreq.budget import Accountant, BudgetAccountant, PrivacyBudget, check_accountant
from dpfreq.errors import BudgetExceededError, DataError, ParameterError, public_call
from dpfreq.ledger import Ledger
from dpfreq.noise import discrete_laplace_gamma, sample_discrete_laplace
from dpfreq.rng import resolve_rng


def _fake_release(counts, *, epsilon, accountant=None, rng=None):
    """A release following the conventions: validate, spend, then draw noise."""
    gen = resolve_rng(rng).generator
    gamma = discrete_laplace_gamma(epsilon, 1)
    if accountant is not None:
        accountant.spend(epsilon, label="fake_release", unit="item")
    return np.asarray(counts) + sample_discrete_laplace(gamma, len(counts), rng=gen)


@pytest.fixture
def ledger(tmp_path):
    return Ledger.create(tmp_path / "budget.sqlite", PrivacyBudget(1.0, 1e-6))


def test_both_accountants_satisfy_the_protocol(ledger):
    assert isinstance(ledger, BudgetAccountant)
    assert isinstance(Accountant(PrivacyBudget(1.0)), BudgetAccountant)
    assert check_accountant(ledger) is ledger
    assert check_accountant(None) is None
    with pytest.raises(ParameterError, match="accountant of f must be"), public_call("f"):
        check_accountant(object())


def test_overspend_refused_before_any_noise_is_drawn(ledger, rng):
    _fake_release([1, 2, 3], epsilon=0.75, accountant=ledger, rng=rng)
    state = rng.bit_generator.state
    with pytest.raises(BudgetExceededError) as info:
        _fake_release([1, 2, 3], epsilon=0.5, accountant=ledger, rng=rng)
    assert rng.bit_generator.state == state
    assert f"budget of ledger {str(ledger.path)!r}: " in str(info.value)
    assert "; remaining ε=0.25, δ=5e-07 of total ε=1.0, δ=1e-06. " in str(info.value)
    assert ledger.spent == PrivacyBudget(0.75)
    assert [(r["label"], r["unit"]) for r in ledger.ledger] == [("fake_release", "item")]


def test_ten_spends_of_a_tenth_exhaust_one_exactly(ledger):
    for _ in range(10):
        ledger.spend(0.1, label="q")
    assert ledger.spent_exact == (Fraction(1), Fraction(0))
    # δ left for the releases' own δ (tight: half; the other half converts the Rényi filter)
    assert (ledger.remaining.epsilon, ledger.remaining.delta) == (0.0, 5e-7)
    with pytest.raises(BudgetExceededError):
        ledger.spend(1e-6)


def test_delta_and_metadata_are_recorded(tmp_path):
    ledger = Ledger.create(tmp_path / "budget.sqlite", PrivacyBudget(1.0, 1e-6),
                           composition="basic")
    ledger.spend(0.5, 4e-7, label="release_window_counts", unit="event", source="log.csv")
    bound = Ledger(ledger.path, command="dpfreq reach", source="other.csv")
    bound.spend(0.25, 6e-7, label="release_window_counts")
    with pytest.raises(BudgetExceededError):
        bound.spend(0.1, 1e-9)
    assert ledger.remaining == PrivacyBudget(0.25, 0.0)
    rows = Ledger(tmp_path / "budget.sqlite").ledger
    assert [(r["command"], r["source"], r["unit"], r["delta"]) for r in rows] == [
        (None, "log.csv", "event", 4e-7), ("dpfreq reach", "other.csv", None, 6e-7)]
    assert all(r["time"].endswith("+00:00") for r in rows)
    summary = ledger.summary()
    assert summary["spent"] == {"epsilon": 0.75, "delta": 1e-6}
    assert summary["remaining"] == {"epsilon": 0.25, "delta": 0.0}
    assert len(summary["releases"]) == 2


def test_check_does_not_record(ledger):
    ledger.check(1.0)
    with pytest.raises(BudgetExceededError):
        ledger.check(1.5)
    assert (ledger.spent.epsilon, ledger.spent.delta) == (0.0, 0.0)
    assert ledger.total == PrivacyBudget(1.0, 1e-6)


def test_bind_keeps_the_file_and_fills_defaults(ledger):
    bound = ledger.bind(command="dpfreq profile", unit="item")
    assert bound.path == ledger.path
    bound.spend(0.5, source="s.csv")
    assert ledger.ledger[0]["command"] == "dpfreq profile"
    assert ledger.ledger[0]["unit"] == "item"


def _spend_many(path: str, count: int, barrier) -> int:
    ledger = Ledger(path, command="worker")
    barrier.wait()
    done = 0
    for _ in range(count):
        try:
            ledger.spend(0.1, 1e-8, label="w")
        except BudgetExceededError:
            continue
        done += 1
    return done


@pytest.mark.parametrize(("composition", "admitted"), [("basic", 10), ("tight", 5)])
def test_concurrent_processes_never_overspend(tmp_path, composition, admitted):
    path = tmp_path / "shared.sqlite"
    ledger = Ledger.create(path, PrivacyBudget(1.0, 1e-7), composition=composition)
    ctx = multiprocessing.get_context("spawn")
    workers = 4
    with ctx.Manager() as manager:
        barrier = manager.Barrier(workers)
        with ctx.Pool(workers) as pool:
            done = pool.starmap(_spend_many, [(str(path), 6, barrier)] * workers)
    # 24 attempts of (0.1, 1e-8) against (1.0, 1e-7): the δ budget admits exactly 10 (basic),
    # or 5 under the tight rule, which keeps half of δ to convert its Rényi filter.
    assert sum(done) == admitted
    assert ledger.spent_exact[1] == Fraction(admitted, 10**8)
    assert len(ledger.ledger) == admitted


def test_create_refuses_to_overwrite(ledger):
    with pytest.raises(DataError, match="already exists"):
        Ledger.create(ledger.path, PrivacyBudget(5.0))
    assert ledger.total == PrivacyBudget(1.0, 1e-6)


@pytest.mark.parametrize("make", ["missing", "text", "other_db", "bad_version", "bad_total",
                                  "bad_row", "huge_row"])
def test_files_that_are_not_ledgers_give_one_line(tmp_path, make):
    path = tmp_path / "x.sqlite"
    if make == "text":
        path.write_text("epsilon,1\n")
    elif make == "other_db":
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE t (x)")
    elif make != "missing":
        Ledger.create(path, PrivacyBudget(1.0))
        change = {"bad_version": "UPDATE dpfreq_ledger SET value='9' WHERE key='version'",
                  "bad_total": "UPDATE dpfreq_ledger SET value='x' WHERE key='total_epsilon'",
                  "bad_row": "INSERT INTO releases (time, label, epsilon, delta, rule, loss, bad, "
                             "hash) VALUES ('t', 'l', '-1/2', '0/1', 'sum', '{}', '0/1', 'x')",
                  "huge_row": "INSERT INTO releases (time, label, epsilon, delta, rule, loss, "
                              "bad, hash) VALUES ('t', 'l', '0.5e400', '0/1', 'sum', "
                              "'{\"kind\":\"pure\",\"epsilon\":\"1/2\"}', '0/1', 'x')"}[make]
        with sqlite3.connect(path) as conn:
            conn.execute(change)
    with pytest.raises(DataError) as info:
        Ledger(path).spend(0.1)
    text = str(info.value)
    assert "\n" not in text
    assert str(path) in text
    assert not (tmp_path / "missing").exists()
    if make == "huge_row":
        with pytest.raises(DataError):
            _ = Ledger(path).ledger


@pytest.mark.parametrize("call", [
    lambda led: led.spend(float("nan")),
    lambda led: led.spend(0.1, 1.5),
    lambda led: led.check(-1.0),
    lambda led: Ledger.create(led.path.with_name("new.sqlite"), 1.0),
])
def test_invalid_parameters(ledger, call):
    with pytest.raises(ParameterError):
        call(ledger)
    assert (ledger.spent.epsilon, ledger.spent.delta) == (0.0, 0.0)


def test_create_in_missing_directory(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        Ledger.create(tmp_path / "no" / "x.sqlite", PrivacyBudget(1.0))


def test_ledger_keeps_relations_apart_or_converts(tmp_path):
    apart = Ledger.create(tmp_path / "apart.sqlite", PrivacyBudget(1.0))
    apart.spend(0.25, unit="item")
    with pytest.raises(ParameterError, match=r"^unit of Ledger\.spend must be 'item'"):
        apart.spend(0.25, unit="event")
    assert (apart.spent.epsilon, apart.spent.delta) == (0.25, 0.0)
    conv = Ledger.create(tmp_path / "conv.sqlite", PrivacyBudget(1.0), unit="item_replace")
    conv.spend(0.25, unit="item")
    conv.spend(0.25, unit="item_replace")
    assert (conv.spent.epsilon, conv.spent.delta) == (0.75, 0.0)
    rows = conv.ledger
    assert rows[0]["epsilon"] == 0.5
    assert "2ε" in rows[0]["conversion"]
    assert rows[1]["conversion"] is None
    assert conv.summary()["unit"] == "item_replace"
    assert (apart.summary()["unit"], apart.summary()["unit_stated"]) == ("item", False)
    assert conv.summary()["spent_by_unit"] == [
        {"unit": "item", "epsilon": 0.5, "delta": 0.0, "releases": 1},
        {"unit": "item_replace", "epsilon": 0.25, "delta": 0.0, "releases": 1}]
    with pytest.raises(ParameterError, match="different currencies"):
        conv.check(0.01, unit="event")
    with pytest.raises(BudgetExceededError):
        conv.spend(0.2, unit="item")
    with pytest.raises(ParameterError, match=r"unit of Ledger\.create"):
        Ledger.create(tmp_path / "bad.sqlite", PrivacyBudget(1.0), unit="user")
