"""`dpfreq resign PATH...` through main(): one line per artefact re-signed, a refused one named in
one line without stopping the others (exit 2), the keys checked before any PATH."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cli_runner import run_cli
from dpfreq.budget import PrivacyBudget
from dpfreq.ledger import Ledger
from dpfreq.profile import release_profile

A, B = "a1" * 32, "b2" * 32


@pytest.fixture
def signed(tmp_path, monkeypatch):
    """A saved release and a ledger signed under A; the rotation's keys set to A -> B."""
    monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", A)
    rel = release_profile(np.array([1, 2, 2, 3, 5] * 4), domain_size=50, max_count=6,
                          epsilon=1.0, unit="item", method="direct", rng=3)
    saved = rel.save(tmp_path / "release.json")
    ledger = tmp_path / "budget.db"
    Ledger.create(ledger, PrivacyBudget(1.0)).spend(0.5, unit="item")
    monkeypatch.setenv("DPFREQ_ARTIFACT_KEY_OLD", A)
    monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", B)
    return saved, ledger


def test_every_artefact_is_resigned_and_reported(signed, capsys, monkeypatch) -> None:
    saved, ledger = signed
    code, out, err = run_cli(["resign", saved, ledger, "--json", "-"], capsys)
    assert code == 0, err
    assert json.loads(out) == {"resigned": [{"path": str(saved), "kind": "ProfileRelease"},
                                            {"path": str(ledger), "kind": "ledger"}],
                               "refused": []}
    assert err == f"resigned {saved} (ProfileRelease)\nresigned {ledger} (ledger)\n"
    monkeypatch.delenv("DPFREQ_ARTIFACT_KEY_OLD")
    assert run_cli(["ledger", "verify", ledger], capsys)[:2] == (0, "ok: 1 rows\n")


def test_a_refused_artefact_is_named_and_the_others_are_still_done(signed, capsys,
                                                                    tmp_path) -> None:
    saved, _ = signed
    edited = tmp_path / "edited.json"
    edited.write_text(saved.read_text().replace('"epsilon": 1.0', '"epsilon": 2.0'))
    before = edited.read_bytes()
    code, out, err = run_cli(["resign", edited, saved, tmp_path / "missing.db"], capsys)
    assert code == 2
    assert out == f"resigned {saved} (ProfileRelease)\n"
    lines = err.splitlines()
    assert lines[0].startswith(f"refused: {edited} is not a valid dpfreq ProfileRelease file: "
                               "its signature does not match")
    assert lines[1] == f"refused: {tmp_path / 'missing.db'} does not exist."
    assert lines[2] == ("dpfreq: error: 2 of 3 artefacts refused (each named above, "
                        "unchanged); the other 1 re-signed.")
    assert len(lines) == 3
    assert edited.read_bytes() == before
    code, _, err = run_cli(["resign", saved], capsys)  # already done: refused, not re-signed
    assert code == 2
    assert "its signature does not match" in err


def test_the_keys_are_checked_before_any_path(signed, capsys, monkeypatch) -> None:
    saved, _ = signed
    before = saved.read_bytes()
    monkeypatch.delenv("DPFREQ_ARTIFACT_KEY_OLD")
    code, out, err = run_cli(["resign", saved], capsys)
    assert (code, out) == (2, "")
    assert err == ("dpfreq: error: DPFREQ_ARTIFACT_KEY_OLD is not set: set it to the key the "
                   "artefacts are signed with, or pass --from-unsigned for unsigned files.\n")
    monkeypatch.setenv("DPFREQ_ARTIFACT_KEY_OLD", "not hex " + A)
    code, out, err = run_cli(["resign", saved], capsys)
    assert code == 2
    assert len(err.splitlines()) == 1
    assert A not in err
    assert "DPFREQ_ARTIFACT_KEY_OLD must be a key of at least 32 bytes" in err
    assert saved.read_bytes() == before
