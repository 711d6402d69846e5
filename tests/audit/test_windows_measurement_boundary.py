"""The measurement boundary of window releases: every published number is a function of the
noisy measurements alone (recomputed here without the key or the data, to the same bits), and
the floats published by the factorization cannot be inverted back to the noise.

The distinguisher is the one of the audit: from the published floats of a cumulative curve,
under each hypothesis about the data (the true log, or a neighbour with one more item), solve
for the integer node noise and recompute the floats; a release that publishes ``exact +
f(noise)`` in floating point reproduces its bits under the true log every time and under the
neighbour never. A release that publishes post-processing of its measurement reproduces them
under neither or both.
"""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
from scipy.linalg import solve_triangular, toeplitz

from dpfreq.windows import WindowCountsRelease, release_window_counts
from dpfreq.windows.layouts.factorization import (
    ALLOWANCE,
    MAX_HORIZON,
    SCALE,
    coefficients,
    prefix_answers,
    prefix_coefficients,
)
from dpfreq.windows.layouts.weights import consistent_estimates
from dpfreq.windows.structures.base import build_structure

#: (windows, method, unit, delta): every structure whose answers come from a measurement
MEASURED = [
    (["cumulative"], {"cumulative": "simple"}, "item", 0.0),
    (["cumulative"], {"cumulative": "tree"}, "event", 0.0),  # T = 40: consistent
    (["cumulative"], {"cumulative": "factorization"}, "item", 1e-6),
    (["cumulative"], {"cumulative": "factorization"}, "event", 1e-6),
    (["all"], {"all": "per_start"}, "item", 0.0),
    (["all"], {"all": "compressed"}, "item", 0.0),
]


def _log(seed: int, horizon: int, n_items: int = 30, singleton: bool = False):
    gen = np.random.default_rng(seed)
    if singleton:  # one event per period
        times = np.arange(1, horizon + 1)
        return gen.integers(0, n_items, times.size), times
    return gen.integers(0, n_items, 400), gen.integers(1, horizon + 1, 400)


def _release(windows, method, unit, delta, seed, horizon=40, log=None):
    items, times = log if log is not None else _log(seed, horizon,
                                                      singleton=method.get("all") == "compressed")
    return release_window_counts((items, times), horizon=horizon, epsilon=1.0, delta=delta,
                                 unit=unit, k_values=[1, 2], windows=windows, method=method,
                                 rng=seed, singleton=method.get("all") == "compressed")


def _fresh_copy(s):
    """The same structure from public parameters only: no key attached, no data."""
    return build_structure(s.family, s.method, s.k, s.horizon, s.unit, s.eps, s.delta,
                           s.width, s.group_size, rho=s.rho, noise_kind=s.noise_kind,
                           branching=s.branching, top=s.top)


@pytest.mark.parametrize(("windows", "method", "unit", "delta"), MEASURED)
def test_every_published_answer_is_recomputed_from_the_measurement_alone(windows, method,
                                                                        unit, delta):
    rel = _release(windows, method, unit, delta, seed=4)
    ts = np.arange(1, rel.horizon + 1)
    for (label, k), s in rel._state.structures.items():
        assert s.measured
        if s.family == "cumulative":
            copy = _fresh_copy(s)
            copy.load_measurement(s.measurement)  # the stored integers, nothing else
            published = np.asarray(rel.value[label][k])
            assert published.tobytes() == np.asarray(
                copy.estimates(np.ones_like(ts), ts)).astype(published.dtype).tobytes()
            half = (copy.halfwidth(np.ones_like(ts), ts, 1 - rel.error.confidence)
                    + copy.bias_bound() + copy.allowance(np.ones_like(ts), ts))
            upper = np.asarray(rel.error.upper[label][k])
            assert upper.tobytes() == (published.astype(np.float64) + half).tobytes()
            continue
        # per-start trees: the trees' noisy node counts are the measurement
        t1, t2 = np.triu_indices(rel.horizon)
        t1, t2 = t1 + 1, t2 + 1
        got = np.asarray(rel.window(t1, t2, k).estimate)
        g1, g2 = s.query_map(t1, t2)
        starts, where = np.unique(g1, return_inverse=True)
        trees = s._tree_measurements(starts)
        est = consistent_estimates(s.layout, trees.T).T  # no key, no exact counts
        assert got.tobytes() == est[where, g2 - g1].tobytes()


@pytest.mark.parametrize(("windows", "method", "unit", "delta"), MEASURED[:4])
def test_a_saved_release_answers_from_the_same_measurement(windows, method, unit, delta,
                                                           tmp_path):
    rel = _release(windows, method, unit, delta, seed=9)
    back = WindowCountsRelease.load(rel.save(tmp_path / "r.dpfreq"))
    for key, s in rel._state.structures.items():
        assert s.measurement.tobytes() == back._state.structures[key].measurement.tobytes()
    assert json.loads(back.to_json()) == json.loads(rel.to_json())


def _matrices(t: int):
    r = np.tril(toeplitz(coefficients(t, False))).astype(np.float64)  # item level
    return r, np.tril(toeplitz(prefix_coefficients(t, False)))


def _reproduces(published, exact_prefix, horizon) -> bool:
    """The audit's distinguisher: under a hypothesis whose exact prefix counts are
    ``exact_prefix``, recover the integer node noise and recompute the floats of a release
    publishing ``exact + L z``; True when every bit matches."""
    _, l_mat = _matrices(horizon)
    z = np.rint(solve_triangular(l_mat, published - exact_prefix, lower=True)).astype(np.int64)
    again = exact_prefix + prefix_answers(z, False)
    return bool(again.tobytes() == published.tobytes())


def test_the_factorization_floats_do_not_tell_the_log_from_its_neighbour():
    """The issue's setting: T = 64, ε = 1, δ = 1e-6, 20 seeds. Against floats ``exact + L z``
    the distinguisher tells the true log every time (its power, checked on the same noise);
    against the published ``L u`` it finds the true log and the neighbour equally plausible."""
    horizon, seeds = 64, range(20)
    true_hits = neighbour_hits = old_true = old_neighbour = 0
    for seed in seeds:
        items, times = _log(100 + seed, horizon)
        # the neighbour: one more item, whose only event is in period T/2
        rel = _release(["cumulative"], {"cumulative": "factorization"}, "item", 1e-6, seed,
                       horizon=horizon, log=(items, times))
        s = rel._state.structures[("cumulative", 1)]
        published = np.asarray(rel.value["cumulative"][1], dtype=np.float64)
        exact = np.asarray(rel._state.oracles[("cumulative", 1)][1:], dtype=np.float64)
        exact_nb = exact + (np.arange(1, horizon + 1) >= horizon // 2)
        true_hits += _reproduces(published, exact, horizon)
        neighbour_hits += _reproduces(published, exact_nb, horizon)
        old = exact + prefix_answers(s._impl, False)  # what the audit found published before
        old_true += _reproduces(old, exact, horizon)
        old_neighbour += _reproduces(old, exact_nb, horizon)
    assert (old_true, old_neighbour) == (20, 0)  # the distinguisher has its power
    assert true_hits == neighbour_hits


def test_published_floats_are_dyadic_and_equal_for_the_log_and_its_neighbour_noise():
    """A consistent tree publishes ``M v / 2^20`` exactly: moving the data by a neighbour and
    the noise by the opposite node counts gives the same measurement, hence the same bits
    (no float carries ``exact + f(noise)``)."""
    s = build_structure("cumulative", "tree", 1, 40, "item", Fraction(1), 0.0)
    assert s.consistent
    s.attach(bytes(32), ("cumulative", 1))
    counts = np.arange(40, dtype=np.int64) % 5
    s.measure(lambda t1, t2: np.cumsum(counts)[np.asarray(t2) - 1])
    ts = np.arange(1, 41)
    est = np.asarray(s.estimates(np.ones_like(ts), ts))
    assert np.all(np.ldexp(est, 20) == np.rint(np.ldexp(est, 20)))
    other = _fresh_copy(s)
    other.load_measurement(s.measurement)
    assert other.estimates(np.ones_like(ts), ts).tobytes() == est.tobytes()


def test_factorization_coefficients_are_within_the_stated_allowance():
    """The certificate behind :data:`ALLOWANCE`: the residual ``r = e * c − 1`` of the float
    coefficients, computed exactly in integers, bounds ``|e − ℓ| <= max|r| · Σ|d|`` with ``d``
    the power-series inverse of ``c`` (``Σ|d| ≈ 2/S``: ``d_0 = 1/S`` and the others are about
    the negative coefficients of ``(1 − x)^{1/2}/S``; 2.007/S at the largest horizon, so
    2.1/S is taken), which must stay below ``2^-40 · min e`` (relative) at every horizon up to
    the largest; with the pairwise sum's ``2^-48`` the allowance ``2^-39`` covers both."""
    for horizon, moves in [(t, m) for t in (64, 365, 2048, MAX_HORIZON) for m in (False, True)]:
        e = prefix_coefficients(horizon, moves)
        c = coefficients(horizon, moves).astype(np.int64)
        mant, expo = np.frexp(e)  # e = mant · 2^expo exactly, |mant| in [1/2, 1)
        shift = int(53 - expo.min())  # e_m · 2^shift is an integer for every m
        total = [int(n) << int(ex - expo.min()) for n, ex in
                 zip(np.ldexp(mant, 53).astype(np.int64), expo, strict=True)]
        hi64 = np.array([v >> 30 for v in total], dtype=np.int64)
        lo64 = np.array([v & ((1 << 30) - 1) for v in total], dtype=np.int64)
        assert int(hi64.max()) * int(c.sum()) < 1 << 62  # the convolutions are exact in int64
        conv = (np.convolve(hi64, c)[:horizon].astype(object) * (1 << 30)
                + np.convolve(lo64, c)[:horizon].astype(object))
        resid = max(abs(int(v) - (1 << shift)) for v in conv)  # |r| · 2^shift
        d = np.diff(e, prepend=0.0)  # the power-series inverse of c (floats: a check of 2/S)
        assert float(np.abs(d).sum()) <= 2.05 / SCALE
        bound = Fraction(resid, 1 << shift) * Fraction(21, 10 * SCALE)
        assert bound <= Fraction(float(e.min())) * Fraction(1, 1 << 40), horizon
    assert ALLOWANCE >= 2.0 ** -40 + 2.0 ** -48


@pytest.mark.parametrize("method", [{"cumulative": "factorization"}, {"cumulative": "tree"}])
def test_every_group_of_a_grouped_release_answers_from_its_measurement(method):
    gen = np.random.default_rng(12)
    log = {"u": gen.integers(0, 40, 600), "g": gen.choice(["a", "b", "c"], 600),
           "t": gen.integers(1, 41, 600)}
    rel = release_window_counts(log, item="u", time="t", group="g", groups=["a", "b", "c"],
                                max_groups_per_item=2, horizon=40, epsilon=2.0, delta=1e-6,
                                unit="item", k_values=[1], windows=["cumulative"],
                                method=method, rng=3)
    ts = np.arange(1, 41)
    for name in ("a", "b", "c"):
        one = rel[name]
        s = one._state.structures[("cumulative", 1)]
        copy = _fresh_copy(s)
        copy.load_measurement(s.measurement)
        published = np.asarray(one.value["cumulative"][1])
        assert published.tobytes() == np.asarray(
            copy.estimates(np.ones_like(ts), ts)).astype(published.dtype).tobytes()


def test_a_loaded_release_answers_from_its_stored_measurement(tmp_path):
    """The file stores each cumulative structure's measurement; a loaded release answers from
    those integers (here: changed before loading, through the writer, so the checksum holds)
    and not from a new measurement of its key and summaries."""
    from dpfreq.artifacts import read_artifact, write_artifact
    from dpfreq.windows.persist import ARTIFACT_KIND, ARTIFACT_VERSION

    rel = _release(["cumulative"], {"cumulative": "simple"}, "item", 0.0, seed=5)
    _, meta, arrays = read_artifact(rel.save(tmp_path / "r.dpfreq"), kind=ARTIFACT_KIND,
                                    versions=(ARTIFACT_VERSION,))
    name = "measurement/cumulative/1"
    stored = np.asarray(arrays[name]).copy()
    assert stored.tobytes() == rel._state.structures[("cumulative", 1)].measurement.tobytes()
    shifted = {**arrays, name: stored + 1000}
    path = write_artifact(tmp_path / "s.dpfreq", kind=ARTIFACT_KIND, version=ARTIFACT_VERSION,
                          meta=meta, arrays=shifted)
    back = WindowCountsRelease.load(path)
    ts = np.arange(1, back.horizon + 1)
    np.testing.assert_array_equal(np.asarray(back.value["cumulative"][1]),
                                  np.cumsum(stored + 1000))
    assert not np.array_equal(back.value["cumulative"][1], rel.value["cumulative"][1])
    assert back.cumulative(ts, 1).estimate[-1] == int(np.sum(stored + 1000))


@pytest.mark.parametrize("unit", ["item", "item_replace"])
def test_daily_reach_with_the_gaussian_publishes_its_noisy_measurements(unit, tmp_path):
    """Per-window structures (``per_query``, ``per_query_gaussian``) are not ``measured``:
    each window's noisy measurement is the integer ``exact count + noise`` itself, and that is
    what is published. Daily reach at ε = 1, δ = 1e-6 (the Gaussian calibrated to (ε, δ)):
    every published value is that integer (recomputed here from the exact counts and the
    keyed noise, to the same bits), every interval is the value plus a half-width that a copy
    of the structure built from public parameters alone gives, and a saved release answers the
    same from its file."""
    items, times = _log(21, 30, n_items=200)
    rel = release_window_counts((items, times), horizon=30, epsilon=1.0, delta=1e-6,
                                unit=unit, k_values=[1], windows=[1], rng=8)
    s = rel._state.structures[("rolling(W=1)", 1)]
    assert s.method == "per_query_gaussian"
    assert not s.measured
    ts = np.arange(1, 31)
    t1 = np.maximum(1, ts)
    noisy = rel._state.exact(s, t1, ts) + s.noise(t1, ts)
    assert noisy.dtype == np.int64
    published = np.asarray(rel.value["rolling(W=1)"][1])
    assert published.tobytes() == noisy.astype(published.dtype).tobytes()
    copy = _fresh_copy(s)  # no key, no data
    half = copy.halfwidth(t1, ts, 1 - rel.error.confidence)
    assert np.asarray(rel.error.upper["rolling(W=1)"][1]).tobytes() == (
        published.astype(np.float64) + half).tobytes()
    back = WindowCountsRelease.load(rel.save(tmp_path / "daily.dpfreq"))
    assert json.loads(back.to_json()) == json.loads(rel.to_json())
