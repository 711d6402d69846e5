"""Party sketches: budget before noise, seeds, exact paths, files, merge refusals."""

from __future__ import annotations

import json
import math
import zipfile
from pathlib import Path

import numpy as np
import pytest

from dpfreq.budget import Accountant, PrivacyBudget
from dpfreq.crossparty import (
    CrossPartyParams,
    CrossPartyRelease,
    PartySketch,
    build_sketch,
    key_fingerprint,
    merge_sketches,
)
from dpfreq.crossparty.reach import users_from_empty
from dpfreq.crossparty.registers import LogSpec, register_frequencies
from dpfreq.errors import BudgetExceededError, DataError, ParameterError
from dpfreq.release import RELATIONS

KEY = bytes(range(32))


def make_params(**changes: object) -> CrossPartyParams:
    fields = {"measurement": "spring", "registers": 512, "sampling_start": 0,
              "sampling_width": 1, "max_frequency": 3, "epsilon_reach": math.log(3),
              "epsilon_frequency": 1.0, "hash": "sha256-prefix/v1", "key_id": key_fingerprint(KEY)}
    return CrossPartyParams(**{**fields, **changes})  # type: ignore[arg-type]


def log(first: int, last: int, repeat: int = 2) -> dict[str, np.ndarray]:
    return {"user": np.repeat(np.arange(first, last), repeat),
            "time": np.tile(np.arange(repeat), last - first)}


def build(party: str = "tv", rng: object = 1, **kwargs: object) -> PartySketch:
    source = kwargs.pop("source", log(0, 200))
    return build_sketch(source, user="user", party=party,
                        params=kwargs.pop("params", make_params()),  # type: ignore[arg-type]
                        key=KEY, rng=rng, **kwargs)  # type: ignore[arg-type]


def test_the_budget_is_charged_once_at_unit_item() -> None:
    acct = Accountant(PrivacyBudget(10.0))
    sketch = build(accountant=acct)
    assert (acct.spent.epsilon, acct.spent.delta) == (pytest.approx(math.log(3) + 1.0), 0.0)
    assert acct.ledger[0]["unit"] == "item"
    assert acct.ledger[0]["label"] == "build_sketch"
    assert sketch.unit == "item"
    assert sketch.delta == 0.0
    assert sketch.relation.startswith(RELATIONS["item"])


@pytest.mark.parametrize("case", ["budget", "missing column", "missing file", "wrong key"])
def test_a_refused_call_spends_nothing_and_draws_nothing(case: str) -> None:
    """Refusals come before any draw: the generator is untouched and nothing is spent."""
    gen = np.random.default_rng(5)
    state = gen.bit_generator.state
    acct = Accountant(PrivacyBudget(0.5 if case == "budget" else 10.0))
    source: object = log(0, 10)
    expected: type[Exception] = BudgetExceededError
    if case == "budget":
        source = "/nonexistent/log.csv"  # reading it would be a DataError: it is never read
    elif case == "missing column":
        source, expected = {"other": np.arange(3)}, DataError
    elif case == "missing file":
        source, expected = "/nonexistent/log.csv", DataError
    elif case == "wrong key":
        expected = ParameterError
    key = bytes(32) if case == "wrong key" else KEY
    with pytest.raises(expected) as info:
        build_sketch(source, user="user", party="tv", params=make_params(), key=key, rng=gen,
                     accountant=acct)
    assert "\n" not in str(info.value)
    assert (acct.spent.epsilon, acct.spent.delta) == (0.0, 0.0)
    assert gen.bit_generator.state == state


def test_same_seed_same_sketch_other_seed_other_noise() -> None:
    a, b, c = build(rng=3), build(rng=3), build(rng=4)
    assert a.sketch_id == b.sketch_id != c.sketch_id
    assert np.array_equal(a.reach_bits, b.reach_bits)
    assert np.array_equal(a.frequency, b.frequency)  # type: ignore[arg-type]
    assert not np.array_equal(a.frequency, c.frequency)  # type: ignore[arg-type]
    assert a.seeded
    assert not a.reach_bits.flags.writeable


def test_zero_noise_returns_the_exact_registers_end_to_end() -> None:
    """ε = 1000: randomized response and discrete Laplace leave every register as it is (the
    probability of any change is below 1e-100), so the merge is the exact linear counting."""
    params = make_params(epsilon_reach=1000.0, epsilon_frequency=1000.0)
    source = log(0, 300, repeat=2)
    exact = register_frequencies(source, spec=LogSpec(user="user"), params=params, key=KEY).values
    sketch = build(params=params, source=source)
    assert np.array_equal(sketch.reach_bits, (exact > 0).astype(np.uint8))
    assert np.array_equal(sketch.frequency, exact)  # type: ignore[arg-type]
    rel = merge_sketches([sketch], confidence=0.9)
    empty = int((exact == 0).sum())
    assert rel.reach == pytest.approx(users_from_empty(empty, 512), rel=1e-12)
    assert rel.raw_kplus_reach[0] == pytest.approx(rel.reach, rel=1e-12)


def test_file_round_trip_and_a_merge_from_files_is_the_same(tmp_path: Path) -> None:
    a, b = build("tv", rng=1), build("web", rng=2, source=log(100, 400))
    pa, pb = a.save(tmp_path / "tv.sketch"), b.save(tmp_path / "web.sketch")
    back = PartySketch.load(pa)
    for name in ("party", "sketch_id", "seeded", "engine", "params"):
        assert getattr(back, name) == getattr(a, name)
    assert np.array_equal(back.reach_bits, a.reach_bits)
    assert np.array_equal(back.frequency, a.frequency)  # type: ignore[arg-type]
    from_objects = merge_sketches([a, b], confidence=0.9)
    from_files = merge_sketches([pa, str(pb)], confidence=0.9)
    assert np.array_equal(from_objects.value, from_files.value)
    assert np.array_equal(from_objects.error.upper, from_files.error.upper)
    with zipfile.ZipFile(pa) as zf:
        header = json.loads(zf.read("__header__.json"))
    assert "epsilon-DP release" in header["meta"]["statement"]
    assert set(header["arrays"]) == {"reach_bits", "frequency"}


def _rewrite(path: Path, target: Path, member: str, edit: object) -> Path:
    with zipfile.ZipFile(path) as zf:
        data = {n: zf.read(n) for n in zf.namelist()}
    data[member] = edit(data[member])  # type: ignore[operator]
    with zipfile.ZipFile(target, "w") as out:
        for name, body in data.items():
            out.writestr(name, body)
    return target


@pytest.mark.parametrize("member", ["__header__.json", "frequency.npy", "reach_bits.npy"])
def test_a_tampered_file_is_refused_in_one_line(tmp_path: Path, member: str) -> None:
    path = build().save(tmp_path / "tv.sketch")
    if member == "__header__.json":
        edit = lambda b: b.replace(b'"party":"tv"', b'"party":"tw"')  # noqa: E731
    else:
        edit = lambda b: b[:-1] + bytes([b[-1] ^ 1])  # noqa: E731
    bad = _rewrite(path, tmp_path / "bad.sketch", member, edit)
    with pytest.raises(DataError) as info:
        merge_sketches([bad], confidence=0.9)
    assert "checksum does not match" in str(info.value)
    assert "\n" not in str(info.value)


def test_signed_sketches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", "11" * 32)
    path = build().save(tmp_path / "tv.sketch")
    assert PartySketch.load(path).party == "tv"
    monkeypatch.setenv("DPFREQ_ARTIFACT_KEY", "22" * 32)
    with pytest.raises(DataError, match="signature does not match"):
        PartySketch.load(path)
    monkeypatch.delenv("DPFREQ_ARTIFACT_KEY")
    with pytest.raises(DataError, match="it is signed"):
        PartySketch.load(path)


@pytest.mark.parametrize(("change", "field"), [
    ({"registers": 1024}, "registers"), ({"measurement": "autumn"}, "measurement"),
    ({"max_frequency": 4}, "max_frequency"), ({"epsilon_reach": 1.0}, "epsilon_reach"),
    ({"sampling_width": "1/2"}, "sampling_width"),
])
def test_merge_refuses_mismatched_parameters(change: dict[str, object], field: str) -> None:
    other = build("web", rng=2, params=make_params(**change))
    with pytest.raises(ParameterError) as info:
        merge_sketches([build("tv"), other], confidence=0.9)
    text = str(info.value)
    assert "same parameters" in text
    assert f"has {field} " in text
    assert "\n" not in text


def test_merge_refuses_another_hash_key() -> None:
    key2 = bytes(range(1, 33))
    params2 = make_params(key_id=key_fingerprint(key2))
    other = build_sketch(log(0, 50), user="user", party="web", params=params2, key=key2, rng=2)
    with pytest.raises(ParameterError, match="has key_id "):
        merge_sketches([build("tv"), other], confidence=0.9)


def test_merge_refuses_a_sketch_twice_and_a_party_twice() -> None:
    a = build("tv", rng=1)
    with pytest.raises(ParameterError, match="appears twice"):
        merge_sketches([a, build("web", rng=2), a], confidence=0.9)
    with pytest.raises(ParameterError, match="party 'tv' has two"):
        merge_sketches([a, build("tv", rng=9)], confidence=0.9)
    with pytest.raises(ParameterError, match="non-empty"):
        merge_sketches([], confidence=0.9)
    with pytest.raises(ParameterError, match="a list of PartySketch"):
        merge_sketches(a, confidence=0.9)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="confidence"):
        merge_sketches([a], confidence=1.5)


def test_reach_only_sketches() -> None:
    params = make_params(epsilon_frequency=None)
    a = build("tv", params=params)
    assert a.frequency is None
    assert a.epsilon == pytest.approx(math.log(3))
    rel = merge_sketches([a, build("web", rng=2, params=params, source=log(100, 300))],
                         confidence=0.9)
    assert rel.value.shape == (1,)
    assert rel.frequency is None
    assert rel.party_kplus_reach.shape == (2, 1)


def test_release_surface_and_consistency() -> None:
    pd = pytest.importorskip("pandas")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rel = merge_sketches([build("tv"), build("web", rng=2, source=log(150, 400))],
                         confidence=0.9)
    assert isinstance(rel, CrossPartyRelease)
    doc = json.loads(rel.to_json())
    assert doc["unit"] == "item"
    assert doc["relation"].startswith(RELATIONS["item"] + " (item = one user")
    assert doc["mechanism_params"]["parties"] == ["tv", "web"]
    frame = rel.to_pandas()
    assert isinstance(frame, pd.DataFrame)
    assert len(frame) == 3 * 3
    assert rel.plot() is not None
    plt.close("all")
    assert not rel.value.flags.writeable
    assert not rel.party_kplus_reach.flags.writeable
    u, p = rel.value, rel.party_kplus_reach
    assert np.all(u[None, :] >= p - 1e-9)
    assert u[0] <= p[:, 0].sum() + 1e-9
    assert np.all(np.diff(u) <= 1e-9)
    assert np.all(np.diff(p, axis=1) <= 1e-9)
    assert rel.frequency.sum() == pytest.approx(1.0)
    assert rel.error.kind == "interval"
    assert rel.error.confidence == 0.9
