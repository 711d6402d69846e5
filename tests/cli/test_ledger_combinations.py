"""Every command that spends budget, with ``--ledger``, as users deploy it (STYLE 20b).

Each command × option combination that takes ``--ledger`` (``reach`` plain, with ``--save``,
with a public ``--groups`` list, with private selection (``--delta``, no ``--groups``), with
``--max-groups-per-item auto``; ``profile`` and ``anonymize`` plain and grouped; ``stream
init``; ``sketch build``) runs in-process through main() on a tiny log and must follow the
ledger's three rules:

1. a ledger that lacks the budget refuses the command in one line (exit 2) before any noise
   is drawn and before anything is written, and the ledger is unchanged; both through the
   command line's early check and through the release function's own atomic check (what a
   process sees when another one spent in between: the early check is switched off);
2. a command that runs records, once, exactly the (ε, δ) and unit its output states; what
   follows for free (``stream append``/``show``, a re-sent append, ``reach query``) records
   nothing;
3. a command that fails on its data before the draw (a missing column, nulls in the group
   column, an empty file) records nothing; one that fails after the draw keeps the release
   (saved to a fallback file) and its charge.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cli_runner import run_cli
from dpfreq.ledger import Ledger


@pytest.fixture(autouse=True)
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DPFREQ_ARTIFACT_KEY", raising=False)


@dataclass(frozen=True)
class Files:
    """The inputs every case reads (written once for the module)."""

    root: Path
    log: Path  # user, campaign, day (integer periods 1..5), ts (timestamps in March 2026)
    groups: Path
    null_group: Path  # the log with one row whose campaign is empty
    empty: Path  # 0 bytes
    header_only: Path
    key: Path
    params: Path  # a cross-party measurement at epsilon 1 + 2


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Files:
    root = tmp_path_factory.mktemp("ledger-combinations")
    rows = ["user,campaign,day,ts"] + [
        f"{u},c{(u * 7 + k) % 3},{1 + (u + k) % 5},2026-03-0{1 + (u + k) % 3}T10:00:00"
        for u in range(200) for k in range(3)]
    log = root / "log.csv"
    log.write_text("\n".join(rows) + "\n", encoding="utf-8")
    null_group = root / "null-group.csv"
    null_group.write_text("\n".join([*rows, "999,,2,2026-03-02T10:00:00"]) + "\n",
                          encoding="utf-8")
    groups = root / "groups.txt"
    groups.write_text("c0\nc1\nc2\n", encoding="utf-8")
    empty = root / "empty.csv"
    empty.write_text("", encoding="utf-8")
    header_only = root / "header-only.csv"
    header_only.write_text(rows[0] + "\n", encoding="utf-8")
    key, params = root / "hash.key", root / "params.json"
    with pytest.MonkeyPatch.context() as mp:  # the module fixture cannot take capsys
        mp.delenv("DPFREQ_ARTIFACT_KEY", raising=False)
        from dpfreq.cli.main import main

        assert main(["sketch", "key", str(key)]) == 0
        assert main(["sketch", "params", "--measurement", "m", "--registers", "64",
                     "--sampling-start", "0", "--sampling-width", "1", "--max-frequency", "3",
                     "--epsilon-reach", "1", "--epsilon-frequency", "2", "--key", str(key),
                     "--out", str(params)]) == 0
    return Files(root, log, groups, null_group, empty, header_only, key, params)


@dataclass(frozen=True)
class Case:
    """One command line that spends: ``argv(files, out)`` (``out``: the directory its outputs
    go to), the files it writes there, whether its options hold ``--group`` and ``--delta``,
    and how to read back the (ε, δ, unit) it states."""

    argv: Callable[[Files, Path], list[Any]]
    writes: tuple[str, ...]
    grouped: bool = False
    delta: bool = False
    stated: Callable[[Files, Path, pytest.CaptureFixture[str]], tuple[float, float, str]] = (
        field(default=None))  # type: ignore[assignment]


def _json_stated(files: Files, out: Path, capsys: pytest.CaptureFixture[str]
                 ) -> tuple[float, float, str]:
    doc = json.loads((out / "out.json").read_text(encoding="utf-8"))
    rel = doc.get("release", doc)  # anonymize: the release beside its property estimates
    return rel["epsilon"], rel["delta"], rel["unit"]


def _stream_stated(files: Files, out: Path, capsys: pytest.CaptureFixture[str]
                   ) -> tuple[float, float, str]:
    code, _, err = run_cli(["stream", "append", out / "state", files.log, "--through",
                            "2026-03-03"], capsys)
    assert code == 0, err
    code, _, err = run_cli(["stream", "append", out / "state", files.log, "--through",
                            "2026-03-03"], capsys)  # a re-send
    assert code == 0, err
    code, text, err = run_cli(["stream", "show", out / "state", "--json", "-"], capsys)
    assert code == 0, err
    doc = json.loads(text)
    return doc["epsilon"], doc["delta"], doc["unit"]


def _sketch_stated(files: Files, out: Path, capsys: pytest.CaptureFixture[str]
                   ) -> tuple[float, float, str]:
    from dpfreq.crossparty import PartySketch

    sketch = PartySketch.load(out / "p.sketch")
    return sketch.epsilon, 0.0, "item"  # a sketch is pure ε-DP at unit item (its docstring)


def _reach(files: Files, out: Path, *extra: Any) -> list[Any]:
    return ["reach", files.log, "--item", "user", "--time", "day", "--horizon", "5",
            "--epsilon", "1", "--unit", "item", "--k", "1,2", "--engine", "memory",
            "--seed", "1", "--json", out / "out.json", *extra]


def _profile(files: Files, out: Path, *extra: Any) -> list[Any]:
    return ["profile", files.log, "--item", "user", "--domain-size", "1000", "--max-count",
            "8", "--epsilon", "1", "--unit", "item", "--engine", "memory", "--seed", "1",
            "--json", out / "out.json", "--plot", out / "out.png", *extra]


def _anonymize(files: Files, out: Path, *extra: Any) -> list[Any]:
    return ["anonymize", files.log, "--item", "user", "--epsilon", "1", "--unit", "event",
            "--engine", "memory", "--seed", "1", "--json", out / "out.json", "--plot",
            out / "out.png", *extra]


def _listed(files: Files, m: str = "2") -> list[Any]:
    return ["--group", "campaign", "--groups", files.groups, "--max-groups-per-item", m]


SELECTED = ["--group", "campaign", "--delta", "1e-6"]  # private partition selection

CASES: dict[str, Case] = {
    "reach": Case(lambda f, o: _reach(f, o, "--windows", "cumulative", "--plot", o / "out.png"),
                  ("out.json", "out.png"), stated=_json_stated),
    "reach --save": Case(lambda f, o: _reach(f, o, "--windows", "all", "--save", o / "r.dpfreq"),
                         ("out.json", "r.dpfreq"), stated=_json_stated),
    "reach --groups": Case(lambda f, o: _reach(f, o, "--windows", "3", "--plot", o / "out.png",
                                               *_listed(f)),
                           ("out.json", "out.png"), grouped=True, stated=_json_stated),
    "reach --group --delta": Case(
        lambda f, o: _reach(f, o, "--windows", "cumulative", "--save", o / "r.dpfreq",
                            *SELECTED, "--max-groups-per-item", "2"),
        ("out.json", "r.dpfreq"), grouped=True, delta=True, stated=_json_stated),
    "reach auto": Case(lambda f, o: _reach(f, o, "--windows", "total", *_listed(f, "auto"),
                                           "--capping-epsilon", "0.2"),
                       ("out.json",), grouped=True, stated=_json_stated),
    "profile": Case(lambda f, o: _profile(f, o), ("out.json", "out.png"), stated=_json_stated),
    "profile --groups": Case(lambda f, o: _profile(f, o, *_listed(f)), ("out.json", "out.png"),
                             grouped=True, stated=_json_stated),
    "profile --group --delta": Case(
        lambda f, o: _profile(f, o, *SELECTED, "--max-groups-per-item", "2"),
        ("out.json", "out.png"), grouped=True, delta=True, stated=_json_stated),
    "profile auto": Case(lambda f, o: _profile(f, o, *_listed(f, "auto"),
                                               "--capping-epsilon", "0.2"),
                         ("out.json", "out.png"), grouped=True, stated=_json_stated),
    "anonymize": Case(lambda f, o: _anonymize(f, o), ("out.json", "out.png"),
                      stated=_json_stated),
    "anonymize --groups": Case(lambda f, o: _anonymize(f, o, "--group", "campaign", "--groups",
                                                       f.groups),
                               ("out.json", "out.png"), grouped=True, stated=_json_stated),
    "anonymize --group --delta": Case(lambda f, o: _anonymize(f, o, *SELECTED),
                                      ("out.json", "out.png"), grouped=True, delta=True,
                                      stated=_json_stated),
    "stream init": Case(
        lambda f, o: ["stream", "init", o / "state", "--item", "user", "--time", "ts",
                      "--start", "2026-03-01", "--period", "1d", "--horizon", "7", "--k",
                      "1,2", "--unit", "item", "--epsilon", "1", "--delta", "0", "--method",
                      "auto", "--late", "error", "--state-engine", "memory", "--seed", "1"],
        ("state",), stated=_stream_stated),
    "sketch build": Case(
        lambda f, o: ["sketch", "build", f.log, "--party", "p", "--params", f.params, "--key",
                      f.key, "--user", "user", "--out", o / "p.sketch", "--engine", "memory",
                      "--seed", "1"],
        ("p.sketch",), stated=_sketch_stated),
}
SPENT = {"sketch build": 3.0}  # ε of the command (epsilon_reach + epsilon_frequency); else 1


def _ledger(path: Path, capsys: pytest.CaptureFixture[str], epsilon: str,
            delta: str = "0") -> Path:
    code, _, err = run_cli(["ledger", "init", path, "--epsilon", epsilon, "--delta", delta],
                           capsys)
    assert code == 0, err
    return path


def _rows(path: Path) -> list[dict[str, Any]]:
    return Ledger(path).ledger


def _error_line(err: str, *, alone: bool = True) -> str:
    """The one error line; ``alone``: the only line but the --seed warning (which a refusal
    by the release function follows), else beside what was written before the error."""
    lines = [line for line in err.strip().splitlines()
             if not line.startswith("dpfreq: warning: --seed")
             and (alone or line.startswith("dpfreq:"))]
    assert len(lines) == 1, err
    assert lines[0].startswith("dpfreq: error: "), err
    return lines[0]


def _no_plot(argv: list[Any]) -> list[Any]:
    """``argv`` without ``--plot FILE`` (a figure costs time and is not what is checked)."""
    at = argv.index("--plot") if "--plot" in argv else len(argv)
    return [*argv[:at], *argv[at + 2:]]


def _written(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir())


SHORT = [(name, short) for name in CASES
         for short in (("epsilon", "delta") if CASES[name].delta else ("epsilon",))]


@pytest.mark.parametrize("early", [True, False], ids=["early-check", "atomic-check"])
@pytest.mark.parametrize(("name", "short"), SHORT)
def test_refused_before_anything_is_drawn_or_written(
        files: Files, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, name: str, short: str, early: bool) -> None:
    """``short``: what the ledger lacks (ε, or the δ of a private selection)."""
    case = CASES[name]
    if not early:  # what a process sees when another one spent between its check and its spend
        monkeypatch.setattr("dpfreq.cli._common._precheck", lambda *args: None)
    monkeypatch.chdir(tmp_path)  # a rescued release would land here
    out = tmp_path / "out"
    out.mkdir()
    total = ("0.5", "1e-3") if short == "epsilon" else ("10", "0")
    ledger = _ledger(tmp_path / "budget.db", capsys, *total)
    before = run_cli(["ledger", "show", ledger, "--json", "-"], capsys)[1]
    code, stdout, err = run_cli([*case.argv(files, out), "--ledger", ledger], capsys)
    assert (code, stdout) == (2, ""), err
    line = _error_line(err)
    asked = f"ε={SPENT.get(name, 1.0)!r}, δ={1e-06 if case.delta else 0.0!r}"
    left = "ε=0.5, δ=0.0005 of total ε=0.5, δ=0.001" if short == "epsilon" else (
        "ε=10.0, δ=0.0 of total ε=10.0, δ=0.0")
    # one wording for every command: what was asked, what remains (public), what to do
    assert line.startswith(f"dpfreq: error: spending {asked} would exceed the budget of ledger "
                           f"{str(ledger)!r}: "), line
    assert line.endswith(f"; remaining {left}. Nothing was recorded and no noise was drawn; "
                         "ask for no more than what remains."), line
    assert "--epsilon" not in line
    assert "epsilon=" not in line
    assert _written(out) == []  # no --json, --plot, --save, sketch or stream state
    assert not list(tmp_path.glob("dpfreq-release-*"))  # nothing was drawn to rescue
    assert run_cli(["ledger", "show", ledger, "--json", "-"], capsys)[1] == before
    assert run_cli(["ledger", "verify", ledger], capsys)[:2] == (0, "ok: 0 rows\n")


@pytest.mark.parametrize("name", list(CASES))
def test_records_once_what_the_release_states(files: Files, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch,
                                              name: str) -> None:
    case = CASES[name]
    monkeypatch.chdir(tmp_path)  # a rescued release would land here
    out = tmp_path / "out"
    out.mkdir()
    ledger = _ledger(tmp_path / "budget.db", capsys, "10", "1e-3")
    code, _, err = run_cli([*_no_plot(case.argv(files, out)), "--ledger", ledger], capsys)
    assert code == 0, err
    assert set(case.writes) - {"out.png"} <= set(_written(out))
    assert not list(tmp_path.glob("dpfreq-release-*"))
    epsilon, delta, unit = case.stated(files, out, capsys)
    assert (epsilon, delta > 0) == (SPENT.get(name, 1.0), case.delta)
    assert f"ledger {ledger}: remaining epsilon={10 - epsilon:g}" in err
    if "--save" in case.argv(files, out):  # a saved release's windows are free
        code, _, query_err = run_cli(["reach", "query", out / "r.dpfreq", "--window", "1:3",
                                      "--k", "1"], capsys)
        assert code == 0, query_err
    rows = _rows(ledger)
    assert [(r["epsilon"], r["delta"], r["unit"]) for r in rows] == [(epsilon, delta, unit)]


def _faults(case: Case, files: Files) -> list[tuple[str, Callable[[list[Any]], list[Any]], str]]:
    """(name, change of the command line, words of the error) of the data faults found before
    the draw."""
    def swap(old: Any, new: Any) -> Callable[[list[Any]], list[Any]]:
        return lambda argv: [new if a == old else a for a in argv]

    if case.grouped:  # the item column and the file are read by the same code as ungrouped
        return [("missing group column", swap("campaign", "nosuch"),
                 "'nosuch' is not in the header of the CSV source"),
                ("null group", swap(files.log, files.null_group), "--null-group drop")]
    return [("missing item column", swap("user", "nosuch"),
             "'nosuch' is not in the header of the CSV source"),
            ("empty file", swap(files.log, files.empty),
             f"error: file {str(files.empty)!r} of the source must be a CSV file whose first "
             "line names its columns; got an empty file (0 bytes).")]


FAULTS = [(name, i) for name in CASES if name != "stream init"  # init reads no data
          for i in range(2)]


@pytest.mark.parametrize(("name", "fault"), FAULTS)
def test_a_data_error_before_the_draw_charges_nothing(files: Files, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      name: str, fault: int) -> None:
    case = CASES[name]
    what, change, words = _faults(case, files)[fault]
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    ledger = _ledger(tmp_path / "budget.db", capsys, "10", "1e-3")
    code, stdout, err = run_cli([*change(_no_plot(case.argv(files, out))), "--ledger", ledger],
                                capsys)
    assert (code, stdout) == (2, ""), (what, err)
    assert words in _error_line(err), (what, err)
    assert _written(out) == []
    assert not list(tmp_path.glob("dpfreq-release-*"))
    assert _rows(ledger) == [], what


def test_stream_append_of_bad_data_charges_nothing(files: Files, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    out.mkdir()
    ledger = _ledger(tmp_path / "budget.db", capsys, "10")
    assert run_cli([*CASES["stream init"].argv(files, out), "--ledger", ledger], capsys)[0] == 0
    for bad in (files.empty, files.root / "no-such-file.csv"):
        code, stdout, err = run_cli(["stream", "append", out / "state", bad, "--through", "1"],
                                 capsys)
        assert (code, stdout) == (2, ""), err
        assert _error_line(err).endswith(
            f"file {str(bad)!r} of the source must be a CSV file whose first line names its "
            "columns; got an empty file (0 bytes)." if bad == files.empty
            else f"file {str(bad)!r} does not exist")
    assert len(_rows(ledger)) == 1


@pytest.mark.parametrize("name", ["reach --groups", "profile", "anonymize",
                                  "anonymize --groups"])
def test_a_write_failing_after_the_draw_keeps_the_release_and_its_charge(
        files: Files, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """The figure cannot be written (a full disk): the release, drawn and charged, is saved
    to the fallback file, whose (ε, δ) are the ones recorded."""
    def full_disk(*args: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("dpfreq.plotting.save_figure", full_disk)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    ledger = _ledger(tmp_path / "budget.db", capsys, "10")
    code, stdout, err = run_cli([*CASES[name].argv(files, out), "--ledger", ledger], capsys)
    assert (code, stdout) == (2, ""), err
    assert "No space left on device" in _error_line(err, alone=False)
    (rescued,) = tmp_path.glob("dpfreq-release-*.json")
    doc = json.loads(rescued.read_text(encoding="utf-8"))
    rel = doc.get("release", doc)
    assert [(r["epsilon"], r["delta"]) for r in _rows(ledger)] == [(rel["epsilon"],
                                                                    rel["delta"])]


def test_selection_of_no_group_is_a_release_not_a_crash(files: Files, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """Private selection on a log without rows selects no group (whatever the noise): every
    command releases the empty set of groups and its charge, and prints it."""
    monkeypatch.chdir(tmp_path)
    for name in ("reach --group --delta", "profile --group --delta",
                 "anonymize --group --delta"):
        out = tmp_path / name.split()[0]
        out.mkdir()
        ledger = _ledger(out / "budget.db", capsys, "10", "1e-3")
        argv = [files.header_only if a == files.log else a
                for a in _no_plot(CASES[name].argv(files, out))]
        code, text, err = run_cli([*argv, "--ledger", ledger], capsys)
        assert code == 0, (name, err)
        doc = json.loads((out / "out.json").read_text(encoding="utf-8"))
        assert doc.get("release", doc)["groups"] in ({}, []), name
        assert "0 groups selected privately" in text, (name, text)
        assert not (out / "r.dpfreq").exists()  # reach: nothing to save, and it says so
        assert ("nothing to save" in err) == (name.startswith("reach")), err
        assert len(_rows(ledger)) == 1
    assert not list(tmp_path.glob("dpfreq-release-*"))


@pytest.mark.parametrize("name", ["reach --save", "reach --groups"])
def test_a_save_failing_after_the_draw_keeps_the_release_and_its_charge(
        files: Files, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """``--save`` fails after the draw (a full disk), with no ``--json``: the release, grouped
    or not, is saved to the fallback file and the error says where."""
    from dpfreq.windows import WindowCountsRelease
    from dpfreq.windows.grouped.result import GroupedWindowRelease

    def full_disk(self: Any, path: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(WindowCountsRelease, "save", full_disk)
    monkeypatch.setattr(GroupedWindowRelease, "save", full_disk)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    ledger = _ledger(tmp_path / "budget.db", capsys, "10")
    argv = [a for a in CASES[name].argv(files, out) if a not in ("--json", out / "out.json")]
    if "--save" not in argv:
        argv += ["--save", out / "r.dpfreq"]
    code, stdout, err = run_cli([*argv, "--ledger", ledger], capsys)
    assert (code, stdout) == (2, ""), err
    line = _error_line(err, alone=False)  # a --plot written before the --save is said
    assert "No space left on device" in line
    (rescued,) = tmp_path.glob("dpfreq-release-*.json")
    assert str(rescued) in line
    doc = json.loads(rescued.read_text(encoding="utf-8"))
    assert [(r["epsilon"], r["delta"]) for r in _rows(ledger)] == [(doc["epsilon"],
                                                                    doc["delta"])]


def test_a_sketch_failing_to_write_after_the_draw_is_saved_elsewhere(
        files: Files, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``sketch build --out`` fails after the draw (a full disk): the sketch, drawn and charged,
    is written to a fallback file, which loads as the same ε-DP sketch, and the one error line
    says where."""
    from dpfreq.crossparty import PartySketch

    real = PartySketch.save

    def full_disk_at_out(self: Any, path: Any) -> Any:
        if Path(path).name == "p.sketch":
            raise OSError(28, "No space left on device")
        return real(self, path)

    monkeypatch.setattr(PartySketch, "save", full_disk_at_out)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    ledger = _ledger(tmp_path / "budget.db", capsys, "10")
    code, stdout, err = run_cli([*CASES["sketch build"].argv(files, out), "--ledger", ledger],
                                capsys)
    assert (code, stdout) == (2, ""), err
    line = _error_line(err, alone=False)
    (rescued,) = tmp_path.glob("dpfreq-sketch-*.sketch")
    assert "No space left on device" in line
    assert str(rescued) in line
    sketch = PartySketch.load(rescued)
    assert [(r["epsilon"], r["delta"]) for r in _rows(ledger)] == [(sketch.epsilon, 0.0)]
    assert not (out / "p.sketch").exists()


def test_a_bad_ledger_with_json_to_stdout_is_one_line_in_a_console_run(files: Files,
                                                                      tmp_path: Path) -> None:
    """``--json -`` claims stdout while the options are parsed; a ``--ledger`` refused at parse
    time then left the claim open until the interpreter's exit, which printed a traceback
    ("Exception ignored in ...") after the error line. Run as a process: the claim redirects
    the real file descriptors only there."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("DPFREQ_ARTIFACT_KEY", None)
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from dpfreq.cli.main import main; sys.exit(main())",
         "reach", str(files.log), "--item", "user",
         "--time", "day", "--horizon", "5", "--epsilon", "1", "--unit", "item", "--k", "1",
         "--windows", "total", "--engine", "memory", "--json", "-", "--ledger",
         str(tmp_path / "missing.db")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.count("\n") == 1, done.stderr
    assert "ledger file" in done.stderr
    assert "does not exist" in done.stderr
