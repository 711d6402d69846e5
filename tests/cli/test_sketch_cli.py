"""`dpfreq sketch key|params|build|merge` through main(): the whole cross-party workflow."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cli_runner import run_cli
from dpfreq.budget import PrivacyBudget
from dpfreq.crossparty import CrossPartyParams, PartySketch
from dpfreq.ledger import Ledger


@pytest.fixture
def setup(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A key, public parameters and two parties' logs (Parquet and CSV) in ``tmp_path``."""
    g = np.random.default_rng(3)
    users = g.integers(0, 3000, 6000)
    pd.DataFrame({"user": users, "t": g.integers(0, 50, users.size),
                  "campaign": g.choice(["a", "b"], users.size)}).to_parquet(tmp_path / "tv.parquet")
    users = g.integers(1500, 4500, 6000)
    pd.DataFrame({"user": users, "t": g.integers(0, 50, users.size),
                  "campaign": g.choice(["a", "b", "c"], users.size)}).to_csv(
        tmp_path / "web.csv", index=False)
    key = tmp_path / "hash.key"
    assert run_cli(["sketch", "key", str(key)], capsys)[0] == 0
    code, _, err = run_cli(["sketch", "params", "--measurement", "spring", "--registers", "8192",
                            "--sampling-start", "0", "--sampling-width", "1",
                            "--max-frequency", "3", "--epsilon-reach", "1.0986",
                            "--epsilon-frequency", "2", "--key", str(key), "--out",
                            str(tmp_path / "params.json")], capsys)
    assert code == 0, err
    return tmp_path


def _build(tmp: Path, log: str, party: str, capsys: pytest.CaptureFixture[str],
           *extra: str) -> tuple[int, str, str]:
    return run_cli(["sketch", "build", str(tmp / log), "--party", party, "--params",
                    str(tmp / "params.json"), "--key", str(tmp / "hash.key"), "--user", "user",
                    "--out", str(tmp / f"{party}.sketch"), *extra], capsys)


def test_key_file_is_private_and_never_overwritten(setup: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    key = setup / "hash.key"
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    before = key.read_bytes()
    code, _, err = run_cli(["sketch", "key", str(key)], capsys)
    assert code == 2
    assert err.strip().startswith("dpfreq: error:")
    assert key.read_bytes() == before


def test_build_and_merge_end_to_end(setup: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Ledger.create(setup / "budget.db", PrivacyBudget(10.0))
    code, _, err = _build(setup, "tv.parquet", "tv", capsys, "--seed", "1", "--ledger",
                          str(setup / "budget.db"), "--time", "t", "--start", "0", "--end",
                          "40", "--campaign", "campaign", "--campaigns", "a,b")
    assert code == 0, err
    assert "NOT for production" in err
    assert Ledger(setup / "budget.db").spent.epsilon == pytest.approx(3.0986)
    # what tv covers: a merge refuses sketches of other periods or campaigns
    period = ("--time", "t", "--start", "0", "--end", "40", "--campaign", "campaign",
              "--campaigns", "b,a")
    assert _build(setup, "web.csv", "web", capsys, "--seed", "2", "--engine", "memory",
                  *period)[0] == 0
    by_memory = PartySketch.load(setup / "web.sketch")
    assert _build(setup, "web.csv", "web", capsys, "--seed", "2", *period)[0] == 0
    by_duckdb = PartySketch.load(setup / "web.sketch")
    assert np.array_equal(by_memory.frequency, by_duckdb.frequency)  # type: ignore[arg-type]
    code, out, err = run_cli(["sketch", "merge", str(setup / "tv.sketch"),
                              str(setup / "web.sketch"), "--json", "-", "--confidence", "0.9"],
                             capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["type"] == "CrossPartyRelease"
    assert doc["parties"] == ["tv", "web"]
    assert doc["unit"] == "item"
    assert len(doc["value"]) == 3
    assert doc["error"]["confidence"] == 0.9
    assert "union\t1+" in err  # the table goes to stderr when stdout carries the JSON
    assert PartySketch.load(setup / "tv.sketch").params == CrossPartyParams.load(
        setup / "params.json")


def test_merge_refusals_are_one_line(setup: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _build(setup, "tv.parquet", "tv", capsys, "--seed", "1")[0] == 0
    assert _build(setup, "web.csv", "web", capsys, "--seed", "2")[0] == 0
    tv = str(setup / "tv.sketch")
    bad = setup / "bad.sketch"
    data = bytearray((setup / "web.sketch").read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad.write_bytes(bytes(data))
    for argv, words in [([tv, tv], "appears twice"), ([tv, str(bad)], "not a valid"),
                        ([tv, str(setup / "nope.sketch")], "does not exist"),
                        ([tv, str(setup / "params.json")], "not a valid")]:
        code, _, err = run_cli(["sketch", "merge", *argv], capsys)
        assert code == 2
        lines = err.strip().splitlines()
        assert len(lines) == 1
        assert words in lines[0]


def test_build_refuses_another_key_and_half_a_period(setup: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    other = setup / "other.key"
    assert run_cli(["sketch", "key", str(other)], capsys)[0] == 0
    code, _, err = run_cli(["sketch", "build", str(setup / "web.csv"), "--party", "web",
                            "--params", str(setup / "params.json"), "--key", str(other),
                            "--user", "user", "--out", str(setup / "w.sketch")], capsys)
    assert code == 2
    assert "fingerprint" in err
    code, _, err = _build(setup, "web.csv", "web", capsys, "--time", "t", "--start", "3")
    assert code == 2
    assert "--start and --end" in err
    assert not (setup / "web.sketch").exists()


def test_reach_only_parameters(setup: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["sketch", "params", "--measurement", "m", "--registers", "1024",
                              "--sampling-start", "1/4", "--sampling-width", "1/2",
                              "--max-frequency", "2", "--epsilon-reach", "1",
                              "--epsilon-frequency", "none", "--key", str(setup / "hash.key"),
                              "--out", "-"], capsys)
    assert code == 0, err
    params = CrossPartyParams.from_json(out)
    assert params.epsilon_frequency is None
    assert str(params.sampling_width) == "1/2"
    code, _, err = run_cli(["sketch", "params", "--measurement", "m", "--registers", "1024",
                            "--sampling-start", "1/2", "--sampling-width", "3/4",
                            "--max-frequency", "2", "--epsilon-reach", "1",
                            "--epsilon-frequency", "none", "--key", str(setup / "hash.key"),
                            "--out", "-"], capsys)
    assert code == 2
    assert "--sampling-width" in err
