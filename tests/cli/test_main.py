"""The CLI shell, in-process: --version, --help, bare ``dpfreq``, and the exit statuses: bad input
→ 2 with one stderr line, a bug → 1 with one line (traceback only with DPFREQ_DEBUG=1)."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

import dpfreq
from dpfreq.cli.main import cli, main
from dpfreq.errors import BudgetExceededError, ParameterError


def _run_failing(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    captured = capsys.readouterr()
    return info.value.code, captured.out, captured.err


def _exit_code(argv) -> int:
    """Exit status as the console script sees it: main's return value or its SystemExit code
    (click returns 0 from --version/--help when not in standalone mode)."""
    try:
        returned = main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return int(returned or 0)


def test_version(capsys):
    assert _exit_code(["--version"]) == 0
    out = capsys.readouterr().out
    assert out.strip() == f"dpfreq, version {dpfreq.__version__}"


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_lists_subcommands(flag, capsys):
    assert _exit_code([flag]) == 0
    out = capsys.readouterr().out
    assert "differentially private" in out
    for name in ("profile", "anonymize", "reach", "longitudinal", "demo"):
        assert name in out


def test_no_arguments_prints_help_and_exits_0(capsys):
    assert _exit_code([]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("Usage: dpfreq")
    assert "dpfreq: error" not in captured.out + captured.err
    result = CliRunner().invoke(cli, [])
    assert result.exit_code == 0
    assert "Usage" in result.output


@pytest.mark.parametrize("group", ["ledger", "later"])
def test_bare_subgroup_prints_its_help(group, capsys, monkeypatch):
    later = click.Group(name="later", commands=[click.Command("sub")])
    monkeypatch.setitem(cli.commands, "later", later)
    assert _exit_code([group]) == 0
    assert capsys.readouterr().out.startswith(f"Usage: dpfreq {group}")


@pytest.mark.parametrize("argv", [["--no-such-option"], ["no-such-command"],
                                  ["profile", "--no-such-option"]])
def test_usage_errors_exit_2_with_one_line(argv, capsys):
    code, out, err = _run_failing(argv, capsys)
    assert code == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("dpfreq: error: ")


@pytest.mark.parametrize(
    "exc",
    [
        click.UsageError("'dpfreq later' is not implemented yet"),
        ParameterError("epsilon of later must be a finite number > 0;\ngot -1.0."),
        BudgetExceededError("spending would exceed\nthe budget"),
        UnicodeDecodeError("utf-8", b"\x89PNG", 0, 1, "invalid start byte"),
        OSError("no such file: x.csv"),
    ],
)
def test_unimplemented_or_failing_subcommand_exits_2_with_one_line(exc, capsys, monkeypatch):
    @click.command(name="later")
    def later() -> None:
        raise exc

    monkeypatch.setitem(cli.commands, "later", later)
    code, out, err = _run_failing(["later"], capsys)
    assert code == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("dpfreq: error: ")
    assert "Traceback" not in err


def test_abort_exits_1(capsys, monkeypatch):
    @click.command(name="later")
    def later() -> None:
        raise click.Abort()

    monkeypatch.setitem(cli.commands, "later", later)
    code, _, err = _run_failing(["later"], capsys)
    assert code == 130
    assert err.strip() == "dpfreq: aborted"


@pytest.mark.parametrize("exc", [ValueError("user 12345 not\nfound"), KeyError("per_query"),
                                 MemoryError(), OverflowError("int too large")])
@pytest.mark.parametrize("debug", [False, True])
def test_internal_errors_exit_1_with_one_line_without_the_message(exc, debug, capsys,
                                                                  monkeypatch):
    @click.command(name="later")
    def later() -> None:
        raise exc

    monkeypatch.setitem(cli.commands, "later", later)
    monkeypatch.setenv("DPFREQ_DEBUG", "1" if debug else "0")
    code, out, err = _run_failing(["later"], capsys)
    assert code == 1
    assert out == ""
    last = err.splitlines()[-1]
    assert last.startswith("dpfreq: internal error: ")
    assert "test_main.py" in last  # where it was raised
    assert "12345" not in last  # the message (possibly data) is not repeated
    assert ("Traceback" in err) == debug
    if not debug:
        assert len(err.splitlines()) == 1


def test_warnings_are_one_line(capsys, monkeypatch):
    import warnings

    @click.command(name="later")
    def later() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.warn("a timezone\nwarning", UserWarning, stacklevel=1)

    monkeypatch.setitem(cli.commands, "later", later)
    assert _exit_code(["later"]) == 0
    err = capsys.readouterr().err
    assert err == "dpfreq: warning: a timezone warning\n"


def test_quiet_is_accepted_and_progress_is_off_without_a_terminal(capsys, monkeypatch):
    from dpfreq import progress

    seen = []

    @click.command(name="later")
    def later() -> None:
        for i in progress.track(range(3), description="work"):
            seen.append(i)

    monkeypatch.setitem(cli.commands, "later", later)
    assert _exit_code(["--quiet", "later"]) == 0
    assert _exit_code(["later"]) == 0
    assert seen == [0, 1, 2, 0, 1, 2]
    assert capsys.readouterr().err == ""  # stderr is no terminal under pytest


def test_console_script_exit_statuses(tmp_path):
    """The real process: bare help exits 0; bad input exits 2 with one line; a closed pipe on
    stdout ends quietly (no traceback)."""
    import subprocess
    import sys

    script = "from dpfreq.cli.main import main; import sys; sys.exit(main())"
    run = [sys.executable, "-c", script]
    bare = subprocess.run(run, capture_output=True, text=True, timeout=60, check=False)
    assert (bare.returncode, bare.stderr) == (0, "")
    assert bare.stdout.startswith("Usage: dpfreq")
    bad = subprocess.run([*run, "ledger", "show", str(tmp_path / "none.sqlite")],
                         capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 2
    assert bad.stdout == ""
    assert len(bad.stderr.splitlines()) == 1
    ledger = tmp_path / "l.sqlite"
    subprocess.run([*run, "ledger", "init", str(ledger), "--epsilon", "1"], check=True,
                   capture_output=True, timeout=60)
    reader = subprocess.Popen([*run, "ledger", "show", str(ledger), "--json", "-"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert reader.stdout is not None
    reader.stdout.close()  # the reader goes away before dpfreq writes
    _, err = reader.communicate(timeout=60)
    assert b"Traceback" not in err
    assert reader.returncode in (0, 1)


def test_json_dash_keeps_c_level_writes_off_stdout():
    """Text written to descriptor 1 from C (DuckDB's progress bar does that) lands on stderr
    while a command's stdout is reserved for JSON."""
    import json
    import subprocess
    import sys

    script = """
import os, sys, click
from dpfreq.cli._common import output_path_option, write_output
from dpfreq.cli.main import cli, main

@click.command(name="toy")
@output_path_option("--json", "json_out", allow_stdout=True, help="JSON")
def toy(json_out):
    os.write(1, b"C-level progress\\n")
    click.echo("human table")
    print("a print")
    write_output('{"ok": true}', json_out)

cli.add_command(toy)
sys.exit(main(["toy", "--json", "-"]))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"ok": True}
    assert done.stderr.splitlines() == ["C-level progress", "human table", "a print"]


@pytest.mark.parametrize(("argv", "reported"), [(["later"], True), (["--quiet", "later"], False),
                                                (["later", "--quiet"], False),
                                                (["later", "-q"], False)])
def test_quiet_before_or_after_the_subcommand(argv, reported, monkeypatch):
    import importlib
    from contextlib import contextmanager

    from dpfreq import progress

    main_module = importlib.import_module("dpfreq.cli.main")

    seen = []

    class Task:
        def advance(self, n=1):
            seen.append(n)

    @contextmanager
    def recorder(description, total, unit):
        yield Task()

    monkeypatch.setattr(main_module, "progress_wanted", lambda quiet: not quiet)
    monkeypatch.setattr(main_module, "tqdm_reporter", lambda: recorder)

    @click.command(name="later")
    def later() -> None:
        list(progress.track(range(2)))

    # registered like a real subcommand: a module whose `command` the group loads lazily
    monkeypatch.setitem(main_module.SUBCOMMANDS, "later", "dpfreq.cli.main")
    monkeypatch.setattr(main_module, "command", later, raising=False)
    assert _exit_code(argv) == 0
    assert (seen == [1, 1]) == reported


@pytest.mark.filterwarnings("always::dpfreq.errors.PrivacyWarning")
def test_every_warning_of_the_command_line_has_one_shape(tmp_path, capsys):
    """The command line's own warnings (a seeded result, an input without rows) and the
    library's Python warnings all print as ``dpfreq: warning: ...`` (cli.output.warn), and no
    module of the command line writes a warning line of another shape."""
    import re
    from pathlib import Path

    import dpfreq.cli

    log = tmp_path / "log.csv"
    log.write_text("user\n", encoding="utf-8")
    runs = [["profile", log, "--item", "user", "--domain-size", "10", "--max-count", "2",
             "--epsilon", "1", "--unit", "item", "--engine", "memory", "--seed", "1"],
            ["plan", "profile", "--domain-size", "1000", "--max-count", "5", "--epsilon", "1",
             "--unit", "item", "--group", "g", "--max-groups-per-item", "1", "--delta", "1e-3"]]
    warned = []
    for argv in runs:
        assert _exit_code([str(a) for a in argv]) == 0
        warned += [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(warned) == 3, warned  # --seed, no data rows, the large δ (a PrivacyWarning)
    assert all(line.startswith("dpfreq: warning: ") for line in warned), warned
    other = re.compile(r"""["'][\w :]{0,20}warning: """)
    for path in Path(dpfreq.cli.__file__).parent.glob("*.py"):
        if path.name != "output.py":  # where warn() and its one prefix live
            assert not other.search(path.read_text(encoding="utf-8")), path.name
