"""Saved profile releases (ProfileRelease.save / load / from_json): every published number comes
back bit for bit, recomputed from the stored noisy measurement alone (STYLE 11d, 20a); an edited
file is refused in one line (signed: always; unsigned: unless the digest was recomputed, and then
the release is still the post-processing of what the file holds); invalid fields are refused."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpfreq.errors import DataError, ParameterError
from dpfreq.profile import ProfileRelease, ProfileSketch, release_profile
from dpfreq.profile.direct import direct_layout
from dpfreq.profile.direct_release import build_direct
from dpfreq.profile.saved import KIND, VERSION

KEY = "0123456789abcdef" * 4  # 32 bytes in hex
OTHER = "f" * 64
COUNTS = np.array([0, 1, 1, 2, 3, 3, 3, 5, 8, 13, 21, 2, 1, 0, 4] * 8, dtype=np.int64)


def _release(unit: str, method: str, norm: Any = 1, confidence: float = 0.95,
             epsilon: float = 0.7) -> ProfileRelease:
    return release_profile(COUNTS, domain_size=300, max_count=10, epsilon=epsilon, unit=unit,
                           method=method, norm=norm, confidence=confidence, rng=3)


def _sketch_release(method: str) -> ProfileRelease:
    sketch = ProfileSketch(domain_size=60, max_count=6, epsilon=1.0, rng=2)
    sketch.update(np.array([1, 2, 2, 3, 3, 3, 7, 7, 40]))
    return sketch.reconstruct(method=method)


RELEASES = {
    "direct item": lambda: _release("item", "direct"),
    "direct event": lambda: _release("event", "direct", confidence=0.9),
    "direct item_replace": lambda: _release("item_replace", "auto", norm="inf"),
    "direct eps sum": lambda: _release("item", "direct", epsilon=0.1 + 0.2),  # 16-digit ε
    "fft norm 2": lambda: _release("event", "fft", norm=2),
    "fft norm inf": lambda: _release("event", "fft", norm="inf", confidence=0.8),
    "mle": lambda: _release("event", "mle"),
    "sketch fft": lambda: _sketch_release("fft"),
    "sketch mle": lambda: _sketch_release("mle"),
}


def _published(rel: ProfileRelease) -> dict[str, Any]:
    """Every number a release publishes, as bits."""
    e = rel.error
    arrays = {"value": rel.value, "lower": e.lower, "upper": e.upper,
              "band_lower": e.band_lower, "band_upper": e.band_upper, "half": e.value,
              "noisy_profile": rel.noisy_profile}
    out: dict[str, Any] = {k: np.asarray(v, dtype=np.float64).tobytes()
                           for k, v in arrays.items()}
    out.update(l1=(rel.l1_bound, rel.l1_confidence), epsilon=rel.epsilon, seeded=rel.seeded,
               text=e.description, vacuous=e.vacuous,
               sums=[rel.sum_interval(lo, hi) for lo in range(rel.max_count + 1)
                     for hi in range(lo, rel.max_count + 1)])
    return out


@pytest.mark.parametrize("name", sorted(RELEASES))
def test_load_gives_back_every_published_number_bit_for_bit(tmp_path: Path, name: str) -> None:
    rel = RELEASES[name]()
    path = rel.save(tmp_path / "profile.json")
    back = ProfileRelease.load(path)
    assert _published(back) == _published(rel)
    assert back.to_json() == rel.to_json()
    assert ProfileRelease.from_json(path.read_text(encoding="utf-8")).to_json() == rel.to_json()
    assert back.save(tmp_path / "again.json").read_text(encoding="utf-8") == \
        path.read_text(encoding="utf-8")


def test_the_file_holds_the_measurement_and_public_parameters_only(tmp_path: Path) -> None:
    rel = _release("item", "direct")
    doc = json.loads(rel.save(tmp_path / "p.json").read_text(encoding="utf-8"))
    assert (doc["format"], doc["kind"], doc["version"]) == ("dpfreq", KIND, VERSION)
    payload = doc["payload"]
    assert payload["measurement"] == rel.mechanism_params["noisy_count_of_counts"].tolist()
    assert "value" not in payload
    assert "error" not in payload
    assert payload["epsilon"] == rel.epsilon
    assert payload["unit"] == "item"


def _reseal(path: Path, edit: Any) -> None:
    """Edit the payload and recompute its plain SHA-256 digest, as anyone can."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    edit(doc["payload"])
    body = json.dumps(doc["payload"], sort_keys=True, separators=(",", ":"))
    doc.pop("hmac_sha256", None)
    doc["sha256"] = hashlib.sha256(f"{KIND}|{VERSION}|{body}".encode()).hexdigest()
    path.write_text(json.dumps(doc), encoding="utf-8")


def _one_line_refusal(path: Path, match: str) -> str:
    with pytest.raises(DataError, match=match) as info:
        ProfileRelease.load(path)
    text = str(info.value)
    assert "\n" not in text, text
    assert text.startswith(str(path)), text
    return text


def test_an_edit_without_a_new_digest_is_refused(tmp_path: Path) -> None:
    path = _release("item", "direct").save(tmp_path / "p.json")
    path.write_text(path.read_text(encoding="utf-8").replace('"unit": "item"',
                                                             '"unit": "event"'),
                    encoding="utf-8")
    _one_line_refusal(path, "checksum does not match")


def test_an_unsigned_edit_with_a_new_digest_still_publishes_only_post_processing(
        tmp_path: Path) -> None:
    """Without a key an edit with a recomputed digest loads (the artefacts' documented limit),
    but what loads is the post-processing of the edited measurement: no published number can
    be edited apart from the measurement it is computed from."""
    rel = _release("item", "direct")
    path = rel.save(tmp_path / "p.json")
    y = rel.mechanism_params["noisy_count_of_counts"].copy()
    y[1] += 3
    y[0] -= 3  # class 0 = d minus the noised classes, as the layout demands

    def edit(p: dict[str, Any]) -> None:
        p["measurement"] = y.tolist()

    _reseal(path, edit)
    back = ProfileRelease.load(path)
    expected = build_direct(y, direct_layout("item", 0.7, 10), d=300, n=10, unit="item",
                            conf=0.95)
    assert back.value.tobytes() == expected.value.tobytes()
    assert back.error.lower.tobytes() == expected.error.lower.tobytes()
    assert back.mechanism_params["noisy_count_of_counts"].tolist() == y.tolist()


def test_signed_files_detect_an_edit_and_need_their_key(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", KEY)
    rel = _release("event", "direct")
    path = rel.save(tmp_path / "p.json")
    assert "hmac_sha256" in json.loads(path.read_text(encoding="utf-8"))
    assert ProfileRelease.load(path).to_json() == rel.to_json()
    forged = tmp_path / "forged.json"
    forged.write_bytes(path.read_bytes())
    _reseal(forged, lambda p: p.update(epsilon=7.0))  # the signature dropped, a digest added
    _one_line_refusal(forged, "not signed, and unsigned files are refused")
    edited = tmp_path / "edited.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["payload"]["epsilon"] = 7.0
    edited.write_text(json.dumps(doc), encoding="utf-8")
    _one_line_refusal(edited, "signature does not match")
    monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", OTHER)
    _one_line_refusal(path, "signature does not match")
    monkeypatch.delenv("DPFREQ_ARTIFACT_KEY")
    _one_line_refusal(path, "it is signed")


BAD_FIELDS = {
    "epsilon negative": (lambda p: p.update(epsilon=-1.0), "epsilon"),
    "epsilon text": (lambda p: p.update(epsilon="1"), "epsilon"),
    "unit device": (lambda p: p.update(unit="device"), "unit"),
    "unknown method": (lambda p: p.update(method="lp"), "method"),
    "item with fft": (lambda p: p.update(method="fft"), "unit|measurement|profile_counts"),
    "short measurement": (lambda p: p.update(measurement=p["measurement"][:-1]), "measurement"),
    "float measurement": (lambda p: p["measurement"].__setitem__(1, 1.5), "measurement"),
    "sum not d": (lambda p: p["measurement"].__setitem__(0, p["measurement"][0] + 1),
                  "summing to d"),
    "domain zero": (lambda p: p.update(domain_size=0), "domain_size"),
    "confidence 1": (lambda p: p.update(confidence=1.0), "confidence"),
    "norm 3": (lambda p: p.update(norm="3"), "norm"),
    "B for direct": (lambda p: p.update(B=2), "measurement"),
    "seeded text": (lambda p: p.update(seeded="yes"), "seeded"),
    "params mapping": (lambda p: p.update(mechanism_params={"engine": "x"}), "mechanism_params"),
    "extra field": (lambda p: p.update(value=[1.0]), "its fields are not"),
    "missing field": (lambda p: p.pop("norm"), "its fields are not"),
}


@pytest.mark.parametrize("name", sorted(BAD_FIELDS))
def test_a_field_out_of_its_range_is_one_data_error(tmp_path: Path, name: str) -> None:
    edit, match = BAD_FIELDS[name]
    path = _release("item", "direct").save(tmp_path / "p.json")
    _reseal(path, edit)
    text = _one_line_refusal(path, match)
    assert "ProfileRelease" in text


def test_a_sketch_measurement_out_of_its_range_is_refused(tmp_path: Path) -> None:
    path = _release("event", "fft").save(tmp_path / "p.json")
    _reseal(path, lambda p: p.update(measurement=[10**6] * len(p["measurement"])))
    _one_line_refusal(path, "profile_counts")


def test_the_plain_json_of_a_release_is_refused_with_the_way_to_save(tmp_path: Path) -> None:
    rel = _release("item", "direct")
    path = tmp_path / "plain.json"
    path.write_text(rel.to_json(), encoding="utf-8")
    _one_line_refusal(path, "holds no seal and cannot be loaded: save the release")
    with pytest.raises(DataError, match=r"^the text is not a valid dpfreq ProfileRelease"):
        ProfileRelease.from_json("[1, 2]")


def test_missing_and_unreadable_files_are_one_line(tmp_path: Path) -> None:
    _one_line_refusal(tmp_path / "absent.json", "does not exist")
    path = tmp_path / "binary.json"
    path.write_bytes(b"\xff\xfe\x00")
    _one_line_refusal(path, "cannot be read")


def test_a_group_release_is_not_saved_alone(tmp_path: Path) -> None:
    columns = {"user": np.array(["a", "a", "b", "c"]), "g": np.array(["x", "x", "y", "x"])}
    grouped = release_profile(columns, item="user", group="g", groups=["x", "y"],
                              max_groups_per_item=1, domain_size=10, max_count=3,
                              epsilon=1.0, unit="item", rng=1)
    with pytest.raises(ParameterError, match="ungrouped profile release"):
        grouped["x"].save(tmp_path / "x.json")
    assert not (tmp_path / "x.json").exists()
