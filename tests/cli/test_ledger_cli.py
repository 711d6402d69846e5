"""`dpfreq ledger verify` and `dpfreq ledger show` per unit of privacy, through main()."""

from __future__ import annotations

import json
import sqlite3

import pytest

from cli_runner import run_cli
from dpfreq.ledger import Ledger


@pytest.fixture(autouse=True)
def no_key(monkeypatch):
    monkeypatch.delenv("DPFREQ_ARTIFACT_KEY", raising=False)


def _ledger(tmp_path, capsys, *unit):
    path = tmp_path / "budget.db"
    assert run_cli(["ledger", "init", str(path), "--epsilon", "2", *unit], capsys)[0] == 0
    ledger = Ledger(path)
    ledger.spend(0.25, label="release_profile", unit="item", source="log.csv")
    ledger.spend(0.5, label="release_window_counts", unit="item", source="log.csv")
    return path


def test_verify_an_intact_ledger(tmp_path, capsys):
    path = _ledger(tmp_path, capsys)
    assert run_cli(["ledger", "verify", str(path)], capsys) == (0, "ok: 2 rows\n", "")


@pytest.mark.parametrize(("edit", "where"), [
    ("DELETE FROM releases WHERE id = 1", "at row 1 (id 2)"),
    ("DELETE FROM releases WHERE id = 2", "after row 1"),
    ("UPDATE releases SET epsilon = '1/100' WHERE id = 2", "at row 2 (id 2)"),
    ("UPDATE releases SET epsilon = '0.5e400' WHERE id = 1", "at row 1 (id 1)"),
])
def test_verify_names_the_first_bad_row_in_one_line(tmp_path, capsys, edit, where):
    path = _ledger(tmp_path, capsys)
    with sqlite3.connect(path) as conn:
        conn.execute(edit)
    code, out, err = run_cli(["ledger", "verify", str(path)], capsys)
    assert (code, out) == (2, "")
    assert len(err.strip().splitlines()) == 1
    assert where in err


@pytest.mark.parametrize("epsilon", ["0.5e400", "1e308"])  # 2 × 1e308 overflows a float
def test_show_with_a_huge_recorded_epsilon_is_one_line(tmp_path, capsys, epsilon):
    path = _ledger(tmp_path, capsys)
    with sqlite3.connect(path) as conn:
        conn.execute(f"UPDATE releases SET epsilon = '{epsilon}'")
    code, _, err = run_cli(["ledger", "show", str(path)], capsys)
    assert code == 2
    assert err.startswith("dpfreq: error: ")
    assert len(err.strip().splitlines()) == 1


def test_show_states_the_budget_unit_and_the_spends_per_unit(tmp_path, capsys):
    path = _ledger(tmp_path, capsys, "--unit", "item_replace")
    Ledger(path).spend(0.25, label="release_profile", unit="item_replace")
    code, out, _ = run_cli(["ledger", "show", str(path)], capsys)
    assert code == 0
    assert "budget in unit=item_replace" in out
    assert ("# spent at unit=item: epsilon=1.5, delta=0 in 2 release(s) "
            "(charged at unit=item_replace)") in out
    assert "# spent at unit=item_replace: epsilon=0.25, delta=0 in 1 release(s)\n" in out
    assert "remaining epsilon=0.25" in out
    assert "# remaining at other units: epsilon=0.125 at unit=item\n" in out
    code, out, _ = run_cli(["ledger", "show", str(path), "--json", "-"], capsys)
    summary = json.loads(out)
    assert (summary["unit"], summary["unit_stated"]) == ("item_replace", True)
    assert [p["unit"] for p in summary["spent_by_unit"]] == ["item", "item_replace"]
    assert summary["remaining_by_unit"] == {"item": 0.125, "item_replace": 0.25}


def test_show_names_the_unit_a_ledger_without_one_spends_at(tmp_path, capsys):
    path = _ledger(tmp_path, capsys)
    _code, out, _ = run_cli(["ledger", "show", str(path)], capsys)
    assert "budget in unit=item (the unit first spent at; units kept apart)" in out
    assert "# spent at unit=item: epsilon=0.75, delta=0 in 2 release(s)\n" in out


def test_a_release_on_a_tampered_ledger_is_refused_before_spending(tmp_path, capsys):
    path = _ledger(tmp_path, capsys)
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM releases WHERE id = 1")
    log = tmp_path / "log.csv"
    log.write_text("user\na\nb\na\n", encoding="utf-8")
    code, out, err = run_cli(["profile", str(log), "--item", "user", "--domain-size", "40",
                              "--max-count", "3", "--epsilon", "0.5", "--unit", "item",
                              "--ledger", str(path)], capsys)
    assert (code, out) == (2, "")
    assert "fails verification at row 1 (id 2)" in err
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM releases").fetchone() == (1,)


def test_show_reports_the_chain(tmp_path, capsys):
    path = _ledger(tmp_path, capsys)
    assert "# 2 release(s); hash chain: ok: 2 rows\n" in run_cli(["ledger", "show", str(path)],
                                                                 capsys)[1]
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE releases SET label = 'x' WHERE id = 2")
    code, out, _ = run_cli(["ledger", "show", str(path), "--json", "-"], capsys)
    assert code == 0
    assert "fails verification at row 2 (id 2)" in json.loads(out)["chain"]


def test_the_command_line_prints_the_head_and_checks_it(tmp_path, capsys):
    path, anchor = tmp_path / "budget.db", tmp_path / "heads.txt"
    code, _, err = run_cli(["ledger", "init", str(path), "--epsilon", "2", "--delta", "1e-6",
                            "--composition", "basic", "--anchor", str(anchor)], capsys)
    assert code == 0
    assert "composition=basic; head " in err
    log = tmp_path / "log.csv"
    log.write_text("user\na\nb\na\n", encoding="utf-8")
    code, _, err = run_cli(["profile", str(log), "--item", "user", "--domain-size", "40",
                            "--max-count", "3", "--epsilon", "0.5", "--unit", "item",
                            "--ledger", str(path)], capsys)
    assert code == 0
    head = err.split("; head ")[1].split()[0]
    assert head == Ledger(path).head
    assert run_cli(["ledger", "verify", str(path), "--expect-head", head], capsys)[:2] == \
        (0, "ok: 1 rows\n")
    code, out, err = run_cli(["ledger", "verify", str(path), "--expect-head", "ab" * 32], capsys)
    assert (code, out) == (2, "")
    assert "never had the head" in err
    assert len(err.strip().splitlines()) == 1
    code, out, _ = run_cli(["ledger", "show", str(path)], capsys)
    assert f"# head {head}" in out
    assert f"anchored to {anchor.resolve()}" in out


@pytest.mark.parametrize(("options", "expected"), [
    (["--epsilon", "1", "--delta", "0.01"],
     "dpfreq: error: --delta of dpfreq ledger init must be a number in [0, 1e-3]"),
    (["--epsilon", "-1"],
     "dpfreq: error: --epsilon of dpfreq ledger init must be a number in [1e-06, 1000]"),
])
def test_init_refuses_a_bad_budget_in_the_spelling_of_every_command(tmp_path, capsys, options,
                                                                     expected):
    """The same one-line shape as every other command's (`--delta of dpfreq plan reach must
    be ...; got 0.01.`), not click's "Invalid value:" prefix; nothing is created."""
    path = tmp_path / "budget.db"
    code, out, err = run_cli(["ledger", "init", str(path), *options], capsys)
    assert (code, out) == (2, "")
    assert err.startswith(expected)
    assert err.rstrip().endswith(".")
    assert len(err.strip().splitlines()) == 1
    assert not path.exists()
