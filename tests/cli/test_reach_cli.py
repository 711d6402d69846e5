"""`dpfreq reach` in-process."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.optimize import isotonic_regression

from dpfreq.cli.main import main


def write_log(path, rows, header=("user", "ts")):
    path.write_text(",".join(header) + "\n" + "\n".join(",".join(map(str, r)) for r in rows)
                    + "\n", encoding="utf-8")
    return path


#: the options every release states (no default family, no default k)
ASK = ["--k", "1", "--windows", "cumulative"]

ROWS = [("a", "2024-01-01T10:00"), ("b", "2024-01-01T11:00"), ("a", "2024-01-02T09:00"),
        ("c", "2024-01-04T00:00"), ("a", "2024-01-05T23:59"), ("b", "2024-01-05T01:00")]


def test_reach_table_json_plot(tmp_path, capsys):
    log = write_log(tmp_path / "log.csv", ROWS)
    png = tmp_path / "reach.png"
    main(["reach", str(log), "--item", "user", "--time", "ts", "--start", "2024-01-01",
          "--end", "2024-01-05", "--period", "1d", "--epsilon", "1", "--k", "1,2",
          "--windows", "cumulative,3", "--seed", "4", "--plot", str(png), "--unit", "event"])
    out, err = capsys.readouterr()
    assert "NOT for production" in err
    lines = out.splitlines()
    header = next(line for line in lines if line.strip().startswith("t "))
    assert "cumulative, k=1" in header
    assert "rolling(W=3), k=2" in header
    assert any("2024-01-05" in line for line in lines)
    assert png.exists()
    assert png.stat().st_size > 0
    main(["reach", str(log), "--item", "user", "--time", "ts", "--start", "2024-01-01",
          "--end", "2024-01-05", "--period", "1d", "--epsilon", "1", "--k", "1",
          "--windows", "cumulative", "--seed", "4", "--json", "-", "--unit", "event"])
    out, _ = capsys.readouterr()
    data = json.loads(out)  # --json -: the JSON alone on stdout
    assert data["type"] == "WindowCountsRelease"
    assert data["unit"] == "event"
    assert len(data["value"]["cumulative"]["1"]) == 5


def test_reach_integer_periods_item_level_and_save(tmp_path, capsys):
    log = write_log(tmp_path / "log.csv", [(1, 1), (2, 3), (1, 4)], header=("u", "t"))
    saved = tmp_path / "rel.npz"
    main(["reach", str(log), "--item", "u", "--time", "t", "--horizon", "6", "--epsilon", "2",
          "--unit", "item", "--k", "1", "--windows", "cumulative,all", "--seed", "1",
          "--save", str(saved)])
    out, err = capsys.readouterr()
    assert "unit=item" in out
    assert "SECRET" in err
    assert saved.exists()


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--epsilon", "-1"], "epsilon"),
        (["--epsilon", "1", "--unit", "user"], "unit"),
        (["--epsilon", "1", "--k", "0"], "--k of dpfreq reach must be an integer >= 1"),
        (["--epsilon", "1", "--k", "x"], "--k"),
        (["--epsilon", "1", "--windows", "99"], "windows"),
        (["--epsilon", "1", "--windows", "weekly"], "--windows"),
        (["--epsilon", "1", "--windows", "rolling7"], "integer window widths"),
        (["--epsilon", "1", "--time", "nope"], "nope"),
    ],
)
def test_reach_bad_input_exit_2(tmp_path, capsys, extra, match):
    log = write_log(tmp_path / "log.csv", [(1, 1), (2, 3)], header=("u", "t"))
    args = ["reach", str(log), "--item", "u", "--horizon", "6", "--seed", "1"]
    if "--k" not in extra:
        args += ["--k", "1"]
    if "--windows" not in extra:
        args += ["--windows", "cumulative"]
    if "--unit" not in extra:
        args += ["--unit", "event"]
    if "--time" not in extra:
        args += ["--time", "t"]
    with pytest.raises(SystemExit) as exc:
        main(args + extra)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert match in err
    assert err.strip().splitlines()[-1].startswith("dpfreq: error")


def test_reach_out_of_range_and_non_integer(tmp_path, capsys):
    log = write_log(tmp_path / "log.csv", [(1, 1), (2, 9)], header=("u", "t"))
    with pytest.raises(SystemExit) as exc:
        main(["reach", str(log), "--item", "u", "--time", "t", "--horizon", "6",
              "--epsilon", "1", "--unit", "event", *ASK])
    assert exc.value.code == 2
    assert "outside" in capsys.readouterr().err
    main(["reach", str(log), "--item", "u", "--time", "t", "--horizon", "6", "--epsilon", "1",
          "--out-of-range", "drop", "--seed", "2", "--unit", "event", *ASK])
    assert "cumulative, k=1" in capsys.readouterr().out
    log2 = write_log(tmp_path / "log2.csv", [(1, "1.5")], header=("u", "t"))
    with pytest.raises(SystemExit) as exc:
        main(["reach", str(log2), "--item", "u", "--time", "t", "--horizon", "6",
              "--epsilon", "1", "--unit", "event", *ASK])
    assert exc.value.code == 2


def test_reach_singleton_flag(tmp_path, capsys):
    log = write_log(tmp_path / "log.csv", [(1, 1), (2, 3), (1, 4)], header=("u", "t"))
    main(["reach", str(log), "--item", "u", "--time", "t", "--horizon", "40", "--epsilon", "1",
          "--unit", "item", "--k", "1", "--windows", "cumulative,all", "--singleton",
          "--seed", "1", "--save", str(tmp_path / "s.dpfreq")])
    assert "method compressed" in capsys.readouterr().out
    bad = write_log(tmp_path / "bad.csv", [(1, 1), (2, 1)], header=("u", "t"))
    with pytest.raises(SystemExit) as exc:
        main(["reach", str(bad), "--item", "u", "--time", "t", "--horizon", "40",
              "--epsilon", "1", "--singleton", "--unit", "event", *ASK])
    assert exc.value.code == 2
    assert "singleton" in capsys.readouterr().err


def test_reach_engine_options(tmp_path, capsys):
    """``--engine duckdb`` gives the default path's table; ``--spark-master`` needs spark."""
    log = write_log(tmp_path / "log.csv", [(1, 1), (2, 3), (1, 4), (3, 4)], header=("u", "t"))
    args = ["reach", str(log), "--item", "u", "--time", "t", "--horizon", "5", "--epsilon", "1",
            "--k", "1,2", "--windows", "cumulative,2", "--seed", "3", "--unit", "event"]
    main(args)
    default_out = capsys.readouterr().out
    main([*args, "--engine", "duckdb"])
    assert capsys.readouterr().out == default_out
    with pytest.raises(SystemExit) as exc:
        main([*args, "--spark-master", "local[1]"])
    assert exc.value.code == 2
    assert "--spark-master needs --engine spark" in capsys.readouterr().err


def test_reach_all_windows_with_delta_prints_the_zcdp_plan(tmp_path, capsys):
    """Issue 13: ``--period 1d --epsilon 1 --delta 1e-6`` with all windows crashed with a
    KeyError on the predicted RMSE of a zCDP plan (candidates are named method/noise)."""
    log = write_log(tmp_path / "log.csv", ROWS)
    main(["reach", str(log), "--item", "user", "--time", "ts", "--start", "2024-01-01",
          "--end", "2024-01-05", "--period", "1d", "--epsilon", "1", "--delta", "1e-6",
          "--k", "1", "--windows", "cumulative,all", "--save", str(tmp_path / "r.dpfreq"),
          "--seed", "2", "--unit", "event"])
    out = capsys.readouterr().out
    assert "predicted RMSE" in out
    assert "all, k=1: method" in out


def test_reach_period_6h_covers_the_same_range_as_1d(tmp_path, capsys):
    """``--end`` is inclusive: a date-only end means through that day, for every period."""
    log = write_log(tmp_path / "log.csv", ROWS)
    for period, periods in (("1d", 5), ("6h", 20)):
        main(["reach", str(log), "--item", "user", "--time", "ts", "--start", "2024-01-01",
              "--end", "2024-01-05", "--period", period, "--epsilon", "1", "--seed", "2",
              "--unit", "item", "--json", "-", *ASK])
        data = json.loads(capsys.readouterr().out)
        assert data["horizon"] == periods


def test_reach_save_into_a_missing_directory_is_refused_first(tmp_path, capsys):
    log = write_log(tmp_path / "log.csv", [(1, 1), (2, 3)], header=("u", "t"))
    with pytest.raises(SystemExit) as exc:
        main(["reach", str(log), "--item", "u", "--time", "t", "--horizon", "6",
              "--epsilon", "1", "--unit", "event", "--save", str(tmp_path / "no" / "r.dpf"),
              *ASK])
    assert exc.value.code == 2
    out, err = capsys.readouterr()
    assert "--save" in err
    assert "cumulative, k=1" not in out  # nothing was released


def test_reach_unit_is_required(tmp_path, capsys):
    log = write_log(tmp_path / "log.csv", [(1, 1), (2, 3)], header=("u", "t"))
    with pytest.raises(SystemExit) as exc:
        main(["reach", str(log), "--item", "u", "--time", "t", "--horizon", "6",
              "--epsilon", "1", *ASK])
    assert exc.value.code == 2
    assert "--unit" in capsys.readouterr().err


def test_reach_timestamps_with_utc_offsets_give_no_warning(tmp_path, capsys):
    log = write_log(tmp_path / "tz.csv", [("a", "2024-01-01T10:00+02:00"),
                                          ("b", "2024-01-02T23:30-05:00")])
    main(["reach", str(log), "--item", "user", "--time", "ts", "--start", "2024-01-01",
          "--end", "2024-01-03", "--period", "1d", "--epsilon", "1", "--unit", "event",
          "--seed", "1", *ASK])
    out, err = capsys.readouterr()
    assert "cumulative, k=1" in out
    assert "timezone" not in err
    assert "Warning" not in err


def _ledger_show(path, capsys):
    assert main(["ledger", "show", str(path), "--json", "-"]) == 0
    return json.loads(capsys.readouterr().out)


def test_reach_releases_and_prints_exactly_the_families_asked(tmp_path, capsys):
    """Issue 31: no family is forced (cumulative used to be), and every family asked is
    printed — the total in the last row — in the names of the Python API and the JSON."""
    log = write_log(tmp_path / "log.csv", ROWS)
    main(["reach", str(log), "--item", "user", "--time", "ts", "--start", "2024-01-01",
          "--end", "2024-01-05", "--period", "1d", "--epsilon", "1", "--k", "1,2",
          "--windows", "total,3", "--seed", "4", "--unit", "event", "--json",
          str(tmp_path / "r.json")])
    out = capsys.readouterr().out
    data = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert set(data["value"]) == {"rolling(W=3)", "total"}
    assert set(data["mechanism_params"]["methods"]) == {
        f"{f}, k={k}" for f in ("rolling(W=3)", "total") for k in (1, 2)}
    assert "cumulative" not in out
    table = [line for line in out.splitlines() if not line.startswith("#")]
    header, rows = table[0], table[1:]
    cols = [c.strip() for c in header.split("  ") if c.strip()]
    assert cols == ["t", "period", "rolling(W=3), k=1", "rolling(W=3), k=2", "total, k=1",
                    "total, k=2"]
    assert [r.split()[0] for r in rows] == ["1", "2", "3", "4", "5"]
    # the printed default: made non-increasing in k and clamped at 0 (post-processing), beside
    # the release's interval clamped at 0
    raw = [data["value"]["total"][k][0] for k in ("1", "2")]
    fit = np.rint(np.maximum(isotonic_regression(raw, increasing=False).x, 0)).astype(int)
    upper = data["error"]["upper"]["total"]["2"][0]
    lower = data["error"]["lower"]["total"]["2"][0]
    assert rows[-1].endswith(f"{fit[1]} [{max(lower, 0):.0f}, {max(upper, 0):.0f}]")
    assert "non-increasing in k and clamped at 0" in out
    assert all(len(r.split()) == 2 + 2 * 3 for r in rows[:-1])  # no total before T
    assert len(rows[-1].split()) == 2 + 4 * 3
    main(["reach", str(log), "--item", "user", "--time", "ts", "--start", "2024-01-01",
          "--end", "2024-01-05", "--period", "1d", "--epsilon", "1", "--k", "1,2",
          "--windows", "total,3", "--seed", "4", "--unit", "event", "--raw"])
    rows = [line for line in capsys.readouterr().out.splitlines() if not line.startswith("#")]
    total = data["value"]["total"]["2"][0]
    half = data["error"]["upper"]["total"]["2"][0] - total
    assert rows[-1].endswith(f"{total:.0f} ±{half:.0f}")


def test_reach_rows_limits_the_periods_printed(tmp_path, capsys):
    log = write_log(tmp_path / "log.csv", [(1, 1), (2, 3), (1, 4)], header=("u", "t"))
    base = ["reach", str(log), "--item", "u", "--time", "t", "--horizon", "9", "--epsilon", "1",
            "--seed", "2", "--unit", "event", *ASK]
    main([*base, "--rows", "3"])
    table = [line for line in capsys.readouterr().out.splitlines() if not line.startswith("#")]
    assert [r.split()[0] for r in table[1:]] == ["1", "2", "...", "9"]
    with pytest.raises(SystemExit) as exc:
        main([*base, "--rows", "0"])
    assert exc.value.code == 2
    assert "--rows" in capsys.readouterr().err


@pytest.mark.parametrize("missing", ["--k", "--windows"])
def test_reach_needs_k_and_windows(tmp_path, capsys, missing):
    """k and the families are stated by the user, as in Python (k_values has no default)."""
    log = write_log(tmp_path / "log.csv", [(1, 1), (2, 3)], header=("u", "t"))
    args = ["reach", str(log), "--item", "u", "--time", "t", "--horizon", "6",
            "--epsilon", "1", "--unit", "event", *ASK]
    i = args.index(missing)
    with pytest.raises(SystemExit) as exc:
        main(args[:i] + args[i + 2:])
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip() == f"dpfreq: error: Missing option '{missing}'."


def test_reach_all_windows_without_save_is_refused_before_spending(tmp_path, capsys):
    """The all-windows family has no curve: without --save its share of ε would buy nothing."""
    log = write_log(tmp_path / "log.csv", [(1, 1), (2, 3)], header=("u", "t"))
    ledger = tmp_path / "budget.db"
    assert main(["ledger", "init", str(ledger), "--epsilon", "5"]) == 0
    capsys.readouterr()
    before = _ledger_show(ledger, capsys)
    with pytest.raises(SystemExit) as exc:
        main(["reach", str(log), "--item", "u", "--time", "t", "--horizon", "6",
              "--epsilon", "1", "--unit", "event", "--k", "1", "--windows", "cumulative,all",
              "--ledger", str(ledger)])
    assert exc.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.strip().splitlines() == [err.strip()]
    assert "--windows of dpfreq reach must be without 'all' unless --save" in err
    assert _ledger_show(ledger, capsys) == before


def test_reach_takes_every_unit_of_the_python_api(tmp_path, capsys):
    log = write_log(tmp_path / "log.csv", [(1, 1), (2, 3), (1, 4)], header=("u", "t"))
    main(["reach", str(log), "--item", "u", "--time", "t", "--horizon", "5", "--epsilon", "1",
          "--unit", "item_replace", "--seed", "1", "--json", "-", *ASK])
    data = json.loads(capsys.readouterr().out)
    assert data["unit"] == "item_replace"


def test_reach_method_forces_a_structure_per_family_and_plan_reach_takes_it(tmp_path, capsys):
    """``--method FAMILY=METHOD`` is the CLI form of ``method={family: method}``; the others
    stay auto. The plan command takes the same option."""
    log = write_log(tmp_path / "log.csv", ROWS)
    base = ["--epsilon", "1", "--delta", "1e-6", "--k", "1", "--windows", "cumulative,3",
            "--unit", "item"]
    main(["reach", str(log), "--item", "user", "--time", "ts", "--start", "2024-01-01",
          "--end", "2024-01-05", "--period", "1d", "--seed", "3", "--json", "-",
          "--method", "cumulative=factorization,3=per_query", *base])
    methods = json.loads(capsys.readouterr().out)["mechanism_params"]["methods"]
    assert methods["cumulative, k=1"]["method"] == "factorization"
    assert methods["rolling(W=3), k=1"]["method"] == "per_query"
    main(["plan", "reach", "--horizon", "5", "--method", "cumulative=simple", *base])
    assert "method simple" in capsys.readouterr().out


@pytest.mark.parametrize(("method", "match"), [
    ("cumulative", "FAMILY=METHOD"),
    ("cumulative=bogus", "must be one of"),
    ("cumulative=factorization", "delta > 0"),
])
def test_reach_bad_method_is_one_line_and_spends_nothing(tmp_path, capsys, method, match):
    from dpfreq.ledger import Ledger

    log = write_log(tmp_path / "log.csv", ROWS)
    ledger = tmp_path / "budget.db"
    main(["ledger", "init", str(ledger), "--epsilon", "5"])
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["reach", str(log), "--item", "user", "--time", "ts", "--start", "2024-01-01",
              "--end", "2024-01-05", "--period", "1d", "--epsilon", "1", "--k", "1",
              "--windows", "cumulative", "--unit", "item", "--method", method,
              "--ledger", str(ledger)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert match in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert Ledger(ledger).spent.epsilon == 0
