"""ProfileSketch: updates, clipped release, save/load, merging, sampling, law."""

from __future__ import annotations

import zipfile
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.stats

from dpfreq.artifacts import read_artifact, write_artifact
from dpfreq.budget import Accountant, PrivacyBudget
from dpfreq.errors import BudgetExceededError, DataError, ParameterError
from dpfreq.noise import discrete_laplace_gamma, discrete_laplace_pmf
from dpfreq.profile import ProfileRelease, ProfileSketch, reconstruct_profile
from dpfreq.profile.sketch import sample_domain

HUGE_EPS = 60.0  # the exact path: Pr[any noise != 0] <= d * 2e^-60


def _counts(seed: int, d: int, n: int) -> np.ndarray:
    return np.random.Generator(np.random.PCG64(seed)).integers(0, n + 1, size=d)


# ---------------------------------------------------------------------------------- creation


def test_basic_properties(seed: int) -> None:
    s = ProfileSketch(100, max_count=7, epsilon=0.5, rng=seed)
    assert s.domain_size == 100
    assert s.sampled_domain_size == 100
    assert s.max_count == 7
    assert s.epsilon == 0.5
    assert s.gamma == discrete_laplace_gamma(0.5)
    assert s.seeded is True
    assert s.keys is None
    assert s.sample_rate is None
    assert s.noisy_counts().dtype == np.int64
    assert "domain_size=100" in repr(s)
    assert ProfileSketch(3, max_count=1, epsilon=1.0).seeded is False


def test_same_seed_same_noise_other_seed_other_noise(seed: int) -> None:
    a = ProfileSketch(5000, max_count=3, epsilon=1.0, rng=seed)
    b = ProfileSketch(5000, max_count=3, epsilon=1.0, rng=seed)
    c = ProfileSketch(5000, max_count=3, epsilon=1.0, rng=seed + 1)
    np.testing.assert_array_equal(a.noisy_counts(), b.noisy_counts())
    assert not np.array_equal(a.noisy_counts(), c.noisy_counts())


@pytest.mark.parametrize(("kwargs", "param"), [
    ({"domain_size": 10, "max_count": 3, "epsilon": 0.0}, "epsilon"),
    ({"domain_size": 10, "max_count": 3, "epsilon": float("nan")}, "epsilon"),
    ({"domain_size": 10, "max_count": 3, "epsilon": float("inf")}, "epsilon"),
    ({"domain_size": 10, "max_count": -1, "epsilon": 1.0}, "max_count"),
    ({"domain_size": 0, "max_count": 3, "epsilon": 1.0}, "domain_size"),
    ({"domain_size": 10.5, "max_count": 3, "epsilon": 1.0}, "domain_size"),
    ({"max_count": 3, "epsilon": 1.0}, "domain_size"),
    ({"keys": ["a", "b", "a"], "max_count": 3, "epsilon": 1.0}, "keys"),
    ({"keys": [], "max_count": 3, "epsilon": 1.0}, "keys"),
    ({"keys": [1.5, 2.5], "max_count": 3, "epsilon": 1.0}, "keys"),
    ({"keys": ["a", 1], "max_count": 3, "epsilon": 1.0}, "keys"),
    ({"domain_size": 3, "keys": ["a", "b"], "max_count": 3, "epsilon": 1.0}, "domain_size"),
    ({"domain_size": 10, "max_count": 3, "epsilon": 1.0, "sample_rate": 0.0}, "sample_rate"),
    ({"domain_size": 10, "max_count": 3, "epsilon": 1.0, "sample_rate": 1.5}, "sample_rate"),
    ({"domain_size": 10, "max_count": 3, "epsilon": 1.0, "sample_rate": 0.5,
      "sample_key": b"short"}, "sample_key"),
    ({"domain_size": 10, "max_count": 3, "epsilon": 1.0, "rng": "x"}, "rng"),
])
def test_bad_parameters(kwargs: dict[str, Any], param: str) -> None:
    with pytest.raises(ParameterError, match=f"{param} of ProfileSketch"):
        ProfileSketch(**kwargs)


def test_duplicate_keys_are_refused() -> None:
    with pytest.raises(ParameterError, match="duplicate keys"):
        ProfileSketch(keys=["a", "b", "a"], max_count=3, epsilon=1.0)


def test_accountant_is_charged_before_noise(seed: int) -> None:
    acc = Accountant(PrivacyBudget(1.0))
    ProfileSketch(10, max_count=2, epsilon=0.75, rng=seed, accountant=acc)
    with pytest.raises(BudgetExceededError):
        ProfileSketch(10, max_count=2, epsilon=0.5, rng=seed, accountant=acc)


# ---------------------------------------------------------------------------------- updates


def test_update_equivalence_integer_domain(seed: int) -> None:
    d, n = 3000, 12
    final = _counts(seed, d, n)
    inc = ProfileSketch(d, max_count=n, epsilon=0.6, rng=seed)
    events = np.repeat(np.arange(d), final)
    np.random.Generator(np.random.PCG64(seed + 7)).shuffle(events)
    for part in np.array_split(events, 5):  # single events, repeats summed
        inc.update(part)
    direct = ProfileSketch.from_counts(final, domain_size=d, max_count=n, epsilon=0.6, rng=seed)
    np.testing.assert_array_equal(inc.noisy_counts(), direct.noisy_counts())
    for norm in (1, 2, "inf"):
        a, b = inc.reconstruct(norm=norm), direct.reconstruct(norm=norm)
        np.testing.assert_array_equal(a.value, b.value)


def test_update_equivalence_with_counts_and_keys(seed: int) -> None:
    keys = [f"user{i}" for i in range(500)]
    final = _counts(seed, 500, 6)
    inc = ProfileSketch(keys=keys, max_count=6, epsilon=1.0, rng=seed)
    half = final // 2
    inc.update(np.array(keys), half)
    inc.update(np.array(keys, dtype=object), final - half)
    direct = ProfileSketch.from_counts(final, keys=keys, max_count=6, epsilon=1.0, rng=seed)
    np.testing.assert_array_equal(inc.noisy_counts(), direct.noisy_counts())
    np.testing.assert_array_equal(inc.reconstruct().value, direct.reconstruct().value)


def test_update_integer_keys_and_scalar_item(seed: int) -> None:
    s = ProfileSketch(keys=[100, 7, 42], max_count=5, epsilon=HUGE_EPS, rng=seed)
    s.update(42)
    s.update([7, 7], counts=[2, 1])
    np.testing.assert_array_equal(s.noisy_counts(), [0, 3, 1])
    with pytest.raises(DataError, match="keys of the public domain"):
        s.update(np.array([100.0]))  # explicit integer keys take integers only
    np.testing.assert_array_equal(s.noisy_counts(), [0, 3, 1])


def test_update_zero_increments_and_empty(seed: int) -> None:
    s = ProfileSketch(10, max_count=5, epsilon=1.0, rng=seed)
    before = s.noisy_counts().copy()
    s.update([], [])
    s.update([1, 2], 0)
    np.testing.assert_array_equal(s.noisy_counts(), before)


@pytest.mark.parametrize(("items", "counts", "shown"), [
    ([1, 10, 11, -1], 1, "items outside it"),
    ([0.5], 1, "dtype float64"),
    (["a"], 1, "dtype <U1"),
    ([1, 2], -1, "a negative, non-integral"),
    ([1, 2], [1, 1.5], "a negative, non-integral"),
    ([1, 2], [1, 2, 3], "3 counts"),
    ([1, 2], [1, float("nan")], "a negative, non-integral"),
    ([1, 2], [1, 2**52], "2^52 or more"),
    ([[1, 2]], 1, "2 dimensions"),
])
def test_update_bad_input_changes_nothing(seed: int, items: Any, counts: Any, shown: str) -> None:
    s = ProfileSketch(10, max_count=5, epsilon=1.0, rng=seed)
    before = s.noisy_counts().copy()
    with pytest.raises(DataError, match=r"of ProfileSketch\.update") as info:
        s.update(items, counts)
    assert shown in str(info.value)
    for private in ("-1", "1.5", "nan", "10", "11", str(2**52)):  # no data value is printed
        assert f"{private}," not in str(info.value)
        assert f"{private}]" not in str(info.value)
    np.testing.assert_array_equal(s.noisy_counts(), before)


def test_update_unknown_keys_not_named(seed: int) -> None:
    s = ProfileSketch(keys=["a", "b"], max_count=5, epsilon=1.0, rng=seed)
    with pytest.raises(DataError, match="items that are not keys of the domain") as info:
        s.update(["a", "y", "x"])
    assert "'x'" not in str(info.value)
    assert "'y'" not in str(info.value)
    with pytest.raises(DataError, match="keys of the public domain"):
        s.update([1])


def test_update_from_source(tmp_path: Path, seed: int) -> None:
    final = _counts(seed, 50, 4)
    events = np.repeat(np.arange(50), final)
    p = tmp_path / "ev.parquet"
    pq.write_table(pa.table({"item": events}), p)
    a = ProfileSketch(50, max_count=4, epsilon=1.0, rng=seed)
    a.update_from_source(str(p), item="item")
    b = ProfileSketch(50, max_count=4, epsilon=1.0, rng=seed)
    b.update_from_source({"item": events}, item="item")
    c = ProfileSketch.from_counts(final, domain_size=50, max_count=4, epsilon=1.0, rng=seed)
    np.testing.assert_array_equal(a.noisy_counts(), c.noisy_counts())
    np.testing.assert_array_equal(b.noisy_counts(), c.noisy_counts())
    with pytest.raises(DataError, match="'nope'"):
        a.update_from_source(str(p), item="nope")


def test_from_counts_clamps_and_pads(seed: int) -> None:
    s = ProfileSketch.from_counts([9, 1, 3], domain_size=5, max_count=3, epsilon=HUGE_EPS,
                                  rng=seed)
    np.testing.assert_array_equal(s.noisy_counts(), [3, 1, 3, 0, 0])
    with pytest.raises(DataError, match="at most domain_size entries"):
        ProfileSketch.from_counts([1, 2, 3], domain_size=2, max_count=3, epsilon=1.0)
    with pytest.raises(DataError, match=r"counts of ProfileSketch\.from_counts"):
        ProfileSketch.from_counts([1, -2], domain_size=2, max_count=3, epsilon=1.0)


# ---------------------------------------------------------------------------------- releases


def test_exact_path_reconstruct_and_clipped(seed: int) -> None:
    h = np.array([0, 0, 1, 2, 2, 4, 0, 3])
    s = ProfileSketch.from_counts(h, domain_size=8, max_count=4, epsilon=HUGE_EPS, rng=seed)
    rel = s.reconstruct()
    assert isinstance(rel, ProfileRelease)
    np.testing.assert_allclose(rel.value, [3 / 8, 1 / 8, 2 / 8, 1 / 8, 1 / 8], atol=1e-12)
    np.testing.assert_array_equal(s.clipped(), h)


def test_clipped_and_noisy_counts(seed: int) -> None:
    s = ProfileSketch.from_counts(_counts(seed, 2000, 5), domain_size=2000, max_count=5,
                                  epsilon=0.3, rng=seed)
    noisy = s.noisy_counts()
    assert noisy.min() < 0  # noise at ε = 0.3 over 2000 counters goes below 0
    np.testing.assert_array_equal(s.clipped(), np.clip(noisy, 0, 5))
    with pytest.raises(ValueError, match="read-only"):
        noisy[0] = 1
    clipped = s.clipped()
    clipped[0] = 99  # a copy: the sketch is unchanged
    assert s.noisy_counts()[0] == noisy[0]


def test_reconstruct_is_deterministic_post_processing(seed: int) -> None:
    s = ProfileSketch.from_counts(_counts(seed, 3000, 8), domain_size=3000, max_count=8,
                                  epsilon=0.8, rng=seed)
    a = s.reconstruct(norm=2, confidence=0.8)
    b = s.reconstruct(norm=2, confidence=0.8)
    ref = reconstruct_profile(s.noisy_counts(), max_count=8, epsilon=0.8, confidence=0.8,
                              norm=2)
    np.testing.assert_array_equal(a.value, b.value)
    np.testing.assert_array_equal(a.value, ref.value)
    np.testing.assert_array_equal(a.error.lower, b.error.lower)  # intervals: keyed by release
    assert a.unit == "event"
    assert a.error.kind == "interval"
    assert a.error.confidence == 0.8
    assert a.seeded is True
    assert a.mechanism_params["sketch"] == "ProfileSketch"
    mle = s.reconstruct(method="mle")
    assert mle.method == "mle"
    with pytest.raises(ParameterError, match=r"norm of ProfileSketch\.reconstruct"):
        s.reconstruct(norm=3)
    with pytest.raises(ParameterError, match=r"method of ProfileSketch\.reconstruct"):
        s.reconstruct(method="lp")
    with pytest.raises(ParameterError, match=r"confidence of ProfileSketch\.reconstruct"):
        s.reconstruct(confidence=1.0)


# ---------------------------------------------------------------------------------- merging


def test_merging_noised_sketches_is_refused(seed: int) -> None:
    a = ProfileSketch(10, max_count=3, epsilon=1.0, rng=seed)
    b = ProfileSketch(10, max_count=3, epsilon=1.0, rng=seed + 1)
    before = a.noisy_counts().copy()
    for op in (lambda: a + b, lambda: b + a, lambda: a.merge(b)):
        with pytest.raises(ParameterError, match="two independently noised sketches") as info:
            op()
        assert "update()" in str(info.value)
    with pytest.raises(ParameterError, match="two independently noised"):
        a += b
    np.testing.assert_array_equal(a.noisy_counts(), before)


def test_adding_raw_arrays_is_refused(seed: int) -> None:
    a = ProfileSketch(3, max_count=3, epsilon=1.0, rng=seed)
    for op in (lambda: a + np.ones(3, dtype=int), lambda: np.ones(3, dtype=int) + a,
               lambda: a + 1, lambda: sum([a])):
        with pytest.raises(ParameterError, match="update"):
            op()


# ---------------------------------------------------------------------------------- save / load


@pytest.mark.parametrize("kind", ["int", "keys-str", "keys-int", "sampled", "keys-sampled"])
def test_save_load_round_trip(tmp_path: Path, seed: int, kind: str) -> None:
    kw: dict[str, Any] = {"max_count": 6, "epsilon": 0.7, "rng": seed}
    if kind == "int":
        s = ProfileSketch(400, **kw)
    elif kind == "keys-str":
        s = ProfileSketch(keys=[f"k{i}" for i in range(400)], **kw)
    elif kind == "keys-int":
        s = ProfileSketch(keys=np.arange(400) * 3 + 1, **kw)
    elif kind == "sampled":
        s = ProfileSketch(4000, sample_rate=0.1, **kw)
    else:
        s = ProfileSketch(keys=[f"k{i}" for i in range(4000)], sample_rate=0.1, **kw)
    if s.keys is None:
        s.update(np.arange(0, 400, 3), 2)
    else:
        s.update(s.keys[:300:3], 2)
    path = tmp_path / "sketch.bin"  # the exact name is used (no .npz appended)
    s.save(path)
    assert path.exists()
    t = ProfileSketch.load(str(path))
    np.testing.assert_array_equal(t.noisy_counts(), s.noisy_counts())
    for attr in ("domain_size", "sampled_domain_size", "max_count", "epsilon", "gamma",
                 "seeded", "sample_rate"):
        assert getattr(t, attr) == getattr(s, attr), attr
    if s.keys is None:
        assert t.keys is None
    else:
        assert t.keys is not None
        np.testing.assert_array_equal(t.keys, s.keys)
    np.testing.assert_array_equal(t.reconstruct().value, s.reconstruct().value)
    # the loaded sketch keeps working: same updates give the same counters
    probe = s.keys[:5] if s.keys is not None else np.arange(5)
    s.update(probe)
    t.update(probe)
    np.testing.assert_array_equal(t.noisy_counts(), s.noisy_counts())


def _rewrite(path: Path, edit_meta: Any = None, edit_arrays: Any = None) -> None:
    """Rewrite a saved sketch with edited fields and a *valid* checksum (a deliberate edit)."""
    version, meta, arrays = read_artifact(path, kind="ProfileSketch", versions=(1,))
    if edit_meta is not None:
        edit_meta(meta)
    if edit_arrays is not None:
        edit_arrays(arrays)
    write_artifact(path, kind="ProfileSketch", version=version, meta=meta, arrays=arrays)


def _edit_raw(path: Path, old: bytes, new: bytes) -> None:
    """Edit the stored header bytes without fixing the checksum (corruption or a casual edit)."""
    with zipfile.ZipFile(path) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    header = members["__header__.json"]
    assert old in header
    members["__header__.json"] = header.replace(old, new, 1)
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)


def _set(key: str, value: Any) -> Any:
    return lambda meta: meta.__setitem__(key, value)


def _drop(key: str) -> Any:
    return lambda meta: meta.pop(key)


def _bump_counter(arrays: dict[str, np.ndarray]) -> None:
    arrays["noisy"] = arrays["noisy"].copy()
    arrays["noisy"][0] += 1


@pytest.mark.parametrize(("old", "new"), [
    (b'"epsilon":1.0', b'"epsilon":5.0'), (b'"max_count":4', b'"max_count":9'),
    (b'"seeded":true', b'"seeded":false')])
def test_edited_header_fails_the_checksum(tmp_path: Path, seed: int, old: bytes,
                                          new: bytes) -> None:
    s = ProfileSketch(50, max_count=4, epsilon=1.0, rng=seed)
    path = tmp_path / "s.sketch"
    s.save(path)
    _edit_raw(path, old, new)
    with pytest.raises(DataError, match=r"s\.sketch .*checksum does not match"):
        ProfileSketch.load(path)


@pytest.mark.parametrize(("edit_meta", "edit_arrays", "match"), [
    (_set("epsilon", 5.0), None, "gamma is not the noise fraction"),
    (_set("domain_size", 70), None, "sampling parameters are inconsistent"),
    (_set("sampled_domain_size", 7), None, "counters are not 7 int64"),
    (_set("keys", "str"), None, "string keys are missing"),
    (_drop("epsilon"), None, "parameters are not those of a ProfileSketch"),
    (_set("extra", 1), None, "parameters are not those of a ProfileSketch"),
    (_set("epsilon", -1.0), None, "epsilon of ProfileSketch.load"),
    (_set("epsilon", 1e9), None, "epsilon of ProfileSketch.load"),
    (_set("gamma", "abc"), None, "is not a valid dpfreq ProfileSketch file"),
    (_set("seeded", "yes"), None, "seeded is not true or false"),
    (_set("max_count", -1), None, "max_count is not an integer"),
    (_set("domain_size", 2**70), None, "domain_size is not an integer"),
    (None, _bump_counter, None),
])
def test_tampered_file_is_refused(tmp_path: Path, seed: int, edit_meta: Any, edit_arrays: Any,
                                  match: str | None) -> None:
    s = ProfileSketch(50, max_count=4, epsilon=1.0, rng=seed)
    path = tmp_path / "s.npz"
    s.save(path)
    ProfileSketch.load(path)  # intact: loads
    _rewrite(path, edit_meta, edit_arrays)
    if match is None:  # a well-formed edit of the counters is a sketch anyone could have made
        assert ProfileSketch.load(path).noisy_counts()[0] == s.noisy_counts()[0] + 1
        return
    with pytest.raises(DataError, match=match) as info:
        ProfileSketch.load(path)
    assert str(path) in str(info.value) or "ProfileSketch.load" in str(info.value)


def test_other_version_is_refused(tmp_path: Path, seed: int) -> None:
    path = tmp_path / "s.npz"
    ProfileSketch(50, max_count=4, epsilon=1.0, rng=seed).save(path)
    _, meta, arrays = read_artifact(path, kind="ProfileSketch", versions=(1,))
    write_artifact(path, kind="ProfileSketch", version=2, meta=meta, arrays=arrays)
    with pytest.raises(DataError, match="format version 2 is not supported"):
        ProfileSketch.load(path)


def test_tampered_sample_is_refused(tmp_path: Path, seed: int) -> None:
    s = ProfileSketch(1000, max_count=4, epsilon=1.0, rng=seed, sample_rate=0.2)
    path = tmp_path / "s.npz"
    s.save(path)
    _rewrite(path, _set("sample_key", "00" * 16))
    with pytest.raises(DataError, match="does not match its rate and key"):
        ProfileSketch.load(path)


def test_truncated_or_flipped_file_is_refused(tmp_path: Path, seed: int) -> None:
    path = tmp_path / "s.npz"
    ProfileSketch(5000, max_count=4, epsilon=1.0, rng=seed).save(path)
    raw = path.read_bytes()
    reference = ProfileSketch.load(path).noisy_counts().copy()
    for cut in (10, len(raw) // 2, len(raw) - 3):
        path.write_bytes(raw[:cut])
        with pytest.raises(DataError, match=r"s\.npz"):
            ProfileSketch.load(path)
    for pos in range(40, len(raw), max(1, len(raw) // 37)):
        flipped = bytearray(raw)
        flipped[pos] ^= 0x10
        path.write_bytes(bytes(flipped))
        message = ""
        try:
            loaded = ProfileSketch.load(path).noisy_counts()
        except DataError as exc:
            message = str(exc)
        if message:
            assert "s.npz" in message
        else:  # a flip in a zip field nobody reads (e.g. a timestamp) changes nothing stored
            np.testing.assert_array_equal(loaded, reference)


def test_not_a_sketch_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="does not exist"):
        ProfileSketch.load(tmp_path / "missing.npz")
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip file at all")
    with pytest.raises(DataError, match=r"junk\.npz is not a valid dpfreq ProfileSketch file"):
        ProfileSketch.load(junk)
    other = tmp_path / "other.npz"
    np.savez(other, x=np.arange(3))
    with pytest.raises(DataError, match="no dpfreq header"):
        ProfileSketch.load(other)


# ---------------------------------------------------------------------------------- sampling


def test_sample_domain_is_deterministic_and_near_rate() -> None:
    key = bytes(range(16))
    s1 = sample_domain(200_000, rate=0.25, key=key)
    s2 = sample_domain(200_000, rate=0.25, key=key)
    s3 = sample_domain(200_000, rate=0.25, key=bytes(range(1, 17)))
    np.testing.assert_array_equal(s1, s2)
    assert not np.array_equal(s1, s3)
    assert np.all(np.diff(s1) > 0)
    # a fixed key gives a fixed set; its size is within 6 binomial sd of ρd (50000 ± 1162)
    assert abs(s1.size - 50_000) < 6 * np.sqrt(200_000 * 0.25 * 0.75)
    np.testing.assert_array_equal(sample_domain(10, rate=1.0, key=key), np.arange(10))
    with pytest.raises(ParameterError, match="rate of sample_domain"):
        sample_domain(10, rate=2.0, key=key)
    with pytest.raises(ParameterError, match="key of sample_domain"):
        sample_domain(10, rate=0.5, key=b"x")


def test_sampled_sketch_updates_and_release(seed: int) -> None:
    key = b"public sampling key"
    d = 20_000
    final = _counts(seed, d, 5)
    s = ProfileSketch(d, max_count=5, epsilon=HUGE_EPS, rng=seed, sample_rate=0.1,
                      sample_key=key)
    sample = sample_domain(d, rate=0.1, key=key)
    assert s.sampled_domain_size == sample.size
    s.update(np.arange(d), final)  # updates outside the sample are dropped
    np.testing.assert_array_equal(s.noisy_counts(), final[sample])
    t = ProfileSketch.from_counts(final, domain_size=d, max_count=5, epsilon=HUGE_EPS,
                                  rng=seed, sample_rate=0.1, sample_key=key)
    np.testing.assert_array_equal(t.noisy_counts(), s.noisy_counts())
    rel = s.reconstruct()
    expected = np.bincount(final[sample], minlength=6) / sample.size
    np.testing.assert_allclose(rel.value, expected, atol=1e-12)
    assert rel.domain_size == sample.size
    assert rel.mechanism_params["full_domain_size"] == d
    assert "sampling error" in rel.error.description
    with pytest.raises(DataError, match="items outside it"):
        s.update([d])  # outside the domain is still an error


def test_sampling_rate_too_small() -> None:
    with pytest.raises(ParameterError, match="at least one"):
        ProfileSketch(3, max_count=1, epsilon=1.0, sample_rate=1e-12, sample_key=b"12345678")


def test_seeded_sampling_key_is_reproducible(seed: int) -> None:
    a = ProfileSketch(5000, max_count=2, epsilon=1.0, rng=seed, sample_rate=0.3)
    b = ProfileSketch(5000, max_count=2, epsilon=1.0, rng=seed, sample_rate=0.3)
    assert a.sampled_domain_size == b.sampled_domain_size
    np.testing.assert_array_equal(a.noisy_counts(), b.noisy_counts())


# ---------------------------------------------------------------------------------- noise law


@pytest.mark.statistical
def test_sketch_noise_law(seed: int) -> None:
    """``h~ − h`` of a sketch against the exact DLap(e^{−γ}) pmf (chi-square, α = 1e-6).

    300 000 counters at ε = 0.8 over items with counts 0..4. Power: against DLap noise with
    parameter 0.95γ the noncentrality ``λ = N Σ (p' − p)²/p`` over the merged cells (computed
    below) makes the rejection probability at α = 1e-6 exceed 0.99.
    """
    eps = 0.8
    gamma = discrete_laplace_gamma(eps)
    d = 300_000
    h = np.arange(d) % 5
    s = ProfileSketch.from_counts(h, domain_size=d, max_count=4, epsilon=eps, rng=seed)
    z = s.noisy_counts() - h
    lo, hi = -25, 25  # tails beyond ±25 merged into the end cells
    cells = np.arange(lo, hi + 1)

    def probs(g: float) -> np.ndarray:
        p = discrete_laplace_pmf(cells, g)
        tail = (1.0 - p.sum()) / 2.0  # the law is symmetric
        p[0] += tail
        p[-1] += tail
        return p

    p0 = probs(float(gamma))
    p1 = probs(0.95 * float(gamma))
    keep = d * p0 >= 5  # merge: the end cells absorb cells with expected count < 5
    first, last = int(np.argmax(keep)), int(keep.size - 1 - np.argmax(keep[::-1]))

    def merged(v: np.ndarray) -> np.ndarray:
        return np.concatenate([[v[: first + 1].sum()], v[first + 1 : last], [v[last:].sum()]])

    e0, e1 = merged(d * p0), merged(d * p1)
    lam = float(((e1 - e0) ** 2 / e0).sum())
    df = e0.size - 1
    crit = scipy.stats.chi2.isf(1e-6, df)
    assert scipy.stats.ncx2.sf(crit, df, lam) > 0.99  # the power calculation
    observed = merged(np.bincount(np.clip(z, lo, hi) - lo, minlength=cells.size).astype(float))
    assert observed.sum() == d
    stat = float(((observed - e0) ** 2 / e0).sum())
    assert scipy.stats.chi2.sf(stat, df) > 1e-6
    assert Fraction(s.gamma) == gamma


# ---------------------------------------------------------------------------------- limits


def test_update_that_would_overflow_is_refused_and_changes_nothing(seed: int) -> None:
    s = ProfileSketch(3, max_count=5, epsilon=1.0, rng=seed)
    big = 2**52 - 1
    s.update(np.zeros(2047, dtype=np.int64), big)  # 2047·(2^52−1) < 2^63 − 2^52: fits
    before = s.noisy_counts().copy()
    assert int(before[0]) > 2**62
    repeats = np.zeros(4096, dtype=np.int64)
    for items, counts in (([0, 0], big), ([0, 2, 0], [big, 1, big]), (repeats, big)):
        with pytest.raises(DataError, match="within the int64 range") as info:
            s.update(items, counts)
        assert str(big) not in str(info.value)
        assert "\n" not in str(info.value)
        np.testing.assert_array_equal(s.noisy_counts(), before)
    s.update([1], big)  # other counters are unaffected
    assert s.noisy_counts()[1] > 2**51


def test_one_update_of_many_repeats_is_checked_exactly(seed: int) -> None:
    s = ProfileSketch(2, max_count=5, epsilon=1.0, rng=seed)
    with pytest.raises(DataError, match="within the int64 range"):
        s.update(np.zeros(4097, dtype=np.int64), 2**52 - 1)  # the sum alone exceeds int64
    assert abs(int(s.noisy_counts()[0])) < 100


@pytest.mark.parametrize(("kwargs", "param", "needle"), [
    ({"domain_size": 10**11}, "domain_size", "GiB available"),
    ({"domain_size": 10**10}, "domain_size", "GiB available"),
    ({"domain_size": 2**63 + 500}, "domain_size", "<= 4611686018427387903"),
    ({"domain_size": 100, "max_count": 10**9}, "max_count", "GiB available"),
])
def test_huge_parameters_are_refused_before_spending(kwargs: dict, param: str,
                                                     needle: str) -> None:
    acc = Accountant(PrivacyBudget(5.0))
    with pytest.raises(ParameterError, match=f"{param} of ProfileSketch") as info:
        ProfileSketch(**{"max_count": 5, "epsilon": 1.0, **kwargs}, accountant=acc)
    assert needle in str(info.value)
    assert "\n" not in str(info.value)
    assert (acc.spent.epsilon, acc.spent.delta) == (0.0, 0.0)


def test_tiny_epsilon_window_is_estimated(monkeypatch: pytest.MonkeyPatch) -> None:
    import dpfreq.resources as resources

    monkeypatch.setattr(resources, "available_memory_bytes", lambda: 1 << 30)
    with pytest.raises(ParameterError, match="epsilon of ProfileSketch must be large enough "
                       "for the reconstruction's noise window") as info:
        ProfileSketch(1000, max_count=5, epsilon=1e-6)
    assert "epsilon_to_fraction" not in str(info.value)
    assert "GiB available" in str(info.value)


def test_tiny_epsilon_sketch_names_what_the_user_typed(
        seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import dpfreq.resources as resources

    # the intervals of a reconstruction at ε = 1e-6 need hundreds of GiB: a machine that has them
    monkeypatch.setattr(resources, "available_memory_bytes", lambda: 1 << 50)
    s = ProfileSketch(50, max_count=2, epsilon=1e-6, rng=seed)  # γ just below 1e-6 internally
    assert s.gamma <= Fraction(1, 10**6)
    with pytest.raises(ParameterError, match="epsilon of ProfileSketch") as info:
        ProfileSketch(50, max_count=2, epsilon=9e-7)
    assert "epsilon_to_fraction" not in str(info.value)


def test_noise_is_the_keyed_blocks_of_histogram_noise(seed: int) -> None:
    """The one noise implementation: block b of the domain is block_noise(key, b, ...)."""
    from dpfreq.profile.histogram_noise import block_noise, domain_noise, master_key
    from dpfreq.rng import resolve_rng

    gamma = discrete_laplace_gamma(0.9)
    key = master_key(resolve_rng(seed))
    s = ProfileSketch(3000, max_count=4, epsilon=0.9, rng=seed)
    np.testing.assert_array_equal(s.noisy_counts(), domain_noise(key, 3000, gamma))
    bs = 1000
    z = domain_noise(key, 2 * bs + 5, gamma, block_size=bs)
    np.testing.assert_array_equal(z[:bs], block_noise(key, 0, bs, gamma))
    np.testing.assert_array_equal(z[bs : 2 * bs], block_noise(key, 1, bs, gamma))
    np.testing.assert_array_equal(z[2 * bs :], block_noise(key, 2, 5, gamma))
    assert not np.array_equal(z[:bs], z[bs : 2 * bs])  # distinct blocks, distinct streams
