"""The windows band: which structures calibrate it by simulation, and that the release states
exactly the simulated ``c·sd`` (deterministic given the key, independent of other keys)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpfreq.windows import release_window_counts
from dpfreq.windows.layouts.layered import layer_incidence, layer_signed_cover
from dpfreq.windows.structures import bands as band
from dpfreq.windows.structures import base as structure
from dpfreq.windows.structures.bands import (
    BAND_DRAWS,
    BAND_MAX_NODES,
    BAND_MAX_WORK,
    band_multiplier,
    cover_map,
)
from dpfreq.windows.structures.base import build_structure

KEY = bytes(range(32))


def test_multiplier_is_a_function_of_key_and_name_only():
    s = build_structure("cumulative", "tree", 1, 30, "item", Fraction(1), 0.0)
    a = band_multiplier(s, 0.1, KEY, ("cumulative", 1))
    assert a == band_multiplier(s, 0.1, KEY, ("cumulative", 1))
    assert a != band_multiplier(s, 0.1, KEY[::-1], ("cumulative", 1))
    assert a != band_multiplier(s, 0.1, KEY, ("cumulative", 2))
    # in units of one answer's half-width at β: a band over 30 answers is wider than one
    # answer's interval and narrower than Bonferroni's (level β/30) on every answer
    t1, t2 = s.family_queries()
    bonferroni = s.halfwidth(t1, t2, 0.1 / 30) / s.halfwidth(t1, t2, 0.1)
    assert 1.0 < a < float(bonferroni.min())
    wider = band_multiplier(s, 0.05, KEY, ("cumulative", 1))
    assert wider is not None
    assert np.all(wider * s.halfwidth(t1, t2, 0.05) > a * s.halfwidth(t1, t2, 0.1))


def test_union_bound_is_kept_where_the_simulation_does_not_apply():
    per_query = build_structure("cumulative", "per_query", 1, 30, "event", Fraction(1), 0.0)
    assert band_multiplier(per_query, 0.1, KEY, ("x", 1)) is None  # Šidák is exact there
    unusable = build_structure("rolling", "blocks", 1, 30, "event", Fraction(1, 10**12), 0.0,
                               width=7)
    assert "unusable" in unusable.detail  # never chosen; the simulation declines it too
    assert band_multiplier(unusable, 0.1, KEY, ("x", 1)) is None
    big = build_structure("all", "per_start", 1, 256, "item", Fraction(1), 0.0)
    d = int(big.detail["domain"])
    assert big.consistent
    assert BAND_DRAWS * 256 * 2 * d > BAND_MAX_NODES
    assert band_multiplier(big, 0.1, KEY, ("x", 1)) is None
    assert BAND_DRAWS * 2 * 1024 * 1024 <= BAND_MAX_WORK  # the largest consistent tree fits
    t1, t2 = np.array([1, 3]), np.array([5, 200])
    np.testing.assert_array_equal(big.band_halfwidth(t1, t2, 0.1),
                                  big.halfwidth(t1, t2, 0.1 / (256 * 257 // 2)))
    # a product tree over 128 × 128 uses about 2·128² nodes: more than the simulation draws
    wide2d = build_structure("all", "tree2d", 1, 128, "event", Fraction(1), 0.0)
    assert BAND_DRAWS * 2 * 128 * 128 > BAND_MAX_NODES
    assert band_multiplier(wide2d, 0.1, KEY, ("x", 1)) is None


def layout_noise(s, t1, t2):
    """Each answer's noise from the layouts of :mod:`dpfreq.windows.structures.base`, by prefix and
    dominance covers of the attached trees (a statement independent of ``cover_map``)."""
    impl = s._impl
    if s.method == "tree":  # the signed cover's blocks, which sum to the prefix
        m = layer_incidence(s.horizon, s.branching, s.top)
        total = np.zeros(t2.shape, dtype=np.int64)
        for used, ids, sign in layer_signed_cover(t2 - 1, s.horizon, s.branching, s.top):
            total += np.where(used, sign * impl[ids], 0)
        covered = np.zeros((t2.size, s.horizon))
        for used, ids, sign in layer_signed_cover(t2 - 1, s.horizon, s.branching, s.top):
            covered[used] += sign[used, None] * m[ids[used]]
        assert np.array_equal(covered, np.arange(s.horizon)[None, :] < t2[:, None])
        return total
    if s.method == "blocks":  # block b = t2 // W: tree 2b + 1 minus tree 2b at t2 − b·W
        b = t2 // s.width
        return impl.prefix_noise(t2 - b * s.width, 2 * b + 1) - impl.prefix_noise(
            t2 - b * s.width, 2 * b)
    if s.method == "single":
        return impl.prefix_noise(t2, 1) - impl.prefix_noise(t2, 0)
    return impl[0].dominance_noise(t1 - 1, t2 - 1) - impl[1].dominance_noise(t1 - 1, t2 - 1)


COVER_CASES = [
    ("rolling", "blocks", 30, "event", {"width": 7}),
    ("rolling", "blocks", 30, "item", {"width": 7}),
    ("rolling", "single", 30, "event", {"width": 7}),
    ("all", "tree2d", 12, "event", {}),
    ("all", "tree2d", 12, "event", {"rho": 0.5, "noise_kind": "gaussian"}),
    ("cumulative", "tree", 2048, "item", {}),  # beyond the least-squares limit
    ("cumulative", "tree", 700, "event", {"branching": 9, "top": True}),
]


@pytest.mark.parametrize(("family", "method", "horizon", "level", "extra"), COVER_CASES)
def test_cover_map_sums_the_nodes_the_release_sums(family, method, horizon, level, extra):
    s = build_structure(family, method, 1, horizon, level, Fraction(1), 0.0, **extra)
    assert not s.consistent
    s.attach(KEY, (family, 1))
    t1, t2 = s.family_queries()
    assert t1.size == s.n_family
    cover = cover_map(s, t1, t2)
    assert cover is not None
    rows, ids, signs = cover
    np.testing.assert_array_equal(np.bincount(rows, minlength=t1.size), s.nodes(t1, t2))
    d = int(s.detail["domain"])
    if method == "tree2d":  # node ids of tree i start at i·(2D)²
        tree, local = np.divmod(ids, (2 * d) ** 2)
        z = np.where(tree == 0, s._impl[0].noise_of(local), s._impl[1].noise_of(local))
    elif method == "tree":
        z = s._impl[ids]
    else:
        z = s._impl.noise[ids]
    sums = np.bincount(rows, weights=signs * z, minlength=t1.size)
    np.testing.assert_array_equal(sums, layout_noise(s, t1, t2))
    np.testing.assert_array_equal(sums, s.noise(t1, t2))
    c = band_multiplier(s, 0.1, KEY, (family, 1))
    assert c is not None
    # narrower than the union bound's band at β/n, wider than one answer's interval
    band = s.band_halfwidth(t1, t2, 0.1)
    assert np.all(band >= s.halfwidth(t1, t2, 0.1))
    assert band.sum() < s.halfwidth(t1, t2, 0.1 / s.n_family).sum()


def test_release_band_is_the_simulated_multiple_of_the_half_width():
    gen = np.random.default_rng(3)
    items, times = gen.integers(0, 50, 400), gen.integers(1, 31, 400)
    rel = release_window_counts((items, times), horizon=30, epsilon=1.0, unit="item",
                                k_values=[1], windows=["cumulative", "all"], rng=4)
    s = rel._state.structures[("cumulative", 1)]
    ts = np.arange(1, 31)
    ans = rel.window(np.ones_like(ts), ts, k=1, confidence=0.9)
    c = band_multiplier(s, 0.1, rel._state.key, ("cumulative", 1))
    assert c is not None
    half = np.asarray(ans.band_upper) - np.asarray(ans.estimate)
    own = np.asarray(ans.upper) - np.asarray(ans.estimate)
    assert c > 1.0
    np.testing.assert_allclose(half, c * own, rtol=1e-12)
    again = rel.window(np.ones_like(ts), ts, k=1, confidence=0.9)
    np.testing.assert_array_equal(again.band_upper, ans.band_upper)


def test_a_loaded_release_states_the_same_band(tmp_path):
    gen = np.random.default_rng(5)
    items, times = gen.integers(0, 60, 500), gen.integers(1, 31, 500)
    rel = release_window_counts((items, times), horizon=30, epsilon=1.0, unit="item",
                                k_values=[1], windows=["cumulative", "all"], rng=6)
    loaded = type(rel).load(rel.save(tmp_path / "release"))
    t1, t2 = np.triu_indices(30)
    a = rel.window(t1 + 1, t2 + 1, k=1, confidence=0.9)
    b = loaded.window(t1 + 1, t2 + 1, k=1, confidence=0.9)
    assert "all/per_start" in set(np.asarray(a.answered_by).tolist())
    np.testing.assert_array_equal(a.band_upper, b.band_upper)
    np.testing.assert_array_equal(a.band_lower, b.band_lower)


def test_a_curve_band_splits_beta_over_the_structures_answering_it():
    gen = np.random.default_rng(3)
    items, times = gen.integers(0, 50, 400), gen.integers(1, 31, 400)
    rel = release_window_counts((items, times), horizon=30, epsilon=1.0, unit="item",
                                k_values=[1], windows=["cumulative", 7], rng=4)
    ts = np.arange(1, 31)
    t1 = np.maximum(1, ts - 6)
    ans = rel.window(t1, ts, k=1, confidence=0.9)
    by = np.asarray(ans.answered_by)
    tree = np.char.startswith(by.astype(str), "cumulative/")
    assert tree.sum() == 7  # [1, t] for t <= 7: the cumulative counter answers them
    assert (by[~tree] == "rolling(W=7)/per_query").all()
    state = rel._state
    cum, per_query = state.structures[("cumulative", 1)], state.structures[("rolling(W=7)", 1)]
    own = cum.halfwidth(t1[tree], ts[tree], 0.05)
    # the released rolling curve: two structures answer it, each gets β/2
    rel9 = release_window_counts((items, times), horizon=30, epsilon=1.0, unit="item",
                                 k_values=[1], windows=["cumulative", 7], rng=4,
                                 confidence=0.9)
    curve = (np.asarray(rel9.error.band_upper["rolling(W=7)"][1])
             - np.asarray(rel9.value["rolling(W=7)"][1]))
    c_half = band_multiplier(cum, 0.05, state.key, ("cumulative", 1))
    assert c_half is not None
    np.testing.assert_allclose(curve[tree], c_half * own, rtol=1e-12)
    sidak = -np.expm1(np.log1p(-0.05) / 30)
    np.testing.assert_array_equal(curve[~tree],
                                  per_query.halfwidth(t1[~tree], ts[~tree], sidak))
    # a batch's band holds for all its windows at once: answered by the two structures, each
    # gets β/2, as the released curve; one window alone gets its structure's band at β
    half = np.asarray(ans.band_upper) - np.asarray(ans.estimate)
    np.testing.assert_allclose(half[tree], c_half * own, rtol=1e-12)
    c = band_multiplier(cum, 0.1, state.key, ("cumulative", 1))
    assert c is not None
    one = rel.window(int(t1[3]), int(ts[3]), k=1, confidence=0.9)
    assert one.band_upper - one.estimate == pytest.approx(
        c * float(cum.halfwidth(t1[3:4], ts[3:4], 0.1)[0]), rel=1e-12)


def test_a_window_with_a_zero_half_width_still_counts_in_the_simulation():
    # huge ε: most node noises are 0, so a window's own half-width at β can be 0; the band's
    # scale is floored at one item in the simulation and in the release alike
    s = build_structure("cumulative", "tree", 1, 8, "event", Fraction(60), 0.0)
    t1, t2 = s.family_queries()
    assert float(s.halfwidth(t1, t2, 0.1).min()) < 1.0
    c = band_multiplier(s, 0.1, KEY, ("cumulative", 1))
    assert c is not None
    s.attach(KEY, ("cumulative", 1))
    np.testing.assert_array_equal(s.band_halfwidth(t1, t2, 0.1),
                                  max(c, 1.0) * np.maximum(s.halfwidth(t1, t2, 0.1), 1.0))
    assert np.all(s.band_halfwidth(t1, t2, 0.1) >= 1.0)


def test_a_plan_simulates_once_per_layout_and_node_law(monkeypatch):
    calls = []
    simulate = band.band_multiplier

    def counted(*args, **kwargs):
        calls.append(args[3])
        return simulate(*args, **kwargs)

    monkeypatch.setattr(band, "band_multiplier", counted)  # what plan_multiplier calls
    monkeypatch.setattr(structure, "band_multiplier", counted)  # what a release calls
    monkeypatch.setattr(band, "_PLAN_MEMO", {})
    first, second = (build_structure("all", "per_start", k, 12, "item", Fraction(1), 0.0)
                     for k in (1, 2))
    assert first.gamma == second.gamma  # one node law: the plan's band is the same
    t1, t2 = first.family_queries()
    np.testing.assert_array_equal(first.band_halfwidth(t1, t2, 0.1),
                                  second.band_halfwidth(t1, t2, 0.1))
    assert len(calls) == 1
    blocks = [build_structure("rolling", "blocks", k, 30, "event", Fraction(1), 0.0, width=7)
              for k in (1, 2)]
    assert blocks[0].gamma != blocks[1].gamma  # sensitivity 4k: another law, another run
    t1, t2 = blocks[0].family_queries()
    for s in blocks:
        s.band_halfwidth(t1, t2, 0.1)
    assert len(calls) == 3
    first.attach(KEY, ("all", 1))  # a release simulates on its own key, never from the memo
    first.band_halfwidth(t1[:1], t2[:1], 0.1)
    assert len(calls) == 4
    assert calls[-1] == ("all", 1)
