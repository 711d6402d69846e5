"""`dpfreq anonymize` in-process."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpfreq.cli.main import main


def write_rows(path, labels, header="password"):
    path.write_text(header + "\n" + "\n".join(labels) + "\n", encoding="utf-8")
    return path


def write_prevalences(path, hist, header="count,prevalence"):
    body = "\n".join(f"{c},{p}" for c, p in hist.items())
    path.write_text(header + "\n" + body + ("\n" if body else ""), encoding="utf-8")
    return path


def zipf_prevalences(seed, n=20_000):
    rng = np.random.Generator(np.random.PCG64(seed))
    p = 1.0 / np.arange(1, n // 2 + 1)
    counts = rng.multinomial(n, p / p.sum())
    values, prev = np.unique(counts[counts > 0], return_counts=True)
    return dict(zip(values.tolist(), prev.tolist(), strict=True))


def test_raw_file_table(tmp_path, capsys):
    labels = ["123456"] * 30 + ["password"] * 12 + ["qwerty"] * 5 + [f"u{i}" for i in range(40)]
    data = write_rows(tmp_path / "pw.csv", labels)
    main(["anonymize", "--unit", "event", str(data), "--item", "password", "--epsilon", "2",
          "--seed", "3",
          "--domain-size", "1000"])
    out, err = capsys.readouterr()
    assert "NOT for production" in err
    assert "epsilon=2, delta=0 (pure DP), mechanism=privhist" in out
    assert "unit=event" in out
    assert "# N = " in out
    assert "with probability" in out
    assert "count  items  ranks" in out
    for name in ("entropy (nats, plug-in)", "support size", "unseen species",
                 "distance to uniform", "collision probability"):
        assert name in out


def test_prevalence_csv_json_and_plot(tmp_path, capsys):
    hist = zipf_prevalences(1)
    data = write_prevalences(tmp_path / "prev.csv", hist)
    png = tmp_path / "rank.png"
    out_json = tmp_path / "rel.json"
    main(["anonymize", "--unit", "event", str(data), "--prevalence-csv", "--epsilon", "0.5",
          "--method",
          "privhist", "--seed", "7", "--top", "3", "--plot", str(png), "--json", str(out_json)])
    out, err = capsys.readouterr()
    assert "more distinct counts" in out  # compact list: 3 largest + 3 smallest
    assert png.exists()
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    doc = json.loads(out_json.read_text(encoding="utf-8"))
    assert doc["release"]["type"] == "AnonymizedHistogramRelease"
    assert doc["release"]["epsilon"] == 0.5
    assert doc["properties"]["entropy"]["private"] is True
    assert doc["properties"]["entropy"]["epsilon"] == 0.5
    assert f"wrote {png}" in err


@pytest.mark.parametrize("method", ["auto", "privhist", "privhist-tuned", "hay"])
def test_json_to_stdout_every_method(tmp_path, capsys, method):
    data = write_prevalences(tmp_path / "prev.csv", {1: 50, 2: 20, 3: 9, 10: 2, 40: 1})
    main(["anonymize", "--unit", "event", str(data), "--prevalence-csv", "--epsilon", "1",
          "--method", method,
          "--seed", "2", "--json", "-"])
    out, _ = capsys.readouterr()
    doc = json.loads(out)  # stdout is the JSON document only
    assert set(doc) == {"release", "properties"}
    assert "support-coverage" in doc["properties"]


def test_split_option(tmp_path, capsys):
    data = write_prevalences(tmp_path / "prev.csv", {1: 50, 2: 20, 3: 9, 10: 2, 40: 1})
    main(["anonymize", "--unit", "event", str(data), "--prevalence-csv", "--epsilon", "2",
          "--method", "privhist",
          "--split", "0.2,1.8,0", "--seed", "1", "--json", "-"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["release"]["split"] == [0.2, 1.8, 0.0]


def test_empty_histogram_is_a_valid_release(tmp_path, capsys):
    data = write_prevalences(tmp_path / "empty.csv", {})
    main(["anonymize", "--unit", "event", str(data), "--prevalence-csv", "--epsilon", "1",
          "--seed", "0"])
    out, _ = capsys.readouterr()
    assert "# N = " in out
    # N = 0 (seed 0): the release and every property with a value carry a bound and its
    # confidence, also in JSON
    main(["anonymize", "--unit", "event", str(data), "--prevalence-csv", "--epsilon", "1",
          "--seed", "0", "--json", "-"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["release"]["value"]["n_estimate"] == 0
    assert doc["release"]["error"]["kind"] == "bound"
    for name in ("entropy", "miller-madow-entropy", "support-size", "unseen-species",
                 "support-coverage"):
        err = doc["properties"][name]["error"]
        assert err["kind"] == "bound", name
        assert err["confidence"] == 0.95, name
        assert err["value"] > 0, name
        assert err["description"].startswith("N = 0"), name


def test_property_bounds_are_cut_to_the_range_in_text_and_json(tmp_path, capsys):
    """N = 1 with the empty histogram released (seed 82, total's interval [0, 61]): the
    entropy's ± is ln 60 (its range: the support is at most --domain-size 60 < 61), not 250.8,
    in the table and in --json -."""
    import math

    data = write_prevalences(tmp_path / "one.csv", {1: 1})
    args = ["anonymize", "--unit", "event", str(data), "--prevalence-csv", "--epsilon", "1",
            "--seed", "82", "--domain-size", "60"]
    main(args)
    out = capsys.readouterr().out
    assert "# N = 1 " in out
    assert "the true total is in [0, 61]" in out
    lines = {line.split("  ")[0]: line for line in out.splitlines() if "±" in line}
    assert "± 4.094 (vacuous)" in lines["entropy (nats, plug-in)"]
    assert "± 2 (vacuous)" in lines["unseen species in t*N more rows"]
    assert "± 1 (vacuous)" in lines["l1 distance to uniform on k"]
    assert "cut to the property's range" in out
    main([*args, "--json", "-"])
    text = capsys.readouterr().out
    assert "NaN" not in text  # strict JSON: the power sum's missing value is the string "nan"
    assert "Infinity" not in text
    doc = json.loads(text)
    assert doc["properties"]["power-sum-2"]["value"] == "nan"
    err = doc["properties"]["entropy"]["error"]
    assert err["value"] == pytest.approx(math.log(60))
    assert err["vacuous"]
    assert doc["properties"]["entropy"]["value_range"] == [0.0, pytest.approx(math.log(60))]
    for _name, prop in doc["properties"].items():
        if prop["error"]["kind"] == "bound":
            lo, hi = prop["value_range"]
            assert prop["error"]["value"] <= max(prop["value"] - lo, float(hi) - prop["value"])


def test_header_says_exact_for_an_empty_release_and_simulated_otherwise(tmp_path, capsys):
    # seed 0 on the empty histogram releases N = 0 (checked through the library); a larger
    # histogram is simulated. Each statement says which it is.
    from dpfreq.anonymized import release_anonymized_histogram

    assert release_anonymized_histogram({}, epsilon=1.0, rng=0, unit="event").regime == "empty"
    empty = write_prevalences(tmp_path / "empty.csv", {})
    main(["anonymize", "--unit", "event", str(empty), "--prevalence-csv", "--epsilon", "1",
          "--seed", "0"])
    out, _ = capsys.readouterr()
    assert "with probability >= 0.95 (exact: N = 0" in out
    assert "simulated" not in out
    data = write_prevalences(tmp_path / "prev.csv", {1: 50, 2: 20, 3: 9, 10: 2, 40: 1})
    main(["anonymize", "--unit", "event", str(data), "--prevalence-csv", "--epsilon", "2",
          "--seed", "1"])
    out, _ = capsys.readouterr()
    assert "with probability about 0.95 (simulated" in out
    assert "items with count >= r: within ±" in out


@pytest.mark.parametrize(
    ("args", "content", "match"),
    [
        (["--epsilon", "1"], None, "--item"),
        (["--prevalence-csv", "--item", "x", "--epsilon", "1"], "count,prevalence\n1,2\n",
         "--item does not apply"),
        (["--prevalence-csv", "--engine", "duckdb", "--epsilon", "1"],
         "count,prevalence\n1,2\n", "--engine does not apply"),
        (["--prevalence-csv", "--epsilon", "1"], "r,phi\n1,2\n", "header 'count,prevalence'"),
        (["--prevalence-csv", "--epsilon", "1"], "count,prevalence\n1,2.5\n", "integers"),
        (["--prevalence-csv", "--epsilon", "1"], "count,prevalence\n0,2\n", "in 1..2**52."),
        (["--prevalence-csv", "--epsilon", "1"], "count,prevalence\n99999999999999999999,1\n",
         "count and prevalence must be integers in 1..2**52."),
        # refused before the release is drawn: nothing spent, nothing saved
        (["--prevalence-csv", "--epsilon", "1", "--extrapolation-ratio", "nan"],
         "count,prevalence\n3,1\n", "--extrapolation-ratio of dpfreq anonymize must be a finite "
         "number > 0; got nan."),
        (["--prevalence-csv", "--epsilon", "1"], "count,prevalence\n3,1\n3,4\n",
         "listed twice"),
        (["--prevalence-csv", "--epsilon", "1"], "count,prevalence\n3,1,2\n", "2 columns"),
        (["--prevalence-csv", "--epsilon", "-1"], "count,prevalence\n3,1\n", "epsilon"),
        (["--prevalence-csv", "--epsilon", "1", "--method", "best"], "count,prevalence\n3,1\n",
         "method"),
        (["--prevalence-csv", "--epsilon", "1", "--top", "0"], "count,prevalence\n3,1\n",
         "--top"),
        (["--prevalence-csv", "--epsilon", "1", "--domain-size", "0"],
         "count,prevalence\n3,1\n", "--domain-size"),
        (["--prevalence-csv", "--epsilon", "1", "--domain-size", "3"],
         "count,prevalence\n3,1\n1,5\n", "--domain-size of dpfreq anonymize must "
         "be at least the number of distinct items"),
        (["--prevalence-csv", "--epsilon", "1", "--confidence", "1.5"],
         "count,prevalence\n3,1\n", "confidence"),
        (["--item", "password", "--count", "count", "--epsilon", "1"],
         "password,count\na,3\nb,-2\n", "negative"),
        (["--item", "nope", "--epsilon", "1"], "password\na\nb\n", "nope"),
        (["--prevalence-csv", "--epsilon", "1", "--split", "a,b"], "count,prevalence\n3,1\n",
         "--split"),
        (["--prevalence-csv", "--epsilon", "1", "--method", "privhist", "--split", "0.5,0.9"],
         "count,prevalence\n3,1\n", "split"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, args, content, match):
    data = tmp_path / "in.csv"
    data.write_text(content if content is not None else "password\na\n", encoding="utf-8")
    with pytest.raises(SystemExit) as info:
        main(["anonymize", "--unit", "event", str(data), *args])
    assert info.value.code == 2
    _, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if not line.startswith("dpfreq: warning:")]
    assert len(lines) == 1
    assert lines[0].startswith("dpfreq: error:")
    assert match in lines[0]
    assert "release drawn" not in lines[0]


def test_prevalence_csv_row_numbers_only_in_debug_mode(tmp_path, capsys, monkeypatch):
    data = tmp_path / "in.csv"
    data.write_text("count,prevalence\n3,1\n7,1\n0,2\n", encoding="utf-8")
    monkeypatch.delenv("DPFREQ_DEBUG", raising=False)
    with pytest.raises(SystemExit):
        main(["anonymize", "--unit", "event", str(data), "--prevalence-csv", "--epsilon", "1"])
    err = capsys.readouterr().err
    assert "in 1..2**52" in err
    assert "line 4" not in err
    monkeypatch.setenv("DPFREQ_DEBUG", "1")
    with pytest.raises(SystemExit):
        main(["anonymize", "--unit", "event", str(data), "--prevalence-csv", "--epsilon", "1"])
    assert "line 4" in capsys.readouterr().err


def test_missing_file_exits_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["anonymize", "--unit", "event", str(tmp_path / "absent.csv"), "--item", "x",
              "--epsilon", "1"])
    assert info.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_item_count_table_reads_weights(tmp_path, capsys):
    # the usual password frequency list: one row per password with its count
    data = tmp_path / "pw.csv"
    data.write_text("password,count\n123456,30\npassword,12\nqwerty,5\nx,1\ny,1\n",
                    encoding="utf-8")
    main(["anonymize", "--unit", "event", str(data), "--item", "password", "--count", "count",
          "--epsilon", "1000",
          "--seed", "1", "--json", "-"])
    doc = json.loads(capsys.readouterr().out)
    rel = doc["release"]
    assert rel["value"]["counts"] == [1, 5, 12, 30]
    assert rel["value"]["prevalences"] == [2, 1, 1, 1]
    assert rel["value"]["n_estimate"] == 49


def test_prevalence_csv_with_bom(tmp_path, capsys):
    data = tmp_path / "excel.csv"
    data.write_bytes(b"\xef\xbb\xbfcount,prevalence\r\n1,3\r\n4,1\r\n")
    main(["anonymize", "--unit", "event", str(data), "--prevalence-csv", "--epsilon", "1000",
          "--seed", "0",
          "--json", "-"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["release"]["value"]["counts"] == [1, 4]


def test_parquet_given_to_prevalence_csv(tmp_path, capsys):
    data = tmp_path / "prev.parquet"
    data.write_bytes(b"PAR1" + b"\0" * 16 + b"PAR1")
    with pytest.raises(SystemExit) as info:
        main(["anonymize", "--unit", "event", str(data), "--prevalence-csv", "--epsilon", "1"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "Parquet" in err
    assert err.count("\n") == 1


def test_domain_size_refusal_does_not_print_the_count(tmp_path, capsys):
    labels = [f"u{i}" for i in range(57)]
    data = write_rows(tmp_path / "pw.csv", labels)
    with pytest.raises(SystemExit) as info:
        main(["anonymize", "--unit", "event", str(data), "--item", "password", "--epsilon", "1",
              "--domain-size", "10"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "57" not in err
    assert "--domain-size" in err


def test_plan_anonymize(capsys):
    main(["plan", "anonymize", "--n-range", "1e4,1e5", "--epsilon", "1"])
    out = capsys.readouterr().out
    assert "N ± 60 (exact, confidence 0.95)" in out
    assert "unit event" in out
    main(["plan", "anonymize", "--n-range", "100,1000", "--epsilon", "0.01"])
    assert "VACUOUS" in capsys.readouterr().out
    with pytest.raises(SystemExit) as info:
        main(["plan", "anonymize", "--n-range", "1e4", "--epsilon", "1"])
    assert info.value.code == 2
    main(["plan", "anonymize", "--n-range", "0,100", "--epsilon", "1"])
    out = capsys.readouterr().out
    assert "totals 0..100" in out
    assert "sorted-l1 bound: 60 .. " in out
    for bad in ("-1,100", "5,2"):
        with pytest.raises(SystemExit) as info:
            main(["plan", "anonymize", "--n-range", bad, "--epsilon", "1"])
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith("dpfreq: error: --n-range of dpfreq plan anonymize must be")
        assert len(err.strip().splitlines()) == 1


def test_count_like_column_without_count_warns(tmp_path):
    from click.testing import CliRunner

    from dpfreq.cli.main import cli

    path = tmp_path / "pw.csv"
    path.write_text("password,count\na,100\nb,5\nc,3\n")
    res = CliRunner().invoke(cli, ["anonymize", "--unit", "event", str(path), "--item", "password",
                                   "--epsilon", "1", "--seed", "1"])
    assert res.exit_code == 0, res.output
    assert "has a column 'count'; without --count every row counts as one" in res.output
    res = CliRunner().invoke(cli, ["anonymize", "--unit", "event", str(path), "--item", "password",
                                   "--count",
                                   "count", "--epsilon", "1", "--seed", "1"])
    assert res.exit_code == 0, res.output
    assert "without --count" not in res.output
