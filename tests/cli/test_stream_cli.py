"""`dpfreq stream init|append|show`, through main(): a daily pipeline, the ledger charged once,
``--json -`` clean, re-sends and late files, one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cli_runner import run_cli
from dpfreq.ledger import Ledger


@pytest.fixture(autouse=True)
def no_key(monkeypatch):
    monkeypatch.delenv("DPFREQ_ARTIFACT_KEY", raising=False)


def _day(tmp_path, name: str, day: str, seed: int) -> str:
    rng = np.random.default_rng(seed)
    users = rng.integers(0, 50, 60)
    camp = rng.choice(["spring", "summer"], 60)
    lines = ["user,ts,campaign"] + [f"{u},{day}T{h:02d}:00:00,{c}" for u, h, c in
                                    zip(users, rng.integers(0, 24, 60), camp, strict=True)]
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return str(path)


INIT = ["--item", "user", "--time", "ts", "--start", "2026-03-01", "--period", "1d",
        "--horizon", "31", "--k", "1,3", "--unit", "item", "--epsilon", "1", "--delta", "0",
        "--method", "auto", "--late", "error", "--state-engine", "memory"]


def test_daily_pipeline_with_a_ledger(tmp_path, capsys) -> None:
    ledger, state = tmp_path / "budget.db", tmp_path / "reach"
    assert run_cli(["ledger", "init", ledger, "--epsilon", "2"], capsys)[0] == 0
    code, _, err = run_cli(["stream", "init", state, *INIT, "--seed", "1", "--ledger", ledger],
                           capsys)
    assert code == 0
    assert "method" in err
    assert "SECRET" in err
    for i, day in enumerate(("2026-03-01", "2026-03-02", "2026-03-03")):
        src = _day(tmp_path, f"events-{day}.csv", day, i)
        code, out, _ = run_cli(["stream", "append", state, src, "--through", day], capsys)
        assert code == 0
        assert out.splitlines()[-1].startswith(day)  # the new period is the last row
    assert Ledger(ledger).remaining.epsilon == pytest.approx(1.0)  # charged once
    code, out, err = run_cli(["stream", "show", state, "--through", "2026-03-02", "--json", "-"],
                             capsys)
    doc = json.loads(out)
    assert code == 0
    assert doc["type"] == "StreamRelease"
    assert doc["period"] == 2
    assert doc["unit"] == "item"
    assert doc["relation"]
    assert doc["mechanism_params"]["why"]
    code, out, _ = run_cli(["stream", "show", state, "--plot", tmp_path / "p.png"], capsys)
    assert code == 0
    assert (tmp_path / "p.png").stat().st_size > 0


def test_resend_late_and_errors_are_one_line(tmp_path, capsys) -> None:
    state = tmp_path / "reach"
    assert run_cli(["stream", "init", state, *INIT, "--seed", "2"], capsys)[0] == 0
    day1 = _day(tmp_path, "d1.csv", "2026-03-01", 1)
    code, first, _ = run_cli(["stream", "append", state, day1, "--through", "1"], capsys)
    assert code == 0
    code, again, _ = run_cli(["stream", "append", state, day1, "--through", "2026-03-01"], capsys)
    assert (code, again) == (0, first)  # a re-send prints the stored answers
    for argv, words in (
            (["stream", "append", state, day1, "--through", "2026-03-02"], "closed period"),
            (["stream", "init", state, *INIT], "new or empty"),
            (["stream", "show", tmp_path / "nothing"], "no reach stream"),
            (["stream", "show", state, "--through", "2026-03-09"], "already appended"),
            (["stream", "init", tmp_path / "x", *INIT[:-4], "--state-engine", "memory",
              "--late", "never"], "--late")):
        code, out, err = run_cli(argv, capsys)
        assert code == 2
        assert out == ""
        assert len(err.strip().splitlines()) == 1, err
        assert words in err, err


def test_grouped_stream_prints_each_group(tmp_path, capsys) -> None:
    state = tmp_path / "reach"
    groups = tmp_path / "groups.txt"
    groups.write_text("spring\nsummer\n")
    code, _, _ = run_cli(["stream", "init", state, *INIT, "--group", "campaign", "--groups", groups,
                          "--max-groups-per-item", "1", "--seed", "3"], capsys)
    assert code == 0
    code, out, _ = run_cli(["stream", "append", state, _day(tmp_path, "d.csv", "2026-03-01", 4),
                            "--through", "2026-03-01"], capsys)
    assert code == 0
    assert "# group spring" in out
    assert "# group summer" in out
    assert "# coverage: the intervals cover the capped data, not the data: each item keeps at " \
           "most 1 of its groups" in out
    code, out, _ = run_cli(["stream", "show", state, "--group", "summer"], capsys)
    assert code == 0
    assert "# group spring" not in out
    assert "# group summer" in out


def test_spark_master_needs_a_stream_on_spark(tmp_path, capsys) -> None:
    state = tmp_path / "reach"
    assert run_cli(["stream", "init", state, *INIT], capsys)[0] == 0
    src = _day(tmp_path, "events.csv", "2026-03-01", 0)
    code, _, err = run_cli(["stream", "append", state, src, "--through", "2026-03-01",
                            "--spark-master", "local[1]"], capsys)
    assert code == 2
    assert "--spark-master needs a stream created with --state-engine spark" in err


def test_unknown_group_is_refused_before_anything_runs(tmp_path, capsys, monkeypatch) -> None:
    """--group names a group the stream has: refused before the append (the stream keeps its
    last period) and without a "rescued" release file (a stream's releases live in it)."""
    monkeypatch.chdir(tmp_path)
    state, groups = tmp_path / "reach", tmp_path / "groups.txt"
    groups.write_text("spring\nsummer\n")
    assert run_cli(["stream", "init", state, *INIT, "--group", "campaign", "--groups", groups,
                    "--max-groups-per-item", "1", "--seed", "4"], capsys)[0] == 0
    plain = tmp_path / "plain"
    assert run_cli(["stream", "init", plain, *INIT, "--seed", "5"], capsys)[0] == 0
    day1 = _day(tmp_path, "d1.csv", "2026-03-01", 1)
    for argv, words in ((["stream", "append", state, day1, "--through", "2026-03-01",
                          "--group", "autumn"],
                         "--group of dpfreq stream append must be one of the stream's groups"),
                        (["stream", "append", plain, day1, "--through", "2026-03-01",
                          "--group", "spring"],
                         "has no groups")):
        code, out, err = run_cli(argv, capsys)
        assert (code, out) == (2, "")
        assert len(err.strip().splitlines()) == 1, err
        assert words in err, err
    code, out, _ = run_cli(["stream", "append", state, day1, "--through", "2026-03-01"], capsys)
    assert code == 0  # the refused append left period 1 open
    assert out.splitlines()[-1].startswith("2026-03-01")
    code, out, err = run_cli(["stream", "show", state, "--group", "autumn"], capsys)
    assert (code, out) == (2, "")
    assert "--group of dpfreq stream show must be one of the stream's groups" in err
    assert "saved to" not in err
    assert not list(tmp_path.glob("dpfreq-release-*"))
