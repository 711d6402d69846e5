"""`dpfreq reach` in-process (issue 5 CLI)."""

from __future__ import annotations

import json

import pytest

from dpfreq.cli.main import main


def write_log(path, rows, header=("user", "ts")):
    path.write_text(",".join(header) + "\n" + "\n".join(",".join(map(str, r)) for r in rows)
                    + "\n", encoding="utf-8")
    return path


ROWS = [("a", "2024-01-01T10:00"), ("b", "2024-01-01T11:00"), ("a", "2024-01-02T09:00"),
        ("c", "2024-01-04T00:00"), ("a", "2024-01-05T23:59"), ("b", "2024-01-05T01:00")]


def test_reach_table_json_plot(tmp_path, capsys):
    log = write_log(tmp_path / "log.csv", ROWS)
    png = tmp_path / "reach.png"
    main(["reach", str(log), "--item", "user", "--time", "ts", "--start", "2024-01-01",
          "--end", "2024-01-05", "--period", "1d", "--epsilon", "1", "--k", "1,2",
          "--window", "3", "--seed", "4", "--plot", str(png)])
    out, err = capsys.readouterr()
    assert "NOT for production" in err
    lines = out.splitlines()
    header = next(line for line in lines if line.strip().startswith("t "))
    assert "cum 1+" in header
    assert "last3 2+" in header
    assert any("2024-01-05" in line for line in lines)
    assert png.exists()
    assert png.stat().st_size > 0
    main(["reach", str(log), "--item", "user", "--time", "ts", "--start", "2024-01-01",
          "--end", "2024-01-05", "--period", "1d", "--epsilon", "1", "--k", "1",
          "--seed", "4", "--json", "-"])
    out, _ = capsys.readouterr()
    data = json.loads(out[out.index("{"):])
    assert data["type"] == "WindowCountsRelease"
    assert len(data["value"]["cumulative"]["k=1"]) == 5


def test_reach_integer_periods_item_level_and_save(tmp_path, capsys):
    log = write_log(tmp_path / "log.csv", [(1, 1), (2, 3), (1, 4)], header=("u", "t"))
    saved = tmp_path / "rel.npz"
    main(["reach", str(log), "--item", "u", "--time", "t", "--horizon", "6", "--epsilon", "2",
          "--level", "item", "--all-windows", "--seed", "1", "--save", str(saved)])
    out, err = capsys.readouterr()
    assert "item-level" in out
    assert "SECRET" in err
    assert saved.exists()


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--epsilon", "-1"], "epsilon"),
        (["--epsilon", "1", "--level", "user"], "level"),
        (["--epsilon", "1", "--k", "0"], "k_values"),
        (["--epsilon", "1", "--k", "x"], "--k"),
        (["--epsilon", "1", "--window", "99"], "windows"),
        (["--epsilon", "1", "--time", "nope"], "nope"),
    ],
)
def test_reach_bad_input_exit_2(tmp_path, capsys, extra, match):
    log = write_log(tmp_path / "log.csv", [(1, 1), (2, 3)], header=("u", "t"))
    args = ["reach", str(log), "--item", "u", "--horizon", "6", "--seed", "1"]
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
              "--epsilon", "1"])
    assert exc.value.code == 2
    assert "outside" in capsys.readouterr().err
    main(["reach", str(log), "--item", "u", "--time", "t", "--horizon", "6", "--epsilon", "1",
          "--out-of-range", "drop", "--seed", "2"])
    assert "cum 1+" in capsys.readouterr().out
    log2 = write_log(tmp_path / "log2.csv", [(1, "1.5")], header=("u", "t"))
    with pytest.raises(SystemExit) as exc:
        main(["reach", str(log2), "--item", "u", "--time", "t", "--horizon", "6",
              "--epsilon", "1"])
    assert exc.value.code == 2


def test_reach_singleton_flag(tmp_path, capsys):
    log = write_log(tmp_path / "log.csv", [(1, 1), (2, 3), (1, 4)], header=("u", "t"))
    main(["reach", str(log), "--item", "u", "--time", "t", "--horizon", "40", "--epsilon", "1",
          "--level", "item", "--all-windows", "--singleton", "--seed", "1"])
    assert "strategy compressed" in capsys.readouterr().out
    bad = write_log(tmp_path / "bad.csv", [(1, 1), (2, 1)], header=("u", "t"))
    with pytest.raises(SystemExit) as exc:
        main(["reach", str(bad), "--item", "u", "--time", "t", "--horizon", "40",
              "--epsilon", "1", "--singleton"])
    assert exc.value.code == 2
    assert "singleton" in capsys.readouterr().err


def test_reach_engine_options(tmp_path, capsys):
    """``--engine duckdb`` gives the default path's table; ``--spark-master`` needs spark."""
    log = write_log(tmp_path / "log.csv", [(1, 1), (2, 3), (1, 4), (3, 4)], header=("u", "t"))
    args = ["reach", str(log), "--item", "u", "--time", "t", "--horizon", "5", "--epsilon", "1",
            "--k", "1,2", "--window", "2", "--seed", "3"]
    main(args)
    default_out = capsys.readouterr().out
    main([*args, "--engine", "duckdb"])
    assert capsys.readouterr().out == default_out
    with pytest.raises(SystemExit) as exc:
        main([*args, "--spark-master", "local[1]"])
    assert exc.value.code == 2
    assert "--spark-master needs --engine spark" in capsys.readouterr().err
