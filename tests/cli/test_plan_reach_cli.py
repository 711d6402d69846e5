"""`dpfreq plan reach` in-process: text lines, JSON on stdout, the vacuous warning, the ε for a
target, and one-line errors with exit status 2."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpfreq.cli.main import main
from dpfreq.windows import plan_window_counts


def test_plan_reach_text_and_target(capsys):
    assert main(["plan", "reach", "--horizon", "30", "--epsilon", "1", "--unit", "item",
                 "--k", "1,3", "--window", "cumulative,7", "--window", "all",
                 "--scale", "5000", "--target-half-width", "50"]) == 0
    out = capsys.readouterr().out
    plan = plan_window_counts(horizon=30, epsilon=1.0, unit="item", k_values=[1, 3],
                              windows=["cumulative", 7, "all"], scale=5000)
    for line in plan.lines():
        assert line in out
    assert "VACUOUS" in out  # the all-windows family at this ε
    eps = plan.epsilon_for(50, family="cumulative", k=3)
    assert f"ε for cumulative, k=3 half-width ≤ 50 items: {eps:g}" in out


def test_plan_reach_json_on_stdout(capsys):
    assert main(["plan", "reach", "--start", "2024-01-01", "--end", "2024-03-31",
                 "--period", "1d", "--epsilon", "0.5", "--delta", "1e-6", "--unit", "event",
                 "--k", "1,2", "--window", "cumulative", "--window", "7", "--json", "-"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["horizon"] == 91
    assert doc["windows"] == [7, "cumulative"]
    plan = plan_window_counts(start="2024-01-01", end="2024-03-31", period="1d", epsilon=0.5,
                              delta=1e-6, unit="event", k_values=[1, 2],
                              windows=["cumulative", 7])
    np.testing.assert_allclose(doc["halfwidth"]["fixed(W=7)"]["2"],
                               plan.halfwidth["fixed(W=7)"][2])
    assert "# plan: reach over T=91 periods" in err  # the human lines go to stderr


@pytest.mark.parametrize("args", [
    ["--horizon", "30", "--epsilon", "1", "--unit", "item", "--window", "weekly"],
    ["--horizon", "30", "--epsilon", "0", "--unit", "item"],
    ["--horizon", "30", "--epsilon", "1", "--unit", "item", "--window", "31"],
    ["--horizon", "30", "--epsilon", "1", "--unit", "user"],
    ["--horizon", "30", "--epsilon", "1"],
    ["--epsilon", "1", "--unit", "event"],
    ["--horizon", "30", "--epsilon", "1", "--unit", "event", "--k", "0"],
    ["--horizon", "30", "--epsilon", "1", "--unit", "event", "--target-half-width", "-1"],
])
def test_plan_reach_bad_input_is_one_line_exit_2(args, capsys):
    with pytest.raises(SystemExit) as info:
        main(["plan", "reach", *args])
    assert info.value.code == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("dpfreq: error:")
