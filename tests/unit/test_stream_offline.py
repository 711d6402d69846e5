"""A stream's answers equal, bit for bit, the offline release of the same data with the same key
and the same structure: the online factorization is the offline one (end to end, through
``release_window_counts`` with the same seed), and the simple counter and the tree measure the
same noisy rows as the offline counters with the same keyed node noise."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpfreq.accounting.zcdp import zcdp_rho
from dpfreq.stream import ReachStream
from dpfreq.stream.measure import measure_periods
from dpfreq.stream.mechanisms import Budget, Counter
from dpfreq.stream.mechanisms.intervals import SimpleLayout, TreeLayout
from dpfreq.stream.mechanisms.law import calibrate
from dpfreq.stream.publish import curve
from dpfreq.windows import release_window_counts
from dpfreq.windows.noise import KeyedDiscreteLaplace
from dpfreq.windows.structures import build_structure


def _log(seed: int, horizon: int):
    rng = np.random.default_rng(seed)
    n = 400
    return rng.integers(0, 90, n), rng.integers(1, horizon + 1, n)


@pytest.mark.parametrize("unit", ["item", "event"])
def test_online_factorization_is_the_offline_release(tmp_path, seed, unit) -> None:
    horizon, ks = 24, [1, 2]
    items, times = _log(seed, horizon)
    offline = release_window_counts({"u": items, "t": times}, item="u", time="t",
                                    horizon=horizon, epsilon=1.0, delta=1e-6, unit=unit,
                                    k_values=ks, windows=["cumulative"],
                                    method={"cumulative": "factorization"}, engine="memory",
                                    rng=seed)
    s = ReachStream.create(tmp_path / "s", item="u", time="t", horizon=horizon, k_values=ks,
                           unit=unit, epsilon=1.0, delta=1e-6, method="factorization",
                           late="error", engine="memory", rng=seed)
    for lo, hi in ((0, 1), (1, 9), (9, 10), (10, 24)):
        sel = (times > lo) & (times <= hi)
        rel = s.append({"u": items[sel], "t": times[sel]}, through=hi)[-1]
    for j, k in enumerate(ks):
        st = offline._state.structures[("cumulative", k)]
        np.testing.assert_array_equal(s.state.noisy[j, 0], st.measurement)  # u = R x + z
        a, b = rel.value[k], offline.value["cumulative"][k]
        assert a.dtype == b.dtype
        assert a.tobytes() == b.tobytes()
        assert np.array_equal(rel.error.lower[k], offline.error.lower["cumulative"][k])


def _exact_prefix(x: np.ndarray):
    run = np.concatenate(([0], np.cumsum(x)))
    return lambda t1, t2: run[np.asarray(t2)] - run[np.asarray(t1) - 1]


@pytest.mark.parametrize("kind", ["laplace", "gaussian"])
def test_simple_counter_measures_and_answers_as_the_offline_one(seed, kind) -> None:
    horizon, key = 30, np.random.default_rng(seed).bytes(32)
    x = np.random.default_rng(seed + 1).integers(0, 20, horizon)
    rho = zcdp_rho(1.0, 1e-6)
    s = build_structure("cumulative", "simple", 1, horizon, "item", Fraction(1), 1e-6,
                        rho=rho if kind == "gaussian" else None, noise_kind=kind)
    if kind == "laplace":  # the offline Laplace counter draws eagerly; give it keyed noise
        s.node_noise = lambda st, name: KeyedDiscreteLaplace(key, name, st.gamma)
    s.attach(key, ("cumulative", 1))
    s.measure(_exact_prefix(x))
    budget = Budget(Fraction(1), rho if kind == "gaussian" else None)
    law = calibrate(budget, kind, *SimpleLayout(horizon).sensitivity("item"))
    assert law is not None
    assert (law.gamma, law.sigma2 or 0) == ((s.gamma if kind == "laplace" else None), s.sigma2)
    counter = Counter(SimpleLayout(horizon), law)
    noisy = measure_periods(counter, key, (1,), x[None, None, :],
                            np.zeros((1, 1, 0), dtype=np.int64), 0, horizon, False)
    np.testing.assert_array_equal(noisy[0, 0], s.measurement)
    ts = np.arange(1, horizon + 1)
    np.testing.assert_array_equal(curve(counter, noisy[0], horizon)[0][0],
                                  s.estimates(np.ones_like(ts), ts))


def test_tree_measures_the_offline_trees_nodes(seed) -> None:
    """The online tree measures the blocks its covers use, each with the offline tree's keyed
    node noise (same flat ids, same law): the same noisy block counts."""
    horizon, key = 16, np.random.default_rng(seed).bytes(32)
    x = np.random.default_rng(seed + 2).integers(0, 9, horizon)
    rho = zcdp_rho(1.0, 1e-6)
    s = build_structure("cumulative", "tree", 1, horizon, "item", Fraction(1), 1e-6, rho=rho,
                        noise_kind="gaussian", branching=2, top=False)
    s.attach(key, ("cumulative", 1))
    s.measure(_exact_prefix(x))
    lay = TreeLayout(horizon, 2, False)
    law = calibrate(Budget(Fraction(1), rho), "gaussian", *lay.sensitivity("item"))
    assert law is not None
    assert law.sigma2 == s.sigma2
    noisy = measure_periods(Counter(lay, law), key, (1,), x[None, None, :],
                            np.zeros((1, 1, 0), dtype=np.int64), 0, horizon, False)
    np.testing.assert_array_equal(noisy[0, 0], s.measurement[lay.ids])
