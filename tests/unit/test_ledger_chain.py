"""The ledger's hash chain: every deletion, edit, insertion or reordering of rows is detected
(naming the first row affected), plain and keyed (HMAC) chains, and old ledgers refused."""

from __future__ import annotations

import sqlite3

import pytest

from dpfreq._ledger_chain import head_hash, header_hash, row_hash
from dpfreq.budget import PrivacyBudget
from dpfreq.errors import DataError, ParameterError
from dpfreq.ledger import Ledger

KEY = "ab" * 32
OTHER_KEY = "cd" * 32
COLUMNS = ("id, time, command, label, epsilon, delta, unit, source, rule, plan, loss, bad, bound, "
           "renyi, items")


@pytest.fixture(autouse=True)
def no_key(monkeypatch):
    monkeypatch.delenv("DPFREQ_ARTIFACT_KEY", raising=False)


def _ledger(tmp_path, n=4):
    ledger = Ledger.create(tmp_path / "budget.db", PrivacyBudget(10.0, 1e-6))
    for i in range(n):
        ledger.spend(0.5, label=f"release {i}", unit="item", source=f"log{i}.csv")
    return ledger


def _sql(ledger, *statements):
    with sqlite3.connect(ledger.path) as conn:
        for statement in statements:
            conn.execute(statement)


def _refused(ledger, where):
    with pytest.raises(DataError) as info:
        ledger.verify()
    text = str(info.value)
    assert "\n" not in text
    assert where in text
    with pytest.raises(DataError):  # a tampered ledger accepts no further spend
        ledger.spend(0.1, unit="item")
    with pytest.raises(DataError):  # and says so when a release checks it, before any reading
        ledger.check(0.1, unit="item")
    return text


def test_an_intact_ledger_verifies(tmp_path):
    ledger = _ledger(tmp_path)
    assert ledger.verify() == 4
    assert Ledger.create(tmp_path / "empty.db", PrivacyBudget(1.0)).verify() == 0


def test_a_deleted_row_is_detected_at_the_next_row(tmp_path):
    ledger = _ledger(tmp_path)
    _sql(ledger, "DELETE FROM releases WHERE id = 2")
    _refused(ledger, "at row 2 (id 3)")


def test_deleted_last_rows_are_detected_by_the_head(tmp_path):
    ledger = _ledger(tmp_path)
    _sql(ledger, "DELETE FROM releases WHERE id >= 3")
    _refused(ledger, "after row 2")


@pytest.mark.parametrize(("column", "value"), [
    ("epsilon", "'1/100'"), ("unit", "'event'"), ("label", "'other'"), ("time", "'2020-01-01'"),
    ("rule", "'renyi'"), ("bad", "'1/1000000000'"), ("bound", "'1/100'"), ("renyi", "'0/1'"),
    ("loss", "'{\"epsilon\":\"1/100\",\"kind\":\"pure\"}'"), ("bound", "NULL")])
def test_an_edited_row_is_detected_at_that_row(tmp_path, column, value):
    ledger = _ledger(tmp_path)
    _sql(ledger, f"UPDATE releases SET {column} = {value} WHERE id = 3")
    _refused(ledger, "at row 3 (id 3)")


def test_an_inserted_row_is_detected(tmp_path):
    ledger = _ledger(tmp_path)
    _sql(ledger, "UPDATE releases SET id = id + 10 WHERE id >= 3",
         f"INSERT INTO releases ({COLUMNS}, hash) SELECT 3, {COLUMNS[4:]}, hash FROM "
         "releases WHERE id = 2")
    _refused(ledger, "at row 3 (id 3)")


def test_reordered_rows_are_detected(tmp_path):
    ledger = _ledger(tmp_path)
    _sql(ledger, "UPDATE releases SET id = -id WHERE id IN (2, 3)",
         "UPDATE releases SET id = 5 WHERE id = -2", "UPDATE releases SET id = 2 WHERE id = -3",
         "UPDATE releases SET id = 3 WHERE id = 5")
    _refused(ledger, "at row 2 (id 2)")


@pytest.mark.parametrize(("key", "value"), [
    ("total_epsilon", "100/1"), ("composition", "basic"), ("renyi_budget", "100/1"),
    ("order", "2/1"), ("release_delta", "1/1000000"), ("conversion_delta", "1/1000000")])
def test_an_edited_total_or_rule_is_detected_at_the_header(tmp_path, key, value):
    ledger = _ledger(tmp_path)
    _sql(ledger, f"UPDATE dpfreq_ledger SET value = '{value}' WHERE key = '{key}'")
    _refused(ledger, "at its header")


def _recompute_plain_chain(path):
    """What an editor without the key can do: recompute every digest with plain SHA-256."""
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE dpfreq_ledger SET value = 'sha256' WHERE key = 'chain'")
        header = dict(conn.execute("SELECT key, value FROM dpfreq_ledger"))
        last = header_hash(None, header)
        conn.execute("UPDATE dpfreq_ledger SET value = ? WHERE key = 'header_hash'", (last,))
        rows = conn.execute(f"SELECT {COLUMNS} FROM releases ORDER BY id").fetchall()
        for row in rows:
            last = row_hash(None, last, tuple(row))
            conn.execute("UPDATE releases SET hash = ? WHERE id = ?", (last, row[0]))
        conn.execute("UPDATE dpfreq_ledger SET value = ? WHERE key = 'head'",
                     (head_hash(None, last, len(rows)),))


def test_without_a_key_a_recomputed_chain_passes(tmp_path):
    """The plain chain detects edits made by hand, not a forger who recomputes it."""
    ledger = _ledger(tmp_path)
    _sql(ledger, "DELETE FROM releases WHERE id = 2")
    _recompute_plain_chain(ledger.path)
    assert ledger.verify() == 3


def test_a_signed_ledger_rejects_a_recomputed_chain(tmp_path, monkeypatch):
    monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", KEY)
    ledger = _ledger(tmp_path)
    assert ledger.verify() == 4
    _sql(ledger, "DELETE FROM releases WHERE id = 2")
    _recompute_plain_chain(ledger.path)
    _refused(ledger, "is not signed")
    with sqlite3.connect(ledger.path) as conn:  # or claim the keyed chain: the digests fail
        conn.execute("UPDATE dpfreq_ledger SET value = 'hmac-sha256' WHERE key = 'chain'")
    _refused(ledger, "at its header")


def test_a_signed_ledger_needs_its_key(tmp_path, monkeypatch):
    monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", KEY)
    ledger = _ledger(tmp_path, n=2)
    monkeypatch.delenv("DPFREQ_ARTIFACT_KEY")
    _refused(ledger, "set DPFREQ_ARTIFACT_KEY")
    monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", OTHER_KEY)
    _refused(ledger, "at its header")


def test_an_unsigned_ledger_is_refused_while_a_key_is_set(tmp_path, monkeypatch):
    ledger = _ledger(tmp_path, n=1)
    monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", KEY)
    _refused(ledger, "unset the key")


@pytest.mark.parametrize("key", ["ab" * 31, "not hex at all", "abc"])
def test_a_short_or_malformed_key_is_one_line(tmp_path, monkeypatch, key):
    monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", key)
    with pytest.raises(ParameterError) as info:
        Ledger.create(tmp_path / "b.db", PrivacyBudget(1.0))
    assert str(info.value).startswith("DPFREQ_ARTIFACT_KEY must be a key of at least 32 bytes")
    assert key not in str(info.value)


@pytest.mark.parametrize("version", ["1", "2"])
def test_an_older_ledger_is_refused_with_one_line_saying_how_to_upgrade(tmp_path, version):
    """A version 2 ledger (the schema before losses and rules) as dpfreq 0.1 wrote it."""
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE dpfreq_ledger (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("CREATE TABLE releases (id INTEGER PRIMARY KEY AUTOINCREMENT, time TEXT "
                     "NOT NULL, command TEXT, label TEXT NOT NULL, epsilon TEXT NOT NULL, delta "
                     "TEXT NOT NULL, unit TEXT, source TEXT, hash TEXT NOT NULL)")
        conn.executemany("INSERT INTO dpfreq_ledger VALUES (?, ?)", [
            ("kind", "dpfreq-ledger"), ("version", version), ("total_epsilon", "1/1"),
            ("total_delta", "0/1"), ("chain", "sha256")])
        conn.execute("INSERT INTO releases (time, label, epsilon, delta, hash) VALUES "
                     "('t', 'l', '1/2', '0/1', 'x')")
    with pytest.raises(DataError) as info:
        Ledger(path)
    text = str(info.value)
    assert "\n" not in text
    assert f"version {version} ledger" in text
    assert "start a new ledger with 'dpfreq ledger init FILE --epsilon E --delta D'" in text
    with sqlite3.connect(path) as conn:  # refused: nothing was written
        assert conn.execute("SELECT COUNT(*) FROM releases").fetchone() == (1,)


@pytest.mark.parametrize("epsilon", ["0.5e400", "1e308"])
def test_a_huge_recorded_epsilon_is_one_line(tmp_path, epsilon):
    ledger = _ledger(tmp_path, n=2)
    _sql(ledger, f"UPDATE releases SET epsilon = '{epsilon}'")
    for read in (Ledger.summary, Ledger.verify, lambda led: led.remaining):
        with pytest.raises(DataError) as info:
            read(ledger)
        assert "\n" not in str(info.value)
