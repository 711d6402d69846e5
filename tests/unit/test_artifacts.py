"""Saved state: versioned, checksummed, and every failure one DataError naming the file."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from dpfreq.artifacts import (
    open_json,
    read_artifact,
    read_text_file,
    seal_json,
    write_artifact,
)
from dpfreq.errors import DataError

META = {"epsilon": 1.0, "unit": "item"}


def _write(path: Path) -> Path:
    return write_artifact(path, kind="test-state", version=2, meta=META,
                          arrays={"counts": np.arange(10, dtype=np.int64),
                                  "w": np.linspace(0, 1, 5)})


def test_round_trip(tmp_path: Path) -> None:
    p = _write(tmp_path / "a.dpf")
    version, meta, arrays = read_artifact(p, kind="test-state", versions=(2,))
    assert version == 2
    assert meta == META
    assert (arrays["counts"] == np.arange(10)).all()
    assert np.array_equal(arrays["w"], np.linspace(0, 1, 5))
    assert not (tmp_path / "a.dpf.tmp").exists()


def _rewrite_member(path: Path, member: str, data: bytes) -> None:
    with zipfile.ZipFile(path) as zf:
        items = {n: zf.read(n) for n in zf.namelist()}
    items[member] = data
    with zipfile.ZipFile(path, "w") as zf:
        for name, body in items.items():
            zf.writestr(name, body)


def test_edited_parameter_is_refused(tmp_path: Path) -> None:
    p = _write(tmp_path / "a.dpf")
    with zipfile.ZipFile(p) as zf:
        header = json.loads(zf.read("__header__.json"))
    header["meta"]["epsilon"] = 1000.0
    _rewrite_member(p, "__header__.json", json.dumps(header).encode())
    with pytest.raises(DataError, match=r"a\.dpf .*checksum"):
        read_artifact(p, kind="test-state", versions=(2,))


def test_edited_array_is_refused(tmp_path: Path) -> None:
    p = _write(tmp_path / "a.dpf")
    import io

    buf = io.BytesIO()
    np.save(buf, np.arange(10, dtype=np.int64) * 2)
    _rewrite_member(p, "counts.npy", buf.getvalue())
    with pytest.raises(DataError, match="checksum"):
        read_artifact(p, kind="test-state", versions=(2,))


@pytest.mark.parametrize("cut", [0, 10, 100, -20])
def test_truncated_file_is_refused(tmp_path: Path, cut: int) -> None:
    p = _write(tmp_path / "a.dpf")
    data = p.read_bytes()
    p.write_bytes(data[:cut])
    with pytest.raises(DataError, match=r"a\.dpf is not a valid dpfreq test-state file"):
        read_artifact(p, kind="test-state", versions=(2,))


def test_every_single_byte_flip_is_refused(tmp_path: Path) -> None:
    p = _write(tmp_path / "a.dpf")
    data = bytearray(p.read_bytes())
    for i in range(0, len(data), max(1, len(data) // 97)):
        flipped = bytearray(data)
        flipped[i] ^= 0x55
        p.write_bytes(bytes(flipped))
        try:
            _, meta, arrays = read_artifact(p, kind="test-state", versions=(2,))
        except DataError:
            continue
        # a flip in bytes that carry no content (zip metadata) may leave the content intact
        assert meta == META
        assert (arrays["counts"] == np.arange(10)).all()


def test_other_kind_and_version_are_refused(tmp_path: Path) -> None:
    p = _write(tmp_path / "a.dpf")
    with pytest.raises(DataError, match="holds a 'test-state'"):
        read_artifact(p, kind="window-release", versions=(2,))
    with pytest.raises(DataError, match="format version 2 is not supported"):
        read_artifact(p, kind="test-state", versions=(3,))


def test_missing_and_foreign_files(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="does not exist"):
        read_artifact(tmp_path / "nope", kind="k", versions=(1,))
    np.savez(tmp_path / "plain.npz", a=np.arange(3))
    with pytest.raises(DataError, match="no dpfreq header"):
        read_artifact(tmp_path / "plain.npz", kind="k", versions=(1,))
    (tmp_path / "text").write_text("hello")
    with pytest.raises(DataError, match="unreadable or truncated"):
        read_artifact(tmp_path / "text", kind="k", versions=(1,))


def test_a_dpfreq_file_of_the_other_format_says_what_it_holds(tmp_path: Path) -> None:
    """A saved text file (JSON) given where a binary one (zip) is read, and the reverse, is
    refused naming what it holds, not a Python exception's class."""
    binary = _write(tmp_path / "a.dpf")
    text = tmp_path / "b.json"
    text.write_text(seal_json({"n": 1}, kind="params", version=1), encoding="utf-8")
    with pytest.raises(DataError) as info:
        read_artifact(text, kind="test-state", versions=(2,))
    assert str(info.value) == (f"{text} is not a valid dpfreq test-state file: it holds a "
                               "'params' (a dpfreq text file).")
    with pytest.raises(DataError) as info:
        read_text_file(binary, "a saved profile release")
    assert str(info.value) == (f"{binary} cannot be read as a saved profile release: it holds "
                               "a 'test-state' (a dpfreq binary file).")
    (tmp_path / "c.bin").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(DataError) as info:
        read_text_file(tmp_path / "c.bin", "a parameters file")
    assert str(info.value).endswith("c.bin cannot be read as a parameters file: it is not UTF-8 "
                                    "text.")


def test_object_arrays_are_never_written(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        write_artifact(tmp_path / "x", kind="k", version=1, meta={},
                       arrays={"o": np.array([object()])})


def test_json_round_trip_and_tamper() -> None:
    text = seal_json({"v": [1, -1, 1], "used": 0}, kind="client", version=1)
    assert open_json(text, kind="client", versions=(1,)) == (1, {"v": [1, -1, 1], "used": 0})
    obj = json.loads(text)
    obj["payload"]["v"] = [5, 5, 5]
    with pytest.raises(DataError, match="checksum"):
        open_json(json.dumps(obj), kind="client", versions=(1,), label="state.json")
    for bad in ("not json", "[]", json.dumps({"format": "dpfreq", "kind": "other"})):
        with pytest.raises(DataError):
            open_json(bad, kind="client", versions=(1,))
