"""Signed artefacts: HMAC-SHA256 under DPFREQ_ARTIFACT_KEY detects an edit whose plain digest
was recomputed; signed files need their key; unsigned files are refused while a key is set."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from dpfreq.artifacts import open_json, read_artifact, seal_json, write_artifact
from dpfreq.errors import DataError, ParameterError

KEY = "0123456789abcdef" * 4  # 32 bytes in hex
OTHER = "f" * 64
META = {"epsilon": 1.0, "unit": "item", "seeded": True}
ARRAYS = {"counts": np.arange(6, dtype=np.int64)}


@pytest.fixture(autouse=True)
def no_key(monkeypatch):
    monkeypatch.delenv("DPFREQ_ARTIFACT_KEY", raising=False)


def _write(path: Path) -> Path:
    return write_artifact(path, kind="test-state", version=1, meta=META, arrays=ARRAYS)


def _read(path: Path):
    return read_artifact(path, kind="test-state", versions=(1,))


def _forge(path: Path, **meta) -> None:
    """Edit the parameters and recompute a plain SHA-256 digest, as anyone can."""
    with zipfile.ZipFile(path) as zf:
        items = {n: zf.read(n) for n in zf.namelist()}
    header = json.loads(items["__header__.json"])
    header["meta"].update(meta)
    body = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    h = hashlib.sha256(len(body).to_bytes(8, "big") + body)
    for name in sorted(ARRAYS):
        arr = np.load(io.BytesIO(items[name + ".npy"]))
        m = f"{name}|{arr.dtype.str}|{arr.shape}".encode()
        h.update(len(m).to_bytes(8, "big") + m)
        data = arr.tobytes()
        h.update(len(data).to_bytes(8, "big") + data)
    items = {n: b for n, b in items.items() if not n.startswith("__") or n == "__header__.json"}
    items["__header__.json"] = body
    items["__sha256__"] = h.hexdigest().encode()
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in items.items():
            zf.writestr(name, data)


def _refused(path: Path, match: str) -> None:
    with pytest.raises(DataError, match=match) as info:
        _read(path)
    assert "\n" not in str(info.value)


def test_without_a_key_a_recomputed_digest_is_accepted(tmp_path):
    """What the plain digest does not guarantee (documented): a forger's edit loads."""
    path = _write(tmp_path / "s.dpf")
    _forge(path, epsilon=0.1, seeded=False)
    assert _read(path)[1]["epsilon"] == 0.1


def test_with_a_key_a_recomputed_plain_digest_is_rejected(tmp_path, monkeypatch):
    monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", KEY)
    path = _write(tmp_path / "s.dpf")
    assert _read(path)[1] == META
    _forge(path, epsilon=0.1, seeded=False)
    _refused(path, "not signed, and unsigned files are refused while DPFREQ_ARTIFACT_KEY")


def test_an_edited_signed_file_is_rejected(tmp_path, monkeypatch):
    monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", KEY)
    path = _write(tmp_path / "s.dpf")
    with zipfile.ZipFile(path) as zf:
        items = {n: zf.read(n) for n in zf.namelist()}
    assert "__hmac_sha256__" in items
    assert "__sha256__" not in items
    items["__header__.json"] = items["__header__.json"].replace(b'"epsilon":1.0',
                                                                b'"epsilon":0.1')
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in items.items():
            zf.writestr(name, data)
    _refused(path, "its signature does not match")


def test_round_trips_with_and_without_a_key(tmp_path, monkeypatch):
    plain = _write(tmp_path / "plain.dpf")
    assert _read(plain)[1] == META
    monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", KEY.upper())  # hex in either case
    signed = _write(tmp_path / "signed.dpf")
    version, meta, arrays = _read(signed)
    assert (version, meta, arrays["counts"].tolist()) == (1, META, list(range(6)))


def test_a_signed_file_needs_its_key(tmp_path, monkeypatch):
    monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", KEY)
    path = _write(tmp_path / "s.dpf")
    monkeypatch.delenv("DPFREQ_ARTIFACT_KEY")
    _refused(path, "it is signed \\(HMAC-SHA256\\); set DPFREQ_ARTIFACT_KEY")
    monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", OTHER)
    _refused(path, "signature does not match \\(it was edited, or signed with another key: after "
             "a key rotation, carry it over with 'dpfreq resign', the old key in "
             "DPFREQ_ARTIFACT_KEY_OLD\\)")


def test_an_unsigned_file_is_refused_while_a_key_is_set(tmp_path, monkeypatch):
    path = _write(tmp_path / "s.dpf")
    monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", KEY)
    _refused(path, "to adopt it, load it with the key unset and save it again")


@pytest.mark.parametrize("key", ["ab" * 31, "zz" * 32, "abc"])
def test_a_short_or_malformed_key_is_one_line(tmp_path, monkeypatch, key):
    monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", key)
    for call in (lambda: _write(tmp_path / "s.dpf"),
                 lambda: seal_json({"a": 1}, kind="params", version=1)):
        with pytest.raises(ParameterError, match=r"^DPFREQ_ARTIFACT_KEY must be a key of at "
                                                 r"least 32 bytes written in hexadecimal"):
            call()
    assert not (tmp_path / "s.dpf").exists()


def test_json_signed_round_trip_and_refusals(monkeypatch):
    plain = seal_json({"horizon": 8}, kind="params", version=1)
    assert open_json(plain, kind="params", versions=(1,)) == (1, {"horizon": 8})
    monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", KEY)
    signed = seal_json({"horizon": 8}, kind="params", version=1)
    assert "hmac_sha256" in json.loads(signed)
    assert "sha256" not in json.loads(signed)
    assert open_json(signed, kind="params", versions=(1,)) == (1, {"horizon": 8})
    with pytest.raises(DataError, match="not signed"):
        open_json(plain, kind="params", versions=(1,))
    edited = json.loads(signed)
    edited["payload"]["horizon"] = 9
    with pytest.raises(DataError, match="signature does not match"):
        open_json(json.dumps(edited), kind="params", versions=(1,))
    forged = {k: v for k, v in edited.items() if k != "hmac_sha256"}
    body = json.dumps(forged["payload"], sort_keys=True, separators=(",", ":"))
    forged["sha256"] = hashlib.sha256(f"params|1|{body}".encode()).hexdigest()
    with pytest.raises(DataError, match="not signed"):
        open_json(json.dumps(forged), kind="params", versions=(1,))
    monkeypatch.delenv("DPFREQ_ARTIFACT_KEY")
    assert open_json(json.dumps(forged), kind="params", versions=(1,))[1] == {"horizon": 9}
    with pytest.raises(DataError, match="is signed"):
        open_json(signed, kind="params", versions=(1,))


def test_a_saved_sketch_is_signed_end_to_end(tmp_path, monkeypatch):
    from dpfreq.profile import ProfileSketch

    monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", KEY)
    sketch = ProfileSketch(domain_size=50, max_count=3, epsilon=1.0, rng=1)
    sketch.update([1, 2, 2])
    sketch.save(tmp_path / "s.npz")
    assert ProfileSketch.load(tmp_path / "s.npz").epsilon == 1.0
    monkeypatch.delenv("DPFREQ_ARTIFACT_KEY")
    with pytest.raises(DataError, match="is signed"):
        ProfileSketch.load(tmp_path / "s.npz")


@pytest.mark.parametrize("signed", [False, True])
def test_a_non_ascii_digest_is_one_line(tmp_path, monkeypatch, signed):
    if signed:
        monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", KEY)
    member = "__hmac_sha256__" if signed else "__sha256__"
    path = _write(tmp_path / "s.dpf")
    with zipfile.ZipFile(path) as zf:
        items = {n: zf.read(n) for n in zf.namelist()}
    items[member] = "é".encode() * 32
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in items.items():
            zf.writestr(name, data)
    _refused(path, "does not match")
    text = json.loads(seal_json({"a": 1}, kind="params", version=1))
    text[member.strip("_")] = "é" * 64
    with pytest.raises(DataError, match="does not match"):
        open_json(json.dumps(text), kind="params", versions=(1,))


def test_public_protocol_parameters_are_never_signed(monkeypatch):
    from dpfreq.longitudinal import ProtocolParams
    from dpfreq.longitudinal.params import make_params

    params = make_params(horizon=8, max_changes=2, epsilon=1.0, method="auto")
    monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", KEY)  # the server's key
    text = params.to_json()
    assert "sha256" in json.loads(text)
    monkeypatch.delenv("DPFREQ_ARTIFACT_KEY")  # a device, without it
    assert ProtocolParams.from_json(text) == params
    monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", OTHER)
    assert ProtocolParams.from_json(text).param_id == params.param_id
