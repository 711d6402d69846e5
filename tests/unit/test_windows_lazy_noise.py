"""Keyed node noise schemes of dpfreq.windows.lazy_noise: determinism, format stability, the rare
paths of the AES + table sampler, and legacy releases keeping their noise."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

import dpfreq.windows.lazy_noise as lazy
from dpfreq._exact_inverse import inverse_table, survival_bounds
from dpfreq.errors import ParameterError
from dpfreq.windows import KeyedDiscreteLaplace, WindowCountsRelease, release_window_counts
from dpfreq.windows.lazy_noise import LAPLACE_SCHEME, LEGACY_LAPLACE_SCHEME

KEY = bytes(range(32))
IDS = np.array([0, 1, 2, 3, 1 << 40, (1 << 63) - 1])


# Known-answer values: node noise is a deterministic function of (key, structure, γ, id) and a
# saved release is re-answered from its key, so these values are part of the file format. They
# were computed when each scheme was introduced (the legacy ones with the code of revision
# 3315f9a); a change here means saved releases would change their answers.
@pytest.mark.parametrize(("scheme", "gamma", "expected"), [
    (LEGACY_LAPLACE_SCHEME, Fraction(1, 3), [-2, 0, 4, -1, 1, 3]),
    (LAPLACE_SCHEME, Fraction(1, 3), [-1, 0, -3, -5, -1, 9]),
    (LAPLACE_SCHEME, Fraction(1, 5000), [-1512, -867, -17888, -9444, -1674, 13404]),
])
def test_known_answers_of_each_scheme(scheme, gamma, expected):
    assert KeyedDiscreteLaplace(KEY, 7, gamma, scheme=scheme).noise(IDS).tolist() == expected


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
    with pytest.raises(ParameterError, match="scheme"):
        KeyedDiscreteLaplace(KEY, 1, Fraction(1), scheme="xor")
    with pytest.raises(ParameterError, match="at least 16 bytes"):
        KeyedDiscreteLaplace(b"short", 1, Fraction(1))
    with pytest.raises(ParameterError, match="gamma"):
        KeyedDiscreteLaplace(KEY, 1, Fraction(0))
    src = KeyedDiscreteLaplace(KEY, 1, Fraction(1))
    with pytest.raises(ParameterError, match="non-negative"):
        src.noise([3, -1])
    with pytest.raises(ParameterError, match="integers"):
        src.noise([1.5])


def test_huge_gamma_uses_the_stream_sampler_and_is_zero():
    """γ = 50: no threshold fits 63 bits (empty table). Pr[Z != 0] = 2α/(1+α) < 4·10^-22 per
    draw, so 10^4 draws are all zero except with probability < 10^-17."""
    assert inverse_table(Fraction(50), True).size == 0
    src = KeyedDiscreteLaplace(KEY, 2, Fraction(50))
    z = src.noise(np.arange(10_000))
    assert not z.any()
    assert np.array_equal(KeyedDiscreteLaplace(KEY, 2, Fraction(50)).noise(np.arange(10_000)), z)


def test_word_on_a_threshold_is_settled_by_the_nodes_own_stream():
    """A word equal to threshold D_k goes up by one with probability frac(2^63 S(k)) (the chance
    that W + R <= 2^63 S(k)). 4000 nodes: a binomial test at α = 1e-6, plus determinism."""
    gamma = Fraction(1, 3)
    tab = inverse_table(gamma, True)
    k = 5
    lo, _ = survival_bounds(gamma, k, True, 63 + 64)
    frac = (lo - (int(tab.at[k]) << 64)) / float(1 << 64)
    assert 0.0 < frac < 1.0
    src = KeyedDiscreteLaplace(KEY, 9, gamma)
    nodes = np.arange(4000, dtype=np.int64)
    words = np.full(nodes.size, tab.at[k], dtype=np.uint64)
    got = src._invert(tab, words, nodes, 0)
    assert set(np.unique(got).tolist()) <= {k, k + 1}
    ups = int(np.sum(got == k + 1))
    assert stats.binomtest(ups, nodes.size, frac).pvalue > 1e-6
    assert np.array_equal(src._invert(tab, words, nodes, 0), got)  # same node, same settle
    plain = np.full(nodes.size, tab.at[k] + np.uint64(1), dtype=np.uint64)
    assert np.all(src._invert(tab, plain, nodes, 0) == k)  # above D_k: decided, no settle


def test_legacy_release_file_keeps_its_noise(tmp_path):
    """A file saved before the scheme was recorded (no "noise_scheme" in its build arguments)
    loads with the legacy scheme: its answers equal a legacy release built from the same key."""
    rng = np.random.default_rng(2)
    item = rng.integers(0, 30, size=400)
    times = rng.integers(1, 65, size=400)
    rel = release_window_counts((item, times), horizon=64, epsilon=1.0, k_values=[1, 2],
                                windows=["all", "cumulative"], strategy={"all": "tree2d"},
                                rng=11)
    assert rel.mechanism_params["noise_scheme"] == LAPLACE_SCHEME
    path = rel.save(tmp_path / "new.npz")
    # the layout of files written before the change: dense item codes and periods sorted by
    # (item, period), and build arguments without "noise_scheme"
    order = np.lexsort((times, item))
    codes = np.unique(item[order], return_inverse=True)[1].astype(np.int64)
    build = {k: v for k, v in rel._state.build_args.items() if k != "noise_scheme"}
    meta = {"public": rel.to_dict(), "build": build, "key": rel._state.key.hex()}
    old_path = tmp_path / "old.npz"
    with old_path.open("wb") as fh:
        np.savez_compressed(fh, item=codes, time=times[order].astype(np.int64),
                            meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8))
    old = WindowCountsRelease.load(old_path)
    assert old.mechanism_params["noise_scheme"] == LEGACY_LAPLACE_SCHEME
    new = WindowCountsRelease.load(path)
    t1 = np.array([1, 3, 10, 40])
    t2 = np.array([64, 9, 10, 63])
    assert np.array_equal(new.window(t1, t2, 2).estimate, rel.window(t1, t2, 2).estimate)
    # the legacy file's structures draw from the legacy construction under the same key
    s_old = old._state.structures[("all", 2)]._impl[0]._noise
    s_new = rel._state.structures[("all", 2)]._impl[0]._noise
    assert s_old.scheme == LEGACY_LAPLACE_SCHEME
    assert s_new.scheme == LAPLACE_SCHEME
    ref = KeyedDiscreteLaplace(old._state.key, s_old.structure, s_old.gamma,
                               scheme=LEGACY_LAPLACE_SCHEME)
    assert np.array_equal(s_old.noise(IDS[:5]), ref.noise(IDS[:5]))
    # cumulative curves do not use lazy 2d noise: unchanged by the scheme
    assert np.array_equal(old.cumulative_curve(1).estimate, rel.cumulative_curve(1).estimate)


def test_aes_chunking_does_not_change_values(monkeypatch):
    ids = np.random.default_rng(1).integers(0, 1 << 60, size=1000)
    ref = KeyedDiscreteLaplace(KEY, 5, Fraction(1, 4000)).noise(ids)
    monkeypatch.setattr(lazy, "_AES_CHUNK", 7)
    assert np.array_equal(KeyedDiscreteLaplace(KEY, 5, Fraction(1, 4000)).noise(ids), ref)
