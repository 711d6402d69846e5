"""``dpfreq --help`` and ``--version`` import no command module (numpy, scipy, DuckDB): the
start-up stays a fraction of a second. Checked by the modules loaded, not by a timer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[2] / "src")
HEAVY = ("numpy", "scipy", "duckdb", "pandas", "pyarrow", "matplotlib")


def modules_after(argv: list[str]) -> list[str]:
    script = ("import sys, json, contextlib, io\n"
              "from dpfreq.cli.main import main\n"
              "with contextlib.redirect_stdout(io.StringIO()):\n"
              "    try:\n        main(sys.argv[1:])\n    except SystemExit:\n        pass\n"
              "print(json.dumps(sorted(sys.modules)))\n")
    out = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": SRC}, timeout=120, check=True)
    return json.loads(out.stdout)


@pytest.mark.parametrize("argv", [["--help"], ["--version"], []])
def test_help_and_version_import_nothing_heavy(argv):
    loaded = modules_after(argv)
    assert [m for m in loaded if m.split(".")[0] in HEAVY] == []


def test_short_help_names_every_subcommand():
    from dpfreq.cli.main import SHORT_HELP, SUBCOMMANDS

    assert sorted(SHORT_HELP) == sorted(SUBCOMMANDS)


PLAN_PROFILE = ["plan", "profile", "--domain-size", "1000", "--max-count", "5", "--epsilon", "1",
                "--unit", "item"]


@pytest.mark.parametrize("argv", [["plan", "--help"], ["plan", "profile", "--help"],
                                  PLAN_PROFILE, [*PLAN_PROFILE, "--method", "direct"]])
def test_plan_profile_imports_only_the_planner(argv):
    # numpy is needed (the exact interval widths); scipy's FFT, the engines and the sketch are
    # not: the profile package imports its modules on first use.
    loaded = modules_after(argv)
    heavy = [m for m in loaded if m.split(".")[0] in HEAVY and m.split(".")[0] != "numpy"]
    assert heavy == []
    assert not {"dpfreq.engines", "dpfreq.profile.api", "dpfreq.profile.kernel",
                "dpfreq.profile.sketch", "dpfreq.budget"} & set(loaded)


def test_profile_package_names_resolve_on_first_use():
    import dpfreq.profile as profile

    assert "release_profile" in dir(profile)
    assert profile.plan_profile.__module__ == "dpfreq.profile.plan"
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        profile.nothing  # noqa: B018
