"""Simultaneous bands hold over every value they cover, whichever family answers each value.

A curve of a release can be answered by several structures (a cumulative curve whose last
period the ``total`` family answers; a rolling curve whose first windows, which start at period
1, a cumulative structure answers; any window an ``all`` structure answers). Each release's
band of each curve, and the band of :meth:`cumulative_curve` / :meth:`rolling_curve` /
:meth:`answer_windows` over several k, must contain the whole truth at once with probability
at least the confidence. Each assertion is the one-sided exact binomial test of ``coverage >=
0.95`` at α = 1e-6 over independent seeded releases; the number of releases is the smallest
that rejects a coverage of 0.88 (the shortfall the audit found) with probability 0.99
(``tests/power.py``). Every curve of a release is tested on its own (one hit per release).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpfreq.windows import release_window_counts
from power import coverage_trials

pytestmark = pytest.mark.statistical

ALPHA, CONF = 1e-6, 0.95
TRIALS = coverage_trials(CONF, 0.07, ALPHA, 0.99)
HORIZON, WIDTH = 12, 4

COMBINATIONS = [
    ["cumulative", "total"],
    ["cumulative", WIDTH],
    ["total", "all"],
    [WIDTH, "all"],
    ["cumulative", "total", WIDTH, "all"],
]


def _log(seed: int):
    gen = np.random.default_rng(seed)
    return gen.integers(0, 60, 400), gen.integers(1, HORIZON + 1, 400)


def _truth(items, times, t1, t2, k):
    """f≥k of each window by brute force."""
    out = np.empty(t1.size, dtype=np.int64)
    for i, (a, b) in enumerate(zip(t1.tolist(), t2.tolist(), strict=True)):
        inside = (times >= a) & (times <= b)
        out[i] = int((np.bincount(items[inside], minlength=60) >= k).sum())
    return out


def _held(lower, upper, truth) -> bool:
    return bool(np.all((np.asarray(lower) <= truth) & (truth <= np.asarray(upper))))


def _check(hits: dict[str, int]) -> None:
    for name, h in hits.items():
        assert stats.binom.cdf(h, TRIALS, CONF) >= ALPHA, (name, h, TRIALS)


CASES = [("event", w) for w in COMBINATIONS] + [("item", COMBINATIONS[-1])]


@pytest.mark.parametrize(("unit", "windows"), CASES,
                         ids=[f"{u}-{'+'.join(map(str, w))}" for u, w in CASES])
def test_every_curve_band_holds_at_its_confidence(unit, windows):
    items, times = _log(7)
    ts = np.arange(1, HORIZON + 1)
    curves = {"cumulative": (np.ones_like(ts), ts), "total": (ts[-1:] * 0 + 1, ts[-1:]),
              f"rolling(W={WIDTH})": (np.maximum(1, ts - WIDTH + 1), ts)}
    truth = {(name, k): _truth(items, times, a, b, k)
             for name, (a, b) in curves.items() for k in (1, 2)}
    hits: dict[str, int] = {}
    for seed in range(TRIALS):
        rel = release_window_counts((items, times), horizon=HORIZON, epsilon=0.5, unit=unit,
                                    k_values=[1, 2], windows=windows, rng=seed,
                                    confidence=CONF)
        for label in rel.error.band_lower:
            for k in (1, 2):
                name = f"release {label} k={k}"
                hits[name] = hits.get(name, 0) + _held(rel.error.band_lower[label][k],
                                                       rel.error.band_upper[label][k],
                                                       truth[(label, k)])
        if "cumulative" in windows or "all" in windows:
            a = rel.cumulative_curve(1)
            hits["cumulative_curve"] = hits.get("cumulative_curve", 0) + _held(
                a.band_lower, a.band_upper, truth[("cumulative", 1)])
        if WIDTH in windows:
            a = rel.rolling_curve(2, width=WIDTH)
            hits["rolling_curve"] = hits.get("rolling_curve", 0) + _held(
                a.band_lower, a.band_upper, truth[(f"rolling(W={WIDTH})", 2)])
        if "all" in windows:  # one batch over both k
            t1, t2 = np.triu_indices(HORIZON)
            t1, t2 = np.tile(t1 + 1, 2), np.tile(t2 + 1, 2)
            kk = np.repeat([1, 2], t1.size // 2)
            a = rel.answer_windows(t1, t2, kk, confidence=CONF)
            want = np.concatenate([_truth(items, times, t1[kk == k], t2[kk == k], k)
                                   for k in (1, 2)])
            hits["answer_windows"] = hits.get("answer_windows", 0) + _held(
                a.band_lower, a.band_upper, want)
    _check(hits)


def test_grouped_bands_hold_for_each_group_and_all_groups_at_once():
    """A grouped release with two families answering the cumulative curve: each group's curve
    band, and the simultaneous statement over all groups, at the confidence."""
    gen = np.random.default_rng(3)
    n = 600
    log = {"u": gen.integers(0, 80, n), "g": gen.choice(["a", "b"], n),
           "t": gen.integers(1, HORIZON + 1, n)}
    ts = np.arange(1, HORIZON + 1)
    truth = {}
    for g in ("a", "b"):
        sel = log["g"] == g
        truth[g] = _truth(log["u"][sel], log["t"][sel], np.ones_like(ts), ts, 1)
    hits: dict[str, int] = {}
    for seed in range(TRIALS):
        rel = release_window_counts(log, item="u", time="t", group="g", groups=["a", "b"],
                                    max_groups_per_item=2, horizon=HORIZON, epsilon=1.0,
                                    unit="item", k_values=[1], windows=["cumulative", "total"],
                                    rng=seed, confidence=CONF)
        every = True  # the grouped release's simultaneous bound over groups and curves
        for g in ("a", "b"):
            one = rel[g]
            held = _held(one.error.band_lower["cumulative"][1],
                         one.error.band_upper["cumulative"][1], truth[g])
            hits[f"group {g}"] = hits.get(f"group {g}", 0) + held
            a = one.cumulative_curve(1)
            hits[f"group {g} curve"] = hits.get(f"group {g} curve", 0) + _held(
                a.band_lower, a.band_upper, truth[g])
            for label in ("cumulative", "total"):
                est = np.asarray(one.value[label][1], dtype=np.float64)
                want = truth[g] if label == "cumulative" else truth[g][-1:]
                every &= bool(np.all(np.abs(est - want) <= rel.simultaneous.value))
        hits["all groups at once"] = hits.get("all groups at once", 0) + every
    _check(hits)
