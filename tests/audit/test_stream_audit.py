"""Seeded Clopper–Pearson audit of a short stream (T = 4, k = 1 and 2, unit="item", ε = 1).

The stream's own pipeline — the per-item update period by period, the keyed measurement of the
rows each period closes, the published answers — runs on two neighbouring logs: item 1 with two
events in period 1 (its 1st and 2nd events, so both k levels gain a point there) and without it
(another item's events stay). Many independent streams run at once as the groups of one
measurement (distinct keyed counters: independent draws given an ideal PRF). The event "both
answers of period 1 are >= 1 + the other item's contribution" is as likely as the likelihood
ratio allows: its privacy loss is exactly ε for the simple counter the plan picks. The
Clopper–Pearson bound on the loss the hit counts certify stays below ε (false-alarm rate
α = 1e-6) and is close to it (the audit is not idle).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import beta

from dpfreq.stream.auto import plan_stream
from dpfreq.stream.items.memory import numpy_update
from dpfreq.stream.items.update import UpdatePlan, count_dtype
from dpfreq.stream.measure import measure_periods
from dpfreq.stream.publish import curve

ALPHA = 1e-6
EPSILON, HORIZON, KS, RUNS = 1.0, 4, (1, 2), 200_000


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    """One-sided (1 − α/4) Clopper–Pearson bounds (four are used: α in all)."""
    lower = 0.0 if k == 0 else float(beta.ppf(ALPHA / 4, k, n - k + 1))
    upper = 1.0 if k == n else float(beta.ppf(1 - ALPHA / 4, k + 1, n - k))
    return lower, upper


def _increments(log: dict[int, list[int]]) -> np.ndarray:
    keys, codes = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    counts = np.zeros(0, dtype=count_dtype(max(KS)))
    out = []
    for t in range(1, HORIZON + 1):
        rows = [(i, h.count(t)) for i, h in sorted(log.items()) if h.count(t)]
        ev = {"k": np.array([i for i, _ in rows], dtype=np.int64),
              "g": np.zeros(len(rows), dtype=np.int64),
              "p": np.full(len(rows), t, dtype=np.int64),
              "n": np.array([n for _, n in rows], dtype=np.int64)}
        keys, codes, counts, inc, _, _ = numpy_update(keys, codes, counts, ev,
                                                   UpdatePlan(KS, 1, None, None, "0" * 32,
                                                              t - 1, t))
        out.append(inc[0])
    return np.concatenate(out, axis=1)


def _hits(log: dict[int, list[int]], counter, seed: int) -> int:
    x = np.broadcast_to(_increments(log)[None], (RUNS, len(KS), HORIZON))
    key = np.random.default_rng(seed).bytes(32)
    noisy = measure_periods(counter, key, KS, np.ascontiguousarray(x),
                            np.zeros((len(KS), RUNS, 0), dtype=np.int64), 0, HORIZON, True)
    first = [curve(counter, noisy[j], 1)[0][:, 0] for j in range(len(KS))]
    return int(np.sum((first[0] >= 2) & (first[1] >= 1)))


def test_short_stream_loss_stays_below_epsilon() -> None:
    plan = plan_stream(horizon=HORIZON, unit="item", epsilon=EPSILON, delta=0.0, n_k=len(KS),
                       method="auto", max_groups_per_item=None)
    assert plan.method == "simple"
    other = {2: [1, 3]}  # another item: its first event is in period 1 too
    with_item = {**other, 1: [1, 1]}
    k1 = _hits(other, plan.counter, 11)
    k2 = _hits(with_item, plan.counter, 12)
    _lo1, hi1 = clopper_pearson(k1, RUNS)
    lo2, _hi2 = clopper_pearson(k2, RUNS)
    bound = max(math.log(lo2 / hi1), math.log((1 - hi1) / (1 - lo2)))
    assert bound <= EPSILON
    assert bound > 0.9 * EPSILON  # the audit sees almost all of the claimed ε
