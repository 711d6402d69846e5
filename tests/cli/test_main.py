"""The CLI shell, in-process: --version, --help, and bad input → exit 2 with one stderr line."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

import dpfreq
from dpfreq.cli.main import cli, main
from dpfreq.errors import ParameterError


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


def test_no_arguments_shows_usage():
    result = CliRunner().invoke(cli, [])
    assert "Usage" in result.output


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
        ValueError("a multi\nline\nmessage"),
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
    assert code == 1
    assert err.strip() == "dpfreq: aborted"
