"""`dpfreq sketch shuffle-params|share|shuffle-setup|shuffle-result` through main(): the
parameters file, and the one-line refusals before any network call (the services' runs are in
tests/server/test_shuffle_e2e.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_runner import run_cli
from dpfreq.crossparty import Coverage, PartySketch
from dpfreq.crossparty.shuffle import ShuffleParams


@pytest.fixture
def params_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    assert run_cli(["sketch", "key", str(tmp_path / "hash.key")], capsys)[0] == 0
    code, _, err = run_cli(["sketch", "shuffle-params", "--measurement", "spring", "--registers",
                            "4096", "--sampling-start", "0", "--sampling-width", "1/2",
                            "--max-frequency", "4", "--epsilon", "1.1", "--delta", "1e-10",
                            "--party", "tv", "--party", "web", "--histograms", "union+parties",
                            "--deadline", "2030-01-01T12:00:00+02:00", "--key",
                            str(tmp_path / "hash.key"), "--out", str(tmp_path / "p.json")],
                        capsys)
    assert code == 0, err
    return tmp_path / "p.json"


def test_shuffle_params_file(params_file: Path) -> None:
    params = ShuffleParams.load(params_file)
    assert params.parties == ("tv", "web")
    assert params.per_party
    assert params.histograms == 3
    assert params.deadline == "2030-01-01T10:00:00+00:00"
    assert str(params.sampling_width) == "1/2"
    assert params.coverage == Coverage()  # no --start/--end or --campaigns: every row


@pytest.mark.parametrize(("extra", "words"), [
    (["--worker", "http://127.0.0.1:1", "--token-file", "t0"],
     "--worker and --token-file go twice each"),
    (["--worker", "localhost:8101", "--worker", "http://127.0.0.1:2", "--token-file", "t0",
      "--token-file", "t1"], "must be a base URL"),
    (["--worker", "http://127.0.0.1:1", "--worker", "http://127.0.0.1:2", "--token-file",
      "missing.token", "--token-file", "t1"], "cannot read"),
])
def test_share_refuses_in_one_line(params_file: Path, tmp_path: Path, capsys, extra,
                                   words) -> None:
    (tmp_path / "log.csv").write_text("user_id\n1\n2\n2\n")
    for t in ("t0", "t1"):
        (tmp_path / t).write_text("token")
    argv = ["sketch", "share", str(tmp_path / "log.csv"), "--party", "tv", "--params",
            str(params_file), "--key", str(tmp_path / "hash.key"), "--user", "user_id",
            "--state", str(tmp_path / "tv.state"), "--wait", "0"]
    argv += [str(tmp_path / a) if a in ("t0", "t1", "missing.token") else a for a in extra]
    code, _, err = run_cli(argv, capsys)
    assert code == 2
    assert words in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "tv.state").exists()  # refused before the log was read


def test_share_names_an_unknown_party_and_unreachable_workers(params_file: Path,
                                                              tmp_path: Path, capsys) -> None:
    (tmp_path / "log.csv").write_text("user_id\n1\n2\n2\n")
    for t in ("t0", "t1"):
        (tmp_path / t).write_text("token")
    base = ["sketch", "share", str(tmp_path / "log.csv"), "--params", str(params_file),
            "--key", str(tmp_path / "hash.key"), "--user", "user_id", "--worker",
            "http://127.0.0.1:9", "--worker", "http://127.0.0.1:9", "--token-file",
            str(tmp_path / "t0"), "--token-file", str(tmp_path / "t1"), "--wait", "0.5"]
    code, _, err = run_cli([*base, "--party", "radio", "--state", str(tmp_path / "r.state")],
                           capsys)
    assert code == 2
    assert "--party of dpfreq sketch share must be one of the measurement's parties" in err
    code, _, err = run_cli([*base, "--party", "tv", "--state", str(tmp_path / "tv.state")],
                           capsys)
    assert code == 2
    assert "were not acknowledged by both workers" in err
    assert (tmp_path / "tv.state").stat().st_mode & 0o777 == 0o600  # kept for a rerun
    code, _, err = run_cli([*base, "--party", "web", "--state", str(tmp_path / "tv.state")],
                           capsys)
    assert "holds the shares of another measurement or party" in err


def test_setup_and_result_refuse_unreachable_services(params_file: Path, tmp_path: Path,
                                                      capsys) -> None:
    (tmp_path / "admin").write_text("x" * 30)
    code, _, err = run_cli(["sketch", "shuffle-result", "--aggregator", "http://127.0.0.1:9",
                            "--measurement", "spring", "--token-file", str(tmp_path / "admin"),
                            "--wait", "0"], capsys)
    assert code == 2
    assert "cannot reach http://127.0.0.1:9/v1/measurements/spring/result" in err
    code, _, err = run_cli(["sketch", "shuffle-setup", "--params", str(params_file),
                            "--aggregator", "http://127.0.0.1:9", "--aggregator-token-file",
                            str(tmp_path / "admin"), "--worker", "http://127.0.0.1:9",
                            "--worker-token-file", str(tmp_path / "admin"), "--out-dir",
                            str(tmp_path / "tokens")], capsys)
    assert code == 2
    assert "go twice each" in err


def test_shuffle_params_fix_the_coverage_build_reads(tmp_path: Path, capsys) -> None:
    """--start/--end/--campaigns are read as 'build' reads them: the parameters' coverage is
    the one a sketch of the same options records; without them, every row."""
    assert run_cli(["sketch", "key", str(tmp_path / "hash.key")], capsys)[0] == 0
    key = ["--key", str(tmp_path / "hash.key")]
    space = ["--registers", "64", "--sampling-start", "0", "--sampling-width", "1",
             "--max-frequency", "3"]
    rows = ["--start", "2026-03-01", "--end", "2026-04-01T12:00:00", "--campaigns", "y, x"]
    code, _, err = run_cli(["sketch", "shuffle-params", "--measurement", "spring", *space,
                            "--epsilon", "1", "--delta", "1e-9", "--party", "tv",
                            "--histograms", "union", *rows, "--deadline", "2030-01-01",
                            *key, "--out", str(tmp_path / "s.json")], capsys)
    assert code == 0, err
    code, _, err = run_cli(["sketch", "params", "--measurement", "spring", *space,
                            "--epsilon-reach", "1", "--epsilon-frequency", "none", *key,
                            "--out", str(tmp_path / "p.json")], capsys)
    assert code == 0, err
    (tmp_path / "log.csv").write_text("user,day,campaign\n1,2026-03-02,x\n",
                                      encoding="utf-8")
    code, _, err = run_cli(["sketch", "build", str(tmp_path / "log.csv"), "--party", "tv",
                            "--params", str(tmp_path / "p.json"), *key, "--user", "user",
                            "--time", "day", "--campaign", "campaign", *rows, "--seed", "1",
                            "--out", str(tmp_path / "tv.sketch")], capsys)
    assert code == 0, err
    coverage = ShuffleParams.load(tmp_path / "s.json").coverage
    assert coverage == PartySketch.load(tmp_path / "tv.sketch").coverage
    assert coverage.describe() == ("period [2026-03-01T00:00:00Z, 2026-04-01T12:00:00Z); "
                                   "campaigns x, y")
    code, _, err = run_cli(["sketch", "shuffle-params", "--measurement", "spring", *space,
                            "--epsilon", "1", "--delta", "1e-9", "--party", "tv",
                            "--histograms", "union", "--start", "0", "--deadline",
                            "2030-01-01", *key, "--out", str(tmp_path / "t.json")], capsys)
    assert code == 2
    assert "--start and --end go together" in err
    assert len(err.strip().splitlines()) == 1


def test_share_applies_the_parameters_period_and_needs_its_column(tmp_path: Path,
                                                                  capsys) -> None:
    """'share' has no --start/--end/--campaigns: with a period in the parameters, --time names
    the party's column for it, and its absence is one line before anything is read or sent."""
    assert run_cli(["sketch", "key", str(tmp_path / "hash.key")], capsys)[0] == 0
    code, _, err = run_cli(["sketch", "shuffle-params", "--measurement", "spring",
                            "--registers", "64", "--sampling-start", "0", "--sampling-width",
                            "1", "--max-frequency", "3", "--epsilon", "1", "--delta", "1e-9",
                            "--party", "tv", "--histograms", "union", "--start", "0",
                            "--end", "28", "--deadline", "2030-01-01", "--key",
                            str(tmp_path / "hash.key"), "--out", str(tmp_path / "p.json")],
                           capsys)
    assert code == 0, err
    (tmp_path / "log.csv").write_text("user_id,day\n1,3\n2,40\n", encoding="utf-8")
    for t in ("t0", "t1"):
        (tmp_path / t).write_text("token")
    base = ["sketch", "share", str(tmp_path / "log.csv"), "--party", "tv", "--params",
            str(tmp_path / "p.json"), "--key", str(tmp_path / "hash.key"), "--user",
            "user_id", "--worker", "http://127.0.0.1:9", "--worker", "http://127.0.0.1:9",
            "--token-file", str(tmp_path / "t0"), "--token-file", str(tmp_path / "t1"),
            "--state", str(tmp_path / "tv.state"), "--wait", "0"]
    code, _, err = run_cli(base, capsys)
    assert code == 2
    assert ("dpfreq: error: --time of dpfreq sketch share must be this party's time column "
            "(the parameters' coverage is period [0, 28) of the time column); got nothing.") in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "tv.state").exists()
    code, _, err = run_cli([*base, "--start", "0"], capsys)
    assert code == 2
    assert "No such option '--start'" in err
