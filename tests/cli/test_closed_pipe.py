"""A reader that stops early (``| head -2``) loses nothing: every requested file is written
before the table is printed, and the command exits 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = "from dpfreq.cli.main import main; import sys; sys.exit(main())"
SRC = str(Path(__file__).resolve().parents[2] / "src")


def run_into_closed_pipe(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """Run the CLI with stdout a pipe whose reader has already gone (as after ``head``)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = {**os.environ, "PYTHONPATH": SRC}
    try:
        return subprocess.run([sys.executable, "-c", SCRIPT, *argv], cwd=cwd,
                              stdout=write_end, stderr=subprocess.PIPE, env=env, timeout=120,
                              check=False)
    finally:
        os.close(write_end)


@pytest.mark.parametrize("extra", [[], ["--rows", "1"]])
def test_profile_writes_files_and_exits_0_on_closed_pipe(tmp_path, extra):
    log = tmp_path / "log.csv"
    log.write_text("user\n" + "".join(f"u{i % 7}\n" for i in range(40)), encoding="utf-8")
    argv = ["profile", str(log), "--item", "user", "--domain-size", "40", "--max-count", "8",
            "--epsilon", "1", "--unit", "item", "--plot", "p.png", "--json", "p.json",
            *extra]
    proc = run_into_closed_pipe(argv, tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    assert (tmp_path / "p.json").stat().st_size > 0
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"
    assert "Traceback" not in proc.stderr.decode()


def test_longitudinal_simulate_writes_files_and_exits_0_on_closed_pipe(tmp_path):
    argv = ["longitudinal", "simulate", "--devices", "200", "--horizon", "8", "--max-changes",
            "2", "--epsilon", "1", "--seed", "3", "--json", "s.json", "--plot", "s.png",
            "--rows", "2"]
    proc = run_into_closed_pipe(argv, tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    assert (tmp_path / "s.json").stat().st_size > 0
    assert (tmp_path / "s.png").read_bytes()[:4] == b"\x89PNG"


def test_longitudinal_simulate_rows_limits_the_table(tmp_path):
    from dpfreq.cli.main import main

    argv = ["longitudinal", "simulate", "--devices", "200", "--horizon", "8", "--max-changes",
            "2", "--epsilon", "1", "--seed", "3", "--rows", "2"]
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(argv) == 0
    table = [line for line in out.getvalue().splitlines() if not line.startswith("#")]
    assert len(table) == 1 + 2  # header and two periods


def test_reach_writes_json_and_save_before_the_table(tmp_path):
    log = tmp_path / "log.csv"
    log.write_text("user,ts\na,2024-01-01T10:00\nb,2024-01-02T10:00\na,2024-01-03T10:00\n",
                   encoding="utf-8")
    argv = ["reach", str(log), "--item", "user", "--time", "ts", "--start", "2024-01-01",
            "--end", "2024-01-03", "--period", "1d", "--epsilon", "1", "--k", "1",
            "--windows", "cumulative", "--unit", "event", "--seed", "1", "--json", "r.json",
            "--save", "r.sav"]
    proc = run_into_closed_pipe(argv, tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    assert (tmp_path / "r.json").stat().st_size > 0
    assert (tmp_path / "r.sav").stat().st_size > 0


def test_anonymize_writes_json_before_the_table(tmp_path):
    data = tmp_path / "pw.csv"
    data.write_text("password\n" + "".join(f"p{i % 5}\n" for i in range(30)), encoding="utf-8")
    argv = ["anonymize", str(data), "--item", "password", "--epsilon", "1", "--unit", "event",
            "--seed", "1",
            "--json", "a.json"]
    proc = run_into_closed_pipe(argv, tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    assert (tmp_path / "a.json").stat().st_size > 0
