"""A grouped stream's private estimate of the fraction of (item, group) pairs its cap dropped.

* Exact privacy by enumeration: on a tiny stream (2 periods, 4 groups, m = 1, M = 4) every
  item history (each group absent, in period 1, 2 or both) is added to or removed from small
  logs; the stream's own update gives the increments of ``T`` and ``D``; every candidate
  counter at the capping budget changes its rows, through every prefix, by a privacy loss of
  at most ``ε_c``, and the largest ℓ1 change of the two counters' rows is ``(2M − m)`` times a
  point's sensitivity (the enumeration reaches it).
* The increments sum to the true ``T(t)`` and ``D(t)`` (remembered pairs counted once), on
  the memory and DuckDB stores alike.
* Every published number is post-processing of the saved noisy rows, measured under the
  capping sub-key (not the reach counters' key); at zero noise the interval holds the truth.
* Refusals before any charge: a bad share, ``unit="event"``, no cap; an older
  manifest in one line.
"""

from __future__ import annotations

import itertools
import json
from fractions import Fraction

import numpy as np
import pytest

from dpfreq.artifacts import read_artifact, write_artifact
from dpfreq.budget import Accountant
from dpfreq.errors import DataError, DPFreqWarning, ParameterError
from dpfreq.grouped.dropped import dropped_interval
from dpfreq.stream import ReachStream
from dpfreq.stream.capping import (
    capping_budget,
    capping_key,
    dropped_fractions,
    sensitivity,
)
from dpfreq.stream.items.memory import numpy_update
from dpfreq.stream.items.update import UpdatePlan, count_dtype
from dpfreq.stream.measure import measure_periods
from dpfreq.stream.mechanisms import BOUNDED_METHODS, best_counters
from dpfreq.stream.publish import curve, halfwidths

HORIZON, M_CAP, NAMES = 2, 1, ("a", "b", "c", "d")
BIG = 4 * M_CAP
#: an item's history: per group the periods it is seen in (none, 1, 2 or both)
CHOICES = ((), (1,), (2,), (1, 2))
HISTORIES = [h for h in itertools.product(CHOICES, repeat=len(NAMES)) if any(h)]
BASES = [{}, {1: ((1,), (2,), (), (1, 2))}]


def _increments(log: dict[int, tuple[tuple[int, ...], ...]]) -> np.ndarray:
    """The increments ``(2, T)`` of ``T`` and ``D`` by the stream's update, one append per
    period (events: one per (item, group, period))."""
    keys = np.zeros(0, dtype=np.int64)
    codes = np.zeros(0, dtype=np.int64)
    counts = np.zeros(0, dtype=count_dtype(1))
    out = []
    for t in range(1, HORIZON + 1):
        rows = [(i, g) for i, h in sorted(log.items()) for g, ps in enumerate(h) if t in ps]
        ev = {"k": np.array([i for i, _ in rows], dtype=np.int64),
              "g": np.array([g for _, g in rows], dtype=np.int64),
              "p": np.full(len(rows), t, dtype=np.int64), "n": np.ones(len(rows), np.int64)}
        plan = UpdatePlan((1,), len(NAMES), NAMES, M_CAP, "cd" * 16, t - 1, t, seen_bound=BIG)
        keys, codes, counts, _, _, cap = numpy_update(keys, codes, counts, ev, plan)
        out.append(cap)
    return np.concatenate(out, axis=1)


def _truth(log: dict[int, tuple[tuple[int, ...], ...]], t: int) -> tuple[int, int]:
    seen = [sum(1 for ps in h if any(p <= t for p in ps)) for h in log.values()]
    return (sum(min(g, BIG) for g in seen),
            sum(min(max(g - M_CAP, 0), BIG - M_CAP) for g in seen))


def _rows(counter, x: np.ndarray) -> np.ndarray:
    pre = np.concatenate(([0], np.cumsum(x)))[None, :]
    return np.concatenate([counter.row_values(pre, t)[0] for t in range(1, x.size + 1)])


def test_every_neighbour_every_prefix_within_the_capping_budget() -> None:
    eps_c = 0.5
    budget = capping_budget(eps_c, M_CAP)
    assert budget.epsilon == Fraction(eps_c) / (2 * BIG - M_CAP)
    counters = [c for _, c, _ in best_counters(HORIZON, "item", budget, BOUNDED_METHODS)]
    assert {c.name for c in counters} >= {"simple", "tree"}
    worst = {id(c): 0 for c in counters}
    mass = np.zeros(2, dtype=np.int64)
    for base in BASES:
        x0 = _increments(base)
        for t in range(1, HORIZON + 1):
            assert tuple(x0[:, :t].sum(axis=1)) == _truth(base, t)
        new = max(base, default=0) + 1
        neighbours = [{j: h for j, h in base.items() if j != i} for i in base]
        neighbours += [{**base, new: h} for h in HISTORIES]
        for nb in neighbours:
            x1 = _increments(nb)
            for t in range(1, HORIZON + 1):
                assert tuple(x1[:, :t].sum(axis=1)) == _truth(nb, t)
            mass = np.maximum(mass, np.abs(x1 - x0).sum(axis=1))
            for c in counters:
                gamma = c.law.gamma
                for t in range(1, HORIZON + 1):  # every prefix: the rows published by t
                    n = c.rows_through(t)
                    d = sum(int(np.abs(_rows(c, x1[j])[:n] - _rows(c, x0[j])[:n]).sum())
                            for j in range(2))
                    assert d * gamma <= Fraction(eps_c)
                    worst[id(c)] = max(worst[id(c)], d)
    assert tuple(mass) == (BIG, BIG - M_CAP)  # one item: M to T, M − m to D, reached
    for c in counters:
        assert worst[id(c)] == sensitivity(M_CAP) * c.law.l1, c.describe()


def _log(seed: int = 0, n: int = 400) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"u": rng.integers(0, 60, n), "t": rng.choice([1, 2, 3, 5], n),
            "g": rng.choice(list("abcdef"), n)}


def _create(path, **over):
    kw = {"item": "u", "time": "t", "horizon": 6, "k_values": [1], "unit": "item",
          "epsilon": 1.0, "delta": 0.0, "method": "auto", "late": "error", "engine": "memory",
          "group": "g", "groups": list("abcdef"), "max_groups_per_item": 2,
          "capping_epsilon": 0.4, "rng": 5}
    kw.update(over)
    return ReachStream.create(path, **kw)


@pytest.mark.filterwarnings("ignore::dpfreq.errors.DPFreqWarning")
@pytest.mark.parametrize("engine", ["memory", "duckdb"])
def test_published_fraction_is_post_processing_of_the_saved_rows(tmp_path, engine) -> None:
    log = _log(1)
    s = _create(tmp_path / "s", engine=engine)
    rels = []
    for after, through in ((0, 2), (2, 5)):  # several periods per append, period 4 empty
        sel = (log["t"] > after) & (log["t"] <= through)
        rels += s.append({k: v[sel] for k, v in log.items()}, through=through)
    st, cap = s.state, s.capping
    # the exact increments are the truth: pairs seen to date, each item up to M = 8
    for t in range(1, st.last + 1):
        groups: dict[int, set[str]] = {}
        for u, tt, g in zip(log["u"], log["t"], log["g"], strict=True):
            if tt <= t:
                groups.setdefault(int(u), set()).add(str(g))
        want = (sum(min(len(v), 8) for v in groups.values()),
                sum(min(max(len(v) - 2, 0), 6) for v in groups.values()))
        assert tuple(st.cap_exact[0, :, :t].sum(axis=1)) == want
    # the noisy rows: the capping sub-key's noise on the exact increments, not the reach key's
    empty = np.zeros((2, 1, 0), dtype=np.int64)
    again = measure_periods(cap, capping_key(st.key), (1, 2), st.cap_exact, empty, 0, st.last,
                            False)
    np.testing.assert_array_equal(again, st.cap_noisy)
    assert not np.array_equal(measure_periods(cap, st.key, (1, 2), st.cap_exact, empty, 0,
                                              st.last, False), st.cap_noisy)
    np.testing.assert_array_equal(st.cap_widths, halfwidths(cap, st.last, 0.025))
    for rel in rels:  # each release from the noisy rows and public widths alone
        d = rel.dropped_fraction
        tot = curve(cap, st.cap_noisy[0], rel.period)[0][0, -1]
        drop = curve(cap, st.cap_noisy[1], rel.period)[0][0, -1]
        q = int(np.ceil(halfwidths(cap, rel.period, 0.025)[-1]))
        assert (d.noisy_total, d.noisy_dropped, d.noise_quantile) == (tot, drop, q)
        assert (d.value, d.lower, d.upper) == dropped_interval(tot, drop, q, 2, 8)
        assert (d.epsilon, d.sensitivity, d.measurement) == (0.4, 14, "stream")
        assert d.gamma == float(Fraction(2, 5) / 14)  # a point's ℓ1 is 1 on these counters
        assert rel.epsilon == 1.0
        assert rel.mechanism_params["counters_epsilon"] == pytest.approx(0.6)
        assert "dropped-fraction estimate" in rel.error.description
    doc = json.loads(rels[-1].to_json())["dropped_fraction"]
    assert (doc["noisy_total"], doc["measurement"]) == (tot, "stream")
    assert doc["description"].startswith("The cap at m = 2 dropped an estimated")
    assert ReachStream.open(tmp_path / "s").release().to_json() == rels[-1].to_json()
    assert s.plan.budget.epsilon <= Fraction(3, 5)  # the reach counters at ε − ε_c


@pytest.mark.filterwarnings("ignore::dpfreq.errors.DPFreqWarning")
def test_at_zero_noise_the_interval_holds_the_truth(tmp_path) -> None:
    s = _create(tmp_path / "s", rng=2)
    s.append(_log(3), through=5)
    st = s.state
    exact_rows = measure_periods(_ZeroNoise(s.capping), st.key, (1, 2), st.cap_exact,
                                 np.zeros((2, 1, 0), dtype=np.int64), 0, st.last, False)
    for d, t in zip(dropped_fractions(s.params, s.capping, exact_rows, np.zeros(st.last), 1,
                                      st.last, 0.95), range(1, st.last + 1), strict=True):
        total, dropped = st.cap_exact[0, :, :t].sum(axis=1)
        truth = dropped / total if total else 0.0
        assert d.lower <= truth <= d.upper
        assert d.value == pytest.approx(truth)


class _ZeroNoise:
    """The capping counter with every node noise 0 (its rows are the exact values)."""

    def __init__(self, counter) -> None:
        self._c = counter

    def __getattr__(self, name):
        return getattr(self._c, name)

    def rows(self, t):
        return [(tree, _ZeroLaw(), ids) for tree, _, ids in self._c.rows(t)]


class _ZeroLaw:
    def source(self, key, name):
        return self

    def noise(self, ids):
        return np.zeros(np.shape(ids), dtype=np.int64)


@pytest.mark.parametrize(("over", "says"), [
    ({"capping_epsilon": 0.0}, "(0, epsilon = 1)"),
    ({"capping_epsilon": 1.0}, "(0, epsilon = 1)"),
    ({"capping_epsilon": "0.1"}, "(0, epsilon = 1)"),
    ({"capping_epsilon": True}, "(0, epsilon = 1)"),
    ({"capping_epsilon": float("nan")}, "(0, epsilon = 1)"),
    ({"unit": "event", "max_groups_per_item": None}, "None at unit='event'"),
    ({"group": None, "groups": None, "max_groups_per_item": None},
     "None without max_groups_per_item"),
])
def test_refusals_are_one_line_and_charge_nothing(tmp_path, over, says) -> None:
    acct = Accountant(epsilon=10.0, delta=0.0)
    with pytest.raises(ParameterError) as err:
        _create(tmp_path / "s", accountant=acct, **over)
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith("capping_epsilon of ReachStream.create must be")
    assert says in text
    assert acct.spent.epsilon == 0
    assert not (tmp_path / "s").exists()


def test_a_manifest_of_format_version_2_is_refused_in_one_line(tmp_path) -> None:
    s = _create(tmp_path / "s")
    manifest = s.path / "stream.dpfreq"
    _, meta, arrays = read_artifact(manifest, kind="reach-stream", versions=(4,))
    write_artifact(manifest, kind="reach-stream", version=2, meta=meta, arrays=arrays)
    with pytest.raises(DataError) as err:
        ReachStream.open(s.path)
    assert "\n" not in str(err.value)
    assert "format version 2 is not supported" in str(err.value)


def test_without_capping_epsilon_nothing_is_remembered(tmp_path) -> None:
    s = _create(tmp_path / "s", capping_epsilon=None)
    [rel] = s.append(_log(4), through=5)[-1:]
    assert s.capping is None
    assert rel.dropped_fraction is None
    assert s.state.cap_widths.shape == (0,)
    assert s.state.cap_counter == {}
    assert "does not estimate" in rel.error.description
    assert json.loads(rel.to_json())["dropped_fraction"] is None


def test_a_large_dropped_fraction_warns_with_the_streams_remedy(tmp_path) -> None:
    """A stream's m is fixed at creation: its warning asks for a new stream, not to raise m."""
    s = _create(tmp_path / "s", epsilon=40.0, capping_epsilon=20.0, max_groups_per_item=1)
    every = {"u": np.repeat(np.arange(50), 6), "t": np.ones(300, dtype=np.int64),
             "g": np.tile(list("abcdef"), 50)}  # each item in 6 groups, keeps 1: 75 % dropped
    with pytest.warns(DPFreqWarning, match="a new stream with a larger max_groups_per_item"):
        [rel] = s.append(every, through=1)
    assert rel.dropped_fraction.lower > 0.1


def test_a_saved_dropped_fraction_counter_planned_differently_is_refused(tmp_path) -> None:
    """As the reach counter's: the dropped-fraction counter rebuilt from its saved spec must be
    the one whose record was saved at creation (here a tree where a simple counter measured
    the rows), else the stream is refused on open in one line."""
    from dpfreq.stream.state import load_state, save_state

    s = _create(tmp_path / "s", method="simple")
    s.append(_log(1), through=5)
    state = load_state(s.path)
    assert state.cap_counter["layout"] == "simple"
    other = {"layout": "tree", "horizon": 6, "branching": 2, "top": False, "noise": "laplace"}
    save_state(s.path, state.advanced(cap_counter=other))
    with pytest.raises(DataError, match="dropped-fraction counter was planned differently"
                       ) as err:
        ReachStream.open(s.path)
    assert "\n" not in str(err.value)
