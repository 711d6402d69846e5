"""Issue 50, as an analyst meets it: a campaign log with New York timestamps over a DST change.

Each test states the item of the issue it checks; each failed before the change.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest

import dpfreq
from cli_runner import run_cli

ZONE = "America/New_York"
RANGE = ["--start", "2026-03-01", "--end", "2026-03-14", "--timezone", ZONE]
#: UTC instants at the edges of the New York range [2026-03-01, 2026-03-14] (DST on 03-08):
#: (instant, inside?)
EDGES = [("2026-03-01T04:59:59Z", False),  # 02-28 23:59:59 EST
         ("2026-03-01T05:00:00Z", True),   # 03-01 00:00:00 EST: the first instant
         ("2026-03-08T07:30:00Z", True),   # 03:30 EDT, after the change
         ("2026-03-15T03:59:59Z", True),   # 03-14 23:59:59 EDT: the last second
         ("2026-03-15T04:00:00Z", False)]  # 03-15 00:00:00 EDT


@pytest.fixture(scope="module")
def campaign_log(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """300 users in three campaigns over two weeks, plus the edge events of user 0 in c0, and
    a one-user campaign 'tiny'; the public list names c0, c1, c2 and tiny."""
    root = tmp_path_factory.mktemp("campaigns")
    gen = np.random.default_rng(50)
    n = 1500
    start = np.datetime64("2026-03-01T05:00:00")
    offsets = gen.integers(60, 13 * 86_400, n).astype("timedelta64[s]")
    rows = ["user,campaign,ts"]
    rows += [f"{u},c{c},{t}Z" for u, c, t in zip(gen.integers(0, 300, n),
                                                    gen.choice(3, n, p=[0.6, 0.3, 0.1]),
                                                    start + offsets, strict=True)]
    rows += [f"0,c0,{t}" for t, _ in EDGES]
    rows += ["9999,tiny,2026-03-05T12:00:00Z"]
    log = root / "log.csv"
    log.write_text("\n".join(rows) + "\n", encoding="utf-8")
    groups = root / "groups.txt"
    groups.write_text("c0\nc1\nc2\ntiny\n", encoding="utf-8")
    return log, groups


def _reach(log: Path, *extra: str) -> list[str]:
    return ["reach", str(log), "--item", "user", "--time", "ts", *RANGE, "--period", "1d",
            "--epsilon", "1", "--unit", "item", "--k", "1,3", "--engine", "memory",
            "--seed", "5", *extra]


def _grouped(groups: Path) -> list[str]:
    return ["--group", "campaign", "--groups", str(groups), "--max-groups-per-item", "2"]


def test_out_of_range_error_gives_the_rule_the_range_and_sql_never_a_count(
        campaign_log: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """Item 6: the refusal states the public range in the zone and a SQL query that finds
    exactly the events a `--out-of-range drop` release drops; no count of them."""
    log, _ = campaign_log
    code, _, err = run_cli(_reach(log, "--windows", "total"), capsys)
    assert code == 2
    line = err.strip().splitlines()[-1]
    assert (f"must be inside the public range: wall-clock time in {ZONE} from 2026-03-01 "
            "00:00:00 (included) to 2026-03-15 00:00:00 (excluded), periods 1..14") in line
    assert "--out-of-range drop" in line
    assert " 2 " not in line
    assert "2 events" not in line
    sql = re.search(r"DuckDB: (SET TimeZone = 'UTC'); (SELECT \* FROM <source> WHERE .*)\.$",
                    line)
    assert sql is not None, line
    con = duckdb.connect()
    con.execute(sql.group(1))
    found = con.execute(sql.group(2).replace("<source>", f"read_csv('{log}')")).fetchall()
    rel = dpfreq.release_window_counts(
        str(log), item="user", time="ts", start="2026-03-01", end="2026-03-14", period="1d",
        timezone=ZONE, epsilon=1.0, unit="item", k_values=[1], windows=["total"], rng=1,
        out_of_range="drop")
    assert len(found) == rel.n_dropped == sum(not inside for _, inside in EDGES)


def test_grouped_release_keeps_n_dropped_and_fills_attrs(campaign_log: tuple[Path, Path],
                                                         tmp_path: Path) -> None:
    """Item 6: a grouped release's n_dropped survives save/load; its to_pandas().attrs are
    filled (they were empty)."""
    from dpfreq.windows.grouped.result import GroupedWindowRelease

    log, groups = campaign_log
    rel = dpfreq.release_window_counts(
        str(log), item="user", time="ts", start="2026-03-01", end="2026-03-14", period="1d",
        timezone=ZONE, epsilon=1.0, unit="item", k_values=[1], windows=["cumulative"], rng=1,
        out_of_range="drop", group="campaign", groups=str(groups), max_groups_per_item=2)
    assert rel.n_dropped == 2
    again = GroupedWindowRelease.load(rel.save(tmp_path / "g.dpfreq"))
    assert again.n_dropped == 2
    attrs = again.to_pandas().attrs
    assert attrs["epsilon"] == 1.0
    assert attrs["unit"] == "item"
    assert attrs["confidence"] == 0.95
    assert attrs["group_column"] == "campaign"
    assert attrs["groups"] == ["c0", "c1", "c2", "tiny"]
    assert attrs["epsilon_per_group"] == 0.5
    assert attrs["timezone"] == ZONE
    assert attrs["n_dropped"] == 2
    assert "both included" in attrs["start_end"]


def test_grouped_reach_prints_zone_days_rows_and_the_groups_below_their_noise(
        campaign_log: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """Items 4, 5, 7: --rows per group; the header's zone line; each row's period is the day
    (wall-clock in the zone), included; the groups smaller than their noise are named (at
    confidence 1 − 10^-6 the one-user group's interval reaches 0 except with probability below
    10^-6); the estimates are the consistent view (non-increasing in k, at least 0)."""
    log, groups = campaign_log
    code, out, err = run_cli(_reach(log, "--windows", "cumulative,total", "--out-of-range", "drop",
                                    "--rows", "3", "--confidence", "0.999999", *_grouped(groups)),
                             capsys)
    assert code == 0, err
    assert f"# periods: wall-clock time in {ZONE}, days 2026-03-01 to 2026-03-14; row t: the " \
           "windows ending with period t, the day in the period column, included" in out
    assert re.search(r"^# smaller than their noise \(\d of 4 groups.*: .*tiny", out, re.M)
    rows = [line.split() for line in out.splitlines() if line and not line.startswith("#")]
    assert rows[0][:3] == ["campaign", "t", "period"]
    body = rows[1:]
    assert [r[1] for r in body if r[0] == "c0"] == ["1", "2", "...", "14"]
    last = next(r for r in body if r[0] == "c0" and r[1] == "14")
    assert last[2] == "2026-03-14"
    cells = re.findall(r"(\d+) \[(\d+), (\d+)\]", " ".join(last[3:]))
    cum1, cum3 = int(cells[0][0]), int(cells[1][0])
    assert cum1 >= cum3 >= 0  # consistent across k


def test_reach_header_says_what_the_cells_are(campaign_log: tuple[Path, Path],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Item 5: the printed default is the consistent view, said so; --raw prints the JSON's
    values."""
    log, _ = campaign_log
    code, out, _ = run_cli(_reach(log, "--windows", "total", "--out-of-range", "drop"), capsys)
    assert code == 0
    assert "post-processed (no privacy cost): made non-increasing in k and clamped at 0" in out
    code, raw, _ = run_cli(_reach(log, "--windows", "total", "--out-of-range", "drop", "--raw",
                                  "--json", "-"), capsys)
    doc = json.loads(raw)
    code, out, _ = run_cli(_reach(log, "--windows", "total", "--out-of-range", "drop", "--raw"),
                           capsys)
    value = doc["value"]["total"]["3"][0]
    half = doc["error"]["upper"]["total"]["3"][0] - value
    assert out.strip().splitlines()[-1].endswith(f"{value:.0f} ±{half:.0f}")


def test_profile_start_end_keeps_the_rows_reach_keeps(campaign_log: tuple[Path, Path],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Item 8: `dpfreq profile --time --start --end --timezone` releases the rows of the range
    `dpfreq reach` covers with the same options: the edge events on both sides of it."""
    from dpfreq.cli.row_rules import rows_kept

    log, _groups = campaign_log
    kept = rows_kept(str(log), item="user", group=None, null_group="error", engine=None, time="ts",
                     start="2026-03-01", end="2026-03-14",
                     timezone=ZONE)
    total = len(log.read_text(encoding="utf-8").splitlines()) - 1
    assert kept.aggregate("count(*)").fetchall()[0][0] == total - 2
    args = ["profile", str(log), "--item", "user", "--domain-size", "1000", "--max-count", "8",
            "--epsilon", "1", "--unit", "item", "--time", "ts", *RANGE, "--seed", "1"]
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    assert f"rows with ts from 2026-03-01 to 2026-03-14 ({ZONE}" in out
    code, _, err = run_cli([*args, "--engine", "spark"], capsys)
    assert code == 2
    assert "filter the table first" in err
    code, _, err = run_cli([*args[:-len(RANGE) - 2], "--start", "2026-03-01", "--seed", "1"],
                           capsys)
    assert code == 2
    assert "--start/--end of dpfreq profile must be both given, with --time" in err


@pytest.mark.parametrize("command", ["reach", "profile", "anonymize"])
def test_null_group_error_or_drop(campaign_log: tuple[Path, Path], tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str], command: str) -> None:
    """Item 9: one row without a group refuses the file, with the way out named;
    `--null-group drop` releases the rows that have one (a public rule on rows)."""
    log, groups = campaign_log
    with_null = tmp_path / "null.csv"
    with_null.write_text(log.read_text(encoding="utf-8") + "77,,2026-03-04T12:00:00Z\n",
                         encoding="utf-8")
    args: dict[str, list[str]] = {
        "reach": _reach(with_null, "--windows", "total", "--out-of-range", "drop",
                        *_grouped(groups)),
        "profile": ["profile", str(with_null), "--item", "user", "--domain-size", "1000",
                    "--max-count", "8", "--epsilon", "1", "--unit", "item", "--seed", "1",
                    *_grouped(groups)],
        "anonymize": ["anonymize", str(with_null), "--item", "user", "--epsilon", "1",
                      "--unit", "event", "--seed", "1", "--group", "campaign", "--groups",
                      str(groups)]}
    code, _, err = run_cli(args[command], capsys)
    assert code == 2
    assert "free of nulls" in err
    assert "Pass --null-group drop" in err
    code, out, err = run_cli([*args[command], "--null-group", "drop", "--json", "-"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert list((doc if command != "anonymize" else doc["release"])["groups"]) == \
        ["c0", "c1", "c2", "tiny"]


def test_null_group_drop_needs_group(campaign_log: tuple[Path, Path],
                                     capsys: pytest.CaptureFixture[str]) -> None:
    log, _ = campaign_log
    code, _, err = run_cli(_reach(log, "--windows", "total", "--null-group", "drop"), capsys)
    assert code == 2
    assert "--null-group of dpfreq reach must be 'error' without --group" in err


def test_ledger_records_input_engine_groups_windows_and_k(campaign_log: tuple[Path, Path],
                                                          tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    """Item 10: every command records its input file and engine in `source` (reach recorded
    "duckdb", profile the file), and what was released: groups, windows, k."""
    log, groups = campaign_log
    ledger = tmp_path / "budget.db"
    assert run_cli(["ledger", "init", str(ledger), "--epsilon", "5"], capsys)[0] == 0
    reach = ["reach", str(log), "--item", "user", "--time", "ts", *RANGE, "--period", "1d",
             "--epsilon", "1", "--unit", "item", "--k", "1,3", "--windows", "cumulative,7",
             "--out-of-range", "drop", "--seed", "1", *_grouped(groups), "--ledger",
             str(ledger)]
    assert run_cli(reach, capsys)[0] == 0
    profile = ["profile", str(log), "--item", "user", "--domain-size", "1000", "--max-count",
               "8", "--epsilon", "1", "--unit", "item", "--seed", "1", "--ledger", str(ledger)]
    assert run_cli(profile, capsys)[0] == 0
    _code, out, _ = run_cli(["ledger", "show", str(ledger), "--json", "-"], capsys)
    rows = json.loads(out)["releases"]
    assert [r["source"].split("; ")[:2] for r in rows] == [[str(log), "engine duckdb"]] * 2
    assert rows[0]["source"] == (
        f"{log}; engine duckdb; groups by campaign (public list {groups}: c0, c1, c2, tiny, at "
        f"most 2 per item); windows cumulative,7; k 1,3; time 2026-03-01 to 2026-03-14 "
        f"({ZONE})")


def test_header_only_csv_releases_an_empty_log(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Item 12: a header-only CSV said its time column was "integer"; it is an empty log."""
    empty = tmp_path / "empty.csv"
    empty.write_text("user,ts\n", encoding="utf-8")
    code, _out, err = run_cli(_reach(empty, "--windows", "total"), capsys)
    assert code == 0, err
    assert "has no data rows; the release is the reach of an empty data set" in err
    assert "integer" not in err


def test_k_zero_names_the_option(campaign_log: tuple[Path, Path],
                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Item 12: `--k 0` named the Python parameter k_values."""
    log, _ = campaign_log
    args = _reach(log, "--windows", "total")
    args[args.index("1,3")] = "0"
    code, _, err = run_cli(args, capsys)
    assert code == 2
    assert "--k of dpfreq reach must be an integer >= 1" in err
    assert "k_values" not in err


def test_dir_lists_the_public_api_and_plans_print_a_summary() -> None:
    """Item 13: no `Any`, `annotations`, `importlib` in dir(dpfreq); a plan prints a few
    readable lines, not a dataclass dump."""
    assert dir(dpfreq) == sorted(dpfreq.__all__)
    plans: list[Any] = [
        dpfreq.plan_profile(domain_size=1000, max_count=10, epsilon=1.0, unit="item"),
        dpfreq.plan_window_counts(horizon=10, epsilon=1.0, unit="item", k_values=[1],
                                  windows=["cumulative"]),
        dpfreq.plan_anonymized(n_range=(100, 10_000), epsilon=1.0),
        dpfreq.plan_longitudinal(horizon=16, max_changes=2, epsilon=1.0, method="auto",
                                 devices=1000),
        dpfreq.plan_profile(domain_size=1000, max_count=10, epsilon=1.0, unit="item",
                            group="g", groups=["a", "b"], max_groups_per_item=2),
    ]
    for plan in plans:
        text = repr(plan)
        name = type(plan).__name__
        assert text.startswith(f"{name} (from public parameters: no data read, nothing spent)")
        assert f"{name}(" not in text  # not the dataclass dump
        assert all(len(line) <= 210 for line in text.splitlines())
        assert "ε=1" in text or "epsilon  " in text
