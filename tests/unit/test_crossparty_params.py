"""Cross-party parameters and the keyed hash of the virtual-ID space (deterministic)."""

from __future__ import annotations

import hashlib
import math
import os
import stat
from fractions import Fraction

import numpy as np
import pytest

from dpfreq.crossparty import CrossPartyParams, key_fingerprint, read_hash_key, write_hash_key
from dpfreq.crossparty.params import SAMPLING_BITS
from dpfreq.crossparty.vid import user_bytes, vid_hash
from dpfreq.errors import DataError, ParameterError
from dpfreq.rng import derive_key

KEY = bytes(range(32))
BASE = {"measurement": "m", "registers": 64, "sampling_start": 0, "sampling_width": 1,
        "max_frequency": 3, "epsilon_reach": 1.0, "epsilon_frequency": 0.5,
        "hash": "sha256-prefix/v1", "key_id": key_fingerprint(KEY)}


def params(**changes: object) -> CrossPartyParams:
    return CrossPartyParams(**{**BASE, **changes})  # type: ignore[arg-type]


def test_no_field_has_a_default() -> None:
    for name in BASE:
        fields = {k: v for k, v in BASE.items() if k != name}
        with pytest.raises(TypeError, match=name):
            CrossPartyParams(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(("field", "value", "rule"), [
    ("measurement", "", "printable"), ("measurement", "a\nb", "printable"),
    ("registers", 0, ">= 1"), ("registers", 2**30 + 1, "<= 1073741824"),
    ("registers", 1.5, "an integer"), ("sampling_start", 1, "below 1"),
    ("sampling_start", -0.1, "[0, 1]"), ("sampling_width", 0, "(0, 1]"),
    ("sampling_width", "3/4", "(0, 1/2]"), ("sampling_width", float("nan"), "a number"),
    ("sampling_width", "abc", "a number"), ("sampling_width", True, "a number"),
    ("sampling_width", "1/2**34", "a number"), ("sampling_width", 2.0**-35, "registers / 2^40"),
    ("max_frequency", 0, ">= 1"), ("epsilon_reach", 0.0, "[1e-06, 1000]"),
    ("epsilon_frequency", -1.0, "[1e-06, 1000]"), ("hash", "md5", "sha256-prefix/v1"),
    ("key_id", "XYZ", "32 lower-case hex digits"),
])
def test_each_field_is_checked_in_one_line(field: str, value: object, rule: str) -> None:
    changes: dict[str, object] = {field: value}
    if field == "sampling_width" and value == "3/4":
        changes["sampling_start"] = "1/2"
    with pytest.raises(ParameterError) as info:
        params(**changes)
    text = str(info.value)
    assert text.startswith(f"{field} of CrossPartyParams must be ")
    assert "\n" not in text
    assert rule in text


def test_exact_sampling_bounds_and_epsilon() -> None:
    p = params(sampling_start="1/4", sampling_width=0.125, epsilon_reach=0.1,
               epsilon_frequency=0.2)
    lo, hi = p.sampling_bounds
    assert (lo, hi) == (2**SAMPLING_BITS // 4, 2**SAMPLING_BITS // 4 + 2**SAMPLING_BITS // 8)
    assert p.sampling_rate == Fraction(1, 8)
    assert p.epsilon == 0.3  # exact decimal sum, not 0.30000000000000004
    assert params(epsilon_frequency=None).epsilon == 1.0
    assert not params(epsilon_frequency=None).has_frequency


def test_json_round_trip_and_tampering(tmp_path) -> None:
    p = params(sampling_start="1/3", sampling_width="1/3", epsilon_reach=math.log(3))
    assert CrossPartyParams.from_json(p.to_json()) == p
    path = p.save(tmp_path / "params.json")
    assert CrossPartyParams.load(path) == p
    edited = p.to_json().replace('"registers": 64', '"registers": 65')
    with pytest.raises(DataError, match="checksum does not match"):
        CrossPartyParams.from_json(edited)
    with pytest.raises(DataError, match="does not exist"):
        CrossPartyParams.load(tmp_path / "missing.json")
    with pytest.raises(DataError, match="fields are not"):
        CrossPartyParams.from_dict({"registers": 3})


def test_params_are_never_signed(tmp_path, monkeypatch) -> None:
    """Public parameters go to whoever merges, who may not hold the artefact key."""
    text = params().to_json()
    monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", "ab" * 32)
    assert params().to_json() == text
    assert CrossPartyParams.from_json(text) == params()


def test_hash_is_sha256_of_the_secret_prefix_and_the_id() -> None:
    vh = vid_hash(KEY, params())
    prefix = derive_key(KEY, "crossparty", "register-hash")[:16].hex().encode()
    for user in [0, -12, 2**70, "007", "é-ü", ""]:
        expected = hashlib.sha256(prefix + user_bytes(user)).hexdigest()
        assert vh.digest(user) == expected
    sampled, regs = vh.locate([5, "5", 6])
    assert regs[0] == regs[1]  # the integer 5 and the text "5" are the same user id
    d = vh.digest(6)
    assert regs[2] == int(d[:15], 16) % 64
    assert sampled.all()
    assert vh.prefix not in repr(vh)
    assert KEY.hex() not in repr(vh)


def test_sampling_keeps_the_interval() -> None:
    p = params(sampling_start="1/2", sampling_width="1/4", registers=1000)
    vh = vid_hash(KEY, p)
    users = list(range(4000))
    sampled, _ = vh.locate(users)
    coords = np.array([int(vh.digest(u)[:15], 16) for u in users])
    lo, hi = p.sampling_bounds
    assert np.array_equal(sampled, (coords >= lo) & (coords < hi))
    assert 0 < sampled.sum() < 4000


def test_wrong_key_is_refused_before_anything() -> None:
    with pytest.raises(ParameterError, match="fingerprint"):
        vid_hash(bytes(32), params())
    with pytest.raises(ParameterError, match="at least 32 bytes"):
        vid_hash(b"short", params())
    with pytest.raises(ParameterError, match="at least 32 bytes"):
        key_fingerprint(b"short")


@pytest.mark.parametrize("bad", [1.0, True, None, b"x", np.float64(2)])
def test_user_ids_are_integers_or_text(bad: object) -> None:
    with pytest.raises(DataError, match="integers or text"):
        user_bytes(bad)


def test_key_file_is_private_and_checked(tmp_path) -> None:
    path = write_hash_key(tmp_path / "hash.key", KEY)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert read_hash_key(path) == KEY
    (tmp_path / "short.key").write_text("abcd")
    for name in ("short.key", "missing.key"):
        with pytest.raises(DataError) as info:
            read_hash_key(tmp_path / name)
        assert "abcd" not in str(info.value)
