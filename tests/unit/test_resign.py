"""Key rotation (dpfreq.resign): a saved release, a ledger and a stream state signed under key A,
re-signed to key B, load under B and are refused under A; a file that does not verify under the
old key is refused in one line and nothing is rewritten; the keys are checked first."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from dpfreq._resign_file import ITEMS_KIND, STREAM_KIND
from dpfreq.budget import PrivacyBudget
from dpfreq.errors import DataError, ParameterError
from dpfreq.ledger import Ledger
from dpfreq.profile import ProfileRelease, ProfileSketch, release_profile
from dpfreq.resign import resign
from dpfreq.stream import ReachStream

A, B = "a1" * 32, "b2" * 32
COUNTS = np.array([0, 1, 1, 2, 3, 3, 5, 8, 2, 1] * 4, dtype=np.int64)


@pytest.fixture
def keys(monkeypatch):
    """``keys(old, new)`` sets the rotation's variables (None: unset)."""
    def set_keys(old: str | None, new: str | None) -> None:
        for name, value in (("DPFREQ_ARTIFACT_KEY_OLD", old), ("DPFREQ_ARTIFACT_KEY", new)):
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, value)

    set_keys(None, None)
    return set_keys


def _snapshot(path: Path) -> dict[str, bytes]:
    files = sorted(path.rglob("*")) if path.is_dir() else [path]
    return {str(f): f.read_bytes() for f in files if f.is_file()}


def _day(t: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(t)
    return {"u": rng.integers(0, 40, 30), "t": np.full(30, t)}


def _stream(path: Path, engine: str = "memory") -> ReachStream:
    s = ReachStream.create(path, item="u", time="t", horizon=4, k_values=[1], unit="item",
                           epsilon=1.0, delta=0.0, method="simple", late="error",
                           engine=engine, rng=5)
    s.append(_day(1), through=1)
    return s


def test_a_saved_release_and_sketch_move_to_the_new_key(tmp_path, keys) -> None:
    keys(None, A)
    rel = release_profile(COUNTS, domain_size=100, max_count=6, epsilon=1.0, unit="item",
                          method="direct", rng=3)
    rel_path = rel.save(tmp_path / "release.json")
    sketch = ProfileSketch(domain_size=60, max_count=6, epsilon=1.0, rng=2)
    sketch.update(np.array([1, 2, 2, 3, 40]))
    sketch.save(tmp_path / "sketch.dpfreq")
    keys(A, B)
    assert resign(rel_path) == "ProfileRelease"
    assert resign(tmp_path / "sketch.dpfreq") == "ProfileSketch"
    keys(None, B)
    assert ProfileRelease.load(rel_path).to_dict() == rel.to_dict()
    np.testing.assert_array_equal(
        ProfileSketch.load(tmp_path / "sketch.dpfreq").reconstruct().noisy_profile,
        sketch.reconstruct().noisy_profile)
    keys(None, A)
    for load, path in ((ProfileRelease.load, rel_path),
                       (ProfileSketch.load, tmp_path / "sketch.dpfreq")):
        with pytest.raises(DataError, match="signature does not match"):
            load(path)


def test_an_edited_or_foreign_file_is_refused_and_left_as_it_is(tmp_path, keys) -> None:
    keys(None, A)
    rel = release_profile(COUNTS, domain_size=100, max_count=6, epsilon=1.0, unit="item",
                          method="direct", rng=3)
    path = rel.save(tmp_path / "release.json")
    path.write_text(path.read_text().replace('"epsilon": 1.0', '"epsilon": 0.5'))
    other = rel.save(tmp_path / "other.json")
    before = {**_snapshot(path), **_snapshot(other)}
    keys(B, "c3" * 32)  # the old key is not the one they were signed with
    for target in (path, other):
        with pytest.raises(DataError, match="signature does not match") as info:
            resign(target)
        assert str(target) in str(info.value)
        assert "\n" not in str(info.value)
    keys(A, B)
    with pytest.raises(DataError, match=f"{path}.*signature does not match"):
        resign(path)
    assert {**_snapshot(path), **_snapshot(other)} == before
    assert not list(tmp_path.glob("*.tmp"))


def test_a_ledger_keeps_every_spend_and_its_anchor(tmp_path, keys) -> None:
    keys(None, A)
    path, anchor = tmp_path / "budget.db", tmp_path / "anchor"
    ledger = Ledger.create(path, PrivacyBudget(1.0), anchor=anchor)
    ledger.spend(0.25, label="first", unit="item")
    ledger.spend(0.5, label="second", unit="item")
    rows = ledger.ledger
    counts = [line.split()[0] for line in anchor.read_text().splitlines()]
    keys(A, B)
    assert resign(path) == "ledger"
    keys(None, B)
    assert Ledger(path).verify() == 2
    assert Ledger(path).ledger == rows
    assert [line.split()[0] for line in anchor.read_text().splitlines()] == counts
    Ledger(path).spend(0.25, label="third", unit="item")  # spends go on, the anchor follows
    assert Ledger(path).verify() == 3
    assert Ledger(path).remaining.epsilon == 0.0
    keys(None, A)
    with pytest.raises(DataError, match=r"fails verification at its header: .* edited; or it is "
                       r"signed with another key than this one \(after a key rotation, carry "
                       r"it over with 'dpfreq resign'"):
        Ledger(path).verify()


def test_a_rolled_back_or_edited_ledger_is_refused_unchanged(tmp_path, keys) -> None:
    keys(None, A)
    path, anchor = tmp_path / "budget.db", tmp_path / "anchor"
    Ledger.create(path, PrivacyBudget(1.0), anchor=anchor).spend(0.25, unit="item")
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE releases SET epsilon = '1/100' WHERE id = 1")
    before = {**_snapshot(path), **_snapshot(anchor)}
    keys(B, "c3" * 32)
    with pytest.raises(DataError, match="its header does not verify under "
                                        "DPFREQ_ARTIFACT_KEY_OLD"):
        resign(path)
    keys(A, B)
    with pytest.raises(DataError, match="fails verification at row 1"):
        resign(path)
    assert {**_snapshot(path), **_snapshot(anchor)} == before
    keys(None, A)
    with pytest.raises(DataError, match="fails verification at row 1"):
        Ledger(path).verify()  # still the old key's chain, still refused for its edit


def test_an_interrupted_ledger_rotation_completes_when_run_again(tmp_path, keys) -> None:
    keys(None, A)
    path, anchor = tmp_path / "budget.db", tmp_path / "anchor"
    Ledger.create(path, PrivacyBudget(1.0), anchor=anchor).spend(0.25, unit="item")
    saved = _snapshot(path)
    keys(A, B)
    resign(path)  # then the ledger is put back as before its commit: the anchor is B's
    for f in (Path(f"{path}-wal"), Path(f"{path}-shm")):
        f.unlink(missing_ok=True)
    path.write_bytes(saved[str(path)])
    keys(None, A)
    with pytest.raises(DataError, match="fails its anchor"):
        Ledger(path).verify()
    keys(A, B)
    assert resign(path) == "ledger"
    keys(None, B)
    assert Ledger(path).verify() == 1


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
def test_a_stream_moves_to_the_new_key_and_appends(tmp_path, keys, engine) -> None:
    keys(None, A)
    stale = _stream(tmp_path / "s", engine)
    first = stale.release(1).value[1].tolist()
    keys(A, B)
    assert resign(tmp_path / "s") == "stream"
    keys(None, B)
    assert ReachStream.open(tmp_path / "s").release(1).value[1].tolist() == first
    if engine == "memory":  # opened before the rotation: it re-reads the state, then appends
        assert stale.append(_day(2), through=2)[-1].period == 2
        assert ReachStream.open(tmp_path / "s").last_period == 2
    items = [p.name for p in (tmp_path / "s").iterdir() if p.name.startswith("items-")]
    assert len(items) == 1
    keys(None, A)
    with pytest.raises(DataError, match="signature does not match"):
        ReachStream.open(tmp_path / "s")


def test_a_stream_with_an_edited_per_item_file_is_refused_unchanged(tmp_path, keys) -> None:
    keys(None, A)
    _stream(tmp_path / "s")
    (items,) = (tmp_path / "s").glob("items-*")
    keys(A, B)
    for part in (tmp_path / "s" / "stream.dpfreq", items):  # one file of the state alone
        with pytest.raises(DataError, match="part of a reach stream's state"):
            resign(part)
    data = bytearray(items.read_bytes())
    data[len(data) // 2] ^= 1
    items.write_bytes(bytes(data))
    before = _snapshot(tmp_path / "s")
    with pytest.raises(DataError, match=f"{items} cannot be re-signed: it does not match"):
        resign(tmp_path / "s")
    assert _snapshot(tmp_path / "s") == before


def test_public_parameters_are_never_signed(tmp_path, keys) -> None:
    from dpfreq.longitudinal import make_params

    params = tmp_path / "params.json"
    params.write_text(make_params(horizon=4, max_changes=1, epsilon=1.0,
                                  method="futurerand").to_json())
    keys(None, B)
    with pytest.raises(DataError, match="public protocol parameters"):
        resign(params, from_unsigned=True)


def test_the_stream_kinds_named_are_the_streams_own() -> None:
    from dpfreq.stream import state
    from dpfreq.stream.items import memory

    assert (STREAM_KIND, ITEMS_KIND) == (state._KIND, memory._KIND)


KEY_CASES = [
    (None, B, {}, "DPFREQ_ARTIFACT_KEY_OLD is not set"),
    ("zz" * 32, B, {}, "DPFREQ_ARTIFACT_KEY_OLD must be a key of at least 32 bytes written in "
                       "hexadecimal; got text that is not hexadecimal"),
    ("a1" * 8, B, {}, "DPFREQ_ARTIFACT_KEY_OLD must be .*; got 8 bytes"),
    (A, None, {}, "DPFREQ_ARTIFACT_KEY is not set"),
    (A, A, {}, "the old and new keys are the same"),
    (A, B, {"from_unsigned": True}, "from_unsigned=True asks for unsigned files, but "
                                    "DPFREQ_ARTIFACT_KEY_OLD is set"),
    (None, None, {"from_unsigned": True, "to_unsigned": True}, "the old and new keys are the"),
]


@pytest.mark.parametrize(("old", "new", "flags", "match"), KEY_CASES,
                         ids=[f"case{i}" for i in range(len(KEY_CASES))])
def test_missing_or_malformed_keys_are_one_line(tmp_path, keys, old, new, flags, match) -> None:
    path = tmp_path / "never-read.json"
    keys(old, new)
    with pytest.raises(ParameterError, match=match) as info:
        resign(path, **flags)
    text = str(info.value)
    assert "\n" not in text
    assert "zz" * 32 not in text
    assert "a1" * 8 not in text


def test_unsigned_files_are_adopted_and_signed_files_unsigned_on_request(tmp_path, keys) -> None:
    rel = release_profile(COUNTS, domain_size=100, max_count=6, epsilon=1.0, unit="item",
                          method="direct", rng=3)
    path = rel.save(tmp_path / "release.json")
    keys(A, B)
    with pytest.raises(DataError, match=r"it is not signed .*from_unsigned=True"):
        resign(path)
    keys(None, B)
    assert resign(path, from_unsigned=True) == "ProfileRelease"
    assert ProfileRelease.load(path).to_dict() == rel.to_dict()
    keys(B, None)
    assert resign(path, to_unsigned=True) == "ProfileRelease"
    keys(None, None)
    assert ProfileRelease.load(path).to_dict() == rel.to_dict()
    assert '"sha256"' in path.read_text()
