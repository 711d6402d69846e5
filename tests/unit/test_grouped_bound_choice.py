"""``max_groups_per_item="auto"`` (issue 47): the histogram of groups per item (engines against
its definition, its sensitivity by enumeration of every neighbour, the exact privacy ratio of
the chosen m on an enumerable case; its noise law is tested in
``tests/statistical/test_grouped_bound_choice_law.py``), what a release publishes
(recomputed from its stored noisy histogram), the total ε charged, save/load, the planner,
the refusals and the dropped-fraction warning's location."""

from __future__ import annotations

import itertools
import json
import math
import pathlib
import warnings
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from dpfreq import Accountant, PrivacyBudget
from dpfreq._noise_laws import discrete_laplace_pmf, discrete_laplace_tail
from dpfreq.accounting.zcdp import zcdp_rho
from dpfreq.anonymized import release_anonymized_histogram
from dpfreq.cli.main import cli
from dpfreq.engines import CountRequest, Grouping, get_engine
from dpfreq.errors import DataError, DPFreqWarning, ParameterError
from dpfreq.grouped.bound_choice import (
    AUTO_MAX_GROUPS,
    BoundChoice,
    choose_bound,
    groups_histogram,
    predicted_errors,
)
from dpfreq.grouped.dropped import dropped_from_histogram, release_epsilon
from dpfreq.noise import discrete_laplace_gamma
from dpfreq.profile import release_profile
from dpfreq.windows import plan_window_counts, release_window_counts
from dpfreq.windows.grouped.result import GroupedWindowRelease

GROUPS = ("a", "b", "c", "d", "e")
TINY = [(1, "a"), (1, "b"), (1, "c"), (1, "a"), (2, "a"), (3, "a"), (3, "b"), (3, "c"),
        (3, "d"), (3, "e"), (3, "z"), (4, "z")]


def _hist(rows: list[tuple[int, str]], bound: int, engine: str = "memory",
          groups: tuple[str, ...] | None = GROUPS) -> np.ndarray:
    log = {"user": [u for u, _ in rows], "site": [g for _, g in rows]}
    src: object = log if engine == "memory" else pd.DataFrame(log)
    gp = get_engine(engine).grouped_count_of_counts(src, CountRequest(
        "user", Grouping("site", groups, None), per_item="distinct_groups"))
    return groups_histogram(gp, bound)


def _truth(rows: list[tuple[int, str]], bound: int,
           groups: tuple[str, ...] | None = GROUPS) -> list[int]:
    held: dict[int, set[str]] = {}
    for u, g in rows:
        if groups is None or g in groups:
            held.setdefault(u, set()).add(g)
    out = [0] * bound
    for s in held.values():
        out[min(len(s), bound) - 1] += 1
    return out


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
def test_engine_histogram_matches_the_definition(engine: str) -> None:
    for bound in (1, 2, 3, 16):
        assert _hist(TINY, bound, engine).tolist() == _truth(TINY, bound)
        assert _hist(TINY, bound, engine, None).tolist() == _truth(TINY, bound, None)


def _neighbours(rows: list[tuple[int, str]]) -> list[list[tuple[int, str]]]:
    """Every neighbour at unit="item" that removes an item, and every added item holding any
    subset of the listed groups (plus an unlisted one)."""
    out = [[r for r in rows if r[0] != u] for u in sorted({u for u, _ in rows})]
    for size in range(len(GROUPS) + 1):
        for subset in itertools.combinations(GROUPS, size):
            out.append(rows + [(9, g) for g in (*subset, "z")])
    return out


def test_histogram_sensitivity_by_enumeration() -> None:
    """One item enters or leaves one bin: ℓ1 distance exactly 1 (0 for an item with no
    listed group), for every neighbour and every cap."""
    for bound in (2, 3, AUTO_MAX_GROUPS):
        base = _hist(TINY, bound)
        moves = {int(np.abs(_hist(n, bound) - base).sum()) for n in _neighbours(TINY)}
        assert moves == {0, 1}


def test_privacy_ratio_of_the_chosen_bound_is_exact_on_an_enumerable_case() -> None:
    """With M = 2 bins and candidates m in {1, 2}, the law of the chosen m is computed exactly
    by summing the exact discrete Laplace pmf over a noise grid [−K, K]² (the mass outside is
    at most 2·Pr[|Z| > K]); for every neighbour of TINY, Pr[m | D] <= e^{ε_c} Pr[m | D'] +
    outside mass, and the noisy histogram's own log-ratio is at most γ·‖h − h'‖₁ <= ε_c."""
    eps_c = 0.7
    gamma = discrete_laplace_gamma(eps_c)
    k = 60
    z = np.arange(-k, k + 1)
    pz = discrete_laplace_pmf(z, gamma)
    outside = 2 * float(discrete_laplace_tail(k, gamma))
    variances = {1: 0.5, 2: 2.0}

    def law(h: np.ndarray) -> dict[int, float]:
        out = {1: 0.0, 2: 0.0}
        for i, j in itertools.product(range(z.size), repeat=2):
            noisy = np.array([h[0] + z[i], h[1] + z[j]])
            m = choose_bound(predicted_errors(noisy, gamma, variances, 3))
            out[m] += float(pz[i] * pz[j])
        return out

    base = _hist(TINY, 2)
    p_base = law(base)
    assert 0.0 < p_base[1] < 1.0  # both choices happen
    assert 0.0 < p_base[2] < 1.0
    worst = 0.0
    for rows in _neighbours(TINY):
        h = _hist(rows, 2)
        p = law(h)
        for m in (1, 2):
            assert p_base[m] <= math.exp(eps_c) * p[m] + outside
            assert p[m] <= math.exp(eps_c) * p_base[m] + outside
            worst = max(worst, abs(math.log(p_base[m] / p[m])))
        # the measurement itself: the exact log-ratio over the grid of each bin
        log_ratio = sum(float(np.max(np.abs(np.log(discrete_laplace_pmf(z - a, gamma))
                                            - np.log(discrete_laplace_pmf(z - b, gamma)))))
                        for a, b in zip(base, h, strict=True))
        assert log_ratio <= float(gamma) * 1 + 1e-12 <= eps_c + 1e-12
    assert 0.0 < worst <= eps_c


def _log(n_users: int = 300, seed: int = 3) -> dict[str, list[object]]:
    """Users in 1..8 of 10 sites (log-uniform), 5 days."""
    gen = np.random.default_rng(seed)
    users, sites, days = [], [], []
    for u in range(n_users):
        k = int(np.exp(gen.uniform(0, np.log(9))))
        for s in gen.choice(10, size=k, replace=False):
            users.append(u)
            sites.append(f"s{s}")
            days.append(int(gen.integers(1, 6)))
    return {"user": users, "site": sites, "day": days}


NAMES = [f"s{k}" for k in range(10)]


def _release(kind: str, engine: str = "memory", **extra: object) -> object:
    log = _log()
    src: object = log if engine == "memory" else pd.DataFrame(log)
    kw: dict[str, object] = {"item": "user", "group": "site", "groups": NAMES,
                             "max_groups_per_item": "auto", "epsilon": 2.0, "unit": "item",
                             "rng": 5, "engine": engine, "capping_epsilon": 0.25, **extra}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DPFreqWarning)
        if kind == "profile":
            return release_profile(src, domain_size=400, max_count=4, **kw)  # type: ignore
        return release_window_counts(src, time="day", horizon=5, k_values=[1],  # type: ignore
                                     windows=["total"], **kw)


@pytest.mark.parametrize("kind", ["profile", "windows"])
@pytest.mark.parametrize("engine", ["memory", "duckdb"])
def test_release_publishes_what_its_noisy_histogram_gives(kind: str, engine: str) -> None:
    """Everything the choice publishes is recomputed from the stored noisy histogram: the
    dropped fraction bit for bit, m from the stated predicted errors; the release runs at the
    chosen m and ε − ε_c; the whole call is ε."""
    rel: object = _release(kind, engine)
    params = rel.mechanism_params  # type: ignore[attr-defined]
    choice = BoundChoice.from_dict(params["bound_choice"])
    m = choice.chosen
    assert params["max_groups_per_item"] == m
    assert choice.chosen == choose_bound(choice.predicted)
    assert sorted(choice.predicted) == list(range(1, len(NAMES) + 1))  # 10 < 16 listed
    assert choice.epsilon == 0.25
    assert choice.gamma == float(discrete_laplace_gamma(0.25))
    d = rel.dropped_fraction  # type: ignore[attr-defined]
    assert d == dropped_from_histogram(choice.noisy_histogram, discrete_laplace_gamma(0.25),
                                       epsilon=0.25, m=m, confidence=0.95)
    assert d.measurement == "histogram"
    assert d.max_groups_per_item == m
    assert rel.epsilon == 2.0  # type: ignore[attr-defined]
    per = rel["s0"].epsilon  # type: ignore[index]
    assert per * m <= release_epsilon(2.0, 0.25)
    assert per == pytest.approx(1.75 / m, rel=1e-12)
    assert f"m = {m} chosen from 1..10" in params["bound_choice"]["why"]
    assert json.loads(rel.to_json())["mechanism_params"]["bound_choice"]["chosen"] == m  # type: ignore[attr-defined]
    assert _release(kind, engine).to_json() == rel.to_json()  # type: ignore[attr-defined]


def test_same_seed_same_choice_and_the_measurement_moves_with_the_seed() -> None:
    a, b = _release("windows", rng=1), _release("windows", rng=2)
    hist_a = a.mechanism_params["bound_choice"]["noisy_histogram"]  # type: ignore[attr-defined]
    hist_b = b.mechanism_params["bound_choice"]["noisy_histogram"]  # type: ignore[attr-defined]
    assert hist_a != hist_b


@pytest.mark.parametrize("extra", [{}, {"groups": None, "delta": 1e-5, "epsilon": 8.0}])
def test_total_epsilon_charged_and_its_composition(extra: dict[str, object]) -> None:
    """The accountant is charged the call's (ε, δ) once; the parts compose to at most ε,
    exactly: ε_c + selection + the groups' releases (m·ε_g under pure accounting; under zCDP
    across groups m·ρ_g <= ρ(ε − ε_c − ε_s, δ − δ_s))."""
    acct = Accountant(PrivacyBudget(10.0, 1e-3))
    rel: object = _release("windows", accountant=acct, **extra)
    eps = 2.0 if "epsilon" not in extra else 8.0
    assert acct.spent_exact[0] == Fraction(eps)
    params = rel.mechanism_params  # type: ignore[attr-defined]
    m = params["max_groups_per_item"]
    sel = params.get("selection")
    eps_s = Fraction(sel["epsilon"]) if sel else Fraction(0)
    eps_g = Fraction(rel[next(iter(rel))].epsilon)  # type: ignore[call-overload,index]
    rho = params.get("rho_per_group")
    if rho is None:
        assert Fraction(0.25) + eps_s + m * eps_g <= Fraction(eps)
    else:
        eps_r = float(Fraction(release_epsilon(eps, 0.25)) - eps_s)
        assert m * rho <= zcdp_rho(eps_r, float(Fraction(1e-5) - Fraction(sel["delta"])))
    assert Fraction(0.25) + Fraction(release_epsilon(eps, 0.25)) <= Fraction(eps)


def test_saved_auto_release_round_trips(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "rel.dpf"
    for extra in ({}, {"groups": None, "delta": 1e-5, "epsilon": 8.0}):
        rel: object = _release("windows", **extra)
        rel.save(path)  # type: ignore[attr-defined]
        back = GroupedWindowRelease.load(path)
        assert back.dropped_fraction == rel.dropped_fraction  # type: ignore[attr-defined]
        assert back.mechanism_params["bound_choice"] == rel.mechanism_params["bound_choice"]  # type: ignore[attr-defined]
        assert back.to_json() == rel.to_json()  # type: ignore[attr-defined]


def test_a_tampered_choice_is_refused(tmp_path: pathlib.Path) -> None:
    """A saved choice that disagrees with the file's bound is refused, naming the file."""
    from dpfreq.artifacts import read_artifact, write_artifact
    from dpfreq.windows.grouped.result import GROUPED_KIND, GROUPED_VERSION

    rel: object = _release("windows")
    path = tmp_path / "rel.dpf"
    rel.save(path)  # type: ignore[attr-defined]
    _, meta, arrays = read_artifact(path, kind=GROUPED_KIND, versions=(GROUPED_VERSION,))
    meta = dict(meta)
    meta["bound_choice"] = {**meta["bound_choice"],
                            "chosen": meta["bound_choice"]["chosen"] % 10 + 1}
    write_artifact(path, kind=GROUPED_KIND, version=GROUPED_VERSION, meta=meta, arrays=arrays)
    with pytest.raises(DataError, match="bound_choice is malformed"):
        GroupedWindowRelease.load(path)


def test_refusals_are_one_line() -> None:
    log = _log(20)
    base = {"item": "user", "group": "site", "groups": NAMES, "epsilon": 1.0, "unit": "item"}
    cases = [
        (lambda: release_window_counts(log, time="day", horizon=5, k_values=[1],
                                       windows=["total"], max_groups_per_item="auto", **base),
         r"^capping_epsilon of release_window_counts must be a number in \(0, epsilon\) with "
         r"max_groups_per_item='auto'"),
        (lambda: release_profile(log, domain_size=50, max_count=3, max_groups_per_item="auto",
                                 **base),
         r"^capping_epsilon of release_profile must be a number in \(0, epsilon\) with "),
        (lambda: release_window_counts(log, time="day", horizon=5, k_values=[1],
                                       windows=["total"], max_groups_per_item="banana",
                                       capping_epsilon=0.1, **base),
         r"^max_groups_per_item of release_window_counts must be an integer >= 1, or 'auto'"),
        (lambda: release_window_counts(log, time="day", horizon=5, k_values=[1],
                                       windows=["total"], max_groups_per_item="auto",
                                       capping_epsilon=1.5, **base),
         r"^capping_epsilon of release_window_counts must be None or a number in \(0, "),
        (lambda: release_window_counts(log, time="day", horizon=5, k_values=[1],
                                       windows=["total"], max_groups_per_item="auto",
                                       capping_epsilon=0.1, **{**base, "unit": "event"}),
         r"^max_groups_per_item of release_window_counts must be None at unit='event'"),
        (lambda: release_anonymized_histogram(log, item="user", group="site", groups=NAMES,
                                              epsilon=1.0, unit="event",
                                              max_groups_per_item="auto"),
         r"^max_groups_per_item of release_anonymized_histogram must be None"),
        (lambda: plan_window_counts(horizon=5, epsilon=1.0, unit="item", k_values=[1],
                                    windows=["total"], capping_epsilon=0.1),
         r"^capping_epsilon of plan_window_counts must be None without group="),
    ]
    for call, pattern in cases:
        with pytest.raises(ParameterError, match=pattern) as info:
            call()
        assert "\n" not in str(info.value)


def test_plan_window_counts_takes_capping_epsilon_and_auto() -> None:
    kw: dict[str, object] = {"horizon": 5, "epsilon": 1.0, "unit": "item", "k_values": [1],
                             "windows": ["total"], "group": "site", "groups": NAMES}
    fixed = plan_window_counts(max_groups_per_item=4, capping_epsilon=0.2, **kw)  # type: ignore[arg-type]
    assert fixed.per_group.epsilon == pytest.approx(0.2, rel=1e-12)  # (1 − 0.2)/4, rounded down
    assert fixed.per_group.epsilon <= 0.2
    assert fixed.capping_epsilon == 0.2
    assert "capping_epsilon=0.2" in fixed.lines()[0]
    auto = plan_window_counts(max_groups_per_item="auto", capping_epsilon=0.2, **kw)  # type: ignore[arg-type]
    assert sorted(auto.candidates) == list(range(1, len(NAMES) + 1))
    assert auto.max_groups_per_item == len(NAMES)
    wide = plan_window_counts(max_groups_per_item="auto", capping_epsilon=0.2,  # type: ignore[arg-type]
                              **{**kw, "groups": [f"x{k}" for k in range(40)]})
    assert sorted(wide.candidates) == list(range(1, AUTO_MAX_GROUPS + 1))
    assert auto.candidates[4].per_group.epsilon == fixed.per_group.epsilon
    assert json.loads(json.dumps(auto.to_dict()))["capping_epsilon"] == 0.2
    # the release at a fixed m plans what the plan said
    rel: object = _release("windows", max_groups_per_item=4, capping_epsilon=0.4)
    plan = plan_window_counts(max_groups_per_item=4, capping_epsilon=0.4,  # type: ignore[arg-type]
                              **{**kw, "epsilon": 2.0})
    assert rel["s0"].epsilon == plan.per_group.epsilon  # type: ignore[index]


def test_large_dropped_fraction_warns_at_the_users_call() -> None:
    """The warning names this file (the user's call), not a module inside dpfreq."""
    log = {"user": [u for u in range(400) for _ in range(6)],
           "site": [f"s{k}" for _ in range(400) for k in range(6)],
           "day": [1] * 2400}
    with pytest.warns(DPFreqWarning, match="raise max_groups_per_item") as record:
        release_window_counts(log, item="user", time="day", horizon=1, epsilon=4.0,
                              unit="item", k_values=[1], windows=["total"], group="site",
                              groups=[f"s{k}" for k in range(6)], max_groups_per_item=1,
                              capping_epsilon=2.0, rng=0)
    hits = [w for w in record if "raise max_groups_per_item" in str(w.message)]
    assert hits
    assert all(w.filename == __file__ for w in hits)


def test_cli_reach_auto_with_save(tmp_path: pathlib.Path) -> None:
    log = _log(200)
    csv = tmp_path / "events.csv"
    pd.DataFrame(log).to_csv(csv, index=False)
    groups = tmp_path / "groups.txt"
    groups.write_text("\n".join(NAMES) + "\n")
    saved = tmp_path / "auto.dpfreq"
    args = ["reach", str(csv), "--item", "user", "--time", "day", "--horizon", "5",
            "--epsilon", "2", "--unit", "item", "--group", "site", "--groups", str(groups),
            "--seed", "1", "--k", "1", "--windows", "total", "--max-groups-per-item", "auto",
            "--capping-epsilon", "0.25"]
    out = CliRunner().invoke(cli, [*args, "--save", str(saved)])
    assert out.exit_code == 0, out.output
    assert "max-groups-per-item auto: m = " in out.output
    back = GroupedWindowRelease.load(saved)
    assert back.mechanism_params["bound_choice"]["epsilon"] == 0.25
    bad = CliRunner().invoke(cli, [*args[:-4], "--max-groups-per-item", "many"])
    assert bad.exit_code == 2
    assert "must be an integer >= 1 or 'auto'" in bad.output
    plan = CliRunner().invoke(cli, ["plan", "reach", "--horizon", "5", "--epsilon", "2",
                                    "--unit", "item", "--k", "1", "--windows", "total",
                                    "--group", "site", "--groups", str(groups),
                                    "--max-groups-per-item", "auto",
                                    "--capping-epsilon", "0.25"])
    assert plan.exit_code == 0, plan.output
    assert "m chosen privately in 1..10" in plan.output
