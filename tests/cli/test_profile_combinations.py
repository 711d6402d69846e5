"""`dpfreq profile`, `dpfreq profile show`, `dpfreq anonymize`, `dpfreq longitudinal` and their
plans with their options in combination (STYLE 20b), in-process on tiny inputs.

* engines: memory and DuckDB give the same release from the same seed (profile: direct and the
  sketch; anonymize: events, an ``item,count`` table and a prevalence CSV of the same counts);
* outputs: ``--save`` × ``--json FILE|-`` × ``--plot``; a saved release shown again by ``dpfreq
  profile show`` is the same release (its JSON byte for byte, its table line for line), with
  nothing spent and nothing written to a ledger; ``show`` refuses an edited file, a file signed
  under another key and the plain ``--json`` document, in one line;
* ``--save`` after the draw: a write that fails keeps the release (a fallback file ``profile
  show`` reads) and its one ledger charge; ``--save`` that cannot be honoured (``--group``, the
  path of ``--json``) is refused before anything is read or spent;
* one-line refusals of bad targets (plan profile, plan longitudinal) and enrolment
  (longitudinal aggregate) that name the option.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli_runner import run_cli
from dpfreq.ledger import Ledger

KEY = "0123456789abcdef" * 4
USERS = ["a"] * 5 + ["b"] * 3 + ["c"] * 3 + ["d", "e", "f"] + ["g"] * 12 + ["h"] * 2


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("profile-combinations") / "log.csv"
    path.write_text("user,campaign\n" + "".join(f"{u},c{i % 2}\n" for i, u in enumerate(USERS)),
                    encoding="utf-8")
    return path


def _profile(log: Path, *extra: Any, method: str = "direct", unit: str = "item",
             engine: str = "duckdb") -> list[Any]:
    return ["profile", log, "--item", "user", "--domain-size", "60", "--max-count", "8",
            "--epsilon", "1", "--unit", unit, "--method", method, "--engine", engine,
            "--seed", "5", *extra]


def _strip_engine(doc: dict[str, Any]) -> dict[str, Any]:
    params = dict(doc["mechanism_params"])
    assert params.pop("engine") in ("memory", "duckdb")
    return {**doc, "mechanism_params": params}


def _table(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith("# dpfreq profile of")]


@pytest.mark.parametrize(("method", "unit"), [("direct", "item"), ("direct", "event"),
                                              ("direct", "item_replace"), ("fft", "event")])
def test_engines_give_the_same_release(log: Path, capsys: pytest.CaptureFixture[str],
                                       method: str, unit: str) -> None:
    docs = []
    for engine in ("memory", "duckdb"):
        code, out, err = run_cli(_profile(log, "--json", "-", method=method, unit=unit,
                                          engine=engine), capsys)
        assert code == 0, err
        docs.append(_strip_engine(json.loads(out)))
    assert docs[0] == docs[1]


def _strip_input(doc: Any) -> Any:
    """``doc`` without the entries that name where it was computed (engine) or read from."""
    if isinstance(doc, dict):
        return {k: _strip_input(v) for k, v in doc.items() if k not in ("engine", "source")}
    if isinstance(doc, list):
        return [_strip_input(v) for v in doc]
    return doc


@pytest.mark.parametrize("grouped", [False, True], ids=["ungrouped", "grouped"])
def test_grouped_and_ungrouped_releases_agree_across_engines(
        log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], grouped: bool) -> None:
    groups = ["--group", "campaign", "--groups", _groups(tmp_path)] if grouped else []
    cases = {"profile": _profile(log, *groups, *(["--max-groups-per-item", "1"] if grouped
                                                  else []), "--json", "-"),
             "anonymize": ["anonymize", log, "--item", "user", "--epsilon", "1", "--unit",
                           "event", "--seed", "5", *groups, "--json", "-"]}
    for name, argv in cases.items():
        docs = []
        for engine in ("memory", "duckdb"):
            code, out, err = run_cli([*argv, "--engine", engine], capsys)
            assert code == 0, (name, err)
            docs.append(_strip_input(json.loads(out)))
        assert docs[0] == docs[1], name


def test_anonymize_reads_events_a_count_column_and_a_prevalence_csv_alike(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One multiset of counts written three ways gives one release (same seed)."""
    counts = {"a": 5, "b": 3, "c": 3, "d": 12, "e": 1}
    events = tmp_path / "events.csv"
    events.write_text("item\n" + "".join(f"{k}\n" * v for k, v in counts.items()),
                      encoding="utf-8")
    table = tmp_path / "table.csv"
    table.write_text("item,n\n" + "".join(f"{k},{v}\n" for k, v in counts.items())
                     + "z,0\n", encoding="utf-8")  # a zero count is no occurrence
    prevalence = tmp_path / "prevalence.csv"
    prevalence.write_text("count,prevalence\n1,1\n3,2\n5,1\n12,1\n", encoding="utf-8")
    common = ["--epsilon", "1", "--unit", "event", "--seed", "3", "--json", "-"]
    runs = [["anonymize", events, "--item", "item", "--engine", "memory", *common],
            ["anonymize", events, "--item", "item", "--engine", "duckdb", *common],
            ["anonymize", table, "--item", "item", "--count", "n", "--engine", "memory",
             *common],
            ["anonymize", table, "--item", "item", "--count", "n", "--engine", "duckdb",
             *common],
            ["anonymize", prevalence, "--prevalence-csv", *common]]
    docs = []
    for argv in runs:
        code, out, err = run_cli(argv, capsys)
        assert code == 0, err
        docs.append(_strip_input(json.loads(out)))
    assert all(doc == docs[0] for doc in docs[1:])


OUTPUTS = {
    "save": [],
    "save json": ["--json", "{d}/out.json"],
    "save json-stdout": ["--json", "-"],
    "save plot": ["--plot", "{d}/out.png"],
    "save json plot": ["--json", "{d}/out.json", "--plot", "{d}/out.png"],
}


@pytest.mark.parametrize("outputs", sorted(OUTPUTS))
@pytest.mark.parametrize(("method", "unit"), [("direct", "item"), ("fft", "event")])
def test_a_saved_release_is_shown_again_as_it_was(log: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str],
                                                  outputs: str, method: str, unit: str) -> None:
    extra = [a.format(d=tmp_path) for a in OUTPUTS[outputs]]
    saved = tmp_path / "release.dpfreq"
    code, out, err = run_cli(_profile(log, *extra, "--save", saved, method=method, unit=unit),
                             capsys)
    assert code == 0, err
    assert f"wrote {saved}" in err
    made = out if "-" in extra else None
    if "-" in extra:  # stdout holds the JSON alone, the table went to stderr
        json.loads(out)
    code, shown, show_err = run_cli(["profile", "show", saved, "--json", tmp_path / "shown.json",
                                     "--plot", tmp_path / "shown.png"], capsys)
    assert code == 0, show_err
    assert "NOT for production" in show_err  # the release was seeded, and says so
    if made is not None:
        assert (tmp_path / "shown.json").read_text(encoding="utf-8").strip() == made.strip()
    if (tmp_path / "out.json").exists():
        assert (tmp_path / "shown.json").read_bytes() == (tmp_path / "out.json").read_bytes()
    assert (tmp_path / "shown.png").read_bytes()[:4] == b"\x89PNG"
    code, again, _ = run_cli(_profile(log, method=method, unit=unit), capsys)
    assert _table(shown) == _table(again)  # the same header and table


def test_show_json_to_stdout_is_the_release_alone(log: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    saved = tmp_path / "r.json"
    code, _, err = run_cli(_profile(log, "--json", tmp_path / "made.json", "--save", saved),
                           capsys)
    assert code == 0, err
    code, out, err = run_cli(["profile", "show", saved, "--json", "-", "--rows", "all"], capsys)
    assert code == 0, err
    assert out == (tmp_path / "made.json").read_text(encoding="utf-8")
    assert "fraction" in err


def _ledger(path: Path, capsys: pytest.CaptureFixture[str], epsilon: str = "10") -> Path:
    code, _, err = run_cli(["ledger", "init", path, "--epsilon", epsilon, "--delta", "0"],
                           capsys)
    assert code == 0, err
    return path


def test_show_of_a_sketch_reconstruction_states_its_method_without_a_blank_reason(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A ProfileSketch's release has no "why" (nothing was chosen): the header said
    "# method mle: " with nothing after the colon."""
    import numpy as np

    from dpfreq.profile import ProfileSketch

    sketch = ProfileSketch(domain_size=60, max_count=6, epsilon=1.0, rng=2)
    sketch.update(np.array([1, 2, 2, 3, 3, 3, 7]))
    saved = sketch.reconstruct(method="mle").save(tmp_path / "sketch-release.json")
    code, out, err = run_cli(["profile", "show", saved], capsys)
    assert code == 0, err
    assert "# method mle\n" in out
    assert "wu-pagh-mle" in out


def test_show_spends_nothing_and_takes_no_ledger(log: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    ledger = _ledger(tmp_path / "budget.db", capsys)
    saved = tmp_path / "r.json"
    code, _, err = run_cli([*_profile(log, "--save", saved), "--ledger", ledger], capsys)
    assert code == 0, err
    assert len(Ledger(ledger).ledger) == 1
    code, _, err = run_cli(["profile", "show", saved], capsys)
    assert code == 0, err
    code, _, err = run_cli(["profile", "show", saved, "--ledger", ledger], capsys)
    assert code == 2
    assert "--ledger" in err
    assert len(Ledger(ledger).ledger) == 1


def test_a_save_failing_after_the_draw_keeps_the_release_and_its_one_charge(
        log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from dpfreq.profile import ProfileRelease

    def full_disk(self: Any, path: Any) -> Any:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ProfileRelease, "save", full_disk)
    monkeypatch.chdir(tmp_path)
    ledger = _ledger(tmp_path / "budget.db", capsys)
    out = tmp_path / "out"
    out.mkdir()
    code, stdout, err = run_cli([*_profile(log, "--json", out / "r.json", "--save",
                                           out / "r.dpfreq"), "--ledger", ledger], capsys)
    assert (code, stdout) == (2, ""), err
    lines = [line for line in err.splitlines() if line.startswith("dpfreq: error:")]
    assert len(lines) == 1, err
    assert "No space left on device" in lines[0], err
    (rescued,) = tmp_path.glob("dpfreq-release-*.json")  # one file: the sealed release
    assert str(rescued) in lines[0]
    monkeypatch.undo()
    rel = ProfileRelease.load(rescued)
    assert rel.to_json() == (out / "r.json").read_text(encoding="utf-8").rstrip("\n")
    rows = Ledger(ledger).ledger
    assert [(r["epsilon"], r["delta"]) for r in rows] == [(rel.epsilon, rel.delta)]
    assert not (out / "r.dpfreq").exists()


@pytest.mark.parametrize("method", ["fft", "mle"])
def test_a_sketch_at_tiny_epsilon_is_refused_before_the_charge(
        log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, method: str) -> None:
    """At ε = 1e-6 the intervals' simulated sketches need hundreds of GiB: the release was
    charged, drew the noise of every item and then died of a MemoryError (an internal error,
    after 50 s): the memory check counted n + 1 entries per simulated sketch, not P. Now
    it is refused in one line naming --epsilon, before anything is spent (64 GiB available)."""
    import dpfreq.resources as resources

    monkeypatch.setattr(resources, "available_memory_bytes", lambda: 64 << 30)
    ledger = _ledger(tmp_path / "budget.db", capsys)
    argv = _profile(log, method=method, unit="event")
    argv[argv.index("--epsilon") + 1] = "1e-6"
    code, out, err = run_cli([*argv, "--ledger", ledger], capsys)
    assert (code, out) == (2, ""), err
    assert "dpfreq: error: --epsilon of dpfreq profile must be large enough for the " \
           "reconstruction's noise window" in err, err
    assert "GiB available); got 1e-06." in err, err
    assert Ledger(ledger).ledger == []


@pytest.mark.parametrize("case", ["group", "same as json"])
def test_a_save_that_cannot_be_honoured_is_refused_before_anything_is_spent(
        log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    ledger = _ledger(tmp_path / "budget.db", capsys)
    target = tmp_path / "r.json"
    extra = (["--group", "campaign", "--groups", _groups(tmp_path), "--max-groups-per-item",
              "1", "--save", target] if case == "group" else ["--json", target, "--save", target])
    code, out, err = run_cli([*_profile(log, *extra), "--ledger", ledger], capsys)
    assert (code, out) == (2, ""), err
    lines = [line for line in err.splitlines() if not line.startswith("dpfreq: warning: --seed")]
    assert len(lines) == 1
    assert lines[0].startswith("dpfreq: error: --save of dpfreq profile")
    assert Ledger(ledger).ledger == []
    assert not target.exists()


def _groups(tmp_path: Path) -> Path:
    path = tmp_path / "groups.txt"
    path.write_text("c0\nc1\n", encoding="utf-8")
    return path


def _saved(log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    saved = tmp_path / "r.json"
    code, _, err = run_cli(_profile(log, "--save", saved), capsys)
    assert code == 0, err
    return saved


def _show_refuses(saved: Path, capsys: pytest.CaptureFixture[str], match: str) -> None:
    code, out, err = run_cli(["profile", "show", saved], capsys)
    assert (code, out) == (2, ""), err
    assert err.count("\n") == 1, err
    assert err.startswith("dpfreq: error: "), err
    assert match in err, err
    assert "Traceback" not in err
    assert "saved to" not in err


def test_show_refuses_an_edited_file(log: Path, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    saved = _saved(log, tmp_path, capsys)
    saved.write_text(saved.read_text(encoding="utf-8").replace('"epsilon": 1.0',
                                                               '"epsilon": 0.5'),
                     encoding="utf-8")
    _show_refuses(saved, capsys, "checksum does not match")


def test_show_refuses_another_key_and_an_unsigned_file_while_a_key_is_set(
        log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    unsigned = _saved(log, tmp_path, capsys)
    monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", KEY)
    _show_refuses(unsigned, capsys, "unsigned files are refused")
    signed = tmp_path / "signed.json"
    code, _, err = run_cli(_profile(log, "--save", signed), capsys)
    assert code == 0, err
    code, _, err = run_cli(["profile", "show", signed], capsys)
    assert code == 0, err
    monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", "e" * 64)
    _show_refuses(signed, capsys, "signature does not match")


def test_show_refuses_the_plain_json_with_the_way_to_save(
        log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = tmp_path / "plain.json"
    code, _, err = run_cli(_profile(log, "--json", plain), capsys)
    assert code == 0, err
    _show_refuses(plain, capsys, "dpfreq profile --save FILE")


def test_show_refuses_to_write_over_the_saved_release(
        log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved = _saved(log, tmp_path, capsys)
    before = saved.read_bytes()
    code, out, err = run_cli(["profile", "show", saved, "--json", saved], capsys)
    assert (code, out) == (2, ""), err
    assert "--json of dpfreq profile show must be another file than SAVED" in err, err
    assert saved.read_bytes() == before


def test_show_failing_to_write_rescues_nothing(log: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A loaded release spent nothing: a write that fails is one line, and no "budget spent"
    fallback file is written for it."""
    saved = _saved(log, tmp_path, capsys)

    def full_disk(*args: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("dpfreq.plotting.save_figure", full_disk)
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(["profile", "show", saved, "--plot", tmp_path / "x.png"], capsys)
    assert (code, out) == (2, ""), err
    assert "No space left on device" in err
    assert "saved to" not in err
    assert list(tmp_path.glob("dpfreq-release-*")) == []


@pytest.mark.parametrize(("argv", "option"), [
    (["plan", "profile", "--domain-size", "100", "--max-count", "5", "--epsilon", "1", "--unit",
      "item", "--target-half-width", "inf"], "--target-half-width"),
    (["plan", "profile", "--domain-size", "100", "--max-count", "5", "--epsilon", "1", "--unit",
      "item", "--target-l1", "nan"], "--target-l1"),
    (["plan", "longitudinal", "--horizon", "8", "--max-changes", "2", "--epsilon", "1",
      "--devices", "1000", "--target-half-width", "inf", "--json", "-"], "--target-half-width"),
])
def test_a_bad_target_is_one_line_naming_its_option_before_any_plan(
        capsys: pytest.CaptureFixture[str], argv: list[str], option: str) -> None:
    code, out, err = run_cli(argv, capsys)
    assert (code, out) == (2, ""), err
    assert err.count("\n") == 1, err
    assert option in err, err
    assert "finite number > 0" in err, err


def test_longitudinal_aggregate_names_devices_for_a_bad_enrolment(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    params = tmp_path / "params.json"
    code, _, err = run_cli(["longitudinal", "params", "--horizon", "8", "--max-changes", "2",
                            "--epsilon", "1", "--method", "futurerand", "--out", params], capsys)
    assert code == 0, err
    reports = tmp_path / "reports.csv"
    reports.write_text("device,order,interval,bit\n", encoding="utf-8")
    for devices in ("5,5,5", "5,5,5,-1", "5,x,5,5"):
        code, out, err = run_cli(["longitudinal", "aggregate", reports, "--params", params,
                                  "--devices", devices], capsys)
        assert (code, out) == (2, ""), err
        assert err.startswith("dpfreq: error: --devices of dpfreq longitudinal aggregate must "
                              "be 4 comma-separated non-negative integers"), err
