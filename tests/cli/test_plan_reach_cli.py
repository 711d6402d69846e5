"""`dpfreq plan reach` in-process: text lines, JSON on stdout, the vacuous warning, the ε for a
target, and one-line errors with exit status 2."""

from __future__ import annotations

import json

import click
import numpy as np
import pytest

from dpfreq.cli.main import main
from dpfreq.windows import plan_window_counts

ASK = ["--k", "1", "--windows", "cumulative"]


def test_plan_reach_text_and_target(capsys):
    assert main(["plan", "reach", "--horizon", "30", "--epsilon", "1", "--unit", "item",
                 "--k", "1,3", "--windows", "cumulative,7", "--windows", "all",
                 "--scale", "5000", "--target-half-width", "50"]) == 0
    out = capsys.readouterr().out
    plan = plan_window_counts(horizon=30, epsilon=1.0, unit="item", k_values=[1, 3],
                              windows=["cumulative", 7, "all"], scale=5000)
    for line in plan.lines():
        assert line in out
    assert "VACUOUS" in out  # the all-windows family at this ε
    eps = plan.epsilon_for(50, family="cumulative", k=3)
    assert f"total ε for cumulative, k=3 half-width ≤ 50 items: {eps:g}" in out
    # the ε printed is the call's total, split over its 6 (family, k) structures (issue 50)
    assert "# ε below: the whole call's ε, split equally over its 6 (family, k) structures" in out


def test_plan_reach_json_on_stdout(capsys):
    assert main(["plan", "reach", "--start", "2024-01-01", "--end", "2024-03-31",
                 "--period", "1d", "--epsilon", "0.5", "--delta", "1e-6", "--unit", "event",
                 "--k", "1,2", "--windows", "cumulative", "--windows", "7", "--json", "-"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["horizon"] == 91
    assert doc["windows"] == [7, "cumulative"]
    plan = plan_window_counts(start="2024-01-01", end="2024-03-31", period="1d", epsilon=0.5,
                              delta=1e-6, unit="event", k_values=[1, 2],
                              windows=["cumulative", 7])
    np.testing.assert_allclose(doc["halfwidth"]["rolling(W=7)"]["2"],
                               plan.halfwidth["rolling(W=7)"][2])
    assert "# plan: reach over T=91 periods" in err  # the human lines go to stderr


@pytest.mark.parametrize("args", [
    ["--horizon", "30", "--epsilon", "1", "--unit", "item", "--k", "1", "--windows", "weekly"],
    ["--horizon", "30", "--epsilon", "0", "--unit", "item", *ASK],
    ["--horizon", "30", "--epsilon", "1", "--unit", "item", "--k", "1", "--windows", "31"],
    ["--horizon", "30", "--epsilon", "1", "--unit", "user", *ASK],
    ["--horizon", "30", "--epsilon", "1", *ASK],
    ["--epsilon", "1", "--unit", "event", *ASK],
    ["--horizon", "30", "--epsilon", "1", "--unit", "event", "--k", "0", "--windows", "total"],
    ["--horizon", "30", "--epsilon", "1", "--unit", "event", "--target-half-width", "-1", *ASK],
    ["--horizon", "30", "--epsilon", "1", "--unit", "event", "--windows", "cumulative"],
    ["--horizon", "30", "--epsilon", "1", "--unit", "event", "--k", "1"],
])
def test_plan_reach_bad_input_is_one_line_exit_2(args, capsys):
    with pytest.raises(SystemExit) as info:
        main(["plan", "reach", *args])
    assert info.value.code == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("dpfreq: error:")


#: what each command adds to the shared public parameters (data, outputs, planning extras)
ONLY_PLAN = {"scale", "target_half_width", "json_out"}
ONLY_REACH = {"file", "item", "time_col", "time_unit", "timezone", "out_of_range", "rows_text",
              "raw", "null_group", "save_path", "engine", "spark_master", "json_out", "plot_out",
              "seed",
              "ledger"}


def _options(command):
    ctx = click.Context(command)
    return {p.name: p.to_info_dict() for p in command.get_params(ctx)
            if p.name != "quiet" and "--help" not in getattr(p, "opts", ())}


def test_plan_reach_and_reach_take_identical_public_options():
    """Issue 31: the planner and the release take the same window/k/unit/ε options (one
    definition), so a plan is run by changing the command name only."""
    from dpfreq.cli.plan_reach import command as plan_command
    from dpfreq.cli.reach import command as reach_command

    plan, reach = _options(plan_command), _options(reach_command)
    shared = set(plan) - ONLY_PLAN
    assert {"epsilon", "delta", "unit", "k_text", "window_text", "horizon", "start", "end",
            "period", "singleton", "confidence", "group", "max_groups_per_item",
            "groups_file"} <= shared
    assert set(reach) - ONLY_REACH == shared
    for name in shared:
        assert plan[name] == reach[name], name
    assert plan["window_text"]["opts"] == ["--windows"]
    assert plan["window_text"]["required"]  # no default family
    assert plan["k_text"]["required"]  # no default k


@pytest.mark.parametrize("missing", ["--k", "--windows"])
def test_plan_reach_needs_k_and_windows_like_the_release(missing, capsys):
    args = ["plan", "reach", "--horizon", "30", "--epsilon", "1", "--unit", "event",
            "--k", "1", "--windows", "cumulative"]
    i = args.index(missing)
    with pytest.raises(SystemExit) as info:
        main(args[:i] + args[i + 2:])
    assert info.value.code == 2
    assert capsys.readouterr().err.strip() == f"dpfreq: error: Missing option '{missing}'."


def test_plan_reach_total_family_and_integral_float_width(capsys):
    assert main(["plan", "reach", "--horizon", "30", "--epsilon", "1", "--unit", "event",
                 "--k", "1", "--windows", "total, 7e0", "--json", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    plan = plan_window_counts(horizon=30, epsilon=1.0, unit="event", k_values=[1],
                              windows=["total", 7])
    assert doc["windows"] == [7, "total"]
    assert doc["max_halfwidth"]["total"]["1"] == pytest.approx(plan.max_halfwidth["total"][1])


def test_parse_window_list_grammar():
    from dpfreq.cli.reach_options import parse_window_list

    assert parse_window_list(("cumulative, 7", "ALL,total,")) == ["cumulative", 7, "all", "total"]
    for bad in (("rolling7",), ("",), (",",), ("1.5",)):
        with pytest.raises(click.BadParameter, match=r"family|integer window widths"):
            parse_window_list(bad)


def test_plan_reach_with_groups_prints_the_per_group_plan(tmp_path):
    """Issue 28: `plan reach --group` plans every group at ε/m, the same options as reach."""
    from click.testing import CliRunner

    from dpfreq.cli.main import cli

    groups = tmp_path / "groups.txt"
    groups.write_text("c0\nc1\nc2\n")
    out = CliRunner().invoke(cli, ["plan", "reach", "--horizon", "30", "--epsilon", "1",
                                   "--unit", "item", "--k", "1", "--windows", "total",
                                   "--group", "campaign", "--groups", str(groups),
                                   "--max-groups-per-item", "4"])
    assert out.exit_code == 0, out.output
    assert "3 groups, epsilon=1 spent once: ε/m = 0.25 per group (m=4)" in out.output
