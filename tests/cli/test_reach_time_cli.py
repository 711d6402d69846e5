"""`dpfreq reach --time-unit` (integer epochs) and `--timezone` (wall-clock periods)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from dpfreq.cli.main import main

#: instants around New York's local midnights and its DST day (2024-03-10, 23 hours)
INSTANTS = ["2024-03-09T05:00:00Z", "2024-03-10T04:59:59Z", "2024-03-10T05:00:00Z",
            "2024-03-10T07:00:00Z", "2024-03-11T03:59:59Z", "2024-03-11T04:00:00Z"]
USERS = ["a", "b", "a", "c", "b", "c"]
ARGS = ["--item", "user", "--time", "ts", "--start", "2024-03-09", "--end", "2024-03-11",
        "--period", "1d", "--epsilon", "1", "--unit", "event", "--k", "1",
        "--windows", "cumulative", "--seed", "3", "--json", "-"]


def _write(path, times):
    path.write_text("user,ts\n" + "".join(f"{u},{t}\n" for u, t in zip(USERS, times,
                                                                           strict=True)),
                    encoding="utf-8")
    return str(path)


def _release(capsys, *args):
    main(["reach", *args, *ARGS])
    return json.loads(capsys.readouterr().out)


def test_epochs_in_each_unit_equal_the_timestamps(tmp_path, capsys):
    text = _write(tmp_path / "text.csv", INSTANTS)
    ref = _release(capsys, text, "--timezone", "America/New_York")
    assert ref["time_axis"]["timezone"] == "America/New_York"
    assert ref["mechanism_params"]["timezone"] == "America/New_York"
    seconds = pd.to_datetime(INSTANTS, utc=True).as_unit("s").asi8
    for unit, factor in (("s", 1), ("ms", 10**3), ("us", 10**6), ("ns", 10**9)):
        path = _write(tmp_path / f"{unit}.csv", seconds * factor)
        got = _release(capsys, path, "--time-unit", unit, "--timezone", "America/New_York")
        assert got["value"] == ref["value"]
        assert got["time_axis"]["time_unit"] == unit


def test_the_zone_moves_the_period_boundaries(tmp_path, capsys):
    """The same seed gives other values when events change periods: in UTC two of the events
    fall one day later than in New York."""
    text = _write(tmp_path / "text.csv", INSTANTS)
    utc = _release(capsys, text)
    ny = _release(capsys, text, "--timezone", "America/New_York")
    assert utc["time_axis"]["timezone"] == "UTC"
    assert utc["value"] != ny["value"]


def test_table_states_the_zone(tmp_path, capsys):
    text = _write(tmp_path / "text.csv", INSTANTS)
    main(["reach", text, *ARGS[:-2], "--timezone", "Europe/Paris"])
    assert "# periods: wall-clock time in Europe/Paris" in capsys.readouterr().out


def _ledger_json(path, capsys):
    assert main(["ledger", "show", str(path), "--json", "-"]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("extra", [
    ["--timezone", "Mars/Olympus"],
    ["--time-unit", "min"],
    ["--time-unit", "s"],  # a timestamp column
])
def test_bad_time_options_are_one_line_and_spend_nothing(tmp_path, capsys, extra):
    text = _write(tmp_path / "text.csv", INSTANTS)
    ledger = tmp_path / "ledger.db"
    assert main(["ledger", "init", str(ledger), "--epsilon", "5"]) == 0
    capsys.readouterr()
    before = _ledger_json(ledger, capsys)
    with pytest.raises(SystemExit) as info:
        main(["reach", text, *ARGS, "--ledger", str(ledger), *extra])
    assert info.value.code != 0
    err = capsys.readouterr().err.strip().splitlines()
    lines = [line for line in err if not line.startswith("dpfreq: warning: --seed")]
    assert len(lines) == 1
    assert lines[0].startswith("dpfreq: error:")
    assert _ledger_json(ledger, capsys) == before
