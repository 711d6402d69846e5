"""`dpfreq stream init --capping-epsilon`: the dropped fraction on the command line — the
`# dropped by the cap:` line, the JSON field (clean `--json -`), `show` of a past period, the
plan at ε − ε_c, and one-line refusals that charge nothing."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cli_runner import run_cli
from dpfreq.ledger import Ledger

INIT = ["--item", "u", "--time", "t", "--horizon", "6", "--k", "1", "--unit", "item",
        "--epsilon", "1", "--delta", "0", "--method", "auto", "--late", "error",
        "--group", "g", "--max-groups-per-item", "1", "--state-engine", "memory"]


@pytest.fixture(autouse=True)
def no_key(monkeypatch):
    monkeypatch.delenv("DPFREQ_ARTIFACT_KEY", raising=False)


def _files(tmp_path) -> list[str]:
    rng = np.random.default_rng(0)
    out = []
    for t in (1, 2):
        path = tmp_path / f"d{t}.parquet"
        pq.write_table(pa.table({"u": rng.integers(0, 80, 300), "t": np.full(300, t),
                                 "g": rng.choice(list("abcd"), 300)}), path)
        out.append(str(path))
    return out


@pytest.mark.filterwarnings("ignore::dpfreq.errors.DPFreqWarning")
def test_dropped_line_json_and_show(tmp_path, capsys) -> None:
    groups = tmp_path / "groups.txt"
    groups.write_text("a\nb\nc\nd\n")
    ledger, state = str(tmp_path / "b.db"), str(tmp_path / "s")
    assert run_cli(["ledger", "init", ledger, "--epsilon", "2"], capsys)[0] == 0
    code, _, err = run_cli(["stream", "init", state, *INIT, "--groups", groups,
                            "--capping-epsilon", "0.25", "--seed", "1", "--ledger", ledger],
                           capsys)
    assert code == 0, err
    assert Ledger(ledger).spent.epsilon == pytest.approx(1.0)  # one charge: ε, the share in it
    d1, d2 = _files(tmp_path)
    code, out, err = run_cli(["stream", "append", state, d1, "--through", "1"], capsys)
    assert code == 0, err
    assert "# dropped by the cap: The cap at m = 1 dropped an estimated" in out
    code, out, err = run_cli(["stream", "append", state, d2, "--through", "2", "--json", "-"],
                             capsys)
    assert code == 0, err
    doc = json.loads(out)
    drop = doc["dropped_fraction"]
    assert (drop["epsilon"], drop["bound"], drop["sensitivity"]) == (0.25, 4, 7)
    assert drop["lower"] <= drop["value"] <= drop["upper"]
    assert doc["mechanism_params"]["capping_epsilon"] == 0.25
    code, out, _ = run_cli(["stream", "show", state, "--through", "1", "--json", "-"], capsys)
    assert code == 0
    past = json.loads(out)
    assert past["period"] == 1
    assert past["dropped_fraction"]["description"].startswith("The cap at m = 1 dropped")
    plan = [a for a in INIT[4:-2] if a not in ("--late", "error")]
    code, out, err = run_cli(["plan", "stream", *plan, "--groups", groups,
                              "--capping-epsilon", "0.25", "--target-half-width", "40"],
                             capsys)
    assert code == 0, err
    eps = float(out.strip().splitlines()[-1].rsplit(" ", 1)[1])
    assert eps > 0.25  # the reach counters' ε plus the share


@pytest.mark.parametrize(("extra", "says"), [
    (["--capping-epsilon", "1"], "(0, --epsilon 1)"),
    (["--capping-epsilon", "-0.1"], "(0, --epsilon 1)"),
])
def test_refusals_are_one_line(tmp_path, capsys, extra, says) -> None:
    groups = tmp_path / "groups.txt"
    groups.write_text("a\nb\n")
    ledger = str(tmp_path / "b.db")
    assert run_cli(["ledger", "init", ledger, "--epsilon", "2"], capsys)[0] == 0
    code, out, err = run_cli(["stream", "init", str(tmp_path / "s"), *INIT, "--groups", groups,
                              *extra, "--ledger", ledger], capsys)
    assert code == 2
    assert out == ""
    [line] = err.strip().splitlines()
    assert line.startswith("dpfreq: error: --capping-epsilon of dpfreq stream init must be")
    assert says in line
    assert Ledger(ledger).spent.epsilon == 0
