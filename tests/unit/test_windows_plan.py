"""plan_window_counts: the plan states the release's intervals, epsilon_for inverts it, and the
predicted intervals cover the truth over seeded releases at least at their confidence."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binomtest

from dpfreq.errors import ParameterError
from dpfreq.windows import WindowCountsPlan, plan_window_counts, release_window_counts
from power import coverage_trials

ALPHA = 1e-6
#: The coverage test's power: a shortfall of SHORTFALL below the confidence fails with
#: probability POWER (tests/power.py).
SHORTFALL, POWER = 0.15, 0.99


def small_log(seed: int, horizon: int, n_items: int = 40, n_events: int = 300):
    rng = np.random.default_rng(seed)
    return rng.integers(0, n_items, n_events), rng.integers(1, horizon + 1, n_events)


SETTINGS = [
    ("event", 0.0, ["cumulative", 5, "all"], False),
    ("item", 0.0, ["cumulative", 7, "all"], False),
    ("event", 1e-6, ["cumulative", 3], False),
    ("item", 1e-5, ["cumulative", 10, "all"], False),
]


@pytest.mark.parametrize(("unit", "delta", "windows", "singleton"), SETTINGS)
def test_plan_states_the_release_half_widths(unit, delta, windows, singleton):
    horizon = 24
    items, times = small_log(11, horizon)
    kw = {"horizon": horizon, "epsilon": 1.5, "delta": delta, "unit": unit, "k_values": [1, 2],
          "windows": windows, "singleton": singleton, "confidence": 0.9}
    plan = plan_window_counts(**kw)
    rel = release_window_counts((items, times), rng=5, **kw)
    assert isinstance(plan, WindowCountsPlan)
    assert set(plan.halfwidth) == set(rel.error.value)
    for label, per_k in plan.halfwidth.items():
        for k, half in per_k.items():
            # the release adds the factorization's floating-point allowance (relative 2^-40 of
            # the measurement's magnitude) to the plan's half-width
            np.testing.assert_allclose(half, rel.error.value[label][k], rtol=0, atol=1e-6)
            band = np.asarray(rel.error.band_upper[label][k]) - np.asarray(rel.value[label][k])
            method = plan.methods[f"{label}, k={k}"]
            if method != "per_query":  # the trees' bands are simulated
                # two independent simulations of 1,000 draws (the plan's public one, the
                # release's keyed one): their 0.9-quantiles of the maximum differ by ~1 %
                assert plan.band_halfwidth[label][k] == pytest.approx(band.max(), rel=0.05)
                if method in ("tree", "per_start", "compressed"):  # continuous maxima
                    assert plan.band_halfwidth[label][k] != band.max()  # not the secret's
            else:
                assert plan.band_halfwidth[label][k] == pytest.approx(band.max(), abs=1e-9)
    for name, rec in rel.mechanism_params["methods"].items():
        assert plan.methods[name] == rec["method"]
    if "all" in plan.max_halfwidth:  # the worst window the release can be asked about
        t1, t2 = np.triu_indices(horizon)
        for k in (1, 2):
            a = rel.window(t1 + 1, t2 + 1, k, confidence=0.9)
            worst = float(np.max(np.asarray(a.upper) - np.asarray(a.estimate)))
            assert worst <= plan.max_halfwidth["all"][k] + 1e-9


def test_timestamp_axis_gives_the_same_plan_as_its_horizon():
    a = plan_window_counts(start="2024-01-01", end="2024-01-31", period="1d", epsilon=1.0,
                           unit="event", k_values=1, windows=["cumulative"])
    b = plan_window_counts(horizon=31, epsilon=1.0, unit="event", k_values=1,
                           windows=["cumulative"])
    assert a.horizon == 31
    np.testing.assert_array_equal(a.halfwidth["cumulative"][1], b.halfwidth["cumulative"][1])


@pytest.mark.parametrize("family", ["cumulative", 7, "rolling(W=7)"])
def test_epsilon_for_inverts_the_plan(family):
    base = {"horizon": 30, "delta": 0.0, "unit": "item", "k_values": [1, 3],
            "windows": ["cumulative", 7]}
    plan = plan_window_counts(epsilon=1.0, **base)
    label = "rolling(W=7)" if family != "cumulative" else "cumulative"
    target = plan.max_halfwidth[label][3] / 4
    eps = plan.epsilon_for(target, family=family, k=3)
    assert eps > 1.0
    assert plan_window_counts(epsilon=eps, **base).max_halfwidth[label][3] <= target
    # rounded up to 3 significant digits, so 2 % less ε misses the target
    assert plan_window_counts(epsilon=eps * 0.98, **base).max_halfwidth[label][3] > target


@pytest.mark.parametrize(("unit", "delta", "epsilon"),
                         [("item", 0.0, 0.3), ("event", 0.0, 3.0), ("item", 1e-6, 0.5)])
def test_worst_half_width_search_equals_the_full_curve(unit, delta, epsilon):
    """epsilon_for evaluates only the worst half-width, computing exact laws for the windows
    whose tail bound can exceed it; that is the maximum of the full curve."""
    from dpfreq.windows.plan import _predict

    plan = plan_window_counts(horizon=40, epsilon=1.0, unit=unit, delta=delta, k_values=[1, 2],
                              windows=["cumulative", 7])
    for label in ("cumulative", "rolling(W=7)"):
        for k in (1, 2):
            worst = _predict(plan._inputs, epsilon, (label, k))[1][label][k][1]
            assert worst == _predict(plan._inputs, epsilon)[1][label][k][1]


def test_vacuous_flag_and_the_epsilon_that_fixes_it():
    plan = plan_window_counts(horizon=30, epsilon=0.02, unit="item", k_values=[1],
                              windows=["cumulative"], scale=1000)
    h = plan.max_halfwidth["cumulative"][1]
    assert plan.vacuous["cumulative"][1] is (2 * h >= 1000)
    assert plan.vacuous["cumulative"][1]
    useful = plan.useful_epsilon(family="cumulative", k=1)
    assert useful is not None
    assert plan_window_counts(horizon=30, epsilon=useful, unit="item", k_values=[1],
                              scale=1000,
                              windows=["cumulative"]).max_halfwidth["cumulative"][1] <= 100
    (line,) = plan.lines()
    assert "VACUOUS" in line
    assert f"epsilon >= {useful:g}" in line
    unjudged = plan_window_counts(horizon=30, epsilon=0.1, unit="item", k_values=[1],
                                  windows=["cumulative"])
    assert unjudged.vacuous["cumulative"][1] is None
    assert "VACUOUS" not in unjudged.lines()[0]
    with pytest.raises(ParameterError, match="scale"):
        unjudged.useful_epsilon()


def test_bad_input_is_one_parameter_error():
    plan = plan_window_counts(horizon=10, epsilon=1.0, unit="event", k_values=[1],
                              windows=["cumulative"])
    for call in (lambda: plan.epsilon_for(0.0),
                 lambda: plan.epsilon_for(1.0, family="all"),
                 lambda: plan.epsilon_for(1.0, k=2),
                 lambda: plan_window_counts(horizon=10, epsilon=0.0, unit="event", k_values=1,
                                            windows=["cumulative"]),
                 lambda: plan_window_counts(horizon=10, epsilon=1.0, unit="user", k_values=1,
                                            windows=["cumulative"]),
                 lambda: plan_window_counts(horizon=10, epsilon=1.0, unit="event", k_values=1,
                                            scale=0, windows=["cumulative"]),
                 lambda: plan_window_counts(horizon=10, epsilon=1.0, unit="event", k_values=1,
                                            windows=[11])):
        with pytest.raises(ParameterError) as info:
            call()
        assert "\n" not in str(info.value)
    assert plan.to_dict()["halfwidth"]["cumulative"]["1"] == list(plan.halfwidth["cumulative"][1])
    # exact quantiles: at a large enough ε the answers are nearly exact
    eps = plan.epsilon_for(1e-9)
    assert plan_window_counts(horizon=10, epsilon=eps, unit="event",
                              k_values=[1],
                              windows=["cumulative"]).max_halfwidth["cumulative"][1] <= 1e-9


def exact_reach(items, times, t1, t2, k):
    sel = (times >= t1) & (times <= t2)
    _, counts = np.unique(items[sel], return_counts=True)
    return int(np.sum(counts >= k))


@pytest.mark.statistical
@pytest.mark.parametrize(("unit", "delta", "confidence"),
                         [("event", 0.0, 0.6), ("item", 0.0, 0.8), ("event", 1e-6, 0.7)])
def test_predicted_intervals_cover_at_least_their_confidence(unit, delta, confidence):
    """One answer per seeded release (independent keys); the intervals are tail bounds of the
    exact noise law, so coverage is at least the confidence: a one-sided binomial test at
    α = 1e-6 against ``p = confidence``, with the trials that detect a coverage of
    ``confidence − 0.15`` with probability 0.99 (430 to 560 releases)."""
    horizon = 16
    trials = coverage_trials(confidence, SHORTFALL, ALPHA, POWER)
    items, times = small_log(3, horizon)
    kw = {"horizon": horizon, "epsilon": 2.0, "delta": delta, "unit": unit, "k_values": [2],
          "windows": ["cumulative", 4], "confidence": confidence}
    plan = plan_window_counts(**kw)
    cum_h = plan.halfwidth["cumulative"][2][horizon - 1]
    fix_h = plan.halfwidth["rolling(W=4)"][2][9]
    cum_truth = exact_reach(items, times, 1, horizon, 2)
    fix_truth = exact_reach(items, times, 7, 10, 2)
    hits = np.zeros(2, dtype=np.int64)
    for seed in range(trials):
        rel = release_window_counts((items, times), rng=seed, **kw)
        hits[0] += abs(rel.value["cumulative"][2][horizon - 1] - cum_truth) <= cum_h
        hits[1] += abs(rel.value["rolling(W=4)"][2][9] - fix_truth) <= fix_h
    for h in hits.tolist():
        assert binomtest(h, trials, confidence, alternative="less").pvalue >= ALPHA
    assert math.isfinite(cum_h)
    assert math.isfinite(fix_h)


def test_windows_is_required_like_on_the_command_line():
    """No default family (the CLI requires --windows): one rule in Python and the CLI."""
    with pytest.raises(TypeError, match="windows"):
        plan_window_counts(horizon=10, epsilon=1.0, unit="event", k_values=[1])  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="windows"):
        release_window_counts(([1], [1]), horizon=10, epsilon=1.0, unit="event",  # type: ignore[call-arg]
                              k_values=[1])


def test_epsilon_for_at_delta_meets_noise_free_answers():
    """At δ > 0 and a large ε the discrete Gaussian's predicted MSE underflows to 0: the chooser
    compares such plans (log 0 = -inf, the best score) instead of failing."""
    plan = plan_window_counts(horizon=16, epsilon=1.0, delta=1e-9, unit="item", k_values=1,
                              windows=["cumulative"])
    eps = plan.epsilon_for(1e-3)
    assert plan_window_counts(horizon=16, epsilon=eps, delta=1e-9, unit="item", k_values=1,
                              windows=["cumulative"]).max_halfwidth["cumulative"][1] <= 1e-3
