"""`dpfreq profile` and `dpfreq plan profile` in-process: table with per-class intervals, JSON
round trip, PNG, engines, the vacuous warning, one-line errors (exit 2)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from dpfreq.cli.main import cli, main
from dpfreq.cli.profile import format_table, row_ranges
from dpfreq.profile import release_profile
from dpfreq.profile.datasets import make_impressions, write_impressions

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def table_text(out):
    return "\n".join(line for line in out.splitlines() if not line.startswith("#"))


def write_csv(path, users):
    path.write_text("user,campaign\n" + "".join(f"{u},c\n" for u in users), encoding="utf-8")
    return path


USERS = ["a"] * 5 + ["b"] * 3 + ["c"] * 3 + ["d", "e", "f"] + ["g"] * 12


def base_args(path, *extra):
    return ["profile", str(path), "--item", "user", "--domain-size", "40", "--max-count", "8",
            "--epsilon", "1", "--unit", "item", *extra]


def run_failing(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    captured = capsys.readouterr()
    return info.value.code, captured.out, captured.err


def test_table_header_and_seed_warning(tmp_path, capsys):
    log = write_csv(tmp_path / "log.csv", USERS)
    assert main(base_args(log, "--seed", "5")) == 0
    out, err = capsys.readouterr()
    assert "NOT for production" in err
    header = [line for line in out.splitlines() if line.startswith("#")]
    text = "\n".join(header)
    for piece in ("epsilon=1", "delta=0", "direct-count-of-counts", "d=40", "n=8",
                  "engine duckdb", "unit of privacy: item", "method direct", "auto chose direct",
                  "interval", "probability at least 0.95"):
        assert piece in text, piece
    assert "ℓ1 bound" not in table_text(out)  # no whole-vector bound repeated per row
    # a grouped row's interval is its sum's: the option that chooses the rows, no Python name
    interval = next(line for line in header if line.startswith("# interval:"))
    assert "a row t = a-b: an interval for the sum of the classes a to b; --rows chooses" in \
        interval
    assert "ProfileRelease" not in text
    assert "sum_interval" not in text
    table = [line for line in out.splitlines() if not line.startswith("#")]
    assert table[0].split()[:2] == ["t", "fraction"]
    labels = [line.split()[0] for line in table[1:]]
    assert labels == [str(t) for t in range(8)] + ["8+"]


def test_json_round_trips_the_release(tmp_path, capsys):
    log = write_csv(tmp_path / "log.csv", USERS)
    out_json = tmp_path / "rel.json"
    main(base_args(log, "--seed", "11", "--confidence", "0.9", "--json", str(out_json)))
    capsys.readouterr()
    data = json.loads(out_json.read_text(encoding="utf-8"))
    rel = release_profile(str(log), item="user", domain_size=40, max_count=8, epsilon=1.0,
                          unit="item", confidence=0.9, rng=11)
    expected = json.loads(rel.to_json())
    assert data == expected
    assert data["type"] == "ProfileRelease"
    assert data["value"] == rel.value.tolist()
    assert (data["epsilon"], data["domain_size"], data["max_count"], data["unit"],
            data["error"]["confidence"], data["seeded"]) == (1.0, 40, 8, "item", 0.9, True)
    assert math.isclose(sum(data["value"]), 1.0, abs_tol=1e-9)


def test_json_to_stdout_is_pure_json(tmp_path, capsys):
    log = write_csv(tmp_path / "log.csv", USERS)
    main(base_args(log, "--seed", "2", "--json", "-"))
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert data["mechanism"] == "direct-count-of-counts"
    assert "fraction" in err  # the table moved to stderr


def test_plot_writes_png(tmp_path, capsys):
    log = write_csv(tmp_path / "log.csv", USERS)
    png = tmp_path / "profile.png"
    main(base_args(log, "--seed", "3", "--plot", str(png)))
    assert "wrote" in capsys.readouterr().err
    assert png.read_bytes()[:8] == PNG_MAGIC


def test_parquet_directory_engines_agree_and_rows(tmp_path, capsys, seed):
    log = make_impressions(400, domain_size=1000, rng=seed)
    folder = tmp_path / "events"
    write_impressions(folder, log)
    values = {}
    for engine in ("duckdb", "memory"):
        target = tmp_path / f"{engine}.json"
        main(["profile", str(folder), "--item", "user_id", "--domain-size", "1e3",
              "--max-count", "30", "--epsilon", "0.5", "--unit", "event", "--method", "fft",
              "--engine", engine, "--seed", "9",
              "--rows", "all", "--json", str(target)])
        out = capsys.readouterr().out
        labels = [line.split()[0] for line in out.splitlines()
                  if line and not line.startswith("#")][1:]
        assert labels == [str(t) for t in range(30)] + ["30+"]
        data = json.loads(target.read_text(encoding="utf-8"))
        assert data["mechanism_params"]["engine"] == engine
        values[engine] = data["value"]
    assert values["duckdb"] == values["memory"]  # same seed, same multiset of counts


def test_compressed_rows(tmp_path, capsys):
    log = write_csv(tmp_path / "log.csv", USERS)
    main(["profile", str(log), "--item", "user", "--domain-size", "40", "--max-count", "100",
          "--epsilon", "2", "--unit", "item", "--rows", "5", "--seed", "1"])
    out = capsys.readouterr().out
    labels = [line.split()[0] for line in out.splitlines() if not line.startswith("#")][1:]
    assert labels == ["0", "1", "2", "3", "4", "5", "6-10", "11-20", "21-40", "41-80",
                      "81-99", "100+"]


@pytest.mark.parametrize("n", [0, 1, 2, 7, 20, 21, 22, 50, 333])
@pytest.mark.parametrize("rows", [None, 0, 1, 5, 20])
def test_row_ranges_partition_the_counts(n, rows):
    ranges = row_ranges(n, rows)
    covered = [t for lo, hi in ranges for t in range(lo, hi + 1)]
    assert covered == list(range(n + 1))
    assert ranges[-1] == (n, n)
    if rows is None:
        assert len(ranges) == n + 1


@pytest.mark.parametrize("method", ["direct", "fft"])
def test_rows_show_per_class_intervals_not_the_l1_bound(method):
    rel = release_profile(np.array([3, 1, 0, 2] * 50), domain_size=4000, max_count=60,
                          epsilon=3.0, unit="event", method=method, rng=4)
    lines = format_table(rel, rows=3).splitlines()[1:]
    table = rel.table()
    for (lo, hi), line in zip(row_ranges(60, 3), lines, strict=True):
        cells = line.split()
        low, high = (float(x) for x in line[line.index("[") + 1 : line.index("]")].split(","))
        if lo == hi:
            assert low == pytest.approx(table["lower"][lo], abs=1e-6)
            assert high == pytest.approx(table["upper"][lo], abs=1e-6)
        else:  # groups: an interval for the group's sum, never wider than the summed band
            want = rel.sum_interval(lo, hi)
            assert low == pytest.approx(want[0], abs=1e-6)
            assert high == pytest.approx(want[1], abs=1e-6)
            band = (max(0.0, table["band_lower"][lo : hi + 1].sum()),
                    min(1.0, table["band_upper"][lo : hi + 1].sum()))
            assert want[1] - want[0] <= band[1] - band[0] + 1e-12
        assert cells[-1].startswith("±")
    assert rel.l1_bound is not None
    if method == "fft":  # per-class intervals are far narrower than the theorem's ℓ1 bound
        assert float(np.max(table["upper"] - table["lower"])) < rel.l1_bound


def test_vacuous_statement_warns_on_stderr(tmp_path, capsys):
    log = write_csv(tmp_path / "log.csv", USERS)
    assert main(["profile", str(log), "--item", "user", "--domain-size", "40",
                 "--max-count", "30", "--epsilon", "0.05", "--unit", "item", "--seed", "2"]) == 0
    _out, err = capsys.readouterr()
    warnings = [line for line in err.splitlines() if "vacuous" in line]
    assert len(warnings) == 1
    assert "ε ≈" in warnings[0]
    assert main(base_args(log, "--seed", "2", "--domain-size", "1e6")) == 0
    assert "vacuous" not in capsys.readouterr().err


@pytest.mark.parametrize("method", ["fft", "mle"])
def test_item_unit_with_a_sketch_method_exits_2(tmp_path, capsys, method):
    log = write_csv(tmp_path / "log.csv", USERS)
    code, out, err = run_failing(base_args(log, "--method", method), capsys)
    assert code == 2
    assert out == ""
    assert len(err.splitlines()) == 1
    assert "unit" in err


def test_plan_profile_command(capsys):
    assert main(["plan", "profile", "--domain-size", "2e6", "--max-count", "50",
                 "--epsilon", "1", "--unit", "item"]) == 0
    out = capsys.readouterr().out
    assert "method direct" in out
    assert "per-class interval:  ±3 items" in out  # sensitivity 1 on the classes t >= 1
    assert "class 0, derived from d" in out
    assert main(["plan", "profile", "--domain-size", "2e6", "--max-count", "50",
                 "--epsilon", "1", "--unit", "item_replace"]) == 0
    out = capsys.readouterr().out
    assert "per-class interval:  ±6 items" in out  # replacement: sensitivity 2
    assert main(["plan", "profile", "--domain-size", "2e6", "--max-count", "50",
                 "--epsilon", "1", "--unit", "item", "--target-half-width", "3",
                 "--target-l1", "0.0001"]) == 0
    out = capsys.readouterr().out
    assert "ε for a per-class half-width ≤ 3 items" in out
    assert "ε for an ℓ1 bound ≤ 0.0001" in out
    assert main(["plan", "profile", "--domain-size", "100", "--max-count", "50",
                 "--epsilon", "0.1", "--method", "fft", "--unit", "event"]) == 0
    out = capsys.readouterr().out
    assert "unit event" in out
    assert "VACUOUS" in out
    with pytest.raises(SystemExit) as missing_unit:  # the unit of privacy has no default
        main(["plan", "profile", "--domain-size", "100", "--max-count", "50", "--epsilon", "0.1"])
    assert missing_unit.value.code == 2


def test_format_table_truth_column():
    rel = release_profile(np.array([3, 1, 0, 2]), domain_size=10, max_count=4, epsilon=1.0,
                          unit="item", rng=7)
    truth = np.array([0.7, 0.1, 0.1, 0.1, 0.0])
    lines = format_table(rel, rows=None, truth=truth).splitlines()
    assert lines[0].split()[-1] == "true"
    assert [line.split()[-1] for line in lines[1:]] == ["0.700000", "0.100000", "0.100000",
                                                         "0.100000", "0.000000"]


def test_domain_size_accepts_scientific_notation_and_rejects_fractions(tmp_path):
    log = write_csv(tmp_path / "log.csv", USERS)
    runner = CliRunner()
    ok = runner.invoke(cli, ["profile", str(log), "--item", "user", "--domain-size", "2_000",
                             "--max-count", "8", "--epsilon", "1", "--unit", "item",
                             "--seed", "1"])
    assert ok.exit_code == 0, ok.output
    assert "d=2,000" in ok.output
    sci = runner.invoke(cli, ["profile", str(log), "--item", "user", "--domain-size", "2.5e1",
                              "--max-count", "8", "--epsilon", "1", "--unit", "item",
                              "--seed", "1"])
    assert sci.exit_code == 0, sci.output
    assert "; d=25\n" in sci.output  # 2.5e1 = 25 is an integer
    frac = runner.invoke(cli, ["profile", str(log), "--item", "user", "--domain-size", "40.5",
                               "--max-count", "8", "--epsilon", "1", "--unit", "item"])
    assert frac.exit_code == 2
    assert "must be an integer" in frac.output


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--item", "nope"], "nope"),
        (["--epsilon", "0"], "epsilon"),
        (["--epsilon", "-1"], "epsilon"),
        (["--epsilon", "nan"], "epsilon"),
        (["--domain-size", "3"], "--domain-size 3"),
        (["--norm", "3"], "--norm"),
        (["--method", "lp"], "--method"),
        (["--confidence", "1.5"], "confidence"),
        (["--unit", "device"], "--unit"),
        (["--max-count", "-1"], "--max-count"),
        (["--rows", "x"], "--rows"),
        (["--engine", "memory", "--item", "nope"], "nope"),
        (["--engine", "nosuch"], "--engine"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, extra, match):
    log = write_csv(tmp_path / "log.csv", USERS)
    args = base_args(log)
    for i in range(0, len(extra), 2):
        if extra[i] in args:
            args[args.index(extra[i]) + 1] = extra[i + 1]
        else:
            args += extra[i : i + 2]
    code, out, err = run_failing(args, capsys)
    assert code == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("dpfreq: error: ")
    assert match in lines[0]


def test_missing_empty_and_headerless_files_exit_2(tmp_path, capsys):
    missing = tmp_path / "missing.csv"
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    header_only = tmp_path / "header.csv"
    header_only.write_text("user\n", encoding="utf-8")
    for path, match in ((missing, "does not exist"), (empty, "empty")):
        code, out, err = run_failing(base_args(path), capsys)
        assert code == 2
        assert out == ""
        assert len(err.splitlines()) == 1
        assert match in err
    # a header and no rows is a valid, empty data set: every domain item has count 0
    assert main(base_args(header_only, "--seed", "1")) == 0
    captured = capsys.readouterr()
    assert "fraction" in captured.out
    assert "no data rows" in captured.err


@pytest.mark.parametrize("missing", ["--item", "--domain-size", "--max-count", "--epsilon",
                                     "--unit"])
def test_privacy_and_domain_parameters_are_required(tmp_path, capsys, missing):
    log = write_csv(tmp_path / "log.csv", USERS)
    args = base_args(log)
    i = args.index(missing)
    del args[i : i + 2]
    code, out, err = run_failing(args, capsys)
    assert code == 2
    assert out == ""
    assert missing in err
    assert len(err.splitlines()) == 1
