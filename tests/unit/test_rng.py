"""The randomness policy: secure default, reproducible seeds, keyed streams."""

from __future__ import annotations

import re

import numpy as np
import pytest
import randomgen

from dpfreq.errors import ParameterError, public_call
from dpfreq.noise import sample_discrete_laplace
from dpfreq.rng import keyed_generator, new_secret_key, resolve_rng, secure_generator

SHAPE = re.compile(r"^\w+ of [\w.]+ must be .+; got .+\.$")


def test_default_is_the_csprng_and_unseeded():
    res = resolve_rng(None)
    assert res.seeded is False
    assert isinstance(res.generator, np.random.Generator)
    bg = res.generator.bit_generator
    assert isinstance(bg, randomgen.ChaCha)
    assert bg.state["state"]["rounds"] == 20


def test_default_generators_are_freshly_keyed():
    a = resolve_rng(None).generator.integers(0, 2**63, size=4)
    b = resolve_rng(None).generator.integers(0, 2**63, size=4)
    assert not np.array_equal(a, b)
    assert isinstance(secure_generator(), np.random.Generator)


def test_seed_is_reproducible_and_marked(seed):
    r1, r2 = resolve_rng(seed), resolve_rng(seed)
    assert r1.seeded
    assert r2.seeded
    assert isinstance(r1.generator.bit_generator, np.random.PCG64)
    np.testing.assert_array_equal(
        r1.generator.integers(0, 100, 50), r2.generator.integers(0, 100, 50)
    )
    r3 = resolve_rng(seed + 1)
    assert not np.array_equal(resolve_rng(seed).generator.integers(0, 2**62, 8),
                              r3.generator.integers(0, 2**62, 8))
    assert resolve_rng(np.int64(3)).seeded


def test_generator_passes_through(rng):
    res = resolve_rng(rng)
    assert res.generator is rng
    assert res.seeded


@pytest.mark.parametrize("bad", [-1, 1.5, True, np.bool_(True), "1", [1],
                                 np.random.RandomState(0), np.random.PCG64(0)])
def test_bad_rng_rejected(bad):
    with pytest.raises(ParameterError) as info, public_call("release_profile"):
        resolve_rng(bad)
    assert SHAPE.match(str(info.value))
    assert str(info.value).startswith("rng of release_profile must be")


def test_global_numpy_state_untouched():
    before = np.random.get_state()  # noqa: NPY002 - checking the legacy state is untouched
    sample_discrete_laplace(0.5, 1000)
    sample_discrete_laplace(0.5, 1000, rng=1)
    after = np.random.get_state()  # noqa: NPY002
    assert before[0] == after[0]
    np.testing.assert_array_equal(before[1], after[1])
    assert before[2:] == after[2:]


def test_keyed_generator_streams():
    key = new_secret_key()
    assert len(key) == 32
    a = keyed_generator(key, 1, 2).integers(0, 2**63, size=4)
    b = keyed_generator(key, 1, 2).integers(0, 2**63, size=4)
    c = keyed_generator(key, 2, 1).integers(0, 2**63, size=4)
    d = keyed_generator(new_secret_key(), 1, 2).integers(0, 2**63, size=4)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert not np.array_equal(a, d)
    assert isinstance(keyed_generator(key).bit_generator, randomgen.ChaCha)


@pytest.mark.parametrize("bad", [b"short", "a" * 32, 12345, None])
def test_keyed_generator_rejects_bad_keys(bad):
    with pytest.raises(ParameterError, match=r"^key of keyed_generator must be"):
        keyed_generator(bad)


@pytest.mark.parametrize("part", [10**5000, -(10**5000), "a\ud800b"],
                         ids=["huge", "huge-negative", "lone-surrogate"])
def test_derive_key_refuses_unencodable_parts_with_a_parameter_error(part):
    from dpfreq.rng import derive_key

    with pytest.raises(ParameterError, match=r"^part of derive_key must be "):
        derive_key(bytes(32), part)
