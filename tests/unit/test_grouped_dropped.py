"""The dropped-fraction estimate of grouped releases (``capping_epsilon=``, issue 47): the
engines' exact sums, their sensitivity by enumeration of every neighbour of a tiny log, the
interval arithmetic, the exact coverage of the noise quantile, what a release publishes
(recomputed from its stored noisy sums) and the refusals."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pandas as pd
import pytest

from dpfreq._noise_laws import discrete_laplace_tail
from dpfreq.anonymized import release_anonymized_histogram
from dpfreq.engines import CountRequest, Grouping, get_engine
from dpfreq.errors import DPFreqWarning, ParameterError
from dpfreq.grouped.dropped import (
    CappingSums,
    capping_bound,
    capping_sums,
    dropped_interval,
    measure_dropped,
)
from dpfreq.noise import discrete_laplace_gamma
from dpfreq.profile import release_profile
from dpfreq.windows import release_window_counts

GROUPS = ("a", "b", "c", "d", "e")


def _sums(rows: list[tuple[int, str]], m: int, engine: str = "memory") -> CappingSums:
    log = {"user": [u for u, _ in rows], "site": [g for _, g in rows]}
    src: object = log if engine == "memory" else pd.DataFrame(log)
    gp = get_engine(engine).grouped_count_of_counts(src, CountRequest(
        "user", Grouping("site", GROUPS, None), per_item="distinct_groups"))
    return capping_sums(gp, m, capping_bound(m))


def _truth(rows: list[tuple[int, str]], m: int) -> CappingSums:
    """The two sums by their definition, item by item (the reference)."""
    held: dict[int, set[str]] = {}
    for u, g in rows:
        if g in GROUPS:
            held.setdefault(u, set()).add(g)
    big = capping_bound(m)
    return CappingSums(sum(min(len(s), big) for s in held.values()),
                       sum(min(max(len(s) - m, 0), big - m) for s in held.values()))


TINY = [(1, "a"), (1, "b"), (1, "c"), (1, "a"), (2, "a"), (3, "a"), (3, "b"), (3, "c"),
        (3, "d"), (3, "e"), (3, "z"), (4, "z")]


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
def test_engine_sums_match_the_definition(engine: str) -> None:
    for m in (1, 2, 3):
        assert _sums(TINY, m, engine) == _truth(TINY, m)


def test_sensitivity_by_enumeration_of_every_neighbour() -> None:
    """Remove each item (all its rows), or add a new item holding any subset of the listed
    groups (and an unlisted one): the sums move by at most ``M`` and ``M − m``, and the ℓ1
    maximum is exactly the ``2M − m`` the mechanism calibrates to."""
    for m in (1, 2):
        base = _sums(TINY, m)
        neighbours = [[r for r in TINY if r[0] != u] for u in sorted({u for u, _ in TINY})]
        for size in range(len(GROUPS) + 1):
            for subset in itertools.combinations(GROUPS, size):
                neighbours.append(TINY + [(9, g) for g in (*subset, "z")])
        moves = [(abs(s.total - base.total), abs(s.dropped - base.dropped))
                 for s in (_sums(rows, m) for rows in neighbours)]
        big = capping_bound(m)
        assert max(t for t, _ in moves) == min(big, len(GROUPS))
        assert max(d for _, d in moves) == min(big, len(GROUPS)) - m
        out = measure_dropped(CappingSums(100, 0), epsilon=1.0, m=m, confidence=0.95,
                              generator=np.random.default_rng(0))
        assert max(t + d for t, d in moves) <= out.sensitivity == 2 * big - m
    # with more groups than M an added item attains the stated bound itself
    many = tuple(f"g{i}" for i in range(10))
    gp = get_engine("memory").grouped_count_of_counts(
        {"user": [1] * 10, "site": list(many)},
        CountRequest("user", Grouping("site", many, None), per_item="distinct_groups"))
    one = capping_sums(gp, 2, capping_bound(2))
    assert (one.total, one.dropped) == (8, 6)


def test_interval_arithmetic() -> None:
    est, lo, hi = dropped_interval(1000, 200, 10, 1, 4)
    assert (est, lo, hi) == (0.2, 190 / 1010, 210 / 990)
    assert dropped_interval(5, 3, 10, 1, 4) == (0.6, 0.0, 0.75)  # T̃ <= q: the public cap
    assert dropped_interval(-3, 4, 2, 1, 4) == (0.0, 0.0, 0.75)
    assert dropped_interval(100, -7, 2, 2, 8)[0] == 0.0


@pytest.mark.parametrize("confidence", [0.8, 0.95, 0.999])
def test_quantile_gives_the_confidence_exactly(confidence: float) -> None:
    """Both sums within ±q with probability (1 − Pr[|Z| > q])² >= confidence (exact law)."""
    out = measure_dropped(CappingSums(10_000, 100), epsilon=0.7, m=2, confidence=confidence,
                          generator=np.random.default_rng(1))
    gamma = discrete_laplace_gamma(0.7, sensitivity=out.sensitivity)
    tail = float(discrete_laplace_tail(out.noise_quantile, gamma))
    assert (1 - tail) ** 2 >= confidence
    assert float(discrete_laplace_tail(out.noise_quantile - 1, gamma)) > (1 - confidence) / 2


def test_warns_when_the_lower_end_exceeds_ten_percent() -> None:
    with pytest.warns(DPFreqWarning, match="raise max_groups_per_item"):
        out = measure_dropped(CappingSums(100_000, 40_000), epsilon=1.0, m=1,
                              confidence=0.95, generator=np.random.default_rng(2))
    assert out.lower > 0.1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        measure_dropped(CappingSums(100_000, 1_000), epsilon=1.0, m=1, confidence=0.95,
                        generator=np.random.default_rng(2))


def _log() -> dict[str, list[object]]:
    gen = np.random.default_rng(3)
    n = 600
    return {"user": gen.integers(0, 100, n).tolist(),
            "site": [f"s{k}" for k in gen.integers(0, 6, n)],
            "day": gen.integers(1, 6, n).tolist()}


@pytest.mark.parametrize("kind", ["profile", "windows"])
@pytest.mark.parametrize("engine", ["memory", "duckdb"])
def test_release_publishes_what_its_noisy_sums_give(kind: str, engine: str) -> None:
    log = _log()
    src: object = log if engine == "memory" else pd.DataFrame(log)
    names = [f"s{k}" for k in range(6)]
    kw: dict[str, object] = {"item": "user", "group": "site", "groups": names,
                                 "max_groups_per_item": 2, "epsilon": 2.0, "unit": "item", "rng": 5,
                                 "engine": engine, "capping_epsilon": 0.5}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DPFreqWarning)
        if kind == "profile":
            rel = release_profile(src, domain_size=200, max_count=4, **kw)  # type: ignore
            plain = release_profile(src, domain_size=200, max_count=4,  # type: ignore
                                    **{**kw, "capping_epsilon": None})
            assert plain.dropped_fraction is None
        else:
            rel = release_window_counts(src, time="day", horizon=5, k_values=[1],  # type: ignore
                                        windows=["total"], **kw)
    d = rel.dropped_fraction
    assert d is not None
    assert rel.epsilon == 2.0
    assert (d.value, d.lower, d.upper) == dropped_interval(d.noisy_total, d.noisy_dropped,
                                                           d.noise_quantile, 2, d.bound)
    assert rel.to_dict()["dropped_fraction"]["noisy_total"] == d.noisy_total
    assert "ε_c = 0.5" in rel.mechanism_params["capping"]
    if kind == "profile":  # the release itself spends ε − ε_c over m = 2 groups
        assert rel["s0"].epsilon == 0.75
    else:
        assert rel["s0"].epsilon == 0.75


def test_refusals() -> None:
    log = _log()
    kw: dict[str, object] = {"item": "user", "group": "site", "groups": ["s1"],
                                 "max_groups_per_item": 2, "epsilon": 1.0, "unit": "item"}
    for bad in (0, -0.1, 1.0, 2.0, float("nan"), "0.1", True):
        with pytest.raises(ParameterError, match=r"^capping_epsilon of release_profile must be "
                                                 r"None or a number in \(0, epsilon = 1\)"):
            release_profile(log, domain_size=200, max_count=4, capping_epsilon=bad, **kw)  # type: ignore
    with pytest.raises(ParameterError, match="nothing is capped"):
        release_anonymized_histogram(log, item="user", group="site", groups=["s1"],
                                     epsilon=1.0, unit="event", capping_epsilon=0.1)
    with pytest.raises(ParameterError, match="nothing is capped"):
        release_window_counts(log, item="user", time="day", horizon=5, epsilon=1.0,
                              unit="event", k_values=[1], group="site", groups=["s1"],
                              windows=["total"], capping_epsilon=0.1)
    with pytest.raises(ParameterError, match="None without group="):
        release_profile(np.array([1, 2]), domain_size=5, max_count=3, epsilon=1.0, unit="item",
                        capping_epsilon=0.1)


def test_saved_window_release_keeps_its_estimate(tmp_path: object) -> None:
    import pathlib

    from dpfreq.windows.grouped.result import GroupedWindowRelease

    log = _log()
    path = pathlib.Path(str(tmp_path)) / "rel.dpf"
    for extra in ({"groups": [f"s{k}" for k in range(6)], "epsilon": 2.0},
                  {"delta": 1e-5, "epsilon": 6.0}):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DPFreqWarning)
            rel = release_window_counts(log, item="user", time="day", horizon=5, unit="item",
                                        k_values=[1], windows=["total"], group="site",
                                        max_groups_per_item=2, rng=0, capping_epsilon=0.5,
                                        **extra)  # type: ignore[arg-type]
        rel.save(path)
        back = GroupedWindowRelease.load(path)
        assert back.dropped_fraction == rel.dropped_fraction
        assert back.to_dict() == rel.to_dict()
        assert back.to_json() == rel.to_json()  # the same bytes, key order included
