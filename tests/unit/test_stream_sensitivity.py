"""Exact privacy of the stream's measurements, by enumeration over small streams.

For small event logs and **every** neighbour at each unit of privacy (item: an item added with
any history or removed; event: one event added or removed; item_replace: one item's history
replaced by any other), the exact per-period increments are computed by the stream's own
update (period by period, as appends), then every counter's exact rows through **every**
prefix. The privacy loss of the rows of each (k) structure — ``Σ γ_v |Δ_v|`` (discrete
Laplace) or ``Σ Δ_v²/(2σ_v²)`` (discrete Gaussian) over the rows that differ — never exceeds
the structure's budget, and the largest change seen equals the sensitivity the counter was
calibrated to (the enumeration reaches it)."""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations_with_replacement

import numpy as np
import pytest

from dpfreq.accounting.zcdp import zcdp_rho
from dpfreq.stream.items.memory import numpy_update
from dpfreq.stream.items.update import UpdatePlan, count_dtype
from dpfreq.stream.mechanisms import BOUNDED_METHODS, Budget, EpochCounter, best_counters

HORIZON, KS = 4, (1, 2)
HISTORIES = [h for n in range(1, 4) for h in combinations_with_replacement(
    range(1, HORIZON + 1), n)]
BASES = [{}, {1: (1, 3)}, {1: (2, 2, 4), 2: (1,)}]


def _increments(log: dict[int, tuple[int, ...]], horizon: int = HORIZON) -> np.ndarray:
    """The stream's update, one append per period: increments (K, T) of one group."""
    keys = np.zeros(0, dtype=np.int64)
    codes = np.zeros(0, dtype=np.int64)
    counts = np.zeros(0, dtype=count_dtype(max(KS)))
    out = []
    for t in range(1, horizon + 1):
        rows = [(i, sum(1 for p in h if p == t)) for i, h in sorted(log.items())]
        rows = [(i, n) for i, n in rows if n]
        ev = {"k": np.array([i for i, _ in rows], dtype=np.int64),
              "g": np.zeros(len(rows), dtype=np.int64),
              "p": np.full(len(rows), t, dtype=np.int64),
              "n": np.array([n for _, n in rows], dtype=np.int64)}
        plan = UpdatePlan(KS, 1, None, None, "00" * 16, t - 1, t)
        keys, codes, counts, inc, _, _ = numpy_update(keys, codes, counts, ev, plan)
        out.append(inc[0])
    return np.concatenate(out, axis=1)


def _neighbours(log: dict[int, tuple[int, ...]], unit: str):
    new = max(log, default=0) + 1
    if unit in ("item", "item_replace"):
        for i in log:
            rest = {j: h for j, h in log.items() if j != i}
            yield rest
            if unit == "item_replace":
                for h in HISTORIES:
                    yield {**rest, i: h}
        if unit == "item":
            for h in HISTORIES:
                yield {**log, new: h}
        return
    for i, h in log.items():  # remove one event
        for pos in range(len(h)):
            rest = h[:pos] + h[pos + 1:]
            yield {j: (rest if j == i else v) for j, v in log.items() if j != i or rest}
    for i in [*log, new]:  # add one event
        for p in range(1, HORIZON + 1):
            yield {**log, i: tuple(sorted((*log.get(i, ()), p)))}


def _rows(counter, x: np.ndarray) -> tuple[np.ndarray, list]:
    """Exact rows through T (one structure) and the node law of each row."""
    pre = np.concatenate(([0], np.cumsum(x)))[None, :]
    vals, laws = [], []
    for t in range(1, x.size + 1):
        vals.append(counter.row_values(pre, t)[0])
        for _, law, ids in counter.rows(t):
            laws += [law] * ids.size
    return np.concatenate(vals), laws


def _loss(delta: np.ndarray, laws: list) -> float:
    """The privacy loss of a change of the rows, in the budget's currency: pure ε; under zCDP
    ρ — ``Σ Δ²/(2σ²)`` for Gaussian rows, ``(Σ γ|Δ|)²/2`` for discrete Laplace rows (a pure
    ε_0 piece is ε_0²/2-zCDP; the pieces' ε_0 are checked against the budget's ρ below)."""
    if laws[0].kind == "gaussian":
        return float(sum(float(d) ** 2 / (2 * law.sigma2)
                         for d, law in zip(delta, laws, strict=True) if d))
    eps = sum(abs(int(d)) * law.gamma for d, law in zip(delta, laws, strict=True) if d)
    if laws[0].budget.rho is None:
        return float(eps)
    assert all(float(law.epsilon_piece) ** 2 / 2 <= law.budget.rho for law in laws)
    return float(eps) ** 2 / 2


@pytest.mark.parametrize("unit", ["item", "event", "item_replace"])
@pytest.mark.parametrize("budget", [Budget(Fraction(1, 2)),
                                    Budget(Fraction(1, 2), zcdp_rho(1.0, 1e-6) / 2)],
                         ids=["pure", "zcdp"])
def test_every_neighbour_every_prefix_within_budget(unit: str, budget: Budget) -> None:
    counters = [c for _, c, _ in best_counters(HORIZON, unit, budget, BOUNDED_METHODS)]
    assert {c.name for c in counters} >= {"simple", "tree", "smooth"}
    cap = budget.epsilon if budget.rho is None else Fraction(budget.rho)
    worst = {id(c): 0 for c in counters}
    for base in BASES:
        x0 = _increments(base)
        for nb in _neighbours(base, unit):
            x1 = _increments(nb)
            for c in counters:
                for j in range(len(KS)):
                    r0, laws = _rows(c, x0[j])
                    r1, _ = _rows(c, x1[j])
                    for t in range(1, HORIZON + 1):  # every prefix: the rows published by t
                        n = c.rows_through(t)
                        d = r1[:n] - r0[:n]
                        assert _loss(d, laws[:n]) <= float(cap) * (1 + 1e-12)
                        worst[id(c)] = max(worst[id(c)], int(np.abs(d).sum()))
    for c in counters:
        assert worst[id(c)] == c.law.l1 or c.name == "factorization", c.describe()


def test_a_point_moving_across_epochs_costs_at_most_the_budget() -> None:
    """Horizon-free counters at unit="event": a point moved from the last period of one epoch
    to the first of the next changes both epochs; each is calibrated at twice a point's
    sensitivity, so the two halves add to at most the structure's budget."""
    for budget in (Budget(Fraction(1)), Budget(Fraction(1), zcdp_rho(1.0, 1e-6))):
        e = EpochCounter("event", budget)
        cap = float(budget.epsilon) if budget.rho is None else budget.rho
        for p, q in ((16, 17), (1, 80), (5, 81), (80, 81)):
            x0, x1 = np.zeros(90, dtype=np.int64), np.zeros(90, dtype=np.int64)
            x0[p - 1], x1[q - 1] = 1, 1
            r0, laws = _rows(e, x0)
            r1, _ = _rows(e, x1)
            assert 0 < _loss(r1 - r0, laws) <= cap * (1 + 1e-12)
