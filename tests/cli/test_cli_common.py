"""Shared CLI helpers: exact integers, early output-path checks, stdout reserved for machine
output, release rescue, stdin as '-', the ledger commands and --ledger, memory checks and the
progress hooks."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from cli_runner import run_cli
from dpfreq import progress
from dpfreq.budget import PrivacyBudget
from dpfreq.cli._common import (
    COUNT,
    INPUT_FILE,
    INTEGER,
    POSITIVE,
    IntegerType,
    check_output_path,
    emit_release,
    ledger_option,
    output_options,
    parse_int_list,
)
from dpfreq.cli.main import cli, main
from dpfreq.errors import DataError, ParameterError, public_call
from dpfreq.ledger import Ledger
from dpfreq.release import ErrorStatement, Release
from dpfreq.resources import available_memory_bytes, check_memory, format_bytes


def _invoke(argv, **kwargs):
    """Run through main() (the console script) in CliRunner: (exit code, stdout, stderr)."""
    runner = CliRunner()

    def entry():
        main(argv)

    command = click.Command("run", callback=entry)
    result = runner.invoke(command, [], **kwargs)
    code = result.exit_code
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return code, result.stdout, result.stderr


# -- integers ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "value"), [
    ("1000000", 10**6), ("1_000_000", 10**6), ("1e6", 10**6), ("2E6", 2 * 10**6),
    ("2.5e6", 2_500_000), (" 7 ", 7), ("1.0", 1), ("-3", -3), ("9223372036854775807", 2**63 - 1),
])
def test_integer_accepts_exact_notations(text, value):
    assert INTEGER.convert(text, None, None) == value
    assert isinstance(INTEGER.convert(text, None, None), int)


@pytest.mark.parametrize("text", ["1.5e0", "1.5", "nan", "inf", "-inf", "1e19", "2**10", "",
                                  "0x10", "1e999999999", "one", "9223372036854775808", "1__0",
                                  "_1", "1_", "\u0661\u0660", "1 0", ".5e1", "1e-99999999999"])
def test_integer_refuses_inexact_or_huge(text):
    with pytest.raises(click.BadParameter) as info:
        INTEGER.convert(text, None, None)
    assert "must be an integer" in str(info.value)
    assert "\n" not in str(info.value)


def test_integer_ranges():
    assert COUNT.convert("0", None, None) == 0
    with pytest.raises(click.BadParameter, match=">= 0"):
        COUNT.convert("-1", None, None)
    with pytest.raises(click.BadParameter, match=">= 1"):
        POSITIVE.convert("0", None, None)
    with pytest.raises(click.BadParameter, match=r"in \[2, 5\]"):
        IntegerType(2, 5).convert("6", None, None)
    with pytest.raises(click.BadParameter):
        INTEGER.convert(True, None, None)
    assert parse_int_list("1, 1e3,2_000", "--k") == [1, 1000, 2000]
    with pytest.raises(click.BadParameter, match="comma-separated integers"):
        parse_int_list("1,1.5", "--k")


@pytest.mark.parametrize("option", ["--rate", "--enrol-rate", "--read-cache-seconds",
                                    "--db-wait"])
@pytest.mark.parametrize("text", ["-1", "nan", "inf"])
def test_serve_refuses_a_negative_or_non_finite_rate_or_time(option, text, capsys):
    """A rate, a cache time or a wait is a finite number >= 0: a negative one started the
    server (and turned its limit off), a NaN or an infinity too."""
    with pytest.raises(SystemExit) as info:
        main(["serve", option, text, "--port", "0"])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"dpfreq: error: Invalid value for '{option}': must be a finite number >= 0; "
                   f"got {text!r}"]


# -- output paths ------------------------------------------------------------------------------

def test_check_output_path(tmp_path):
    ok = tmp_path / "r.json"
    assert check_output_path(str(ok), "--json", (".json",)) == str(ok)
    assert check_output_path(None, "--json") is None
    assert check_output_path("-", "--json", allow_stdout=True) == "-"
    cases = [
        (str(tmp_path / "missing" / "r.json"), "does not exist"),
        (str(tmp_path / "r.txt"), "must be a file ending in .json"),
        (str(tmp_path), "is a directory"),
        ("-", "cannot write to stdout"),
    ]
    for path, words in cases:
        with pytest.raises(click.BadParameter, match=words):
            check_output_path(path, "--json", (".json",) if path != str(tmp_path) else ())


class _Toy(Release):
    def table(self):
        return {"x": [1.0]}


def _toy_release() -> Release:
    return _Toy(value=[1.0], epsilon=0.5, delta=0.0, unit="item", mechanism="toy",
                mechanism_params={}, seeded=True,
                error=ErrorStatement(kind="bound", confidence=0.95, value=1.0, description="d"))


@pytest.fixture
def toy_command(monkeypatch):
    """A command that counts how often it drew a release and prints a table, like the real ones."""
    drawn = []

    @click.command(name="toy")
    @output_options
    @ledger_option
    @click.argument("file", required=False)
    def toy(json_out, plot_out, accountant, file):
        if accountant is not None:
            accountant.spend(0.5, label="toy_release", unit="item")
        drawn.append(1)
        click.echo("# human header")
        emit_release(_toy_release(), json_out, plot_out)

    monkeypatch.setitem(cli.commands, "toy", toy)
    return drawn


def test_json_dash_puts_only_json_on_stdout(toy_command):
    code, out, err = _invoke(["toy", "--json", "-"])
    assert code == 0
    assert json.loads(out)["epsilon"] == 0.5
    assert "# human header" in err
    code, out, err = _invoke(["toy"])
    assert out == "# human header\n"


@pytest.mark.parametrize(("args", "words"), [
    (["--json", "nodir/r.json"], "does not exist"),
    (["--json", "r.csv"], "ending in .json"),
    (["--plot", "r.foo"], ".png or .pdf or .svg"),
    (["--plot", "-"], "cannot write to stdout"),
])
def test_bad_output_paths_refused_before_the_release(toy_command, tmp_path, args, words):
    os.chdir(tmp_path)
    code, out, err = _invoke(["toy", *args])
    assert code == 2
    assert out == ""
    assert words in err
    assert len(err.splitlines()) == 1
    assert toy_command == []  # nothing was drawn


def test_failed_write_after_the_release_rescues_it(toy_command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    def broken(text, path, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("dpfreq.cli._common.write_output", broken)
    code, out, err = _invoke(["toy", "--json", str(tmp_path / "r.json")])
    assert code == 2
    assert out == "# human header\n"
    assert len(err.splitlines()) == 1
    saved = list(tmp_path.glob("dpfreq-release-*.json"))
    assert len(saved) == 1
    assert str(saved[0]) in err
    assert json.loads(saved[0].read_text())["epsilon"] == 0.5


# -- the ledger --------------------------------------------------------------------------------

def test_ledger_init_show_and_option(toy_command, tmp_path):
    path = tmp_path / "budget.sqlite"
    code, out, err = _invoke(["ledger", "init", str(path), "--epsilon", "1", "--delta", "1e-6"])
    assert (code, out) == (0, "")
    assert "created ledger" in err
    data = tmp_path / "data.csv"
    data.write_text("item\n1\n")
    assert _invoke(["toy", str(data), "--ledger", str(path)])[0] == 0
    assert _invoke(["toy", str(data), "--ledger", str(path)])[0] == 0
    code, out, err = _invoke(["toy", "--ledger", str(path)])
    assert code == 2
    assert "would exceed the budget" in err
    assert len(err.splitlines()) == 1
    assert len(toy_command) == 2  # the refused one drew nothing
    code, out, err = _invoke(["ledger", "show", str(path), "--json", "-"])
    assert code == 0
    summary = json.loads(out)
    # tight (the default): half of δ is kept to convert the Rényi filter, half is the releases'
    assert summary["remaining"] == {"epsilon": 0.0, "delta": 5e-7}
    assert [(r["command"], r["label"], r["unit"], r["source"]) for r in summary["releases"]] == [
        ("dpfreq toy", "toy_release", "item", str(data))] * 2
    assert "2 release(s)" in err
    code, out, _ = _invoke(["ledger", "show", str(path)])
    assert "dpfreq toy" in out


@pytest.mark.parametrize("argv", [
    ["ledger", "init", "{dir}/l.sqlite", "--epsilon", "0"],
    ["ledger", "init", "{dir}/l.sqlite", "--epsilon", "1", "--delta", "1"],
    ["ledger", "init", "{dir}/no/l.sqlite", "--epsilon", "1"],
    ["ledger", "show", "{dir}/none.sqlite"],
    ["ledger", "show", "{dir}/text.txt"],
    ["toy", "--ledger", "{dir}/none.sqlite"],
])
def test_ledger_errors_are_one_line(toy_command, tmp_path, argv):
    (tmp_path / "text.txt").write_text("hello")
    code, out, err = _invoke([a.format(dir=tmp_path) for a in argv])
    assert code == 2
    assert out == ""
    assert len(err.splitlines()) == 1
    assert err.startswith("dpfreq: error: ")
    assert toy_command == []


def test_ledger_init_refuses_to_overwrite(tmp_path):
    path = tmp_path / "l.sqlite"
    Ledger.create(path, PrivacyBudget(2.0))
    code, _, err = _invoke(["ledger", "init", str(path), "--epsilon", "5"])
    assert code == 2
    assert "already exists" in err
    assert Ledger(path).total == PrivacyBudget(2.0)


# -- stdin -------------------------------------------------------------------------------------

def test_stdin_is_spooled_to_a_file_and_removed(monkeypatch):
    seen = {}

    @click.command(name="cat")
    @click.argument("file", type=INPUT_FILE)
    def cat(file):
        seen["path"] = file
        seen["text"] = Path(file).read_text()

    monkeypatch.setitem(cli.commands, "cat", cat)
    code, _, _ = _invoke(["cat", "-"], input="item\n1\n2\n")
    assert code == 0
    assert seen["text"] == "item\n1\n2\n"
    assert seen["path"].endswith(".csv")
    assert not Path(seen["path"]).exists()
    code, _, err = _invoke(["cat", "-"], input="")
    assert code == 2
    assert "stdin ('-') is empty" in err
    code, _, err = _invoke(["cat", "no-such-file.csv"])
    assert code == 2
    assert "does not exist" in err
    assert INPUT_FILE.convert("s3a://bucket/events/*.parquet", None, None).startswith("s3a://")


# -- memory and progress -----------------------------------------------------------------------

def test_memory_check_names_the_parameter_and_the_sizes():
    assert available_memory_bytes() > 0
    assert format_bytes(80 * 1024**3) == "80.0 GiB"
    check_memory(1024, param="domain_size", value=10, available=2048)
    with pytest.raises(ParameterError) as info, public_call("ProfileSketch"):
        check_memory(330 * 1024**3, param="domain_size",
                     value=10**10, what="the counters", available=20 * 1024**3)
    assert str(info.value) == (
        "domain_size of ProfileSketch must be small enough for the counters to fit in memory "
        "(needs 330.0 GiB, 20.0 GiB available); got 10000000000.")
    check_memory(10**30, param="x", value=1, available=0)  # unknown: not checked


def test_progress_is_silent_by_default_and_reports_when_enabled():
    assert list(progress.track(iter(range(3)), total=3, description="x")) == [0, 1, 2]
    events = []

    class Task:
        def advance(self, n=1):
            events.append(n)

    from contextlib import contextmanager

    @contextmanager
    def reporter(description, total, unit):
        events.append((description, total, unit))
        yield Task()

    with progress.reporting(reporter):
        assert list(progress.track(range(2), description="noise")) == [0, 1]
        with progress.task("passes", 10, unit="rows") as t:
            t.advance(4)
    assert events == [("noise", 2, "it"), 1, 1, ("passes", 10, "rows"), 4]
    with progress.task("silent") as t:
        t.advance(1)  # no reporter: nothing recorded
    assert len(events) == 5
    with progress.reporting(reporter):
        assert list(progress.chunks(10, 4, description="noise")) == [0, 4, 8]
    assert events[5:] == [("noise", 10, "items"), 4, 4, 2]
    assert list(progress.chunks(10, 4)) == [0, 4, 8]


def test_tqdm_reporter_draws_on_the_given_stream():
    import io

    from dpfreq.cli.progress import progress_wanted, tqdm_reporter

    stream = io.StringIO()
    with progress.reporting(tqdm_reporter(stream)), progress.task("noise", 5) as t:
        t.advance(5)
    assert "noise" in stream.getvalue()
    assert not progress_wanted(False, stream)  # StringIO is no terminal
    assert not progress_wanted(True, stream)


def test_a_warning_during_a_progress_bar_is_a_line_of_its_own(monkeypatch):
    """cli.output.warn clears the bars drawn on stderr for its line: never inside a bar."""
    import io

    from dpfreq.cli.output import warn
    from dpfreq.cli.progress import tqdm_reporter

    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    with progress.reporting(tqdm_reporter()), progress.task("noise", 5) as t:
        t.advance(2)
        warn("a\nwarning")
        t.advance(3)
    lines = stream.getvalue().replace("\r", "\n").splitlines()
    assert "dpfreq: warning: a warning" in lines


@pytest.mark.parametrize(("exc", "code"), [(KeyError("per_query"), 1),
                                           (DataError("bad window"), 2),
                                           (KeyboardInterrupt(), 130)])
def test_a_release_drawn_before_any_failure_is_saved(exc, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    @click.command(name="later")
    def later():
        release = _toy_release()
        click.echo(f"# release of epsilon {release.epsilon}")
        raise exc

    monkeypatch.setitem(cli.commands, "later", later)
    status, _, err = _invoke(["later"])
    assert status == code
    line = err.splitlines()[-1]
    saved = list(tmp_path.glob("dpfreq-release-*.json"))
    assert len(saved) == 1
    assert f"saved to {saved[0]}" in line
    assert json.loads(saved[0].read_text())["epsilon"] == 0.5
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("module", ["dpfreq.ledger", "dpfreq.progress", "dpfreq.resources",
                                    "dpfreq.budget", "dpfreq.cli._common", "dpfreq.cli.output",
                                    "dpfreq.cli.progress", "dpfreq.cli.ledger",
                                    "dpfreq.cli.main"])
def test_all_is_complete(module):
    import importlib

    mod = importlib.import_module(module)
    for name in mod.__all__:
        assert hasattr(mod, name), name


def test_ledger_refuses_before_the_command_reads_anything(tmp_path, monkeypatch):
    read = []

    @click.command(name="toy2")
    @click.option("--epsilon", type=float, required=True)
    @ledger_option
    def toy2(epsilon, accountant):
        read.append(epsilon)  # the data would be read here
        accountant.spend(epsilon, label="toy2")

    monkeypatch.setitem(cli.commands, "toy2", toy2)
    path = tmp_path / "l.sqlite"
    Ledger.create(path, PrivacyBudget(1.0))
    code, _, err = _invoke(["toy2", "--epsilon", "0.75", "--ledger", str(path)])
    assert code == 0
    assert f"ledger {path}: remaining epsilon=0.25, delta=0" in err
    code, _, err = _invoke(["toy2", "--epsilon", "0.5", "--ledger", str(path)])
    assert code == 2
    assert "would exceed the budget" in err
    assert read == [0.75]  # refused before the body ran


def test_ledger_init_unit_converts_soundly(tmp_path):
    """A ledger stated at item_replace charges an item-level (add/remove) release twice its ε
    and refuses an event-level one; without --unit the first unit spent is the only one."""
    from dpfreq.ledger import Ledger

    data = tmp_path / "events.csv"
    data.write_text("user\n1\n1\n2\n", encoding="utf-8")
    stated, apart = tmp_path / "stated.db", tmp_path / "apart.db"
    assert _invoke(["ledger", "init", str(stated), "--epsilon", "1",
                    "--unit", "item_replace"])[0] == 0
    assert _invoke(["ledger", "init", str(apart), "--epsilon", "1"])[0] == 0
    profile = ["profile", str(data), "--item", "user", "--domain-size", "10", "--max-count",
               "3", "--epsilon", "0.25", "--seed", "1"]
    assert _invoke([*profile, "--unit", "item", "--ledger", str(stated)])[0] == 0
    assert float(Ledger(stated).spent_exact[0]) == pytest.approx(0.5)
    code, _, err = _invoke([*profile, "--unit", "event", "--ledger", str(stated)])
    assert code == 2
    errors = [line for line in err.splitlines() if line.startswith("dpfreq: error")]
    assert len(errors) == 1
    assert "different currencies" in errors[0]
    assert _invoke([*profile, "--unit", "item", "--ledger", str(apart)])[0] == 0
    code, _, err = _invoke([*profile, "--unit", "item_replace", "--ledger", str(apart)])
    assert code == 2
    assert float(Ledger(apart).spent_exact[0]) == pytest.approx(0.25)


def test_a_reporting_block_closed_in_another_context_raises_nothing():
    """A block entered in one context and closed in another (the garbage collector closing
    a CLI context that was never exited) leaves both contexts' reporters as they were."""
    import contextvars

    from dpfreq import progress

    def reporter(description, total, unit):
        raise AssertionError("never used")

    block = progress.reporting(reporter)
    entered = contextvars.copy_context()
    entered.run(block.__enter__)
    assert entered.run(progress._reporter.get) is reporter
    assert progress._reporter.get() is None
    block.__exit__(None, None, None)  # here, not in the context that entered it
    assert progress._reporter.get() is None


PLAN_BASE = {
    "profile": ["plan", "profile", "--domain-size", "100", "--max-count", "5", "--epsilon", "1",
                "--unit", "event"],
    "longitudinal": ["plan", "longitudinal", "--horizon", "8", "--max-changes", "2",
                     "--epsilon", "1", "--devices", "100"],
    "stream": ["plan", "stream", "--horizon", "8", "--k", "1", "--unit", "item", "--epsilon",
               "1", "--delta", "0", "--method", "auto"],
    "reach": ["plan", "reach", "--horizon", "8", "--epsilon", "1", "--unit", "item", "--k", "1",
              "--windows", "cumulative"],
    "anonymize": ["plan", "anonymize", "--n-range", "100,1000"],
}
TARGETS = [("profile", "--target-half-width"), ("profile", "--target-l1"),
           ("longitudinal", "--target-half-width"), ("stream", "--target-half-width"),
           ("reach", "--target-half-width"), ("anonymize", "--target-l1")]


@pytest.mark.parametrize(("name", "option"), TARGETS)
@pytest.mark.parametrize("value", ["inf", "nan", "0", "-1"])
def test_every_accuracy_target_is_refused_in_the_house_shape(name, option, value, capsys):
    """Every ``--target-*`` goes through the library's one check (``check_positive_float``):
    one line ``--opt of dpfreq plan X must be a finite number > 0; got …``, exit 2, nothing
    printed before it and no JSON (never a bare NaN/Infinity)."""
    code, out, err = run_cli([*PLAN_BASE[name], option, value, "--json", "-"]
                             if name in ("longitudinal", "stream", "reach")
                             else [*PLAN_BASE[name], option, value], capsys)
    assert (code, out) == (2, ""), err
    shown = repr(float(value))
    assert err == (f"dpfreq: error: {option} of dpfreq plan {name} must be a finite number > 0;"
                   f" got {shown}.\n")


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0, 0, True, "1"])
def test_every_plan_checks_its_target_in_one_place(value):
    """The Python planners refuse the same targets with the same message (bool included)."""
    from dpfreq.anonymized import plan_anonymized
    from dpfreq.profile import plan_profile
    from dpfreq.windows import plan_window_counts

    plans = [plan_profile(domain_size=100, max_count=5, epsilon=1.0, unit="event"),
             plan_window_counts(horizon=8, epsilon=1.0, unit="item", k_values=[1],
                                windows=["cumulative"])]
    for plan in plans:
        with pytest.raises(ParameterError, match=r"^target of \w+\.epsilon_for must be a "
                                                 r"finite number > 0; got "):
            plan.epsilon_for(value)
    with pytest.raises(ParameterError, match=r"^target_l1 of plan_anonymized must be a finite "
                                             r"number > 0; got "):
        plan_anonymized(n_range=(100, 1000), target_l1=value)
