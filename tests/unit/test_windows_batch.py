"""Batch answering, lazy-noise caching and chunked reductions of dpfreq.windows.

Every speed-up must leave answers bit-identical: the batch API equals the per-query API, and
the buffer sizes, chunk sizes and caches of the lazy noise and of the reductions change speed
only, never values.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from test_windows_reductions import brute, random_log

import dpfreq.windows.noise.keyed as lazy
from dpfreq.engines import get_engine
from dpfreq.errors import ParameterError
from dpfreq.windows import release_window_counts
from dpfreq.windows.data.reductions import block_points
from dpfreq.windows.noise.keyed import KeyedDiscreteGaussian, KeyedDiscreteLaplace

FIELDS = ("estimate", "sd", "lower", "upper", "answered_by", "bias_bound")


def random_windows(rng, horizon, ks, n):
    a = rng.integers(1, horizon + 1, size=(2, n))
    return a.min(axis=0), a.max(axis=0), rng.choice(np.asarray(ks), size=n)


@pytest.mark.parametrize(
    ("level", "delta", "windows"),
    [
        ("event", 0.0, ["cumulative", 3, "all"]),  # tree, blocks, tree2d (lazy 2d noise)
        ("item", 0.0, ["cumulative", 4, "all"]),  # consistent per-start trees: real answers
        ("event", 1e-6, ["cumulative", "all"]),  # zCDP plan (discrete Gaussian where chosen)
    ],
)
def test_batch_equals_single_queries(rng, level, delta, windows):
    horizon = 23
    item, times = random_log(rng, horizon, 7, 80, False)
    ks = [1, 2, 3]
    rel = release_window_counts((item, times), horizon=horizon, epsilon=1.0, delta=delta,
                                k_values=ks, unit=level, windows=windows, rng=5)
    t1, t2, k = random_windows(rng, horizon, ks, 60)
    batch = rel.answer_windows(t1, t2, k)
    assert batch.estimate.shape == (60,)
    assert list(batch.k) == list(k)
    for i in range(t1.size):
        one = rel.window(int(t1[i]), int(t2[i]), int(k[i]))
        for name in FIELDS:
            assert getattr(batch, name)[i] == getattr(one, name), (name, i)
        # the batch's band holds for all its windows and k at once: never narrower
        assert batch.band_upper[i] - batch.estimate[i] >= one.band_upper - one.estimate
    # the per-k array API gives the same as well, and so does a fresh copy of the release
    again = release_window_counts((item, times), horizon=horizon, epsilon=1.0, delta=delta,
                                  k_values=ks, unit=level, windows=windows, rng=5)
    sel = k == 2
    arr = again.window(t1[sel], t2[sel], 2)
    assert np.array_equal(np.asarray(arr.estimate), batch.estimate[sel])


def test_batch_noise_free_equals_brute_force(rng, monkeypatch):
    """With every node noise zero, the batch answers are the exact counts (any k)."""
    monkeypatch.setattr(KeyedDiscreteLaplace, "_values",
                        lambda self, enc, ids: np.zeros(ids.size, dtype=np.int64))
    monkeypatch.setattr(KeyedDiscreteLaplace, "word_pass", lambda self: None)  # all via _values
    horizon = 13
    item, times = random_log(rng, horizon, 5, 40, False)
    rel = release_window_counts((item, times), horizon=horizon, epsilon=1.0, k_values=[1, 2, 4],
                                windows=["all"], method={"all": "tree2d"}, rng=1, unit="event")
    t1, t2, k = random_windows(rng, horizon, [1, 2, 4], 50)
    got = rel.answer_windows(t1, t2, k).estimate
    truth = {kv: brute(item, times, horizon, kv) for kv in (1, 2, 4)}
    assert [int(g) for g in got] == [int(truth[kv][a, b]) for a, b, kv in zip(t1, t2, k,
                                                                              strict=True)]


def test_batch_shapes_and_errors(rng):
    item, times = random_log(rng, 10, 4, 30, False)
    rel = release_window_counts((item, times), horizon=10, epsilon=1.0, k_values=[1, 2],
                                windows=["all"], rng=2, unit="event")
    q = np.array([[1, 4, 1], [2, 9, 2], [5, 5, 1]])
    a = rel.answer_windows(q[:, 0], q[:, 1], q[:, 2])
    assert a.estimate.shape == (3,)
    grid = rel.answer_windows(np.array([[1], [2]]), np.array([[5, 6, 7]]), 1)  # broadcast
    assert grid.estimate.shape == (2, 3)
    assert grid.estimate[1, 2] == rel.window(2, 7, 1).estimate
    with pytest.raises(ParameterError, match="k"):
        rel.answer_windows([1, 2], [3, 4], [1, 3])  # k = 3 was not released
    with pytest.raises(ParameterError, match="integers"):
        rel.answer_windows([1], [3], [1.5])
    with pytest.raises(ParameterError, match="common shape"):
        rel.answer_windows([1, 2], [3, 4, 5], 1)
    with pytest.raises(ParameterError, match="t1 <= t2"):
        rel.answer_windows([4], [3], [1])


def test_repeated_batches_give_identical_answers(rng):
    """Default scheme: the node values of the upper level pairs are kept (row tables), the
    others recomputed (cheaper than a look-up); a batch asked again in another order gets the
    same answers and draws only the lower nodes again."""
    horizon = 64
    item, times = random_log(rng, horizon, 9, 200, False)
    rel = release_window_counts((item, times), horizon=horizon, epsilon=1.0, k_values=[1],
                                windows=["all"], method={"all": "tree2d"}, rng=3, unit="event")
    t1, t2, k = random_windows(rng, horizon, [1], 300)
    first = rel.answer_windows(t1, t2, k).estimate
    trees = rel._state.structures[("all", 1)]._impl
    assert all(t._noise.elementwise and t._noise.cache_size == 0 for t in trees)
    drawn = [t._noise.n_drawn for t in trees]
    assert min(drawn) > 0
    second = rel.answer_windows(t1[::-1], t2[::-1], k).estimate
    assert np.array_equal(second, first[::-1])
    again = [t._noise.n_drawn - d for t, d in zip(trees, drawn, strict=True)]
    assert min(again) > 0  # the lower nodes are recomputed
    assert max(again) < min(drawn)  # the upper tables are kept


@pytest.mark.parametrize("chunk", [1, 5, 70])
def test_lazy_noise_values_do_not_depend_on_chunks(monkeypatch, chunk):
    ids = np.unique(np.random.default_rng(8).integers(0, 1 << 62, size=300))
    key = bytes(range(32))
    ref_a = KeyedDiscreteLaplace(key, 4, Fraction(1, 3700)).noise(ids)  # tail path too
    ref_g = KeyedDiscreteGaussian(key, 4, 9.0).noise(ids[:80])
    monkeypatch.setattr(lazy, "_AES_CHUNK", chunk)
    assert np.array_equal(KeyedDiscreteGaussian(key, 4, 9.0).noise(ids[:80]), ref_g)
    aes = KeyedDiscreteLaplace(key, 4, Fraction(1, 3700))
    assert np.array_equal(np.concatenate([aes.noise(ids[i:i + 70])
                                          for i in range(0, ids.size, 70)]), ref_a)
    assert np.array_equal(aes.noise(ids[::-1]), ref_a[::-1])


@pytest.mark.parametrize("chunk", [1, 2, 5, 1 << 20])
def test_block_points_chunking_and_order_do_not_change_points(rng, chunk):
    for _ in range(40):
        horizon = int(rng.integers(1, 30))
        width = int(rng.integers(1, horizon + 1))
        k = int(rng.integers(1, 4))
        item, times = random_log(rng, horizon, 6, 50, False)
        ref = block_points(item, times, k, width, horizon, chunk=1 << 20)
        got = block_points(item, times, k, width, horizon, chunk=chunk)
        perm = rng.permutation(item.size)  # unsorted input is sorted first
        shuffled = block_points(item[perm], times[perm], k, width, horizon, chunk=chunk)
        ts = np.arange(1, horizon + 1)
        for bp in (got, shuffled):
            assert np.array_equal(bp.exact(ts), ref.exact(ts))
            assert np.array_equal(bp.n_present, ref.n_present)
            assert sorted(zip(bp.block_a.tolist(), bp.a.tolist(), strict=True)) == sorted(
                zip(ref.block_a.tolist(), ref.a.tolist(), strict=True))
            assert sorted(zip(bp.block_c.tolist(), bp.c.tolist(), strict=True)) == sorted(
                zip(ref.block_c.tolist(), ref.c.tolist(), strict=True))
        f = brute(item, times, horizon, k)
        assert [int(v) for v in ref.exact(ts)] == [int(f[max(1, t - width + 1), t]) for t in ts]


def test_engine_instance_is_accepted(tmp_path, rng):
    """``engine=`` takes a name or a configured engine instance (as ``dpfreq reach`` passes)."""
    item, times = random_log(rng, 12, 5, 40, False)
    path = tmp_path / "log.csv"
    path.write_text("u,t\n" + "".join(f"{i},{t}\n" for i, t in zip(item, times, strict=True)),
                    encoding="utf-8")
    kw = {"item": "u", "time": "t", "horizon": 12, "epsilon": 1.0, "k_values": [1, 2],
          "windows": ["cumulative", 3], "rng": 6, "unit": "event"}
    by_name = release_window_counts(str(path), engine="duckdb", **kw)
    by_instance = release_window_counts(str(path), engine=get_engine("duckdb"), **kw)
    for k in (1, 2):
        assert np.array_equal(by_name.cumulative_curve(k).estimate,
                              by_instance.cumulative_curve(k).estimate)
        assert np.array_equal(by_name.rolling_curve(k).estimate,
                              by_instance.rolling_curve(k).estimate)
    assert by_instance.mechanism_params["source"] == "duckdb"


def test_noise_unique_equals_noise_and_checks_its_input():
    src = KeyedDiscreteLaplace(bytes(range(32)), 9, Fraction(2, 5))
    ids = np.array([3, 8, 1 << 40, 5, 8, 3])
    uniq = np.unique(ids)
    fresh = KeyedDiscreteLaplace(bytes(range(32)), 9, Fraction(2, 5))
    assert np.array_equal(fresh.noise_unique(uniq), src.noise(uniq))
    assert np.array_equal(src.noise(ids), fresh.noise_unique(uniq)[np.searchsorted(uniq, ids)])
    for bad in ([5, 3], [2, 2], [-1, 4]):
        with pytest.raises(ParameterError, match="sorted distinct"):
            src.noise_unique(bad)


@pytest.mark.parametrize("gauss", [False, True])
@pytest.mark.parametrize("domain", [1 << 6, 1 << 30])
def test_dominance_noise_batch_equals_explicit_cover_sums(rng, domain, gauss):
    from dpfreq.windows.layouts.dyadic import prefix_cover
    from dpfreq.windows.noise.trees import Tree2DNoise

    key = bytes(range(32))
    src = (KeyedDiscreteGaussian(key, 4, 7.0) if gauss
           else KeyedDiscreteLaplace(key, 4, Fraction(1, 3)))
    tree = Tree2DNoise(domain, Fraction(1, 3), key, 4, noise_source=src)
    ref = (KeyedDiscreteGaussian(key, 4, 7.0) if gauss
           else KeyedDiscreteLaplace(key, 4, Fraction(1, 3)))
    xs = np.concatenate(([-1, domain - 1], rng.integers(-1, domain, size=30)))
    ys = np.concatenate(([domain - 1, -1], rng.integers(-1, domain, size=30)))
    got = tree.dominance_noise(xs, ys)
    for i in range(xs.size):
        ids = [int(ix[0]) * 2 * domain + int(iy[0])
               for ux, ix in prefix_cover([xs[i]], domain) if ux[0]
               for uy, iy in prefix_cover([ys[i]], domain) if uy[0]]
        assert got[i] == int(ref.noise(np.array(ids, dtype=np.int64)).sum())
