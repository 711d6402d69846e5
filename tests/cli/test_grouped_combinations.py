"""`--group` in combination with every window family and every output (STYLE 20b, issue 50).

Each combination of `dpfreq reach --group` with a window family (cumulative, total, an integer
width, all) and an output (`--save` then `dpfreq reach query`, `--rows`, `--plot`, `--json -`)
runs once on a small log through the memory engine (a query of a saved release says what its
intervals cover, as the release did); so do `dpfreq profile --group` and
`dpfreq anonymize --group` with `--rows`/`--top`, `--plot` and `--json -`. Every run must
exit 0 (or refuse before spending, for `all` without `--save`), write what was asked and print
what the release holds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dpfreq.cli.main import main
from dpfreq.grouped.capping import capping_statement

GROUPS = ["c0", "c1", "c2", "tiny"]
FAMILIES = ["cumulative", "total", "3", "all"]
OUTPUTS = ["save", "rows", "plot", "json"]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A log of 60 users over 5 days in three campaigns, a one-user campaign 'tiny', and rows
    of an unlisted campaign 'other' (dropped by the public list)."""
    root = tmp_path_factory.mktemp("grouped")
    log = root / "events.csv"
    rows = ["user,campaign,day"] + [f"{u},c{(u * 7 + k) % 3},{1 + (u + k) % 5}"
                                    for u in range(60) for k in range(3)]
    rows += ["999,tiny,2", "500,other,3"]
    log.write_text("\n".join(rows) + "\n", encoding="utf-8")
    groups = root / "groups.txt"
    groups.write_text("\n".join(GROUPS) + "\n", encoding="utf-8")
    return log, groups


def _reach(log: Path, groups: Path, family: str, *extra: str) -> list[str]:
    return ["reach", str(log), "--item", "user", "--time", "day", "--horizon", "5",
            "--epsilon", "2", "--unit", "item", "--k", "1,2", "--windows", family,
            "--group", "campaign", "--groups", str(groups), "--max-groups-per-item", "2",
            "--engine", "memory", "--seed", "1", *extra]


def _table_rows(out: str) -> list[list[str]]:
    """The rows of the printed table (its header line left out)."""
    return [line.split() for line in out.splitlines()
            if line and not line.startswith("#")][1:]


@pytest.mark.parametrize("output", OUTPUTS)
@pytest.mark.parametrize("family", FAMILIES)
def test_reach_group_family_output(files: tuple[Path, Path], tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str], monkeypatch: Any,
                                   family: str, output: str) -> None:
    monkeypatch.chdir(tmp_path)  # a rescue file, if any, would land here (and fail below)
    log, groups = files
    saved = tmp_path / "r.dpfreq"
    extra = {"save": ["--save", str(saved)], "rows": ["--rows", "2"],
             "plot": ["--plot", str(tmp_path / "r.png")], "json": ["--json", "-"]}[output]
    if family == "all" and output != "save":
        extra += ["--save", str(saved)]  # the all-windows family is asked later: needs a file
    assert main(_reach(log, groups, family, *extra)) == 0
    out, err = capsys.readouterr()
    assert "internal error" not in err
    assert not list(tmp_path.glob("dpfreq-release-*.json"))  # nothing had to be rescued
    if output == "json":
        doc = json.loads(out)
        assert list(doc["groups"]) == GROUPS
        assert doc["epsilon"] == 2.0
        assert all(doc["groups"][g]["epsilon"] == 1.0 for g in GROUPS)
        return
    assert "# grouped by 'campaign': 4 public groups" in out
    assert "the groups at δ = 0" not in out
    rows = _table_rows(out)
    if family == "all":
        assert rows == []  # no curve: the windows are asked with `dpfreq reach query`
        assert f"dpfreq reach query {saved}" in out
    else:
        assert {r[0] for r in rows} == set(GROUPS)  # every group, none dropped
        per_group = [r for r in rows if r[0] == "c0"]
        if family == "total":  # one row: the window [1, T]
            assert [r[1] for r in per_group] == ["5"]
        else:  # --rows 2: the first period, "..." and the last
            assert [r[1] for r in per_group] == (["1", "...", "5"] if output == "rows"
                                                 else ["1", "2", "3", "4", "5"])
    if output == "plot":
        assert (tmp_path / "r.png").stat().st_size > 1000
    if output == "save" or family == "all":
        _query_saved(saved, family, capsys)


def _query_saved(saved: Path, family: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`dpfreq reach query` answers a grouped save: every group, or those named, with the
    numbers of the loaded release; the same refusals as for an ungrouped save."""
    from dpfreq.windows.grouped.result import GroupedWindowRelease

    window = {"cumulative": "1:4", "total": "1:5", "3": "2:4", "all": "2:3"}[family]
    assert main(["reach", "query", str(saved), "--window", window, "--k", "2",
                 "--json", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["post_processing"] is True
    assert doc["release"]["groups"] == GROUPS
    assert doc["release"]["coverage"] == capping_statement(2)  # the capped data, as released
    assert [a["group"] for a in doc["answers"]] == GROUPS
    rel = GroupedWindowRelease.load(saved)
    t1, t2 = (int(x) for x in window.split(":"))
    for a in doc["answers"]:
        want = rel[a["group"]].window(t1, t2, 2)
        assert (a["estimate"], a["lower"], a["upper"]) == (want.estimate, want.lower,
                                                             want.upper)
        assert want.description.endswith(f"Coverage: {capping_statement(2)}")
    assert main(["reach", "query", str(saved), "--window", window, "--k", "1",
                 "--group", "tiny", "--group", "c1"]) == 0
    text = capsys.readouterr().out
    assert f"# coverage: {capping_statement(2)}\n" in text
    table = _table_rows(text)
    assert [r[0] for r in table] == ["tiny", "c1"]
    for bad, match in ((["--group", "nope"], "--group of dpfreq reach query must be one of "
                                              "the groups released in"),
                       (["--k", "3"], "--k of dpfreq reach query must be one of the k "
                                      "values released")):
        args = ["reach", "query", str(saved), "--window", window, *bad]
        if "--k" not in bad:
            args += ["--k", "1"]
        with pytest.raises(SystemExit) as exc:
            main(args)
        assert exc.value.code == 2
        assert match in capsys.readouterr().err


def test_reach_query_refuses_group_on_an_ungrouped_save(files: tuple[Path, Path],
                                                        tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    log, _ = files
    saved = tmp_path / "plain.dpfreq"
    assert main(["reach", str(log), "--item", "user", "--time", "day", "--horizon", "5",
                 "--epsilon", "1", "--unit", "item", "--k", "1", "--windows", "all",
                 "--engine", "memory", "--seed", "1", "--save", str(saved)]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["reach", "query", str(saved), "--window", "1:2", "--k", "1", "--group", "c0"])
    assert exc.value.code == 2
    assert "--group of dpfreq reach query must be given only for a release saved with " \
           "`dpfreq reach --group`" in capsys.readouterr().err


def test_reach_group_all_without_save_is_refused_before_spending(
        files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    log, groups = files
    with pytest.raises(SystemExit) as exc:
        main(_reach(log, groups, "all"))
    assert exc.value.code == 2
    assert "without 'all' unless --save" in capsys.readouterr().err


def _profile(log: Path, groups: Path, *extra: str) -> list[str]:
    return ["profile", str(log), "--item", "user", "--domain-size", "200", "--max-count", "8",
            "--epsilon", "2", "--unit", "item", "--group", "campaign", "--groups", str(groups),
            "--max-groups-per-item", "2", "--engine", "memory", "--seed", "1", *extra]


def _anonymize(log: Path, groups: Path, *extra: str) -> list[str]:
    return ["anonymize", str(log), "--item", "user", "--epsilon", "2", "--unit", "event",
            "--group", "campaign", "--groups", str(groups), "--engine", "memory", "--seed",
            "1", *extra]


@pytest.mark.parametrize("output", ["rows", "plot", "json"])
@pytest.mark.parametrize("command", ["profile", "anonymize"])
def test_profile_and_anonymize_group_output(files: tuple[Path, Path], tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str],
                                            command: str, output: str) -> None:
    log, groups = files
    build = _profile if command == "profile" else _anonymize
    extra = {"rows": ["--rows", "1"] if command == "profile" else ["--top", "1"],
             "plot": ["--plot", str(tmp_path / "g.png")], "json": ["--json", "-"]}[output]
    assert main(build(log, groups, *extra)) == 0
    out, err = capsys.readouterr()
    assert "internal error" not in err
    if output == "json":
        doc = json.loads(out)
        release = doc if command == "profile" else doc["release"]
        assert list(release["groups"]) == GROUPS
        if command == "anonymize":  # every group's property bounds lie within the range
            for group, props in doc["properties"].items():
                for name, prop in props.items():
                    if prop["error"]["kind"] == "bound" and prop["value"] != "nan":
                        lo, hi = (float(x) for x in prop["value_range"])
                        assert lo <= prop["value"] <= hi, (group, name)
                        assert float(prop["error"]["value"]) <= max(
                            prop["value"] - lo, hi - prop["value"]), (group, name)
            # c0's plug-in (4.64) lies above ln 83, its range: clamped into it
            entropy = doc["properties"]["c0"]["entropy"]
            assert entropy["clamped"]
            assert entropy["value"] == entropy["value_range"][1]
        return
    assert "# grouped by 'campaign': 4 public groups" in out
    assert "direct: direct:" not in out
    if output == "plot":
        assert (tmp_path / "g.png").stat().st_size > 1000
    if command == "profile":
        rows = _table_rows(out)
        assert {r[0] for r in rows} == set(GROUPS)
        if output == "rows":  # t = 0, 1, then ranges doubling in width, and 8+, per group
            assert [r[1] for r in rows if r[0] == "c0"] == ["0", "1", "2", "3-4", "5-7", "8+"]


def _auto(args: list[str]) -> list[str]:
    """The same command with ``--max-groups-per-item auto`` paid by ``--capping-epsilon``."""
    at = args.index("--max-groups-per-item")
    return [*args[:at + 1], "auto", *args[at + 2:], "--capping-epsilon", "0.2"]


@pytest.mark.parametrize(("command", "output"), [
    *(("reach", o) for o in OUTPUTS),
    *(("profile", o) for o in OUTPUTS if o != "save"),  # dpfreq profile has no --save
])
def test_auto_bound_with_every_output(files: tuple[Path, Path], tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str], command: str,
                                      output: str) -> None:
    """``--max-groups-per-item auto`` with ``--save``, ``--rows``, ``--plot`` and ``--json -``:
    the chosen m is printed (or in the JSON), every group is released and the saved release
    keeps the choice."""
    log, groups = files
    saved = tmp_path / "a.dpfreq"
    extra = {"save": ["--save", str(saved)], "rows": ["--rows", "1"],
             "plot": ["--plot", str(tmp_path / "a.png")], "json": ["--json", "-"]}[output]
    args = (_reach(log, groups, "total", *extra) if command == "reach"
            else _profile(log, groups, *extra))
    assert main(_auto(args)) == 0
    out, err = capsys.readouterr()
    assert "internal error" not in err
    if output == "json":
        doc = json.loads(out)
        choice = doc["mechanism_params"]["bound_choice"]
        assert 1 <= choice["chosen"] <= len(GROUPS)
        assert choice["epsilon"] == 0.2
        assert list(doc["groups"]) == GROUPS
        return
    assert "max-groups-per-item auto: m = " in out
    assert {r[0] for r in _table_rows(out) if r[0] in GROUPS} == set(GROUPS)
    if output == "plot":
        assert (tmp_path / "a.png").stat().st_size > 1000
    if output == "save":
        from dpfreq.windows.grouped.result import GroupedWindowRelease

        back = GroupedWindowRelease.load(saved)
        assert back.mechanism_params["bound_choice"]["epsilon"] == 0.2
        assert back.dropped_fraction is not None
        assert main(["reach", "query", str(saved), "--window", "1:5", "--k", "1"]) == 0
        text = capsys.readouterr().out  # the query says what the release said of its cap
        m = back.dropped_fraction.max_groups_per_item
        assert f"# coverage: {capping_statement(m)}\n" in text
        assert f"# dropped by the cap: {back.dropped_fraction.description}\n" in text
