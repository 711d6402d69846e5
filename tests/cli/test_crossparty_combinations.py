"""Cross-party sketches as publishers and a measurement vendor use them, in combination
(STYLE 20b): ``dpfreq sketch params|build|merge`` (and the shuffle's ``share``) through main().

* one, two, three parties and an empty one, each merge's output mode (table, ``--json -``,
  ``--json FILE --plot FILE``): the JSON is pure, it is recomputed bit for bit from the saved
  sketches alone, and it states value, ε, δ, unit and relation, mechanism and an error statement
  with its confidence and what it covers; the table has ``K`` rows per entity (``K+`` last);
* sketches of every other public parameter (registers, cap, each ε, reach-only, measurement,
  sampling interval, hash key) or coverage (period, campaigns) are refused in one line naming
  the field, never merged; ``merge --params/--start/--end/--campaigns`` pins what the analyst
  expects; a period of timestamps is recorded in µs and shown in UTC;
* a party with no events (a header-only CSV, an empty mapping or DataFrame) is drawn like any
  other, in every selection and engine;
* large, negative and DECIMAL(p,0) ids, times and campaigns read alike by every engine, a
  DECIMAL with a fraction refused alike;
* one sketch twice, one party twice, two parties drawn from one seed;
* files truncated, flipped or edited × ``DPFREQ_ARTIFACT_KEY`` unset, set or another key;
* the memory and DuckDB engines on CSV and Parquet give the same sketch;
* ``--ledger`` is charged once per build (never by a refused build, never by a merge);
* a missing ε or δ is refused, never defaulted; a tiny ε gives a vacuous release that plots
  without warnings;
* a hand-made :class:`PartySketch` with malformed fields is refused in one line.
"""

from __future__ import annotations

import json
import math
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cli_runner import run_cli
from dpfreq.budget import Accountant, PrivacyBudget
from dpfreq.crossparty import (
    Coverage,
    CrossPartyParams,
    PartySketch,
    build_sketch,
    key_fingerprint,
    merge_sketches,
    read_hash_key,
    write_hash_key,
)
from dpfreq.errors import DataError, ParameterError
from dpfreq.ledger import Ledger
from dpfreq.release import RELATIONS

KEY_A = "ab" * 32  # artefact keys (DPFREQ_ARTIFACT_KEY), hex
KEY_B = "cd" * 32
K = 3


@pytest.fixture(autouse=True)
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DPFREQ_ARTIFACT_KEY", raising=False)


@dataclass(frozen=True)
class World:
    """Logs, keys, parameter files and sketches written once for the module."""

    root: Path
    key: Path
    other_key: Path
    params: Path  # R = 256, K = 3, epsilon 1 + 2
    variants: dict[str, Path]  # sketch of party "v" under parameters differing in one field

    def sketch(self, party: str) -> Path:
        return self.root / f"{party}.sketch"


def _params(key: bytes, **changes: object) -> CrossPartyParams:
    fields: dict[str, object] = {
        "measurement": "spring", "registers": 256, "sampling_start": 0, "sampling_width": 1,
        "max_frequency": K, "epsilon_reach": 1.0, "epsilon_frequency": 2.0,
        "hash": "sha256-prefix/v1", "key_id": key_fingerprint(key)}
    fields.update(changes)
    return CrossPartyParams(**fields)  # type: ignore[arg-type]


#: the field a variant changes -> (the changes, the key it is built with: "key" or "other")
VARIANTS = {
    "registers": ({"registers": 512}, "key"),
    "max_frequency": ({"max_frequency": 4}, "key"),
    "epsilon_reach": ({"epsilon_reach": 0.5}, "key"),
    "epsilon_frequency": ({"epsilon_frequency": 1.0}, "key"),
    "reach-only": ({"epsilon_frequency": None}, "key"),
    "measurement": ({"measurement": "autumn"}, "key"),
    "sampling_width": ({"sampling_width": "1/2"}, "key"),
    "key_id": ({}, "other"),
}
#: the coverage field a variant changes -> the rows of the log it counts (build_sketch's
#: arguments); the base sketches count every row
COVERAGE_VARIANTS = {
    "period": {"time": "day", "period": (0, 20)},
    "campaigns": {"campaign": "campaign", "campaigns": ["x"]},
}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("crossparty-combinations")
    g = np.random.default_rng(20)
    spans = {"a": (0, 300), "b": (200, 500), "c": (400, 800)}
    for party, (lo, hi) in spans.items():
        users = g.integers(lo, hi, 3 * (hi - lo))
        frame = pd.DataFrame({"user": users, "day": g.integers(0, 30, users.size),
                              "campaign": g.choice(["x", "y"], users.size)})
        frame.to_csv(root / f"{party}.csv", index=False)
        frame.to_parquet(root / f"{party}.parquet")
    with pytest.MonkeyPatch.context() as mp:  # a module fixture cannot take monkeypatch
        mp.delenv("DPFREQ_ARTIFACT_KEY", raising=False)
        key, other = bytes(range(32)), bytes(range(1, 33))  # fixed: a reproducible module
        write_hash_key(root / "hash.key", key)
        write_hash_key(root / "other.key", other)
        base = _params(key)
        base.save(root / "params.json")
        for i, party in enumerate(spans):
            build_sketch(str(root / f"{party}.csv"), user="user", party=party, params=base,
                         key=key, rng=10 + i).save(root / f"{party}.sketch")
        # a party with no impression: an empty publisher (a header-only CSV)
        (root / "empty.csv").write_text("user,day,campaign\n", encoding="utf-8")
        build_sketch(str(root / "empty.csv"), user="user", party="empty", params=base,
                     key=key, rng=13).save(root / "empty.sketch")
        variants = {}
        for name, (changes, which) in VARIANTS.items():
            k = key if which == "key" else other
            path = root / f"variant-{name}.sketch"
            build_sketch(str(root / "b.csv"), user="user", party="v", params=_params(k, **changes),
                         key=k, rng=30).save(path)
            variants[name] = path
        for name, rows in COVERAGE_VARIANTS.items():
            path = root / f"variant-{name}.sketch"
            build_sketch(str(root / "b.csv"), user="user", party="v", params=base, key=key,
                         rng=31, **rows).save(path)  # type: ignore[arg-type]
            variants[name] = path
    return World(root, root / "hash.key", root / "other.key", root / "params.json", variants)


def _one_line_error(code: int, err: str) -> str:
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("dpfreq: error:")
    assert "Traceback" not in err
    return lines[0]


# -- merges of one, two, three parties and an empty one, in every output mode --------------

SUBSETS = [("a",), ("a", "b"), ("a", "b", "c"), ("a", "b", "c", "empty"), ("empty",)]


@pytest.mark.parametrize("parties", SUBSETS, ids=["+".join(s) for s in SUBSETS])
@pytest.mark.parametrize("mode", ["table", "json-stdout", "json-file+plot"])
def test_merge_outputs_are_complete_and_recomputed_from_the_files(
        world: World, parties: tuple[str, ...], mode: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(world.sketch(p)) for p in parties]
    extra = {"table": [], "json-stdout": ["--json", "-"],
             "json-file+plot": ["--json", tmp_path / "r.json", "--plot", tmp_path / "r.png"]}
    code, out, err = run_cli(["sketch", "merge", *files, *extra[mode]], capsys)
    assert code == 0, err
    assert "warning" not in err.lower()
    table = out if mode != "json-stdout" else err  # the table goes where the JSON is not
    rows = [line.split("\t") for line in table.splitlines() if not line.startswith("#")]
    assert rows[0] == ["entity", "k", "reach", "lower", "upper"]
    assert [r[1] for r in rows[1:1 + K]] == ["1+", "2+", "3+"]  # K rows, the cap last
    assert len([r for r in rows if r[1].endswith("+")]) == K * (1 + len(parties))
    header = table.splitlines()[0]
    assert "epsilon=3, delta=0 per party" in header
    assert "unit=item" in header
    assert "NOT for production" in table  # the sketches were seeded
    if mode == "table":
        return
    text = out if mode == "json-stdout" else (tmp_path / "r.json").read_text(encoding="utf-8")
    doc = json.loads(text)  # pure JSON: nothing else on stdout
    if mode == "json-file+plot":
        assert (tmp_path / "r.png").stat().st_size > 0
    # every published number is post-processing of the saved sketches: recomputed bit for bit
    assert json.loads(merge_sketches(files, confidence=0.95).to_json()) == doc
    assert (doc["epsilon"], doc["delta"], doc["unit"]) == (3.0, 0.0, "item")
    assert doc["mechanism"] == "crossparty-local-noise"
    assert doc["relation"].startswith(RELATIONS["item"] + " (item = one user")
    assert "j*epsilon" in doc["relation"]
    assert doc["error"]["confidence"] == 0.95
    assert "interval of each k+ reach of the union" in doc["error"]["description"]
    assert "party_lower/upper are the same intervals" in doc["error"]["description"]
    assert len(doc["value"]) == K
    assert len(doc["error"]["lower"]) == K
    assert doc["parties"] == list(parties)
    assert doc["seeded"] is True
    assert doc["mechanism_params"]["coverage"] == {"period": None, "period_unit": None,
                                                   "campaigns": None}


def test_the_json_of_a_merge_never_depends_on_the_order_of_the_checks(
        world: World, capsys: pytest.CaptureFixture[str]) -> None:
    """Loaded from files or held in memory, the same sketches give the same bytes."""
    files = [world.sketch(p) for p in ("a", "b", "c")]
    loaded = [PartySketch.load(f) for f in files]
    assert merge_sketches(loaded).to_json() == merge_sketches([str(f) for f in files]).to_json()


# -- never merge sketches of other parameters --------------------------------------------

@pytest.mark.parametrize("variant", [*VARIANTS, *COVERAGE_VARIANTS])
def test_merge_refuses_other_parameters_naming_the_field(
        world: World, variant: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Sketches of other periods or campaigns were merged as if they measured the same thing:
    a sketch now records its coverage, and a merge refuses a mismatch like any parameter's."""
    field = "epsilon_frequency" if variant == "reach-only" else variant
    for order in ([world.sketch("a"), world.variants[variant]],
                  [world.variants[variant], world.sketch("a")]):
        code, out, err = run_cli(["sketch", "merge", *order, "--json", "-"], capsys)
        line = _one_line_error(code, err)
        assert out == ""
        assert f"has {field} " in line
        assert "same parameters and coverage" in line
        assert f"the first has {field} " in line
        assert "None" not in line  # a sketch of every time says so, not Python's None
    with pytest.raises(ParameterError, match=f"has {field} "):
        merge_sketches([str(world.sketch("a")), str(world.variants[variant])])


def test_a_period_of_timestamps_is_recorded_in_microseconds_and_shown_in_utc(
        world: World) -> None:
    """The same bounds as integers of the time column are another coverage (period_unit)."""
    import datetime as dt


    key = read_hash_key(world.key)
    log = {"user": np.array([1, 2]), "ts": np.array(["2026-03-01", "2026-03-02"],
                                                    dtype="datetime64[us]")}
    start, end = dt.date(2026, 3, 1), dt.datetime(2026, 4, 1, tzinfo=dt.UTC)
    made = build_sketch(log, user="user", party="t", params=_params(key), key=key, time="ts",
                        period=(start, end), rng=1)
    assert made.coverage.period_unit == "microseconds"
    assert made.coverage.describe() == "period [2026-03-01T00:00:00Z, 2026-04-01T00:00:00Z)"
    assert "2026-03-01T00:00:00Z" in repr(made)
    same_numbers = Coverage(period=made.coverage.period, period_unit="integer")
    with pytest.raises(ParameterError, match="has period_unit 'microseconds', expected "
                                             "'integer'"):
        merge_sketches([made], coverage=same_numbers)
    assert merge_sketches([made], coverage=made.coverage).parties == ("t",)
    # a period is named as the sketch states it (UTC, or of the time column), never as raw µs
    with pytest.raises(ParameterError, match=r"has period \[2026-03-01T00:00:00Z, "
                                             r"2026-04-01T00:00:00Z\), expected \[0, 28\) "
                                             r"of the time column\)"):
        merge_sketches([made], coverage=Coverage(period=(0, 28), period_unit="integer"))
    # a period of dates over a column of integers (or integer bounds over timestamps) counted
    # no row and stated the period: refused in one line, on every engine, before the charge
    acct = Accountant(PrivacyBudget(100.0))
    days = {"user": np.array([1, 2]), "ts": np.array([0, 3])}
    for source, period in ((days, (start, end)), (log, (0, 28))):
        for engine, read in (("memory", dict), ("duckdb", pd.DataFrame)):
            with pytest.raises(DataError, match=r"^time of build_sketch must be a column of "
                                                r"(integers|timestamps or dates) .*; got "):
                build_sketch(read(source), user="user", party="t", params=_params(key),
                             key=key, time="ts", period=period, engine=engine,
                             accountant=acct, rng=1)
    with pytest.raises(ParameterError, match="two integers or two dates"):  # not 'start < end'
        build_sketch(days, user="user", party="t", params=_params(key), key=key, time="ts",
                     period=(start, 28), accountant=acct, rng=1)
    assert acct.spent.epsilon == 0
    with pytest.raises(ParameterError, match=r"has period every time \(no period given\), "
                                             r"the first has period \[2026-03-01T00:00:00Z, "):
        merge_sketches([made, build_sketch(log, user="user", party="u", params=_params(key),
                                           key=key, rng=2)])


#: merge's pins of the coverage (a's, b's and c's: every row), and each variant's own
PINS = {"period": ["--start", "0", "--end", "20"], "campaigns": ["--campaigns", "x"]}


@pytest.mark.parametrize("variant", [*VARIANTS, *COVERAGE_VARIANTS])
def test_merge_pins_the_parameters_and_coverage_the_analyst_expects(
        world: World, variant: str, capsys: pytest.CaptureFixture[str]) -> None:
    """'merge' had no --params: one sketch, or sketches agreeing among themselves, of other
    parameters than the analyst's were merged. --params, --start/--end and --campaigns pin
    them, as 'build' takes them."""
    # a coverage variant pinned to the other's coverage: the period differs first
    field = {"reach-only": "epsilon_frequency", "campaigns": "period"}.get(variant, variant)
    alone = [world.variants[variant]]
    line = _one_line_error(*run_cli(["sketch", "merge", *alone, "--params", world.params],
                                    capsys)[::2] if variant in VARIANTS else run_cli(
        ["sketch", "merge", *alone, "--params", world.params, *PINS[
            "campaigns" if variant == "period" else "period"]], capsys)[::2])
    assert f"sketch 1, party 'v', has {field} " in line
    assert "expected parameters and coverage" in line
    if variant in COVERAGE_VARIANTS:  # pinned to its own coverage and the parameters: merged
        code, out, err = run_cli(["sketch", "merge", *alone, "--params", world.params,
                                  *PINS[variant]], capsys)
        assert code == 0, err
        assert "# measurement 'spring' covering " + (
            "period [0, 20) of the time column" if variant == "period" else
            "campaigns x") in out
    code, out, err = run_cli(["sketch", "merge", world.sketch("a"), "--params", world.params],
                             capsys)
    assert code == 0, err
    assert "covering every row of the log" in out


# -- the same publisher twice ---------------------------------------------------------------

def test_one_sketch_twice_and_one_party_twice_are_refused(
        world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = world.sketch("a")
    line = _one_line_error(*run_cli(["sketch", "merge", a, a], capsys)[::2])
    assert "appears twice" in line
    copy = tmp_path / "copy.sketch"
    copy.write_bytes(a.read_bytes())
    assert "appears twice" in _one_line_error(*run_cli(["sketch", "merge", a, copy],
                                                       capsys)[::2])
    again = tmp_path / "again.sketch"  # party a's log noised a second time
    code, _, err = run_cli(["sketch", "build", world.root / "a.csv", "--party", "a",
                            "--params", world.params, "--key", world.key, "--user", "user",
                            "--out", again, "--seed", "99"], capsys)
    assert code == 0, err
    line = _one_line_error(*run_cli(["sketch", "merge", a, world.sketch("b"), again],
                                    capsys)[::2])
    assert "party 'a' has two" in line


def test_two_parties_drawn_from_one_seed_are_named_both(
        world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for party in ("tv", "web"):
        code, _, err = run_cli(["sketch", "build", world.root / f"{'a' if party == 'tv' else 'b'}"
                                ".csv", "--party", party, "--params", world.params, "--key",
                                world.key, "--user", "user", "--out",
                                tmp_path / f"{party}.sketch", "--seed", "5"], capsys)
        assert code == 0, err
    line = _one_line_error(*run_cli(["sketch", "merge", tmp_path / "tv.sketch",
                                     tmp_path / "web.sketch"], capsys)[::2])
    assert "of party 'web' is also that of party 'tv'" in line
    assert "seed" in line


# -- files tampered with, truncated, and the artefact key ------------------------------------

def _tamper(src: Path, dst: Path, how: str) -> None:
    data = src.read_bytes()
    if how == "intact":
        dst.write_bytes(data)
    elif how == "truncated":
        dst.write_bytes(data[: len(data) // 2])
    elif how == "flipped":
        flipped = bytearray(data)
        flipped[len(flipped) // 2] ^= 0x01
        dst.write_bytes(bytes(flipped))
    else:  # "edited": the party renamed inside a well-formed zip
        with zipfile.ZipFile(src) as z:
            members = {n: z.read(n) for n in z.namelist()}
        head = json.loads(members["__header__.json"])
        head["meta"]["party"] = "someone-else"
        members["__header__.json"] = json.dumps(head).encode()
        with zipfile.ZipFile(dst, "w") as z:
            for name, body in members.items():
                z.writestr(name, body)


@pytest.mark.parametrize("how", ["intact", "truncated", "flipped", "edited"])
@pytest.mark.parametrize("written", [None, KEY_A])
@pytest.mark.parametrize("read", [None, KEY_A, KEY_B])
def test_tampered_files_and_artefact_keys(world: World, tmp_path: Path, how: str,
                                          written: str | None, read: str | None,
                                          monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    sketch = PartySketch.load(world.sketch("b"))
    if written is not None:
        monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", written)
    sketch.save(tmp_path / "written.sketch")
    _tamper(tmp_path / "written.sketch", tmp_path / "b.sketch", how)
    monkeypatch.delenv("DPFREQ_ARTIFACT_KEY", raising=False)
    if read is not None:
        monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", read)
    code, out, err = run_cli(["sketch", "merge", world.sketch("a") if read is None else
                              _resigned(world.sketch("a"), tmp_path), tmp_path / "b.sketch",
                              "--json", "-"], capsys)
    if how == "intact" and written == read:
        assert code == 0, err
        assert json.loads(out)["parties"] == ["a", "b"]
    else:
        line = _one_line_error(code, err)
        assert "b.sketch" in line
        assert "not a valid dpfreq crossparty-sketch file" in line
        assert out == ""


def _resigned(path: Path, tmp: Path) -> Path:
    """``path`` saved again under the current DPFREQ_ARTIFACT_KEY (party a, the good one)."""
    import os

    key = os.environ.pop("DPFREQ_ARTIFACT_KEY")
    try:
        sketch = PartySketch.load(path)
    finally:
        os.environ["DPFREQ_ARTIFACT_KEY"] = key
    return sketch.save(tmp / "a.sketch")


# -- engines --------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize("selection", [[], ["--time", "day", "--start", "3", "--end", "20",
                                            "--campaign", "campaign", "--campaigns", "x"]])
def test_memory_and_duckdb_build_the_same_sketch(world: World, tmp_path: Path, fmt: str,
                                                 selection: list[str],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    got = {}
    for engine in ("memory", "duckdb"):
        code, _, err = run_cli(["sketch", "build", world.root / f"c.{fmt}", "--party", "c",
                                "--params", world.params, "--key", world.key, "--user", "user",
                                *selection, "--out", tmp_path / f"{engine}.sketch", "--seed",
                                "4", "--engine", engine], capsys)
        assert code == 0, err
        got[engine] = PartySketch.load(tmp_path / f"{engine}.sketch")
    m, d = got["memory"], got["duckdb"]
    assert (m.engine, d.engine) == ("memory", "duckdb")
    assert m.sketch_id == d.sketch_id
    assert np.array_equal(m.reach_bits, d.reach_bits)
    assert np.array_equal(m.frequency, d.frequency)  # type: ignore[arg-type]


@pytest.mark.parametrize("ids", ["uint64", "python-int", "ints-and-text", "decimals"])
def test_ids_beyond_int64_land_in_the_same_registers_in_every_engine(
        world: World, tmp_path: Path, ids: str, capsys: pytest.CaptureFixture[str]) -> None:
    """An id is its decimal text in every engine: the memory engine once wrapped an unsigned
    id at or above 2^63 to a negative int64 (another register than DuckDB's), raised
    OverflowError on Python integers beyond int64, and refused integers mixed with text
    (which DuckDB reads as text), and Python Decimals without a fraction digit (DuckDB's
    DECIMAL(p,0))."""
    import decimal

    values = [2**64 - 1, 2**63 + 5, 5, 5, 2**63 + 5, 12]
    column = {"uint64": np.array(values, dtype=np.uint64),
              "python-int": np.array([*values, -3], dtype=object),
              "ints-and-text": np.array([*values, "5", "abc", -3], dtype=object),
              "decimals": np.array([decimal.Decimal(v) for v in [*values, -3]],
                                   dtype=object)}[ids]
    key = read_hash_key(world.key)
    params = _params(key)
    as_text = build_sketch({"user": np.array([str(v) for v in column.tolist()])}, user="user",
                           party="t", params=params, key=key, rng=8)
    got = [build_sketch({"user": column}, user="user", party="t", params=params, key=key,
                        rng=8, engine="memory"),
           build_sketch(pd.DataFrame({"user": column}), user="user", party="t", params=params,
                        key=key, rng=8, engine="duckdb")]
    if ids == "uint64":
        pd.DataFrame({"user": column}).to_parquet(tmp_path / "big.parquet")
        for engine in ("memory", "duckdb"):
            code, _, err = run_cli(["sketch", "build", tmp_path / "big.parquet", "--party", "t",
                                    "--params", world.params, "--key", world.key, "--user",
                                    "user", "--out", tmp_path / f"{engine}.sketch", "--seed",
                                    "8", "--engine", engine], capsys)
            assert code == 0, err
            got.append(PartySketch.load(tmp_path / f"{engine}.sketch"))
    for sketch in got:
        assert np.array_equal(sketch.reach_bits, as_text.reach_bits)
        assert np.array_equal(sketch.frequency, as_text.frequency)  # type: ignore[arg-type]


#: a column of each kind of large or decimal integer, as Parquet holds them: (type, values)
DECIMAL_IDS = {
    "uint64": ("uint64", [2**64 - 1, 2**63 + 5, 5, 5, 12]),
    "negative": ("int64", [-(2**63), -3, 5, 5, 12]),
    "decimal(20,0)": ("decimal(20,0)", [2**64 - 1, 2**63 + 5, 5, 5, -12]),
    "decimal(38,0)": ("decimal(38,0)", [10**37, -(10**37), 5, 5, 12]),
    "decimal(10,2)": ("decimal(10,2)", ["1.50", "2", "5", "5", "12"]),
}


def _decimal_log(path: Path, role: str, kind: str) -> None:
    import decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    ty, values = DECIMAL_IDS[kind]
    arrow = (pa.array(values, getattr(pa, ty)()) if not ty.startswith("decimal") else
             pa.array([decimal.Decimal(v) for v in values],
                      pa.decimal128(*map(int, ty[8:-1].split(",")))))
    columns = {"user": pa.array([1, 2, 3, 4, 5], pa.int64()),
               "day": pa.array([-1, 2, 3, 4, 5], pa.int64()),
               "campaign": pa.array(["5"] * 5)}
    columns[role] = arrow
    pq.write_table(pa.table(columns), path)


@pytest.mark.parametrize("kind", list(DECIMAL_IDS))
@pytest.mark.parametrize("role", ["user", "day", "campaign"])
def test_large_and_decimal_integer_columns_are_read_alike_by_every_engine(
        world: World, tmp_path: Path, role: str, kind: str) -> None:
    """DuckDB reads an unsigned 64-bit or decimal Parquet column (Spark's uint64, a sum) as
    DECIMAL(p,0): once refused there (and for times and campaigns by the memory engine too)
    where Spark took it, while the memory engine hashed a DECIMAL(10,2) id as the text '1.50',
    refused a mapping of Python Decimals, and wrapped an unsigned time at or above 2^63
    negative, into a period below 0. Now every
    engine counts DECIMAL(p,0) as the integer it is and refuses a DECIMAL with a fraction in the
    same line (Spark: tests/engines/test_crossparty_engines.py)."""
    from dpfreq.crossparty.registers import check_log_spec, register_frequencies
    from dpfreq.errors import DataError

    _decimal_log(tmp_path / "log.parquet", role, kind)
    key = read_hash_key(world.key)
    spec = check_log_spec(user="user", time="day", period=(-5, 2**62), campaign="campaign",
                          campaigns=["5", "12", "-12"])
    got = {}
    for engine in ("memory", "duckdb"):
        try:
            got[engine] = register_frequencies(str(tmp_path / "log.parquet"), spec=spec,
                                               params=_params(key), key=key,
                                               engine=engine).values.tolist()
        except DataError as exc:
            got[engine] = str(exc)
    assert got["memory"] == got["duckdb"]
    frame = pd.read_parquet(tmp_path / "log.parquet")  # decimals as Python Decimal objects
    try:
        got["mapping"] = register_frequencies({c: frame[c].to_numpy() for c in frame},
                                              spec=spec, params=_params(key), key=key,
                                              engine="memory").values.tolist()
    except DataError as exc:  # refused too (the dtype named: object)
        got["mapping"] = str(exc)
    assert isinstance(got["mapping"], str) == isinstance(got["duckdb"], str)
    assert got["mapping"] == got["duckdb"] or isinstance(got["duckdb"], str)
    if kind == "decimal(10,2)" and role == "day":
        assert got["duckdb"] == ("time column 'day' of register_frequencies must hold "
                                 "integers or timestamps; got type DECIMAL(10,2).")
    elif kind == "decimal(10,2)":  # an id column: the one message of every engine
        assert got["duckdb"] == (f"column {role!r} of the source must be a column of integers "
                                 "or text (an integer, DECIMAL(p,0) included, is the id of its "
                                 "decimal text; a fraction, a float, a time or a boolean is no "
                                 "id); got type DECIMAL(10,2).")
    else:  # the rows counted (5 users in 256 registers, each under the cap K = 3)
        rows = {"user": 5, "campaign": 3}.get(role) or {
            "uint64": 3, "negative": 4, "decimal(20,0)": 2, "decimal(38,0)": 3}[kind]
        assert sum(got["memory"]) == rows  # type: ignore[arg-type]


def test_categorical_ids_and_campaigns_are_their_labels_in_every_engine(world: World) -> None:
    """A pandas categorical (a DuckDB ENUM) counts as its labels' text, as in the memory
    engine (DuckDB refused it)."""
    g = np.random.default_rng(31)
    users = [f"u{i}" for i in g.integers(0, 300, 900)]
    campaigns = g.choice(["x", "y", "z"], 900)
    key = read_hash_key(world.key)
    params = _params(key)
    kwargs = {"user": "user", "party": "t", "params": params, "key": key, "campaign": "c",
              "campaigns": ["x", "y"], "rng": 9}
    as_text = build_sketch({"user": np.array(users), "c": campaigns}, **kwargs)
    frame = pd.DataFrame({"user": pd.Categorical(users), "c": pd.Categorical(campaigns)})
    for engine in ("memory", "duckdb"):
        got = build_sketch(frame, engine=engine, **kwargs)
        assert np.array_equal(got.reach_bits, as_text.reach_bits)
        assert np.array_equal(got.frequency, as_text.frequency)  # type: ignore[arg-type]


# -- a party with no events -----------------------------------------------------------------

EMPTY_SELECTIONS = {"all rows": [], "period": ["--time", "day", "--start", "0", "--end", "9"],
                    "campaigns": ["--campaign", "campaign", "--campaigns", "x"]}


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
@pytest.mark.parametrize("selection", list(EMPTY_SELECTIONS))
def test_a_publisher_with_no_events_is_drawn_not_refused(
        world: World, tmp_path: Path, engine: str, selection: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A header-only CSV (no types to read: DuckDB says VARCHAR) was refused as a time column
    of the wrong type; a party with no events has all-zero registers, and its sketch is drawn
    from them like any other (Spark: tests/engines/test_crossparty_engines.py)."""
    from dpfreq.crossparty.sketch import draw_sketch
    from dpfreq.rng import resolve_rng

    (tmp_path / "none.csv").write_text("user,day,campaign\n", encoding="utf-8")
    code, _, err = run_cli(["sketch", "build", tmp_path / "none.csv", "--party", "none",
                            "--params", world.params, "--key", world.key, "--user", "user",
                            *EMPTY_SELECTIONS[selection], "--out", tmp_path / "none.sketch",
                            "--seed", "6", "--engine", engine], capsys)
    assert code == 0, err
    assert "none.csv has no data rows; the release is the sketch of an empty data set" in err
    got = PartySketch.load(tmp_path / "none.sketch")
    params = CrossPartyParams.load(world.params)
    zeros = draw_sketch(np.zeros(params.registers, dtype=np.int64), params=params,
                        party="none", rng=resolve_rng(6), engine=engine)
    assert np.array_equal(got.reach_bits, zeros.reach_bits)
    assert np.array_equal(got.frequency, zeros.frequency)  # type: ignore[arg-type]
    key = read_hash_key(world.key)
    for source in ({"user": [], "day": []}, pd.DataFrame({"user": [], "day": []})):
        api = build_sketch(source, user="user", party="none", params=params, key=key,
                           time="day", period=(0, 9), rng=6,
                           engine="memory" if isinstance(source, dict) else engine)
        assert np.array_equal(api.frequency, zeros.frequency)  # type: ignore[arg-type]


# -- the budget -----------------------------------------------------------------------------

def test_ledger_is_charged_once_per_build_and_never_by_a_merge(
        world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ledger = tmp_path / "budget.db"
    Ledger.create(ledger, PrivacyBudget(10.0))

    def build(party: str, *extra: object) -> tuple[int, str, str]:
        return run_cli(["sketch", "build", world.root / f"{party}.csv", "--party", party,
                        "--params", world.params, "--key", world.key, "--out",
                        tmp_path / f"{party}.sketch", "--ledger", ledger, *extra], capsys)

    assert build("a", "--user", "user")[0] == 0
    assert build("b", "--user", "user")[0] == 0
    assert Ledger(ledger).spent.epsilon == pytest.approx(6.0)
    assert len(Ledger(ledger).ledger) == 2
    _one_line_error(*build("c", "--user", "nope")[::2])  # refused on its data: no charge
    assert not (tmp_path / "c.sketch").exists()
    code, _, err = run_cli(["sketch", "merge", tmp_path / "a.sketch", tmp_path / "b.sketch"],
                           capsys)
    assert code == 0, err
    code, _, err = run_cli(["sketch", "merge", tmp_path / "a.sketch", "--ledger", ledger],
                           capsys)
    assert code == 2
    assert "--ledger" in err
    assert len(Ledger(ledger).ledger) == 2
    assert Ledger(ledger).spent.epsilon == pytest.approx(6.0)


# -- privacy parameters: never defaulted ---------------------------------------------------

PARAMS_ARGV = ["--measurement", "m", "--registers", "256", "--sampling-start", "0",
               "--sampling-width", "1", "--max-frequency", "3"]


@pytest.mark.parametrize(("command", "given", "missing"), [
    ("params", ["--epsilon-frequency", "1"], "--epsilon-reach"),
    ("params", ["--epsilon-reach", "1"], "--epsilon-frequency"),
    ("shuffle-params", ["--delta", "1e-9"], "--epsilon"),
    ("shuffle-params", ["--epsilon", "1"], "--delta"),
])
def test_a_missing_epsilon_or_delta_is_refused(world: World, command: str, given: list[str],
                                               missing: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    shuffle = ["--party", "a", "--histograms", "union", "--deadline", "2030-01-01"]
    code, out, err = run_cli(["sketch", command, *PARAMS_ARGV, *given,
                              *(shuffle if command == "shuffle-params" else []),
                              "--key", world.key, "--out", "-"], capsys)
    line = _one_line_error(code, err)
    assert missing in line
    assert out == ""


def test_a_refused_sampling_width_echoes_what_was_given(
        world: World, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["sketch", "params", "--measurement", "m", "--registers", "256",
                            "--sampling-start", "0", "--sampling-width", "1e-300",
                            "--max-frequency", "3", "--epsilon-reach", "1",
                            "--epsilon-frequency", "1", "--key", world.key, "--out", "-"], capsys)
    line = _one_line_error(code, err)
    assert line.endswith("got '1e-300'.")


def test_a_tiny_epsilon_gives_a_vacuous_release_that_plots_cleanly(
        world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = read_hash_key(world.key)
    params = _params(key, epsilon_reach=1e-6, epsilon_frequency=1e-6)
    sketch = build_sketch(str(world.root / "c.csv"), user="user", party="c", params=params,
                          key=key, rng=3)
    sketch.save(tmp_path / "c.sketch")
    code, out, err = run_cli(["sketch", "merge", tmp_path / "c.sketch", "--json", "-",
                              "--plot", tmp_path / "c.png"], capsys)
    assert code == 0, err
    assert "warning" not in err.lower()  # no RuntimeWarning of inf - inf in the plot
    assert "VACUOUS" in err
    doc = json.loads(out)
    assert doc["error"]["vacuous"] is True
    assert math.isinf(float(doc["error"]["upper"][0]))
    assert "infinite upper end" in doc["error"]["description"]


def test_a_saturated_release_plots_without_runtime_warnings(world: World) -> None:
    import warnings

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    key = read_hash_key(world.key)
    params = _params(key, epsilon_reach=1e-6, epsilon_frequency=1e-6)
    rel = merge_sketches([build_sketch({"user": np.arange(400)}, user="user", party="c",
                                       params=params, key=key, rng=1)])
    assert math.isinf(rel.reach)
    assert math.isinf(float(rel.error.upper[0]))
    with np.errstate(all="warn"), warnings.catch_warnings():
        warnings.simplefilter("error")
        ax = rel.plot()
    plt.close(ax.figure)


# -- a hand-made sketch ---------------------------------------------------------------------

R = 256


@pytest.mark.parametrize(("changes", "field"), [
    ({"reach_bits": np.zeros(5, dtype=np.uint8)}, "reach_bits"),
    ({"reach_bits": np.full(R, 2, dtype=np.uint8)}, "reach_bits"),
    ({"reach_bits": np.full(R, -1)}, "reach_bits"),
    ({"frequency": None}, "frequency"),
    ({"frequency": np.zeros(3, dtype=np.int64)}, "frequency"),
    ({"frequency": np.zeros(R)}, "frequency"),
    ({"sketch_id": "x"}, "sketch_id"),
    ({"party": ""}, "party"),
    ({"seeded": 1}, "seeded"),
    ({"engine": None}, "engine"),
    ({"coverage": None}, "coverage"),
])
def test_a_malformed_sketch_is_refused_in_one_line(world: World, changes: dict[str, object],
                                                   field: str) -> None:
    good = PartySketch.load(world.sketch("b"))
    with pytest.raises(ParameterError) as info:
        good.replace(**changes)
    text = str(info.value)
    assert text.startswith(f"{field} of PartySketch must be ")
    assert "\n" not in text


@pytest.mark.parametrize("values", [np.full(R, K + 1), np.full(R, -1), np.zeros(R - 1, int),
                                    np.zeros(R)])
def test_the_mechanism_takes_only_capped_frequencies(world: World, values: np.ndarray) -> None:
    """draw_sketch calibrates to values in 0..K; others would void the guarantee (and the
    message shows no value: they are exact)."""
    from dpfreq.crossparty.sketch import draw_sketch
    from dpfreq.rng import resolve_rng

    params = _params(read_hash_key(world.key))
    with pytest.raises(ParameterError, match="values of draw_sketch must be 256 integers in "
                                             r"0\.\.3") as info:
        draw_sketch(values, params=params, party="p", rng=resolve_rng(0), engine="sim")
    assert "got 'an array of shape" in str(info.value)


def test_reach_only_sketches_refuse_frequency_registers(world: World) -> None:
    reach_only = PartySketch.load(world.variants["reach-only"])
    with pytest.raises(ParameterError, match="frequency of PartySketch must be None"):
        reach_only.replace(frequency=np.zeros(R, dtype=np.int64))
    assert reach_only.replace(reach_bits=np.zeros(R, dtype=bool)).reach_bits.dtype == np.uint8


@pytest.mark.parametrize("noise", [(False, False), (True,), (1, 0), "yes"])
@pytest.mark.parametrize("run", ["simulate_shuffle", "run_protocol"])
def test_a_simulated_shuffle_never_releases_without_dummies(run: str, noise: object) -> None:
    """A release states (epsilon, delta): with neither worker's dummies it would be exact."""
    from dpfreq.crossparty import shuffle

    params = shuffle.ShuffleParams(
        measurement="m", registers=64, sampling_start=0, sampling_width=1, max_frequency=3,
        epsilon=1.0, delta=1e-9, parties=["tv", "web"], per_party=False,
        coverage=Coverage(), deadline="2030-01-01", hash="sha256-prefix/v1", key_id="0" * 32)
    with pytest.raises(ParameterError, match=f"worker_noise of {run} must be a pair of bools"):
        getattr(shuffle, run)(np.ones((2, 64), dtype=np.int64), params=params,
                              confidence=0.9, rng=0, worker_noise=noise)


# -- the shuffle's party --------------------------------------------------------------------

def test_share_checks_its_state_path_before_reading_the_log(
        world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    params = tmp_path / "shuffled.json"
    code, _, err = run_cli(["sketch", "shuffle-params", *PARAMS_ARGV, "--epsilon", "1",
                            "--delta", "1e-9", "--party", "a", "--histograms", "union",
                            "--deadline", "2030-01-01", "--key", world.key, "--out", params],
                           capsys)
    assert code == 0, err
    tokens = []
    for i in (0, 1):
        tokens += ["--token-file", tmp_path / f"t{i}"]
        (tmp_path / f"t{i}").write_text("token\n", encoding="utf-8")
    code, _, err = run_cli(["sketch", "share", world.root / "a.csv", "--party", "a",
                            "--params", params, "--key", world.key, "--user", "user",
                            "--worker", "http://127.0.0.1:9", "--worker", "http://127.0.0.1:9",
                            *tokens, "--state", tmp_path / "missing" / "a.state", "--wait",
                            "0"], capsys)
    line = _one_line_error(code, err)
    assert "--state" in line
    assert "does not exist" in line
