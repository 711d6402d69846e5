"""`dpfreq reach query`: windows answered from a saved release, with no budget spent."""

from __future__ import annotations

import json

import pytest

from dpfreq.cli.main import main
from dpfreq.windows import WindowCountsRelease

ROWS = [("a", "2024-01-01T10:00"), ("b", "2024-01-01T11:00"), ("a", "2024-01-02T09:00"),
        ("c", "2024-01-04T00:00"), ("a", "2024-01-05T23:59"), ("b", "2024-01-05T01:00")]


@pytest.fixture
def saved(tmp_path, capsys):
    """A release of every family at k = 1, 2, saved, made with a ledger."""
    log = tmp_path / "log.csv"
    log.write_text("user,ts\n" + "\n".join(f"{u},{t}" for u, t in ROWS) + "\n",
                   encoding="utf-8")
    ledger = tmp_path / "budget.db"
    assert main(["ledger", "init", str(ledger), "--epsilon", "5"]) == 0
    path = tmp_path / "rel.dpfreq"
    assert main(["reach", str(log), "--item", "user", "--time", "ts", "--start", "2024-01-01",
                 "--end", "2024-01-05", "--period", "1d", "--epsilon", "1", "--k", "1,2",
                 "--windows", "cumulative,3,all", "--unit", "item", "--seed", "3",
                 "--save", str(path), "--ledger", str(ledger)]) == 0
    capsys.readouterr()
    return path, ledger


def _ledger(path, capsys):
    assert main(["ledger", "show", str(path), "--json", "-"]) == 0
    return json.loads(capsys.readouterr().out)


def test_query_answers_equal_the_loaded_release_and_spend_nothing(saved, tmp_path, capsys,
                                                                  monkeypatch):
    path, ledger = saved
    before = _ledger(ledger, capsys)
    monkeypatch.chdir(tmp_path)
    assert main(["reach", "query", str(path), "--window", "2:4", "--window",
                 "2024-01-01:2024-01-03", "--k", "1", "--k", "2", "--confidence", "0.9",
                 "--json", "-"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["post_processing"] is True
    assert doc["budget_spent"] == {"epsilon": 0.0, "delta": 0.0}
    assert doc["release"]["windows"] == ["rolling(W=3)", "all", "cumulative"]
    assert "post-processing" in err
    rel = WindowCountsRelease.load(path)
    got = [(a["window"], a["t1"], a["t2"], a["k"]) for a in doc["answers"]]
    assert got == [("2:4", 2, 4, 1), ("2:4", 2, 4, 2), ("2024-01-01:2024-01-03", 1, 3, 1),
                   ("2024-01-01:2024-01-03", 1, 3, 2)]
    for a in doc["answers"]:
        want = rel.window(a["t1"], a["t2"], a["k"], confidence=0.9)
        assert (a["estimate"], a["lower"], a["upper"], a["answered_by"]) == \
            (want.estimate, want.lower, want.upper, want.answered_by)
    assert doc["answers"][0]["answered_by"] == "rolling(W=3)/per_query"
    assert _ledger(ledger, capsys) == before  # no charge, however many windows


def test_query_prints_a_table_naming_the_answering_family(saved, capsys):
    path, _ = saved
    assert main(["reach", "query", str(path), "--window", "3", "--k", "2"]) == 0
    out = capsys.readouterr().out
    assert "post-processing of the release saved in" in out
    assert "no new budget, no ledger charge" in out
    row = out.splitlines()[-1].split()
    assert row[:3] == ["3", "2024-01-03..2024-01-03", "2"]
    assert row[-1].endswith("/per_query") or row[-1].endswith("/tree")


@pytest.mark.parametrize(("args", "match"), [
    (["--window", "2:9", "--k", "1"], "<= 5 (the periods of the saved release, 2024-01-01 to "
                                      "2024-01-05); got '2:9'"),
    (["--window", "4:2", "--k", "1"], "got '4:2'"),
    (["--window", "2023-12-31:2024-01-02", "--k", "1"], "got '2023-12-31:2024-01-02'"),
    (["--window", "2024-02-30:2024-03-01", "--k", "1"], "valid dates"),
    (["--window", "2-4", "--k", "1"], "must be START:END"),
    (["--window", "1:2:3", "--k", "1"], "must be START:END"),
    (["--window", "1:2", "--k", "3"], "one of the k values released in"),
    (["--window", "1:2", "--k", "x"], "--k"),
    (["--window", "1:2", "--k", "1", "--confidence", "2"], "--confidence"),
    (["--k", "1"], "Missing option '--window'"),
    (["--window", "1:2"], "Missing option '--k'"),
])
def test_query_bad_input_is_one_line(saved, tmp_path, capsys, monkeypatch, args, match):
    path, _ = saved
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(["reach", "query", str(path), *args])
    assert exc.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("dpfreq: error: ")
    assert match in err
    assert "budget spent" not in err  # a loaded release is not a new one to rescue
    assert not list(tmp_path.glob("dpfreq-release-*"))


def test_query_of_a_family_not_released_says_which_were(tmp_path, capsys):
    log = tmp_path / "log.csv"
    log.write_text("u,t\n1,1\n2,3\n1,4\n", encoding="utf-8")
    path = tmp_path / "cum.dpfreq"
    assert main(["reach", str(log), "--item", "u", "--time", "t", "--horizon", "6",
                 "--epsilon", "1", "--unit", "event", "--k", "1", "--windows", "cumulative",
                 "--seed", "1", "--save", str(path)]) == 0
    capsys.readouterr()
    assert main(["reach", "query", str(path), "--window", "1:4", "--k", "1"]) == 0
    assert "cumulative/tree" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(["reach", "query", str(path), "--window", "2:4", "--k", "1"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "it released cumulative:" in err
    assert "got '2:4'" in err
    with pytest.raises(SystemExit) as exc:
        main(["reach", "query", str(path), "--window", "2024-01-01:2024-01-02", "--k", "1"])
    assert "integer periods, not dates" in capsys.readouterr().err


def test_query_of_a_file_that_is_not_a_release(tmp_path, capsys):
    bad = tmp_path / "x.dpfreq"
    bad.write_text("not a release", encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        main(["reach", "query", str(bad), "--window", "1:2", "--k", "1"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "x.dpfreq" in err
