"""Degenerate inputs are refused (or warned about) before any budget is spent."""

from __future__ import annotations

import pytest

from dpfreq.cli.main import main


def profile_args(path, *extra, ledger=None):
    tail = ["--ledger", str(ledger)] if ledger is not None else []
    return ["profile", str(path), "--item", "user", "--domain-size", "40", "--epsilon", "1",
            "--unit", "item", *tail, *extra]


def ledger_total(path, capsys) -> str:
    assert main(["ledger", "show", str(path), "--json", "-"]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("command", [["profile"], ["plan", "profile"]])
def test_max_count_zero_is_refused_before_spending(tmp_path, capsys, command):
    log = tmp_path / "log.csv"
    log.write_text("user\na\nb\na\n", encoding="utf-8")
    ledger = tmp_path / "budget.db"
    assert main(["ledger", "init", str(ledger), "--epsilon", "5"]) == 0
    capsys.readouterr()
    before = ledger_total(ledger, capsys)
    argv = (profile_args(log, "--max-count", "0", ledger=ledger) if command == ["profile"]
            else ["plan", "profile", "--domain-size", "40", "--max-count", "0", "--epsilon", "1",
                  "--unit", "item"])
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert "--max-count" in err
    assert len(err.strip().splitlines()) == 1
    assert ledger_total(ledger, capsys) == before


def test_header_only_file_warns_before_the_release(tmp_path, capsys):
    log = tmp_path / "header.csv"
    log.write_text("user\n", encoding="utf-8")
    assert main(profile_args(log, "--max-count", "3", "--seed", "1")) == 0
    err = capsys.readouterr().err
    assert "no data rows" in err


def test_a_file_of_another_format_is_refused_without_a_no_rows_warning(tmp_path, capsys):
    log = tmp_path / "log.json"
    log.write_text('{"user": 1}\n', encoding="utf-8")
    with pytest.raises(SystemExit) as info:
        main(profile_args(log, "--max-count", "3"))
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert err.startswith("dpfreq: error: ")
    assert "cannot tell the format" in err
    assert "no data rows" not in err


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
@pytest.mark.parametrize("command", ["reach", "anonymize", "profile"])
def test_every_release_of_a_file_warns_of_no_rows(tmp_path, capsys, command, suffix):
    """A header-only CSV or a Parquet file without rows: every release of a file says so on
    stderr (the release of an empty data set is still made and charged)."""
    import pandas as pd

    log = tmp_path / f"empty.{suffix}"
    empty = pd.DataFrame({"user": pd.Series([], dtype="int64"),
                          "day": pd.Series([], dtype="int64")})
    if suffix == "csv":
        log.write_text("user,day\n", encoding="utf-8")
    else:
        empty.to_parquet(log)
    argv = {"reach": ["reach", str(log), "--item", "user", "--time", "day", "--horizon", "3",
                      "--epsilon", "1", "--unit", "item", "--k", "1", "--windows",
                      "cumulative"],
            "anonymize": ["anonymize", str(log), "--item", "user", "--epsilon", "1",
                          "--unit", "event"],
            "profile": profile_args(log, "--max-count", "3")}[command]
    assert main([*argv, "--seed", "1"]) == 0
    assert f"dpfreq: warning: {log} has no data rows" in capsys.readouterr().err


def test_file_with_rows_gives_no_empty_warning(tmp_path, capsys):
    log = tmp_path / "log.csv"
    log.write_text("user\na\n", encoding="utf-8")
    assert main(profile_args(log, "--max-count", "3", "--seed", "1")) == 0
    assert "no data rows" not in capsys.readouterr().err


@pytest.mark.parametrize("delta", ["0.5", "0.01"])
def test_reach_refuses_a_delta_above_the_ceiling_before_spending(tmp_path, capsys, delta):
    log = tmp_path / "log.csv"
    log.write_text("user,ts\na,2024-01-01T10:00\nb,2024-01-02T10:00\n", encoding="utf-8")
    ledger = tmp_path / "budget.db"
    assert main(["ledger", "init", str(ledger), "--epsilon", "5", "--delta", "1e-3"]) == 0
    capsys.readouterr()
    before = ledger_total(ledger, capsys)
    with pytest.raises(SystemExit) as info:
        main(["reach", str(log), "--item", "user", "--time", "ts", "--start", "2024-01-01",
              "--end", "2024-01-02", "--period", "1d", "--epsilon", "1", "--delta", delta,
              "--k", "1", "--windows", "cumulative", "--unit", "event", "--ledger",
              str(ledger)])
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert "1e-3" in err
    assert ledger_total(ledger, capsys) == before


#: A headerless event log: its first line, read as the header, holds private-looking values.
_HEADERLESS = "81723,2026-03-02,alice@example.com\n90211,2026-03-03,bob@example.com\n"
_PRIVATE = ("81723", "90211", "2026-03", "alice", "bob", "example.com")
_RANGE = ["--start", "2026-03-01", "--end", "2026-03-04", "--period", "1d"]
_PROFILE = ["--domain-size", "40", "--max-count", "3", "--epsilon", "1", "--unit", "event"]


@pytest.mark.parametrize("argv", [
    ["profile", "{log}", "--item", "user", *_PROFILE],
    ["profile", "{log}", "--item", "user", *_PROFILE, "--engine", "memory"],
    ["profile", "{log}", "--item", "user", *_PROFILE, "--group", "g", "--null-group", "drop"],
    ["profile", "{log}", "--item", "user", *_PROFILE, "--time", "t", *_RANGE[:4]],
    ["reach", "{log}", "--item", "user", "--time", "t", *_RANGE, "--epsilon", "1", "--unit",
     "event", "--k", "1", "--windows", "total"],
    ["anonymize", "{log}", "--item", "user", "--epsilon", "1", "--unit", "event"],
    ["anonymize", "{log}", "--prevalence-csv", "--epsilon", "1", "--unit", "event"],
    ["stream", "append", "{state}", "{log}", "--through", "1"],
], ids=["profile", "profile-memory", "null-group-drop", "time-range", "reach", "anonymize",
        "prevalence-csv", "stream-append"])
def test_headerless_csv_errors_never_echo_the_first_line(tmp_path, capsys, argv):
    """A CSV file without a header: its first line is read as the header (never sniffed), and
    the one-line error says what the first line must be without quoting it (it is data)."""
    from cli_runner import run_cli

    log = tmp_path / "log.csv"
    log.write_text(_HEADERLESS, encoding="utf-8")
    state = tmp_path / "state"
    if "stream" in argv:
        assert run_cli(["stream", "init", state, "--item", "user", "--time", "t", "--horizon",
                        "5", "--k", "1", "--unit", "event", "--epsilon", "1", "--delta", "0",
                        "--method", "simple", "--late", "drop", "--seed", "1"], capsys)[0] == 0
    code, out, err = run_cli([a.format(log=log, state=state) for a in argv], capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert "first line" in err
    assert not [value for value in _PRIVATE if value in out + err]
