"""Keyed node noise of dpfreq.windows.noise.keyed: known answers recomputed from first principles,
determinism, the rare paths of the AES + table sampler, and the discrete Gaussian's rounds."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from scipy import stats

import dpfreq.windows.noise.keyed as lazy
from dpfreq._exact_inverse import exp_neg_bounds, inverse_table, survival_bounds
from dpfreq.errors import ParameterError
from dpfreq.rng import derive_key
from dpfreq.windows.noise.keyed import (
    GAUSSIAN_SCHEME,
    LAPLACE_SCHEME,
    KeyedDiscreteGaussian,
    KeyedDiscreteLaplace,
    structure_name,
)

KEY = bytes(range(32))
IDS = [0, 1, 2, 3, 1 << 40, (1 << 63) - 1]


def aes_word(aes_key: bytes, node: int, tag: int) -> int:
    """First little-endian 64-bit word of AES-256_K(node ‖ tag), straight from `cryptography`."""
    enc = Cipher(algorithms.AES(aes_key), modes.ECB()).encryptor()
    block = node.to_bytes(8, "little") + tag.to_bytes(8, "little")
    return int.from_bytes(enc.update(block)[:8], "little")


def reference_laplace(key: bytes, name: tuple, gamma: Fraction, node: int, tag0: int = 0,
                      scheme: str = LAPLACE_SCHEME) -> int:
    """Scalar reference of the documented construction: |Z| = #{k : ⌊2^63 Pr[|Z| > k]⌋ > W}
    with W the top 63 bits of the word, computed from exact integer bounds of the survival
    function (no table, no float); the low bit is the sign. Valid when |Z| stays inside the
    range scanned here and W is not a threshold (asserted)."""
    word = aes_word(derive_key(key, "windows", scheme, *name), node, tag0)
    w, neg = word >> 1, word & 1
    mag = 0
    while True:
        lo, hi = survival_bounds(gamma, mag, True, 63 + 64)
        d_lo, d_hi = lo >> 64, hi >> 64
        assert d_lo == d_hi
        assert d_lo != w
        if d_lo <= w:
            break
        mag += 1
        assert mag < 4000
    return -mag if neg else mag


@pytest.mark.parametrize("gamma", [Fraction(1, 3), Fraction(2, 7), Fraction(1, 50)])
def test_laplace_equals_the_first_principles_reference(gamma):
    """Provenance of the known answers: every value is recomputed here from derive_key, raw
    AES and exact survival bounds, independently of the vectorized table code."""
    name = ("all", 3, 1)
    got = KeyedDiscreteLaplace(KEY, name, gamma).noise(IDS).tolist()
    assert got == [reference_laplace(KEY, name, gamma, i) for i in IDS]


def test_known_answer_regression_pin():
    """A regression pin of a deterministic function of a fixed key (values produced by
    `test_laplace_equals_the_first_principles_reference`'s reference for these arguments):
    a change here means saved releases would change their answers."""
    name = ("cumulative", 1, 0)
    expected = [reference_laplace(KEY, name, Fraction(1, 3), i) for i in IDS]
    assert KeyedDiscreteLaplace(KEY, name, Fraction(1, 3)).noise(IDS).tolist() == expected
    assert any(expected)


def reference_gaussian(key: bytes, name: tuple, sigma2_min: float, node: int) -> int:
    """CKS Algorithm 3 on the documented words: Y from the Laplace reference with γ = 1/t on
    tag r·2^32, accepted when the top 63 bits of the word of tag r·2^32 + 2^31 lie below
    ⌊2^63 exp(−(|Y| − u)²/(2tu))⌋ (exact bounds)."""
    _, t, u = lazy.gaussian_sigma2(sigma2_min)
    aes_key = derive_key(key, "windows", GAUSSIAN_SCHEME, *name)
    for r in range(200):
        tag0 = r << 32
        y = reference_laplace(key, name, Fraction(1, t), node, tag0, scheme=GAUSSIAN_SCHEME)
        w = aes_word(aes_key, node, tag0 + (1 << 31)) >> 1
        lo, hi = exp_neg_bounds(Fraction((abs(y) - u) ** 2, 2 * t * u), 63 + 64)
        d_lo, d_hi = lo >> 64, hi >> 64
        assert d_lo == d_hi
        assert d_lo != w
        if w < d_lo:
            return y
    raise AssertionError("no acceptance in 200 rounds")


def test_gaussian_equals_the_first_principles_reference():
    name = ("all", 2, 0)
    got = KeyedDiscreteGaussian(KEY, name, 5.5).noise(IDS).tolist()
    assert got == [reference_gaussian(KEY, name, 5.5, i) for i in IDS]


def test_values_are_elementwise_and_independent_of_batch_and_order():
    src = KeyedDiscreteLaplace(KEY, 3, Fraction(1, 900))
    ids = np.random.default_rng(5).integers(0, 1 << 62, size=5000)
    ids[::7] = ids[0]  # repeated ids get the same value
    ref = src.noise(ids)
    assert np.all(ref[::7] == ref[0])
    perm = np.random.default_rng(6).permutation(ids.size)
    assert np.array_equal(src.noise(ids[perm]), ref[perm])
    assert np.array_equal(src.noise(ids.reshape(50, 100)), ref.reshape(50, 100))
    assert src.noise(np.zeros(0, dtype=np.int64)).shape == (0,)
    other = KeyedDiscreteLaplace(KEY, 4, Fraction(1, 900)).noise(ids)
    assert not np.array_equal(other, ref)  # another structure, independent noise
    assert src.n_drawn == 3 * ids.size
    assert src.cache_size == 0


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ParameterError, match="at least 16 bytes"):
        KeyedDiscreteLaplace(b"short", 1, Fraction(1))
    with pytest.raises(ParameterError, match="gamma"):
        KeyedDiscreteLaplace(KEY, 1, Fraction(0))
    with pytest.raises(ParameterError, match="structure"):
        KeyedDiscreteLaplace(KEY, (1.5,), Fraction(1))
    with pytest.raises(ParameterError, match="structure"):
        KeyedDiscreteLaplace(KEY, (), Fraction(1))
    with pytest.raises(ParameterError, match="sigma2"):
        KeyedDiscreteGaussian(KEY, 1, float("inf"))
    src = KeyedDiscreteLaplace(KEY, 1, Fraction(1))
    with pytest.raises(ParameterError, match="non-negative"):
        src.noise([3, -1])
    with pytest.raises(ParameterError, match="integers"):
        src.noise([1.5])


def test_structure_names_are_canonical():
    assert structure_name(5) == (5,)
    assert structure_name(("all", np.int64(3), 0)) == ("all", 3, 0)
    a = KeyedDiscreteLaplace(KEY, ("all", np.int64(3), 0), Fraction(1, 3)).noise(IDS)
    b = KeyedDiscreteLaplace(KEY, ("all", 3, 0), Fraction(1, 3)).noise(IDS)
    assert np.array_equal(a, b)


def test_huge_gamma_uses_the_per_node_stream_sampler_and_is_zero():
    """γ = 50: no threshold fits 63 bits (empty table). Pr[Z != 0] = 2α/(1+α) < 4·10^-22 per
    draw, so 300 draws are all zero except with probability < 10^-19."""
    assert inverse_table(Fraction(50), True).size == 0
    z = KeyedDiscreteLaplace(KEY, 2, Fraction(50)).noise(np.arange(300))
    assert not z.any()
    assert np.array_equal(KeyedDiscreteLaplace(KEY, 2, Fraction(50)).noise(np.arange(300)), z)


def test_word_on_a_threshold_is_settled_by_the_nodes_own_stream():
    """A word equal to threshold D_k goes up by one with probability frac(2^63 S(k)) (the chance
    that W + R <= 2^63 S(k)). 4000 nodes: a binomial test at α = 1e-6, plus determinism."""
    gamma = Fraction(1, 3)
    tab = inverse_table(gamma, True)
    k = 5
    lo, _ = survival_bounds(gamma, k, True, 63 + 64)
    frac = (lo - (int(tab.at[k]) << 64)) / float(1 << 64)
    assert 0.0 < frac < 1.0
    prf = KeyedDiscreteLaplace(KEY, 9, gamma)._prf
    nodes = np.arange(4000, dtype=np.int64)
    words = np.full(nodes.size, tab.at[k], dtype=np.uint64)
    got = prf.invert(tab, words, nodes, 0)
    assert set(np.unique(got).tolist()) <= {k, k + 1}
    ups = int(np.sum(got == k + 1))
    assert stats.binomtest(ups, nodes.size, frac).pvalue > 1e-6
    assert np.array_equal(prf.invert(tab, words, nodes, 0), got)  # same node, same settle
    plain = np.full(nodes.size, tab.at[k] + np.uint64(1), dtype=np.uint64)
    assert np.all(prf.invert(tab, plain, nodes, 0) == k)  # above D_k: decided, no settle


@pytest.mark.parametrize(("sigma2", "y"), [(9.0, 5), (7, 3)])
def test_gaussian_tie_on_the_acceptance_threshold_is_settled_exactly(sigma2, y):
    """A word equal to ⌊2^63 e^{-x}⌋, ``x = (t|Y| − σ²)²/(2σ²t²)``, is accepted with probability
    frac(2^63 e^{-x}) — for a float target (rounded to σ² = t·u = 12, t = 4: ``x = 4/24``) and
    an integer σ² drawn as given (7, t = 3: ``x = 4/126``)."""
    src = KeyedDiscreteGaussian(KEY, 1, sigma2)
    t = src._t
    mag = np.full(4000, y, dtype=np.int64)
    x = Fraction((t * y - src.sigma2) ** 2, 2 * src.sigma2 * t * t)
    assert x == (Fraction(4, 24) if src.sigma2 == 12 else Fraction(4, 126))
    lo, _ = exp_neg_bounds(x, 63 + 64)
    frac = (lo % (1 << 64)) / float(1 << 64)
    words = np.full(mag.size, lo >> 64, dtype=np.uint64)
    got = src._accept(mag, words, np.arange(mag.size, dtype=np.int64), 7)
    assert stats.binomtest(int(got.sum()), mag.size, frac).pvalue > 1e-6
    assert np.array_equal(src._accept(mag, words, np.arange(mag.size, dtype=np.int64), 7), got)
    assert src._accept(mag[:5], words[:5] - np.uint64(1), np.arange(5), 7).all()
    assert not src._accept(mag[:5], words[:5] + np.uint64(1), np.arange(5), 7).any()


def test_aes_chunking_does_not_change_values(monkeypatch):
    ids = np.random.default_rng(1).integers(0, 1 << 50, size=3000)
    ref = KeyedDiscreteLaplace(KEY, 5, Fraction(1, 4000)).noise(ids)
    ref_g = KeyedDiscreteGaussian(KEY, 5, 30.0).noise(ids)
    monkeypatch.setattr(lazy, "_AES_CHUNK", 7)
    assert np.array_equal(KeyedDiscreteLaplace(KEY, 5, Fraction(1, 4000)).noise(ids), ref)
    assert np.array_equal(KeyedDiscreteGaussian(KEY, 5, 30.0).noise(ids), ref_g)


def test_the_encryptor_is_kept_per_thread_and_values_agree_across_threads() -> None:
    """One encryptor per thread, reused by later draws of that thread; values drawn in another
    thread (its own encryptor) are the same."""
    import threading

    src = KeyedDiscreteLaplace(KEY, ("all", 1, 0), Fraction(1, 3))
    prf = src._prf
    assert prf.encryptor() is prf.encryptor()
    got: dict[str, object] = {}

    def other() -> None:
        got["enc"] = prf.encryptor()
        got["values"] = src.noise(np.arange(5000))

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert got["enc"] is not prf.encryptor()
    assert np.array_equal(got["values"], src.noise(np.arange(5000)))
