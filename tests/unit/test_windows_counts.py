"""release_window_counts / WindowCountsRelease ."""

from __future__ import annotations

import datetime as dt
import json
from fractions import Fraction

import numpy as np
import pytest
from test_windows_reductions import brute, random_log

from dpfreq.budget import Accountant, PrivacyBudget
from dpfreq.errors import BudgetExceededError, DataError, ParameterError
from dpfreq.noise import discrete_laplace_tail
from dpfreq.windows import WindowCountsRelease, release_window_counts
from dpfreq.windows.laws.sums import sum_quantile
from dpfreq.windows.params import parse_period
from dpfreq.windows.structures.base import composed_epsilon


def small_log(rng, horizon=12, n_items=5, singleton=False):
    item, times = random_log(rng, horizon, n_items, 30, singleton)
    return item, times


def noise_free(rel, t1, t2, k, fam_filter=None):
    """Estimate minus the node noise of the answering structure (exact part only)."""
    ans = rel.window(t1, t2, k)
    by = np.atleast_1d(ans.answered_by)
    out = np.asarray(ans.estimate, dtype=np.float64).copy().reshape(-1)
    t1a, t2a = np.broadcast_arrays(np.atleast_1d(t1), np.atleast_1d(t2))
    for (label, kk), s in rel._state.structures.items():
        if kk != k:
            continue
        sel = by == f"{label}/{s.method}"
        if sel.any():
            out[sel] -= s.noise(t1a[sel], t2a[sel])
    rounded = np.rint(out)
    assert np.allclose(out, rounded, atol=1e-6)
    return rounded.astype(np.int64)


CHOICES = [
    ("event", {"cumulative": "tree", 3: "blocks", "all": "tree2d"}),
    ("event", {"cumulative": "per_query", 3: "single", "all": "per_start"}),
    ("event", {3: "per_query", "all": "per_query"}),
    ("item", {"cumulative": "tree", 3: "blocks", "all": "per_start"}),
    ("item", {3: "per_query", "all": "per_query"}),
]


@pytest.mark.parametrize(("level", "method"), CHOICES)
def test_noise_free_answers_equal_brute_force(rng, level, method):
    for case in range(12):
        horizon = int(rng.integers(3, 13))
        item, times = small_log(rng, horizon)
        fams = [w for w in ("cumulative", 3, "all") if w in method]
        rel = release_window_counts((item, times), horizon=horizon, epsilon=1.0,
                                    k_values=[1, 2, 3], windows=fams, unit=level,
                                    method=method, rng=case)
        t1, t2 = np.triu_indices(horizon + 1, 0)
        keep = t1 >= 1
        t1, t2 = t1[keep], t2[keep]
        for k in (1, 2, 3):
            f = brute(item, times, horizon, k)
            if "all" in fams:
                assert np.array_equal(noise_free(rel, t1, t2, k), f[t1, t2])
            ts = np.arange(1, horizon + 1)
            if "cumulative" in fams:
                assert np.array_equal(noise_free(rel, np.ones_like(ts), ts, k), f[1, ts])
            assert np.array_equal(noise_free(rel, np.maximum(1, ts - 2), ts, k),
                                  f[np.maximum(1, ts - 2), ts])


def test_compression_bias_within_bound(rng):
    for case in range(20):
        horizon = int(rng.integers(4, 30))
        item, times = small_log(rng, horizon, singleton=True)
        rel = release_window_counts((item, times), horizon=horizon, epsilon=0.05, k_values=[1],
                                    windows=["all"], unit="item", singleton=True, rng=case)
        s = rel._state.structures[("all", 1)]
        f = brute(item, times, horizon, 1)
        t1, t2 = np.triu_indices(horizon + 1, 0)
        keep = t1 >= 1
        t1, t2 = t1[keep], t2[keep]
        est = noise_free(rel, t1, t2, 1)
        if s.method == "compressed":
            assert s.group_size >= 1
            assert np.all(np.abs(est - f[t1, t2]) <= 2 * (s.group_size - 1))
        else:
            assert np.array_equal(est, f[t1, t2])


def test_auto_choice_matches_issue_note():
    item = np.array([0, 0, 1])
    times = np.array([1, 5, 9])
    rel = release_window_counts((item, times), horizon=365, epsilon=1.0, k_values=[1],
                                windows=["cumulative", 7, "all"], rng=1, unit="event")
    st = rel.mechanism_params["methods"]
    assert st["rolling(W=7), k=1"]["method"] == "per_query"
    assert st["cumulative, k=1"]["method"] == "tree"
    assert st["all, k=1"]["method"] == "tree2d"
    for rec in st.values():
        preds = rec["predicted_rmse"]
        assert preds[rec["method"]] == min(preds.values())
    cum = st["cumulative, k=1"]["predicted_rmse"]
    assert cum["per_query"] / cum["tree"] >= 5
    allw = st["all, k=1"]["predicted_rmse"]
    assert allw["per_query"] / allw["tree2d"] >= 5


def test_item_level_candidates_exclude_event_only_structures():
    rel = release_window_counts((np.array([0]), np.array([1])), horizon=64, epsilon=1.0,
                                k_values=[2], windows=[8, "all"], unit="item", rng=1)
    st = rel.mechanism_params["methods"]
    assert "single" not in st["rolling(W=8), k=2"]["predicted_rmse"]
    assert "tree2d" not in st["all, k=2"]["predicted_rmse"]
    with pytest.raises(ParameterError, match="method for all"):
        release_window_counts((np.array([0]), np.array([1])), horizon=64, epsilon=1.0,
                              k_values=[2], windows=["all"], unit="item",
                              method={"all": "tree2d"}, rng=1)


def test_determinism_repeated_queries_and_save_load(tmp_path, rng):
    item, times = small_log(rng, 40, 8)
    kw = {"horizon": 40, "epsilon": 1.0, "k_values": [1, 2], "windows": ["cumulative", 5, "all"],
          "unit": "event"}
    rel = release_window_counts((item, times), rng=7, **kw)
    again = release_window_counts((item, times), rng=7, **kw)
    other = release_window_counts((item, times), rng=8, **kw)
    t1, t2 = np.triu_indices(41, 0)
    keep = t1 >= 1
    t1, t2 = t1[keep], t2[keep]
    a = rel.window(t1, t2, 2).estimate
    assert np.array_equal(a, rel.window(t1, t2, 2).estimate)
    assert np.array_equal(a[::-1], rel.window(t1[::-1], t2[::-1], 2).estimate)
    assert np.array_equal(a, again.window(t1, t2, 2).estimate)
    assert not np.array_equal(a, other.window(t1, t2, 2).estimate)
    path = rel.save(tmp_path / "rel.npz")
    loaded = WindowCountsRelease.load(path)
    assert np.array_equal(loaded.window(t1, t2, 2).estimate, a)
    assert np.array_equal(loaded.rolling_curve(1).estimate, rel.rolling_curve(1).estimate)
    assert loaded.to_dict() == rel.to_dict()
    assert rel.seeded


def test_json_has_no_secret_and_is_valid(rng):
    item, times = small_log(rng, 10)
    rel = release_window_counts((item, times), horizon=10, epsilon=1.0, k_values=[1],
                                windows=["cumulative", 3], rng=2, unit="event")
    text = rel.to_json()
    data = json.loads(text)
    assert data["type"] == "WindowCountsRelease"
    assert rel._state.key.hex() not in text
    assert "item" not in data["mechanism_params"]
    assert len(data["value"]["cumulative"]["1"]) == 10
    assert data["error"]["kind"] == "interval"
    assert data["unit"] == "event"
    assert len(data["error"]["lower"]["rolling(W=3)"]["1"]) == 10


def test_answer_fields_and_sd(rng):
    item, times = small_log(rng, 16)
    rel = release_window_counts((item, times), horizon=16, epsilon=2.0, k_values=[1, 2],
                                windows=["cumulative", 4, "all"], method={"all": "tree2d"},
                                rng=3, unit="event")
    a = rel.window(2, 9, 1)
    s = rel._state.structures[("all", 1)]
    assert a.answered_by == "all/tree2d"
    assert a.sd == pytest.approx(np.sqrt(s.nodes(2, 9) * s.node_variance))
    assert a.lower <= a.estimate <= a.upper
    assert a.band_upper - a.estimate >= a.upper - a.estimate
    c = rel.cumulative(np.arange(1, 17), 1)
    assert len(set(c.answered_by[4:])) == 1  # t <= W: the rolling window may win
    assert c.answered_by[-1].startswith("cumulative/")
    f = rel.rolling(2, 1)
    assert f.t1 == 1
    assert f.t2 == 2
    e = rel.exactly(3, 7, 1)
    assert e.estimate == rel.window(3, 7, 1).estimate - rel.window(3, 7, 2).estimate
    with pytest.raises(ParameterError, match="k and k\\+1"):
        rel.exactly(3, 7, 2)
    with pytest.raises(ParameterError, match="released"):
        rel.window(1, 3, 5)
    curve = rel.cumulative_curve(1, clamp=True, monotone=True)
    est = np.asarray(curve.estimate)
    assert np.all(np.diff(est) >= 0)
    assert np.all(est >= 0)
    tab = rel.k_table("cumulative")
    assert tab.shape == (2, 16)
    assert np.all(tab[0] >= tab[1])
    assert np.all(tab >= 0)


def test_unreleased_window_is_clear_error(rng):
    item, times = small_log(rng, 20)
    rel = release_window_counts((item, times), horizon=20, epsilon=1.0, k_values=[1],
                                windows=["cumulative", 7], rng=1, unit="event")
    with pytest.raises(ParameterError, match="not released"):
        rel.window(3, 5, 1)
    assert rel.window(1, 15, 1).answered_by.startswith("cumulative/")
    assert rel.window(4, 10, 1).answered_by.startswith("rolling(W=7)")
    with pytest.raises(ParameterError, match="width"):
        rel.rolling(5, 1, width=3)
    with pytest.raises(ParameterError):
        rel.window(5, 3, 1)
    with pytest.raises(ParameterError):
        rel.window(0, 3, 1)
    with pytest.raises(ParameterError):
        rel.cumulative(21, 1)


def test_timestamps_bucketing_and_out_of_range():
    ts = np.array(["2024-01-01T05:00", "2024-01-01T23:59", "2024-01-03T00:00",
                   "2024-01-05T12:00"], dtype="datetime64[us]")
    users = np.array(["u1", "u2", "u1", "u3"])
    rel = release_window_counts({"user": users, "ts": ts}, item="user", time="ts",
                                start="2024-01-01", end="2024-01-05", period="1d", epsilon=1.0,
                                k_values=[1, 2], windows=["cumulative"], rng=1, unit="event")
    assert rel.horizon == 5
    # periods of the events: 1, 3, 1, 5 (only per-period counts are kept, not the log)
    assert list(rel._state.summaries.period_counts()) == [0, 2, 0, 1, 0, 1]
    assert rel.time_axis["kind"] == "timestamp"
    with pytest.raises(DataError, match="outside"):
        release_window_counts({"user": users, "ts": ts}, item="user", time="ts",
                              start="2024-01-02", end="2024-01-04", period="1d", epsilon=1.0,
                              k_values=[1], rng=1, unit="event", windows=["cumulative"])
    rel = release_window_counts({"user": users, "ts": ts}, item="user", time="ts",
                                start="2024-01-02", end="2024-01-04", period="1d", epsilon=1.0,
                                k_values=[1], rng=1, out_of_range="drop", unit="event",
                                windows=["cumulative"])
    assert rel.n_dropped == 3
    assert "n_dropped" not in rel.to_json()
    assert parse_period("6h") == 6 * 3600 * 10**6
    assert parse_period(dt.timedelta(days=1)) == 86400 * 10**6
    assert parse_period(np.timedelta64(30, "m")) == 1800 * 10**6


def bad_call(**over):
    kw = {"horizon": 10, "epsilon": 1.0, "k_values": [1], "windows": ["cumulative"], "rng": 1,
          "unit": "event"}
    kw.update(over)
    source = kw.pop("source", (np.array([0, 1]), np.array([1, 2])))
    return release_window_counts(source, **kw)


@pytest.mark.parametrize(
    ("over", "exc", "match"),
    [
        ({"epsilon": -1.0}, ParameterError, "epsilon"),
        ({"epsilon": float("nan")}, ParameterError, "epsilon"),
        ({"delta": 1.0}, ParameterError, "delta"),
        ({"k_values": [-1]}, ParameterError, "k_values"),
        ({"k_values": []}, ParameterError, "k_values"),
        ({"unit": "user"}, ParameterError, "unit"),
        ({"unit": None}, ParameterError, "unit"),
        ({"windows": [11]}, ParameterError, "windows"),
        ({"windows": ["weekly"]}, ParameterError, "windows"),
        ({"horizon": 0}, ParameterError, "horizon"),
        ({"horizon": None}, ParameterError, "horizon"),
        ({"out_of_range": "clip"}, ParameterError, "out_of_range"),
        ({"method": "fast"}, ParameterError, "method"),
        ({"singleton": "yes"}, ParameterError, "singleton"),
        ({"source": (np.array([0, 1]), np.array([1.5, 2]))}, DataError, "time"),
        ({"source": (np.array([0, 1]), np.array([1, 11]))}, DataError, "outside"),
        ({"source": (np.array([0, 1]), np.array([0, 2]))}, DataError, "outside"),
        ({"source": (np.array([0, 1]), np.array(["a", "b"]))}, DataError, "time"),
        ({"source": (np.array([0, 1]), np.array([1, 2, 3]))}, DataError, "equal length"),
        ({"source": {"u": [1, 2]}, "item": "u", "time": "t"}, DataError, "column 't'"),
        ({"source": (np.array([0, 1]), np.array([1, 1])), "singleton": True}, DataError,
         "singleton"),
        ({"start": "2024-01-01"}, ParameterError, "horizon"),
    ],
)
def test_bad_input(over, exc, match):
    with pytest.raises(exc, match=match):
        bad_call(**over)


def test_accountant_charged_before_noise():
    acct = Accountant(PrivacyBudget(1.5))
    bad_call(accountant=acct)
    assert (acct.spent.epsilon, acct.spent.delta) == (1.0, 0.0)
    with pytest.raises(BudgetExceededError):
        bad_call(accountant=acct)


def test_sum_halfwidth_is_valid_and_exact_for_one_node():
    g = Fraction(1, 3)
    h1 = sum_quantile([1], 0.05, gamma=g)[0]
    assert float(discrete_laplace_tail(h1, g)) <= 0.05
    assert float(discrete_laplace_tail(h1 - 1, g)) > 0.05
    # two nodes: exact tail of the sum by convolution of the pmf
    from dpfreq.noise import discrete_laplace_pmf

    z = np.arange(-400, 401)
    p = discrete_laplace_pmf(z, g)
    conv = np.convolve(p, p)
    zz = np.arange(-800, 801)
    h2 = sum_quantile([2], 0.05, gamma=g)[0]
    assert conv[np.abs(zz) > h2].sum() <= 0.05


def test_composed_epsilon_advanced_beats_basic_for_many_pieces():
    eps = Fraction(1)
    assert composed_epsilon(eps, 10, 0.0) == Fraction(1, 10)
    adv = composed_epsilon(eps, 400, 1e-6)
    assert adv > Fraction(1, 400)
    e0 = float(adv)
    total = e0 * np.sqrt(2 * 400 * np.log(1e6)) + 400 * e0 * np.expm1(e0)
    assert total <= 1.0


def node_range(heap_id, domain):
    level = domain.bit_length() - 1 - (int(heap_id).bit_length() - 1)
    j = int(heap_id) - (domain >> level)
    return j << level, ((j + 1) << level) - 1


@pytest.mark.parametrize("horizon", [7, 8, 9])
def test_tree2d_answer_equals_explicit_noisy_tree_over_reduced_domain(rng, horizon):
    """Lazy answer = Σ over cover nodes of (exact node count of the kept points + node noise)."""
    from dpfreq.windows.data.reductions import time_window_points
    from dpfreq.windows.layouts.dyadic import prefix_cover

    item, times = small_log(rng, horizon, 4)
    rel = release_window_counts((item, times), horizon=horizon, epsilon=1.0, k_values=[2],
                                windows=["all"], method={"all": "tree2d"}, rng=5, unit="event")
    s = rel._state.structures[("all", 2)]
    domain = s.detail["domain"]
    trees = s._impl
    pts = time_window_points(item, times, 2, horizon)
    for t1 in range(1, horizon + 1):
        for t2 in range(t1, horizon + 1):
            total = 0
            for sign, (px, py), tree in ((1, pts[:2], trees[0]), (-1, pts[2:], trees[1])):
                keep = (px <= horizon - 1) & (py <= horizon)
                px, py = px[keep], py[keep] - 1
                assert px.max(initial=0) < domain
                assert py.max(initial=0) < domain
                for ux, ix in prefix_cover([t1 - 1], domain):
                    for uy, iy in prefix_cover([t2 - 1], domain):
                        if not (ux[0] and uy[0]):
                            continue
                        x0, x1 = node_range(ix[0], domain)
                        y0, y1 = node_range(iy[0], domain)
                        count = int(((px >= x0) & (px <= x1) & (py >= y0) & (py <= y1)).sum())
                        node = int(ix[0]) * 2 * domain + int(iy[0])
                        total += sign * (count + int(tree._noise.noise([node])[0]))
            assert rel.window(t1, t2, 2).estimate == total


def test_block_and_single_domains_hold_every_counted_point(rng):
    """Every point a rolling-window query can count lies inside the tree domain."""
    from dpfreq.windows.data.reductions import block_points, rolling_window_points

    for _ in range(200):
        horizon = int(rng.integers(1, 15))
        width = int(rng.integers(1, horizon + 1))
        item, times = small_log(rng, horizon, 4)
        blocks = build_structure_for(horizon, width, "blocks")
        bp = block_points(item, times, 2, width, horizon)
        counted = bp.a[bp.a <= width - 1]
        assert counted.max(initial=0) < blocks.detail["domain"]
        single = build_structure_for(horizon, width, "single")
        a, c, _ = rolling_window_points(item, times + width, 2, width, horizon + width)
        vals = np.concatenate((a, c)) - width
        assert vals[vals <= horizon].max(initial=0) < single.detail["domain"]


def build_structure_for(horizon, width, method):
    from dpfreq.windows.structures.base import build_structure

    return build_structure("rolling", method, 2, horizon, "event", Fraction(1), 0.0, width)


def test_zcdp_rho_conversion():
    from dpfreq.accounting import zcdp_rho

    rho = zcdp_rho(1.0, 1e-6)
    assert rho + 2 * np.sqrt(rho * np.log(1e6)) == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize("level", ["event", "item"])
def test_delta_positive_uses_zcdp_gaussian_and_stays_exact(rng, level):
    item, times = small_log(rng, 12)
    rel = release_window_counts((item, times), horizon=12, epsilon=1.0, delta=1e-6,
                                k_values=[1, 2], windows=["cumulative", 3, "all"], unit=level,
                                rng=4)
    assert rel.mechanism_params["accounting"].startswith("zCDP")
    kinds = {rec["noise"] for rec in rel.mechanism_params["methods"].values()}
    assert "gaussian" in kinds
    t1, t2 = np.triu_indices(13, 0)
    keep = t1 >= 1
    t1, t2 = t1[keep], t2[keep]
    for k in (1, 2):
        f = brute(item, times, 12, k)
        assert np.array_equal(noise_free(rel, t1, t2, k), f[t1, t2])
    s = rel._state.structures[("all", 1)]
    a = rel.window(2, 9, 1)
    if s.noise_kind == "gaussian":
        assert a.sd == pytest.approx(np.sqrt(s.nodes(2, 9) * s.sigma2))
    pure = release_window_counts((item, times), horizon=12, epsilon=1.0, k_values=[1, 2],
                                 windows=["cumulative", 3, "all"], unit=level, rng=4)
    assert pure.mechanism_params["accounting"].startswith("pure")


def test_gaussian_halfwidth_is_valid():
    from dpfreq.noise import gaussian_sigma2
    from dpfreq.windows.structures.base import build_structure

    one = build_structure("cumulative", "per_query", 1, 16, "event", Fraction(1), 0.0, rho=0.5,
                          noise_kind="gaussian")
    two = build_structure("rolling", "single", 1, 16, "event", Fraction(1), 0.0, width=1,
                          rho=5.0, noise_kind="gaussian")
    assert two.sigma2 == gaussian_sigma2(two.detail["l2_sensitivity"] ** 2 / (2 * 5.0))[0]
    assert int(one.nodes(1, 3)) == 1
    assert int(two.nodes(1, 1)) == 2
    for s, m, t in ((one, 1, 3), (two, 2, 1)):
        z = np.arange(-2000, 2001)
        p = np.exp(-(z**2) / (2 * s.sigma2))
        p /= p.sum()
        dist, support = (p, z) if m == 1 else (np.convolve(p, p), np.arange(-4000, 4001))
        h = s.halfwidth(max(1, t), t, 0.05)
        assert dist[np.abs(support) > h].sum() <= 0.05


def test_cumulative_tree_consistency_equals_explicit_least_squares(rng):
    """Cumulative answers = prefix sums of the least-squares leaves of the noisy blocks (the
    layout ``auto`` keeps for T = 13, checked against ``numpy.linalg.lstsq``)."""
    from dpfreq.windows.data.reductions import cumulative_points
    from dpfreq.windows.layouts.layered import layer_incidence

    item, times = small_log(rng, 13, 5)
    rel = release_window_counts((item, times), horizon=13, epsilon=1.0, k_values=[1],
                                windows=["cumulative"], rng=6, unit="event",
                                method={"cumulative": "tree"})
    s = rel._state.structures[("cumulative", 1)]
    assert s.method == "tree"
    assert s.consistent
    assert rel.mechanism_params["methods"]["cumulative, k=1"]["detail"]["consistency"]
    incidence = layer_incidence(13, s.branching, s.top)
    leaves = np.bincount(cumulative_points(item, times, 1) - 1, minlength=13)
    fit = np.linalg.lstsq(incidence, incidence @ leaves + s._impl, rcond=None)[0]
    got = rel.cumulative(np.arange(1, 14), 1)
    assert np.allclose(got.estimate, np.cumsum(fit)[:13], atol=1e-2)  # dyadic weights
    raw = s.nodes(1, np.arange(1, 14)) * s.node_variance
    assert np.all(np.asarray(got.sd) ** 2 <= raw + 1e-9)


def test_per_start_consistency_equals_explicit_least_squares(rng):
    from dpfreq.windows.layouts.least_squares import consistent_tree

    item, times = small_log(rng, 11, 4)
    rel = release_window_counts((item, times), horizon=11, epsilon=1.0, k_values=[2],
                                windows=["all"], unit="item", method={"all": "per_start"},
                                rng=8)
    s = rel._state.structures[("all", 2)]
    assert s.method == "per_start"
    assert s.consistent
    d = s.detail["domain"]
    exact = brute(item, times, 11, 2)
    for t1 in (1, 4, 11):
        vec = s._impl.noise((t1 - 1) * 2 * d + np.arange(2 * d)).astype(np.float64)
        levels = [vec[(d >> lev):(d >> lev) * 2] for lev in range(d.bit_length())]
        cons = np.cumsum(consistent_tree(levels, 2)[0])
        t2 = np.arange(t1, 12)
        got = np.asarray(rel.window(np.full(t2.size, t1), t2, 2).estimate)
        # the published weights are the least-squares ones rounded to multiples of 2^-20
        # (within a few 1e-6 each): a few 1e-4 at these noise magnitudes
        assert np.allclose(got, exact[t1, t2] + cons[t2 - t1], atol=1e-2)


def test_consistent_halfwidth_matches_chebyshev_sandwich():
    """The Chernoff half-width of a consistent answer lies between the normal quantile and the
    (always valid) Chebyshev half-width sd/sqrt(β)."""
    from dpfreq.windows.structures.base import build_structure

    s = build_structure("cumulative", "tree", 1, 100, "event", Fraction(1), 0.0)
    assert s.consistent
    t = np.arange(1, 101)
    sd = np.sqrt(s.variance(1, t))
    h = s.halfwidth(1, t, 0.05)
    assert np.all(h >= 1.96 * sd)
    assert np.all(h <= sd / np.sqrt(0.05))


@pytest.mark.parametrize(("method", "group"), [("per_start", 1), ("compressed", 3),
                                               ("tree2d", 1), ("per_query", 1)])
def test_mean_mse_closed_form_equals_enumeration(method, group):
    from dpfreq.windows.structures.base import build_structure

    level = "event" if method == "tree2d" else "item"
    s = build_structure("all", method, 2, 11, level, Fraction(1), 0.0, group_size=group)
    t1, t2 = np.triu_indices(12, 0)
    keep = t1 >= 1
    t1, t2 = t1[keep], t2[keep]
    var = s.variance(t1, t2)
    want = (np.sqrt(np.mean(var)) + s.bias_bound()) ** 2 if method == "compressed" else np.mean(var)
    assert s.mean_mse() == pytest.approx(want, rel=1e-9)


def test_save_load_identical_with_zcdp_and_consistency(tmp_path, rng):
    item, times = small_log(rng, 30, 6)
    rel = release_window_counts((item, times), horizon=30, epsilon=1.0, delta=1e-6,
                                k_values=[1], windows=["cumulative", "all"], unit="item",
                                rng=11)
    t1, t2 = np.triu_indices(31, 0)
    keep = t1 >= 1
    t1, t2 = t1[keep], t2[keep]
    a = rel.window(t1, t2, 1)
    loaded = WindowCountsRelease.load(rel.save(tmp_path / "z.npz"))
    b = loaded.window(t1, t2, 1)
    assert np.array_equal(a.estimate, b.estimate)
    assert np.array_equal(a.upper, b.upper)
    assert loaded.mechanism_params["accounting"] == rel.mechanism_params["accounting"]


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
def test_engine_path_equals_array_path(tmp_path, rng, engine):
    pytest.importorskip(f"dpfreq.engines.{engine}")
    item, times = small_log(rng, 20, 6)
    users = np.array([f"u{i}" for i in item])
    if engine == "duckdb":
        path = tmp_path / "log.csv"
        path.write_text("user,t\n" + "\n".join(f"{u},{t}" for u, t in zip(users, times,
                                                                         strict=True)) + "\n")
        source = str(path)
    else:
        source = {"user": users, "t": times}
    kw = dict(item="user", time="t", horizon=20, epsilon=1.0, k_values=[1, 2],  # noqa: C408
              windows=["cumulative", 4, "all"], rng=3, unit="event")
    via_engine = release_window_counts(source, engine=engine, **kw)
    via_arrays = release_window_counts({"user": users, "t": times}, **kw)
    assert via_engine.mechanism_params["source"] == engine
    a, b = via_engine._state.summaries, via_arrays._state.summaries
    assert a.specs == b.specs
    for name in ("slots", "keys", "weights"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    t1, t2 = np.triu_indices(21, 0)
    keep = t1 >= 1
    assert np.array_equal(via_engine.window(t1[keep], t2[keep], 2).estimate,
                          via_arrays.window(t1[keep], t2[keep], 2).estimate)


def test_a_release_saved_in_an_earlier_format_is_refused(tmp_path, rng):
    """An earlier format (format 1 drew other keyed noise for small γ; format 2 kept no
    measurements) is refused in one line."""
    from dpfreq.artifacts import read_artifact, write_artifact
    from dpfreq.windows.persist import ARTIFACT_KIND, ARTIFACT_VERSION

    item, times = small_log(rng, 20)
    rel = release_window_counts((item, times), horizon=20, epsilon=1.0, k_values=[1],
                                windows=["all"], unit="event", rng=3)
    _, meta, arrays = read_artifact(rel.save(tmp_path / "now.npz"), kind=ARTIFACT_KIND,
                                    versions=(ARTIFACT_VERSION,))
    old = write_artifact(tmp_path / "old.npz", kind=ARTIFACT_KIND, version=1, meta=meta,
                         arrays=arrays)
    with pytest.raises(DataError, match="format version 1 is not supported"):
        WindowCountsRelease.load(old)
