"""`dpfreq profile --group`: one table per public group, clean --json -, one-line errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from dpfreq.cli.main import cli, main


def _log(tmp_path: Path) -> tuple[Path, Path]:
    log = tmp_path / "log.csv"
    rows = ["user,campaign"] + [f"{u},c{(u * 7 + k) % 3}" for u in range(60) for k in range(3)]
    log.write_text("\n".join(rows) + "\n")
    groups = tmp_path / "groups.txt"
    groups.write_text("c0\nc1\nc_empty\n")
    return log, groups


def test_grouped_profile_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log, groups = _log(tmp_path)
    args = ["profile", str(log), "--item", "user", "--domain-size", "100", "--max-count", "4",
            "--epsilon", "1", "--unit", "item", "--group", "campaign", "--groups", str(groups),
            "--seed", "1"]
    out = CliRunner().invoke(cli, [*args, "--max-groups-per-item", "2", "--json", "-"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert list(doc["groups"]) == ["c0", "c1", "c_empty"]
    assert doc["epsilon"] == 1.0
    table = CliRunner().invoke(cli, [*args, "--max-groups-per-item", "2"])
    assert table.exit_code == 0
    assert re.search(r"^\s*c_empty\s+0\s", table.stdout, re.M)  # the group leads each row
    with pytest.raises(SystemExit) as info:
        main(args)
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("dpfreq: error: --max-groups-per-item of dpfreq profile must be")


def _events(tmp_path: Path) -> Path:
    log = tmp_path / "events.csv"
    rows = ["user,campaign,day"] + [f"{u},c{(u * 7 + k) % 3},{1 + (u + k) % 5}"
                                    for u in range(60) for k in range(3)]
    log.write_text("\n".join(rows) + "\n")
    return log


def test_grouped_reach_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dpfreq.windows.grouped.result import GroupedWindowRelease

    log, groups = _events(tmp_path), _log(tmp_path)[1]
    args = ["reach", str(log), "--item", "user", "--time", "day", "--horizon", "5",
            "--epsilon", "1", "--group", "campaign", "--groups", str(groups), "--seed", "1",
            "--k", "1", "--windows", "cumulative"]
    out = CliRunner().invoke(cli, [*args, "--unit", "item", "--max-groups-per-item", "2",
                                   "--json", "-"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert list(doc["groups"]) == ["c0", "c1", "c_empty"]
    assert doc["groups"]["c1"]["epsilon"] == 0.5
    saved = tmp_path / "grouped.dpfreq"
    table = CliRunner().invoke(cli, [*args, "--unit", "event", "--save", str(saved)])
    assert table.exit_code == 0, table.output
    assert "ε=1 per group (parallel composition)" in table.stdout
    assert sum(line.lstrip().startswith("c_empty ") for line in table.stdout.splitlines()) == 5
    assert GroupedWindowRelease.load(saved)["c0"].epsilon == 1.0
    with pytest.raises(SystemExit) as info:
        main([*args, "--unit", "item"])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("dpfreq: error: --max-groups-per-item of dpfreq reach "
                              "must be")


def test_grouped_reach_cli_selects_groups_with_delta(tmp_path: Path) -> None:
    """No --groups: --delta selects the groups (auto: the weighted set union at m = 2, which
    has break-even s* >= m/2); `plan reach` states the same threshold. The groups of one item
    ('solo') are released with probability at most δ = 1e-6 (the assertion's false-alarm
    rate); the campaigns' ~400 items each exceed τ by far (released except with probability
    < 1e-100)."""
    log = tmp_path / "events.csv"
    rows = ["user,campaign,day"] + [f"{u},c{(u * 7 + k) % 3},{1 + (u + k) % 5}"
                                    for u in range(600) for k in range(3)] + ["9999,solo,2"]
    log.write_text("\n".join(rows) + "\n")
    public = ["--horizon", "5", "--epsilon", "4", "--delta", "1e-6", "--unit", "item", "--k",
              "1", "--windows", "cumulative", "--group", "campaign",
              "--max-groups-per-item", "2"]
    out = CliRunner().invoke(cli, ["reach", str(log), "--item", "user", "--time", "day",
                                   "--seed", "1", *public, "--json", "-"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert list(doc["groups"]) == ["c0", "c1", "c2"]
    assert (doc["epsilon"], doc["delta"]) == (4.0, 1e-6)
    sel = doc["mechanism_params"]["selection"]
    assert sel["mechanism"].startswith("weighted set union")
    assert sel["single_item_release_probability"] <= 1e-6
    # the selection's share is chosen from public parameters ("auto"), the rest split over m
    assert doc["groups"]["c1"]["epsilon"] == pytest.approx((4.0 - sel["epsilon"]) / 2)
    assert doc["groups"]["c1"]["delta"] == 0.0
    table = CliRunner().invoke(cli, ["reach", str(log), "--item", "user", "--time", "day",
                                     "--seed", "1", *public])
    assert table.exit_code == 0, table.output
    assert (f"3 groups selected privately (weighted set union: threshold τ={sel['threshold']} "
            f"on the weight, each item spreading L={sel['scale']}") in table.stdout
    assert "the groups at δ = 0" not in table.stdout  # issue 50: the garbled header
    assert f"selection ε={sel['epsilon']:g}, δ={sel['delta']:g}" in table.stdout
    plan = CliRunner().invoke(cli, ["plan", "reach", *public])
    assert plan.exit_code == 0, plan.output
    assert f"reaches τ={sel['threshold']}" in plan.stdout
