"""CLI errors in the command line's spelling: options (``--out-of-range drop``) and the command
(``dpfreq profile``), not Python parameters and functions; Python errors name the public function
called, not the engine method that found the problem."""

from __future__ import annotations

import re

import click
import pytest

from dpfreq.cli.main import main
from dpfreq.cli.spelling import cli_spelling, invoked_command
from dpfreq.errors import DataError, ParameterError, public_errors


def error_line(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main([str(a) for a in argv])
    assert info.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


@pytest.fixture
def log(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("user,t\na,1\nb,2\nc,9\n", encoding="utf-8")
    return path


def test_reach_names_the_option_to_pass(log, capsys):
    line = error_line(["reach", log, "--item", "user", "--time", "t", "--horizon", "3",
                       "--epsilon", "1", "--unit", "event", "--k", "1",
                       "--windows", "cumulative"], capsys)
    assert "--out-of-range drop" in line
    assert "out_of_range" not in line
    assert "release_window_counts" not in line
    assert "of dpfreq reach" in line


def test_profile_names_options_and_the_command(log, capsys):
    line = error_line(["profile", log, "--item", "user", "--domain-size", "2", "--max-count", "3",
                       "--epsilon", "1", "--unit", "item"], capsys)
    assert line.startswith("dpfreq: error: source of dpfreq profile holds more distinct items")
    assert "--domain-size 2; --domain-size must be" in line
    assert "domain_size" not in line


@pytest.mark.parametrize(("argv", "start"), [
    (["plan", "profile", "--domain-size", "10", "--max-count", "3", "--epsilon", "1", "--unit",
      "item", "--confidence", "2"], "--confidence of dpfreq plan profile must be"),
    (["plan", "profile", "--domain-size", "10", "--max-count", "3", "--epsilon", "1e-9",
      "--unit", "item"], "--epsilon of dpfreq plan profile must be"),
    (["anonymize", "LOG", "--item", "user", "--epsilon", "1", "--unit", "item"],
     "--unit of dpfreq anonymize must be"),
    (["profile", "LOG", "--item", "user", "--domain-size", "10", "--max-count", "3",
      "--epsilon", "1", "--unit", "item", "--engine", "spark", "--spark-master", "bogus://x"],
     "--spark-master of dpfreq profile must be a Spark master URL"),
    (["plan", "profile", "--domain-size", "1000", "--max-count", "10", "--epsilon", "1",
      "--unit", "event", "--method", "fft", "--target-half-width", "5"],
     "--target-half-width of dpfreq plan profile must be left out with --method fft (the "
     "sketch methods predict the ℓ1 bound only: give --target-l1); got 5.0."),
])
def test_leading_parameter_and_function(argv, start, log, capsys):
    line = error_line([log if a == "LOG" else a for a in argv], capsys)
    assert line.startswith(f"dpfreq: error: {start}")


def test_another_commands_parameter_is_its_option(log, capsys):
    """A refusal that points to another command names that command's option."""
    from dpfreq.cli.main import cli

    line = error_line(["anonymize", log, "--item", "user", "--epsilon", "1", "--unit", "item"],
                      capsys)
    assert "for item-level protection release a profile instead: --max-count of dpfreq " \
           "profile caps each item's count); got 'item'." in line
    assert "max_count" not in line
    assert "release_profile" not in line
    assert cli_spelling("epsilon of release_profile: see max_count of release_profile and "
                        "scale of release_profile.", demo, "dpfreq demo", root=cli) == \
        "epsilon of dpfreq demo: see --max-count of dpfreq profile and scale of dpfreq " \
        "profile."  # scale: not an option of dpfreq profile


@click.command()
@click.option("--out-of-range", type=click.Choice(["error", "drop"]))
@click.option("--time", "time_col")
@click.option("--all-windows/--no-all-windows", default=False)
@click.option("--max-count", type=int)
@click.argument("file")
def demo(**kwargs):
    """A command to spell against."""


@pytest.mark.parametrize(("text", "spelled"), [
    ("time of release_window_counts must be inside; pass out_of_range='drop' to drop.",
     "--time of dpfreq demo must be inside; pass --out-of-range drop to drop."),
    ("windows of release_window_counts needs all_windows=True or all_windows=False",
     "windows of dpfreq demo needs --all-windows or --no-all-windows"),
    ("counts above max_count = 3 are clamped; max_count must be public",
     "counts above --max-count 3 are clamped; --max-count must be public"),
    ("file of DuckDBEngine.count_of_counts: missing.", "FILE of dpfreq demo: missing."),
    ("max_count of release_window_counts must be None or a number; got 3.",
     "--max-count of dpfreq demo must be "
     "left out or a number; got 3."),
    ("epsilon of a release must be > 0; domain_size = 3", "epsilon of a release must be > 0; "
     "domain_size = 3"),  # neither a Python function nor an option of this command
])
def test_cli_spelling_rules(text, spelled):
    assert cli_spelling(text, demo, "dpfreq demo") == spelled


@click.command()
@click.option("--horizon", type=int)
@click.option("--start")
@click.option("--period")
@click.option("--singleton", is_flag=True)
@click.option("--split")
def ranged(**kwargs):
    """A command with options that go together, a flag and a list."""


@pytest.mark.parametrize(("text", "spelled"), [
    # a keyword named bare, a missing option, a flag's rule
    ("singleton of release_window_counts must be given when period= is set; got None.",
     "--singleton of dpfreq ranged must be given when --period is set; got nothing."),
    ("singleton of release_window_counts must be True only for logs with one event per "
     "period; got 'a log with two'.", "--singleton of dpfreq ranged must be given only for "
     "logs with one event per period; got 'a log with two'."),
    # options named together, and the values they were given
    ("start/period of open_stream must be both given or both None; got ('2020-01-01', None).",
     "--start/--period of dpfreq ranged must be both given or both left out; got --start "
     "2020-01-01, no --period."),
    ("horizon of plan_window_counts must be given alone, or replaced by start/period; got 10.",
     "--horizon of dpfreq ranged must be given alone, or replaced by --start/--period; got 10."),
    # a list option's value as typed
    ("split of release_anonymized_histogram must be three numbers; got (0.5, 1).",
     "--split of dpfreq ranged must be three numbers; got '0.5,1'."),
    # another public call: the command that runs it
    ("epsilon of a release is vacuous (see plan_profile); release a profile (release_profile)",
     "epsilon of a release is vacuous (see dpfreq plan profile); release a profile (dpfreq "
     "profile)"),
], ids=["bare-keyword", "flag-rule", "joined-values", "joined-names", "list", "command"])
def test_cli_spelling_of_missing_options_flags_and_lists(text, spelled):
    assert cli_spelling(text, ranged, "dpfreq ranged") == spelled


@click.command()
@click.option("--start")
@click.option("--end")
def spanned(**kwargs):
    """A command whose period is two options."""


def test_a_parameter_of_two_options_is_named_by_both():
    text = "period of build_sketch must be a pair with start < end; got '5 to 1'."
    assert cli_spelling(text, spanned, "dpfreq spanned") == (
        "--start/--end of dpfreq spanned must be a pair with start < end; got '5 to 1'.")
    assert cli_spelling(text, demo, "dpfreq demo").startswith("period of dpfreq demo ")


def test_invoked_command_walks_groups():
    from dpfreq.cli.main import cli

    command, path = invoked_command(cli, ["-q", "plan", "profile", "--unit", "item"])
    assert path == "dpfreq plan profile"
    assert command.name == "profile"
    assert invoked_command(cli, ["--version"])[1] == "dpfreq"
    command, path = invoked_command(cli, ["reach", "query", "saved.dpfreq", "--k", "1"])
    assert (path, command.name) == ("dpfreq reach query", "query")


def test_python_errors_name_the_public_function(tmp_path, monkeypatch):
    from dpfreq import release_anonymized_histogram, release_profile, release_window_counts

    missing = str(tmp_path / "missing.csv")
    calls = {
        "release_profile": lambda: release_profile(missing, item="u", domain_size=10,
                                                   max_count=3, epsilon=1.0, unit="item"),
        "release_window_counts": lambda: release_window_counts(
            missing, item="u", time="t", horizon=3, epsilon=1.0, unit="event", k_values=[1],
            windows=["cumulative"]),
        "release_anonymized_histogram": lambda: release_anonymized_histogram(
            missing, item="u", epsilon=1.0, unit="event"),
    }
    for name, call in calls.items():
        with pytest.raises(DataError) as info:
            call()
        assert str(info.value).startswith(f"source of {name}: file"), name
        assert "Engine" not in str(info.value)


def test_public_errors_keeps_the_engine_in_debug_detail(monkeypatch):
    from dpfreq.engines import get_engine

    monkeypatch.setenv("DPFREQ_DEBUG", "1")

    @public_errors("release_demo")
    def release_demo():
        return get_engine("memory").item_counts({"u": [1.0, float("nan"), None]}, item="u")

    with pytest.raises(DataError) as info:
        release_demo()
    assert str(info.value).startswith("column 'u' of the source must be free of nulls and NaN")
    assert "[debug, MemoryEngine.item_counts: " in str(info.value)


def test_engine_choice_errors_name_the_release():
    from dpfreq import release_profile

    with pytest.raises(ParameterError, match=r"^engine of release_profile must be one of"):
        release_profile({"u": ["a"]}, item="u", domain_size=10, max_count=3, epsilon=1.0,
                        unit="item", engine="nope")


def test_warnings_are_spelled_for_the_command(capsys, monkeypatch):
    import warnings

    from dpfreq.cli.main import cli

    @click.command(name="later")
    @click.option("--max-count", type=int)
    def later(max_count) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.warn("counts above max_count = 3 were clamped", UserWarning, stacklevel=1)

    monkeypatch.setitem(cli.commands, "later", later)
    assert main(["later", "--max-count", "3"]) == 0
    assert capsys.readouterr().err == ("dpfreq: warning: counts above --max-count 3 were "
                                       "clamped\n")


#: Python spellings a command line must not print: a repr assignment, a library rule "must be
#: None", a Python flag value, a library parameter that names no option of the command
_PYTHON = re.compile(r"\b[a-z_]+='|must be None|\b(?:True|False)\b|\btarget of ")


@pytest.mark.parametrize(("argv", "said"), [
    (["plan", "reach", "--horizon", "30", "--epsilon", "1", "--unit", "item", "--k", "1",
      "--windows", "all", "--target-half-width", "0.01"],
     "total ε for all, k=1 half-width ≤ 0.01 items: not reachable at ε ≤ 1000"),
    (["plan", "profile", "--domain-size", "1000", "--max-count", "10", "--epsilon", "0.01",
      "--unit", "item"], "# --unit item: noising the classes t >= 1"),
    (["plan", "anonymize", "--n-range", "100,1000", "--epsilon", "0.1"],
     "At epsilon=0.1 (privhist-tuned), the release's interval"),  # notation: stays
    (["plan", "longitudinal", "--horizon", "30", "--max-changes", "2", "--epsilon", "1",
      "--devices", "1000", "--target-half-width", "0.01"],
     "ε for a per-period half-width ≤ 0.01 devices: not reachable at ε ≤ 1000"),
], ids=["reach", "profile", "anonymize", "longitudinal"])
def test_plan_lines_speak_the_command_line(argv, said, capsys):
    """Every plan command's lines name options, not the library's parameters (a line of a plan
    is the library's text, spelled for the command that printed it)."""
    assert main(argv) == 0
    out = capsys.readouterr()
    lines = (out.out + out.err).splitlines()
    assert any(line.startswith(said) for line in lines), lines
    assert not [line for line in lines if _PYTHON.search(line)]


def test_a_printed_line_keeps_numbers_as_notation():
    """A printed line's Python literals and names become options; a number assigned to a plain
    word is notation (``epsilon=0.5`` stays)."""
    text = "out_of_range='drop': epsilon=0.5, counts above max_count = 3 with all_windows=True"
    assert cli_spelling(text, demo, "dpfreq demo", notation=True) == (
        "--out-of-range drop: epsilon=0.5, counts above --max-count 3 with --all-windows")


@pytest.mark.parametrize(("argv", "said"), [
    (["profile", "LOG", "--item", "user", "--domain-size", "100", "--max-count", "5",
      "--epsilon", "0.001", "--unit", "item", "--seed", "1"],
     "dpfreq: warning: the error statement is vacuous: the band allows any profile (ℓ1 bound "
     "2); ε ≈ 5.28 would bound the ℓ1 error by 0.1 with --method direct (see dpfreq plan "
     "profile)."),
    (["profile", "LOG", "--item", "user", "--domain-size", "100", "--max-count", "5",
      "--epsilon", "1", "--unit", "item", "--group", "t"],
     "dpfreq: error: --max-groups-per-item of dpfreq profile must be given (an integer >= 1: "
     "how many groups one item may touch) when --group is set at --unit item; got nothing."),
    (["profile", "LOG", "--item", "user", "--domain-size", "100", "--max-count", "5",
      "--epsilon", "1", "--unit", "item", "--time", "t", "--start", "2026-01-01"],
     "dpfreq: error: --start/--end of dpfreq profile must be both given, with --time; got "
     "'--start 2026-01-01 --time t'."),
], ids=["vacuous-warning", "missing-option", "options-apart"])
def test_release_warnings_and_errors_speak_the_command_line(argv, said, log, capsys):
    """A warning quoting the release's statement, a missing option and options given apart
    read as the command line (no ``method='direct'``, ``group=``, ``got None`` or a tuple)."""
    try:
        code = main([str(log) if a == "LOG" else a for a in argv])
    except SystemExit as stop:  # an error
        code = stop.code
    assert code == (2 if said.startswith("dpfreq: error: ") else 0)
    lines = capsys.readouterr().err.splitlines()
    assert said in lines, lines
