"""The optional compiled passes of dpfreq.windows.noise.kernel (extra ``fast``): the same integers
as the numpy path, bit for bit, on many ids, on crafted words (ties, tails, several thresholds
in a bucket) and on dominance sums; and the kernels load from a cache directory of one's own."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from dpfreq._exact_inverse import inverse_table
from dpfreq.windows.data.dominance_count import DominanceCounter
from dpfreq.windows.noise import kernel as node_kernel
from dpfreq.windows.noise import keyed as lazy_noise
from dpfreq.windows.noise.dominance import DominanceNoise
from dpfreq.windows.noise.keyed import KeyedDiscreteGaussian, KeyedDiscreteLaplace
from dpfreq.windows.noise.trees import Tree2DNoise

pytest.importorskip("numba")

KEY = bytes(range(32))
GAMMAS = [Fraction(1, 4700), Fraction(1, 1156), Fraction(1, 97), Fraction(1, 3), Fraction(2),
          Fraction(9, 2), Fraction(30)]


@pytest.fixture(scope="module")
def kern():
    mod = node_kernel.load()
    assert mod is not None
    return mod


@pytest.fixture
def numpy_path(monkeypatch):
    """Runs a function with the compiled passes switched off."""
    def run(fn, *args):
        with monkeypatch.context() as m:
            m.setattr(node_kernel, "loaded", lambda: None)
            return fn(*args)
    return run


@pytest.fixture
def compiled_path(kern, monkeypatch):
    """Runs a function with the compiled passes on, for batches of any size."""
    def run(fn, *args):
        with monkeypatch.context() as m:
            m.setattr(node_kernel, "loaded", lambda: kern)
            m.setattr(node_kernel, "MIN_IDS", 1)
            return fn(*args)
    return run


def some_ids(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.concatenate((np.arange(2000), rng.integers(0, 1 << 62, size=n),
                           [(1 << 63) - 1]))


@pytest.mark.parametrize("gamma", GAMMAS)
def test_laplace_values_equal_the_numpy_path(gamma, numpy_path, compiled_path):
    src = KeyedDiscreteLaplace(KEY, ("all", 1, 0), gamma)
    ids = some_ids(60_000, 1)
    fast = compiled_path(src.noise, ids)
    assert np.array_equal(fast, numpy_path(src.noise, ids))
    if gamma == Fraction(1, 4700):  # ~3% of the values lie beyond the table: tails were taken
        assert np.count_nonzero(np.abs(fast) >= inverse_table(gamma, True).size) > 100


def test_laplace_values_of_a_small_gamma_without_buckets(numpy_path, compiled_path):
    """γ below ~2^-14 keeps the logarithm guess (no bucket table): the numpy path either way."""
    gamma = Fraction(1, 40_000)
    assert inverse_table(gamma, True).bucket_arrays() is None
    src = KeyedDiscreteLaplace(KEY, "small", gamma)
    ids = some_ids(5_000, 2)
    assert np.array_equal(compiled_path(src.noise, ids), numpy_path(src.noise, ids))


@pytest.mark.parametrize("sigma2", [0.5, 6.0, 400.0, 1e5])
def test_gaussian_values_equal_the_numpy_path(sigma2, numpy_path, compiled_path):
    src = KeyedDiscreteGaussian(KEY, ("all", 3, 1), sigma2)
    ids = some_ids(20_000, 3)
    assert np.array_equal(compiled_path(src.noise, ids), numpy_path(src.noise, ids))


def crafted_words(tab) -> np.ndarray:
    """63-bit words on, next to and between thresholds, beyond the table, and the extremes."""
    t = tab.table.astype(object)
    picks = [0, 1, 2, (1 << 63) - 1, (1 << 62), (1 << 62) - 1]
    for d in list(t[:50]) + list(t[-50:]) + list(t[:: max(1, len(t) // 200)]):
        picks += [int(d) - 1, int(d), int(d) + 1]
    return np.array([w for w in picks if 0 <= w < 1 << 63], dtype=np.uint64)


def run_laplace_words(kern, tables, words, signs):
    n = words.size
    ct = np.zeros(2 * n + 2, dtype=np.uint64)
    ct[:2 * n:2] = (words << np.uint64(1)) | signs
    out = np.empty(n, dtype=np.int64)
    flagged = np.empty(n, dtype=np.int64)
    f = kern.laplace_words(ct, n, *tables, out, flagged)
    return out, flagged[:f]


@pytest.mark.parametrize("gamma", GAMMAS)
@pytest.mark.parametrize("force_search", [False, True])
def test_crafted_words_decide_as_count_and_ties(gamma, force_search, kern):
    """Every word: the magnitude of ``count_and_ties`` with the sign bit, ties and words beyond
    the table flagged (value 0 at a tie, ±K beyond). ``force_search`` marks every bucket as
    holding several thresholds, so the binary search decides every word."""
    tab = inverse_table(gamma, True)
    tables = tab.bucket_arrays()
    assert tables is not None
    if force_search:
        base = np.full_like(tables[3], -(1 << 40))
        tables = (*tables[:3], base, *tables[4:])
    words = crafted_words(tab)
    signs = (np.arange(words.size) % 2).astype(np.uint64)
    out, flagged = run_laplace_words(kern, tables, words, signs)
    m, ties = tab.count_and_ties(words)
    tails = np.flatnonzero(m == tab.size)
    assert ties.size > 0
    assert tails.size > 0
    assert np.array_equal(flagged, np.union1d(ties, tails))
    assert np.all(out[ties] == 0)
    expect = np.where(signs == 1, -m, m)
    keep = np.setdiff1d(np.arange(words.size), ties)
    assert np.array_equal(out[keep], expect[keep])


@pytest.mark.parametrize("gamma", GAMMAS)
def test_crafted_word_sums_leave_out_what_laplace_words_flags(gamma, kern):
    """``laplace_sums`` adds per query exactly the values ``laplace_words`` decides, with the
    sign, and flags the same words (ties and tails) without adding them."""
    tab = inverse_table(gamma, True)
    tables = tab.bucket_arrays()
    words = crafted_words(tab)
    signs = (np.arange(words.size) % 2).astype(np.uint64)
    out, flagged = run_laplace_words(kern, tables, words, signs)
    ct = np.zeros(2 * words.size + 2, dtype=np.uint64)
    ct[:2 * words.size:2] = (words << np.uint64(1)) | signs
    starts = np.array([0, 0, 5, 6, words.size // 2, words.size], dtype=np.int64)
    sums = np.full(starts.size - 1, 7, dtype=np.int64)
    got = np.empty(words.size, dtype=np.int64)
    f = kern.laplace_sums(ct, starts, starts.size - 1, -1, *tables, sums, got)
    assert np.array_equal(got[:f], flagged)
    kept = out.copy()
    kept[flagged] = 0
    want = [7 - int(kept[a:b].sum()) for a, b in itertools.pairwise(starts)]
    assert sums.tolist() == want


def test_crafted_geometric_words_decide_as_the_numpy_path(kern):
    """``G = (A << m) + B`` from crafted words: A on, next to and beyond its thresholds, digit
    words on and next to theirs; flagged exactly where the numpy path needs more bits."""
    gamma = Fraction(1, 4700)
    m, geo = lazy_noise._geometric_split(gamma)
    digits = lazy_noise._digit_thresholds(gamma, m)
    tables = geo.bucket_arrays()
    assert m == 12
    assert tables is not None
    rng = np.random.default_rng(5)
    a_words = crafted_words(geo)
    n = a_words.size
    d_words = rng.integers(0, 1 << 63, size=(n, m), dtype=np.uint64)
    for j in range(m):  # some digit words on, just below and just above their threshold
        d_words[j::3 * m, j] = digits[j]
        d_words[(j + m)::3 * m, j] = digits[j] - np.uint64(1)
        d_words[(j + 2 * m)::3 * m, j] = digits[j] + np.uint64(1)
    words = np.concatenate((a_words[:, None], d_words), axis=1)
    ct = np.zeros(2 * words.size + 2, dtype=np.uint64)
    ct[:2 * words.size:2] = (words << np.uint64(1)).ravel()
    out = np.empty(n, dtype=np.int64)
    flagged = np.empty(n, dtype=np.int64)
    f = kern.geometric_words(ct, n, m, digits, *tables, out, flagged)
    a, a_ties = geo.count_and_ties(a_words)
    bad = (a == geo.size) | np.isin(np.arange(n), a_ties) | (d_words == digits).any(axis=1)
    assert 0 < f < n
    assert np.array_equal(flagged[:f], np.flatnonzero(bad))
    bits = (d_words < digits).astype(np.int64) << np.arange(m)
    expect = (a << m) + bits.sum(axis=1)
    assert np.array_equal(out[~bad], expect[~bad])


def test_geometric_tails_equal_the_numpy_path(kern):
    gamma = Fraction(1, 4700)
    m, geo = lazy_noise._geometric_split(gamma)
    prf = KeyedDiscreteLaplace(KEY, "tails", gamma)._prf
    enc = prf.encryptor()
    ids = some_ids(20_000, 6)
    g, redo = node_kernel.geometric(kern, enc, ids, node_kernel.tail_tags(0, m),
                                    lazy_noise._digit_thresholds(gamma, m),
                                    geo.bucket_arrays())
    expect = prf.geometric(enc, gamma, ids, 0)
    keep = np.setdiff1d(np.arange(ids.size), redo)
    assert redo.size < ids.size // 100
    assert np.array_equal(g[keep], expect[keep])


@pytest.mark.parametrize("gamma", [Fraction(1, 40), Fraction(1, 4700)])
@pytest.mark.parametrize("domain", [8, 64, 1 << 10])
def test_dominance_sums_equal_the_numpy_path(domain, gamma, numpy_path, compiled_path):
    """The lower pairs listed and summed by the compiled passes (blocks shared by the two
    trees, several chunks of blocks at the largest domain, the tails of γ = 1/4700 added
    afterwards) give the same sums (fresh structures, so every split is built afresh on each
    path)."""
    trees = [Tree2DNoise(domain, gamma, KEY, ("all", 1, i)) for i in (0, 1)]
    rng = np.random.default_rng(domain)
    for n in (1, 37, 3_000):
        x = rng.integers(-1, domain, size=n)
        y = rng.integers(-1, domain, size=n)
        fast = compiled_path(DominanceNoise(trees, (1, -1)), x, y)
        assert np.array_equal(fast, numpy_path(DominanceNoise(trees, (1, -1)), x, y))


@pytest.mark.parametrize("domain", [8, 1 << 10])
def test_dominance_sums_by_node_values_equal_the_numpy_path(domain, numpy_path, compiled_path,
                                                           monkeypatch):
    """Trees whose values the compiled summing pass does not decide (a discrete Gaussian, a
    very large γ) list their lower pairs by the compiled listing and sum ``node_values``:
    the same sums as the numpy listing."""
    monkeypatch.setattr(DominanceNoise, "_word_passes", lambda self: None)
    trees = [Tree2DNoise(domain, Fraction(1, 40), KEY, ("all", 1, i)) for i in (0, 1)]
    rng = np.random.default_rng(domain + 1)
    for n in (1, 37, 3_000):
        x = rng.integers(-1, domain, size=n)
        y = rng.integers(-1, domain, size=n)
        fast = compiled_path(DominanceNoise(trees, (1, -1)), x, y)
        assert np.array_equal(fast, numpy_path(DominanceNoise(trees, (1, -1)), x, y))


@pytest.mark.parametrize(("n_points", "x_max", "y_max"), [(0, 9, 9), (1, 1, 1), (400, 37, 20),
                                                         (5_000, 300, 1_000), (20_000, 40, 9),
                                                         (30_000, 2_000, 70_000)])
def test_dominance_counts_equal_the_numpy_path(n_points, x_max, y_max, numpy_path,
                                               compiled_path):
    """The compiled counts (each search confined to its node's keys) equal numpy's whole-level
    searches and the brute-force count, with ±weights, repeated points and queries outside."""
    rng = np.random.default_rng(n_points)
    x = rng.integers(0, x_max + 1, size=n_points)
    y = rng.integers(0, y_max + 1, size=n_points)
    w = rng.choice([-2, -1, 1, 3], size=n_points)
    dc = DominanceCounter(x, y, w, x_max, y_max, table_limit=0)
    qx = rng.integers(-2, x_max + 4, size=700)
    qy = rng.integers(-2, y_max + 4, size=700)
    fast = compiled_path(dc.count, qx, qy)
    assert np.array_equal(fast, numpy_path(dc.count, qx, qy))
    want = [int(w[(x <= a) & (y <= b)].sum()) for a, b in zip(qx, qy, strict=True)]
    assert fast.tolist() == want


def test_lower_pairs_list_every_pair_below_the_split(kern):
    d, levels = 16, 5
    xs = np.arange(1, d + 1, dtype=np.int64).repeat(d)
    ys = np.tile(np.arange(1, d + 1, dtype=np.int64), d)
    for split in (0, 3, 9):
        ids, starts = node_kernel.lower_pairs(kern, xs, ys, split, levels, d)
        expect = []
        for x1, y1 in zip(xs.tolist(), ys.tolist(), strict=True):
            expect.append([((x1 >> lx) + (d >> lx) - 1) * 2 * d + (y1 >> ly) + (d >> ly) - 1
                           for lx in range(levels) if (x1 >> lx) & 1
                           for ly in range(levels) if (y1 >> ly) & 1 and lx + ly < split])
        assert np.diff(starts).tolist() == [len(e) for e in expect]
        assert starts[0] == 0
        assert ids.tolist() == [i for e in expect for i in e]


def test_kernels_load_from_a_cache_directory_of_their_own(tmp_path: Path):
    """With ``NUMBA_CACHE_DIR`` (what a read-only install falls back to) the kernels compile,
    cache there, and load from there in a second process."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    code = ("from dpfreq.windows.noise import kernel as node_kernel; "
            "assert node_kernel.load() is not None; print('ok')")
    for _ in range(2):
        run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, timeout=300, check=False)
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip() == "ok"
    assert any(p.suffix == ".nbi" for p in tmp_path.rglob("*"))


def test_start_returns_at_once_and_loaded_never_waits(kern):
    node_kernel.start()
    assert node_kernel.loaded() is kern

