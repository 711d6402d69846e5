"""`dpfreq demo` in-process, with a small --users for speed."""

from __future__ import annotations

import json
import re

import duckdb
import numpy as np
import pytest

from dpfreq.cli.main import main
from dpfreq.engines import get_engine
from dpfreq.profile.datasets import true_profile

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run_demo(out_dir, *extra):
    assert main(["demo", "--out", str(out_dir), "--users", "2000", *extra]) == 0


def test_demo_writes_parquet_json_png_and_reports_the_error(tmp_path, capsys):
    out_dir = tmp_path / "demo-out"
    run_demo(out_dir, "--seed", "1")
    out, err = capsys.readouterr()
    assert "NOT for production" in err
    parquet = out_dir / "impressions.parquet"
    assert (out_dir / "profile.png").read_bytes()[:8] == PNG_MAGIC
    data = json.loads((out_dir / "profile.json").read_text(encoding="utf-8"))
    assert data["type"] == "ProfileRelease"
    assert (data["domain_size"], data["max_count"], data["epsilon"]) == (4000, 50, 1.0)
    assert data["mechanism_params"]["engine"] == "duckdb"
    assert data["seeded"] is True
    cols = duckdb.connect().sql(f"SELECT * FROM '{parquet}' LIMIT 0").columns
    assert cols == ["user_id", "timestamp", "campaign"]
    # the printed true-vs-private error is the one between the JSON release and the profile
    # computed independently from the Parquet file by the DuckDB engine
    prev = get_engine("duckdb").count_of_counts(str(parquet), item="user_id")
    assert int(prev.prevalences.sum()) == 2000
    counts = np.repeat(prev.counts, prev.prevalences)
    truth = true_profile(counts, 4000, 50)
    l1 = float(np.abs(np.asarray(data["value"]) - truth).sum())
    assert f"ℓ1 error {l1:.6f}" in out
    assert f"the ℓ1 bound was {float(data['l1_bound']):.6f}" in out
    assert data["unit"] == "item"
    assert data["mechanism"] == "direct-count-of-counts"
    inside = sum(lo - 1e-12 <= f <= hi + 1e-12 for lo, f, hi in
                 zip(data["error"]["lower"], truth, data["error"]["upper"], strict=True))
    assert f"{inside} of 51 per-class intervals contain the true value" in out
    assert "epsilon = 1 (the demo's default" in out
    header = next(line for line in out.splitlines() if line.lstrip().startswith("t "))
    assert header.split()[-1] == "true"


def _truth_of(parquet, d, n):
    prev = get_engine("duckdb").count_of_counts(str(parquet), item="user_id")
    return true_profile(np.repeat(prev.counts, prev.prevalences), d, n)


def test_demo_shows_what_privacy_costs_beside_the_easy_release(tmp_path, capsys):
    """Issue 31: at the demo's scale private and true coincide; a second release of the same
    users at ε/100 (printed and drawn) shows the cost of a stronger guarantee."""
    out_dir = tmp_path / "demo-out"
    run_demo(out_dir, "--seed", "2", "--users", "20000")
    out = capsys.readouterr().out
    easy = json.loads((out_dir / "profile.json").read_text(encoding="utf-8"))
    costly = json.loads((out_dir / "profile-compare.json").read_text(encoding="utf-8"))
    assert (easy["epsilon"], costly["epsilon"]) == (1.0, 0.01)
    assert costly["unit"] == easy["unit"] == "item"
    assert costly["domain_size"] == easy["domain_size"] == 40_000
    assert easy["noisy_profile"] != costly["noisy_profile"]  # each its own noise
    truth = _truth_of(out_dir / "impressions.parquet", 40_000, 50)
    l1 = {name: float(np.abs(np.asarray(doc["value"]) - truth).sum())
          for name, doc in (("easy", easy), ("costly", costly))}
    half = {name: max(hi - lo for lo, hi in zip(doc["error"]["lower"], doc["error"]["upper"],
                                                strict=True)) / 2
            for name, doc in (("easy", easy), ("costly", costly))}
    line = next(x for x in out.splitlines() if x.startswith("# what privacy costs"))
    assert "epsilon = 0.01 (--epsilon / 100, the demo's default; 100× stronger" in line
    assert f"misplaces {l1['costly'] * 40_000:,.0f} users" in line
    assert f"against {l1['easy'] * 40_000:,.0f} at epsilon = 1" in line
    assert f"±{half['costly'] * 40_000:,.0f} users against ±{half['easy'] * 40_000:,.0f}" in line
    # the intervals are the release's own: 100 times less ε, 100 times wider at least here
    assert half["costly"] >= 50 * half["easy"]
    png = (out_dir / "profile.png").read_bytes()
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert width > 3.5 * height  # three panels side by side


def test_demo_compare_epsilon_option(tmp_path, capsys):
    run_demo(tmp_path, "--users", "300", "--max-count", "10", "--compare-epsilon", "0.2")
    out = capsys.readouterr().out
    assert "at epsilon = 0.2 (from --compare-epsilon; 5× stronger guarantee)" in out
    doc = json.loads((tmp_path / "profile-compare.json").read_text(encoding="utf-8"))
    assert doc["epsilon"] == 0.2


def test_demo_is_reproducible_with_seeds_and_engines_agree(tmp_path, capsys):
    run_demo(tmp_path / "a", "--seed", "4", "--epsilon", "0.5", "--max-count", "20")
    run_demo(tmp_path / "b", "--seed", "4", "--epsilon", "0.5", "--max-count", "20",
             "--engine", "memory")
    run_demo(tmp_path / "c", "--seed", "5", "--epsilon", "0.5", "--max-count", "20")
    out = capsys.readouterr().out
    assert "epsilon = 0.5 (from --epsilon)" in out
    a, b, c = (json.loads((tmp_path / k / "profile.json").read_text(encoding="utf-8"))
               for k in "abc")
    assert a["value"] == b["value"]  # same data seed and noise seed; memory vs duckdb
    assert b["mechanism_params"]["engine"] == "memory"
    assert a["noisy_profile"] != c["noisy_profile"]  # another noise seed, other noise
    assert (tmp_path / "a" / "impressions.parquet").read_bytes() == \
        (tmp_path / "c" / "impressions.parquet").read_bytes()  # same --data-seed, same data


def test_demo_unseeded_noise_has_no_warning(tmp_path, capsys):
    run_demo(tmp_path, "--users", "300", "--max-count", "10", "--rows", "3")
    out, err = capsys.readouterr()
    assert "NOT for production" not in err
    data = json.loads((tmp_path / "profile.json").read_text(encoding="utf-8"))
    assert data["seeded"] is False
    labels = [line.split()[0] for line in out.splitlines() if line and line[0] != "#"][1:]
    assert labels == ["0", "1", "2", "3", "4-6", "7-9", "10+"]
    assert re.search(r"the simultaneous band (holds|is EXCEEDED)", out)


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--users", "0"], "Invalid value for '--users': must be an integer >= 1"),
        (["--epsilon", "0"], "--epsilon of dpfreq demo"),
        (["--domain-size", "100"], "--domain-size of dpfreq demo"),
        (["--max-count", "-2"], "--max-count"),
        (["--norm", "5"], "--norm"),
        (["--confidence", "0"], "--confidence of dpfreq demo"),
        (["--unit", "item", "--method", "fft"], "unit"),
        (["--compare-epsilon", "-1"], "--compare-epsilon"),
    ],
)
def test_demo_bad_input_exits_2_with_one_line(tmp_path, capsys, extra, match):
    with pytest.raises(SystemExit) as info:
        main(["demo", "--out", str(tmp_path), "--users", "200", *extra])
    captured = capsys.readouterr()
    assert info.value.code == 2
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("dpfreq: error: ")
    assert match in lines[0]
    assert not (tmp_path / "impressions.parquet").exists()  # failed before writing data
