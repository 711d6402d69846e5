"""Ledger rollback (issue 43, item 5): a restored older copy of a ledger brings its budget back
and its own chain still verifies; a head kept outside the file (``--expect-head``, or an anchor
file the ledger appends to) detects it, and nothing is spent on a rolled-back ledger."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dpfreq.budget import PrivacyBudget
from dpfreq.errors import DataError, ParameterError
from dpfreq.ledger import Ledger


@pytest.fixture(autouse=True)
def no_key(monkeypatch):
    monkeypatch.delenv("DPFREQ_ARTIFACT_KEY", raising=False)


def _copy(src: Path, dst: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{src}{suffix}").exists():
            shutil.copyfile(f"{src}{suffix}", f"{dst}{suffix}")


def _restore(backup: Path, path: Path) -> None:
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    _copy(backup, path)


def test_a_chain_alone_cannot_see_a_restored_copy_but_a_kept_head_can(tmp_path):
    path, backup = tmp_path / "budget.db", tmp_path / "backup.db"
    ledger = Ledger.create(path, PrivacyBudget(1.0))
    ledger.spend(0.5, unit="item")
    _copy(path, backup)
    ledger.spend(0.5, unit="item")
    kept = ledger.head
    _restore(backup, path)
    assert ledger.verify() == 1  # the older copy is a valid chain: its budget came back
    assert ledger.remaining.epsilon == 0.5
    with pytest.raises(DataError, match="never had the head") as info:
        ledger.verify(expect_head=kept)
    assert "\n" not in str(info.value)
    other = Ledger.create(tmp_path / "other.db", PrivacyBudget(1.0))
    with pytest.raises(DataError, match=r"older copy .rolled back. or another ledger"):
        other.verify(expect_head=kept)


def test_an_anchored_ledger_refuses_a_restored_copy_before_spending(tmp_path):
    path, backup, anchor = tmp_path / "budget.db", tmp_path / "backup.db", tmp_path / "a.heads"
    ledger = Ledger.create(path, PrivacyBudget(1.0), anchor=anchor)
    ledger.spend(0.25, unit="item")
    _copy(path, backup)
    ledger.spend(0.5, unit="item")
    assert ledger.verify() == 2
    assert anchor.read_text().splitlines()[-1] == f"2 {ledger.head}"
    _restore(backup, path)
    for use in (ledger.verify, lambda: ledger.spend(0.5, unit="item"),
                lambda: ledger.check(0.1, unit="item"), lambda: ledger.head):
        with pytest.raises(DataError, match="fails its anchor") as info:
            use()
        assert "older copy (rolled back)" in str(info.value)
    assert len(anchor.read_text().splitlines()) == 3  # nothing was spent or anchored since
    summary = ledger.summary()  # the report still shows the ledger, and why it fails
    assert "fails its anchor" in summary["chain"]


def test_an_anchor_that_is_missing_or_taken_is_refused(tmp_path):
    anchor = tmp_path / "a.heads"
    ledger = Ledger.create(tmp_path / "budget.db", PrivacyBudget(1.0), anchor=anchor)
    with pytest.raises(DataError, match=r"anchor file .* already exists"):
        Ledger.create(tmp_path / "second.db", PrivacyBudget(1.0), anchor=anchor)
    anchor.write_text("0 nonsense extra\n")
    with pytest.raises(DataError, match="malformed line"):
        ledger.spend(0.1, unit="item")
    anchor.write_bytes(b"\x00\xff binary\n")  # not the anchor's ASCII lines
    with pytest.raises(DataError, match="malformed line"):
        ledger.spend(0.1, unit="item")
    anchor.unlink()
    with pytest.raises(DataError, match="cannot be read; restore it"):
        ledger.spend(0.1, unit="item")
    assert not (tmp_path / "budget.db-anchor").exists()
    # the ledger cannot be its own anchor (the heads would be written into the database)
    same = tmp_path / "same.db"
    with pytest.raises(ParameterError) as info:
        Ledger.create(same, PrivacyBudget(1.0), anchor=same)
    assert str(info.value) == (f"anchor of Ledger.create must be another file than the ledger "
                               f"(kept best on other storage); got {str(same)!r}.")
    assert not same.exists()
