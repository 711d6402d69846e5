"""CLI: --delta selection on `dpfreq profile --group`, grouped `dpfreq anonymize`, and the
grouped `dpfreq plan profile` / `plan anonymize`; clean --json -, one-line errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from dpfreq.cli.main import cli, main
from dpfreq.grouped.selection import plan_partition_selection


def _log(tmp_path: Path) -> tuple[Path, Path]:
    log = tmp_path / "log.csv"
    rows = ["user,site,word"] + [f"{u},s{(u * 7 + k) % 3},w{(u * k) % 40}"
                                 for u in range(400) for k in range(3)]
    rows.append("99999,lone,w1")
    log.write_text("\n".join(rows) + "\n")
    groups = tmp_path / "groups.txt"
    groups.write_text("s0\ns1\ns_empty\n")
    return log, groups


PROFILE = ["profile", "--item", "user", "--domain-size", "1000", "--max-count", "4",
           "--epsilon", "4", "--unit", "item", "--group", "site", "--max-groups-per-item", "2",
           "--seed", "1"]


def test_profile_selection_json_is_clean(tmp_path: Path) -> None:
    log, _ = _log(tmp_path)
    out = CliRunner().invoke(cli, [*PROFILE, str(log), "--delta", "1e-6", "--json", "-"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert doc["delta"] == 1e-6
    assert doc["mechanism_params"]["selection"]["threshold"] >= 2
    # 400 items per group against a threshold near 20: released except with probability
    # < 1e-100; the lone item's group with probability <= 5e-7 (stated false-alarm rate)
    assert list(doc["groups"]) == ["s0", "s1", "s2"]


def test_profile_selection_table_has_group_column(tmp_path: Path) -> None:
    log, _ = _log(tmp_path)
    out = CliRunner().invoke(cli, [*PROFILE, str(log), "--delta", "1e-6"])
    assert out.exit_code == 0, out.output
    assert "selected privately" in out.stdout
    assert re.search(r"^\s*s2\s+0\s", out.stdout, re.M)


def test_anonymize_grouped_public_list_and_selection(tmp_path: Path) -> None:
    log, groups = _log(tmp_path)
    base = ["anonymize", str(log), "--item", "word", "--epsilon", "2", "--unit", "event",
            "--group", "site", "--seed", "3"]
    out = CliRunner().invoke(cli, [*base, "--groups", str(groups), "--json", "-"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert list(doc["release"]["groups"]) == ["s0", "s1", "s_empty"]
    assert doc["release"]["unit"] == "event"
    assert set(doc["properties"]) == {"s0", "s1", "s_empty"}
    assert "entropy" in doc["properties"]["s1"]
    table = CliRunner().invoke(cli, [*base, "--delta", "1e-6", "--top", "2"])
    assert table.exit_code == 0, table.output
    assert "# per group:" in table.stdout
    assert re.search(r"^\s*s1\s+\d+\s+\[", table.stdout, re.M)  # the summary row of s1
    assert "lone" not in table.stdout  # p₁ <= 1e-6: the stated false-alarm rate
    assert "# property estimates per group" in table.stdout


@pytest.mark.parametrize(("extra", "start"), [
    (["--max-groups-per-item", "2", "--groups", "G"],
     "dpfreq: error: --max-groups-per-item of dpfreq anonymize must be left out"),
    ([], "dpfreq: error: --groups of dpfreq anonymize must be a public list"),
    (["--delta", "0.01"], "dpfreq: error: --delta of dpfreq anonymize must be"),
])
def test_anonymize_grouped_errors_are_one_line(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str],
                                               extra: list[str], start: str) -> None:
    log, groups = _log(tmp_path)
    extra = [str(groups) if x == "G" else x for x in extra]
    with pytest.raises(SystemExit) as info:
        main(["anonymize", str(log), "--item", "word", "--epsilon", "1", "--unit", "event",
              "--group", "site", *extra])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(start)


def test_profile_selection_without_delta_or_groups_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log, _ = _log(tmp_path)
    with pytest.raises(SystemExit) as info:
        main([*PROFILE, str(log)])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("dpfreq: error: --groups of dpfreq profile must be a public list "
                              "of group names, or give --delta > 0")


def test_plan_profile_grouped(tmp_path: Path) -> None:
    _, groups = _log(tmp_path)
    base = ["plan", "profile", "--domain-size", "100000", "--max-count", "20", "--epsilon",
            "1", "--unit", "item", "--group", "campaign", "--max-groups-per-item", "5"]
    sel = CliRunner().invoke(cli, [*base, "--delta", "1e-6"])
    assert sel.exit_code == 0, sel.output
    assert "ε=0.1 per group" in sel.stdout
    chosen = plan_partition_selection(0.5, 1e-6, 5)  # auto at (ε/2, δ, m = 5): the set union
    assert chosen.mechanism == "weighted_set_union"
    assert f"τ = {chosen.threshold}" in sel.stdout
    listed = CliRunner().invoke(cli, [*base, "--groups", str(groups)])
    assert listed.exit_code == 0, listed.output
    assert "For all 3 listed groups at once" in listed.stdout
    auto = CliRunner().invoke(cli, [*base[:-1], "auto", "--groups", str(groups),
                                    "--capping-epsilon", "0.2"])
    assert auto.exit_code == 0, auto.output
    assert "--capping-epsilon 0.2 of ε = 1 measures the cap" in auto.stdout
    assert "m is chosen privately in 1..3" in auto.stdout


def test_plan_anonymize_grouped() -> None:
    out = CliRunner().invoke(cli, ["plan", "anonymize", "--n-range", "1e4,1e5", "--epsilon", "1",
                                   "--group", "site", "--delta", "1e-6"])
    assert out.exit_code == 0, out.output
    assert "ε=0.5 per group" in out.stdout
    assert "noisy number of rows" in out.stdout


@pytest.mark.filterwarnings("always::dpfreq.errors.PrivacyWarning")
def test_plan_profile_warns_in_one_line_when_delta_is_one_over_the_domain(
        capsys: pytest.CaptureFixture[str]) -> None:
    args = ["plan", "profile", "--max-count", "20", "--epsilon", "1", "--unit", "item",
            "--group", "campaign", "--max-groups-per-item", "5", "--delta", "1e-6"]
    assert main([*args, "--domain-size", "1000000"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("dpfreq: warning: --delta of dpfreq plan profile is 1e-06, at least "
                          "1/1,000,000 (one over the domain size)")
    assert err.count("\n") == 1
    assert main([*args, "--domain-size", "999999"]) == 0
    assert "warning" not in capsys.readouterr().err
