"""Grouped profile: bounding on every engine, exact sensitivity, uniformity, bad input."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpfreq.budget import Accountant, PrivacyBudget
from dpfreq.engines import get_engine
from dpfreq.engines.grouping_memory import pair_rank
from dpfreq.errors import DataError, ParameterError
from dpfreq.profile import release_profile

KEY = bytes(range(32))
GROUPS = ["a", "b", "c"]


def _frame(rows: list[tuple[object, str]]) -> pd.DataFrame:
    return pd.DataFrame({"u": [r[0] for r in rows], "g": [r[1] for r in rows]})


def _classes(rows: list[tuple[object, str]], m: int, n: int) -> dict[str, dict[int, int]]:
    if not rows:
        return {}
    gp = get_engine("memory").grouped_count_of_counts(
        {"u": [r[0] for r in rows], "g": [r[1] for r in rows]}, item="u", group="g",
        groups=GROUPS, max_groups_per_item=m, hash_key=KEY, max_count=n)
    out: dict[str, dict[int, int]] = {}
    for gi, c, p in zip(gp.group_index, gp.counts, gp.prevalences, strict=True):
        out.setdefault(gp.groups[gi], {})[int(c)] = int(p)
    return out


def _l1_positive(x: dict[int, int], y: dict[int, int]) -> int:
    """ℓ1 change of the classes t >= 1 (the classes the direct mechanism noises at "item")."""
    return sum(abs(x.get(k, 0) - y.get(k, 0)) for k in set(x) | set(y))


def _l1(x: dict[int, int], y: dict[int, int]) -> int:
    # class 0 is d - (items seen), so one item appearing or vanishing also moves class 0
    seen = abs(sum(x.values()) - sum(y.values()))
    return seen + _l1_positive(x, y)


@pytest.mark.parametrize("m", [1, 2])
def test_exact_sensitivity_by_enumeration(m: int) -> None:
    """Every 2-item data set (0..2 rows per group each) and its remove-one-item neighbours:
    at most m groups move, each by ℓ1 <= 1 on the classes t >= 1 (the sensitivity the direct
    mechanism calibrates to at unit "item", class 0 derived) and ℓ1 <= 2 on all classes."""
    per_item = list(itertools.product(range(3), repeat=len(GROUPS)))
    for a, b in itertools.product(per_item, per_item):
        rows = [(1, g) for g, k in zip(GROUPS, a, strict=True) for _ in range(k)]
        rows += [(2, g) for g, k in zip(GROUPS, b, strict=True) for _ in range(k)]
        full = _classes(rows, m, 2)
        for drop in (1, 2):
            nb = _classes([r for r in rows if r[0] != drop], m, 2)
            moved = [_l1(full.get(g, {}), nb.get(g, {})) for g in GROUPS]
            positive = [_l1_positive(full.get(g, {}), nb.get(g, {})) for g in GROUPS]
            assert sum(x > 0 for x in moved) <= m
            assert max(moved) <= 2
            assert max(positive) <= 1


def test_engines_identical() -> None:
    gen = np.random.default_rng(5)
    for items in (gen.integers(0, 300, 4000), gen.integers(0, 300, 4000).astype(str)):
        df = pd.DataFrame({"u": items, "g": gen.choice(["a", "b", "c", "x", "d'q"], 4000)})
        res = []
        for e in ("memory", "duckdb"):
            gp = get_engine(e).grouped_count_of_counts(
                df, item="u", group="g", groups=["a", "b", "c", "d'q", "none"],
                max_groups_per_item=2, hash_key=KEY, max_count=7)
            res.append((gp.group_index.tolist(), gp.counts.tolist(), gp.prevalences.tolist()))
            rel = release_profile(df, item="u", group="g", groups=["a", "b", "none"],
                                  max_groups_per_item=2, domain_size=1000, max_count=7,
                                  epsilon=1.0, unit="item", engine=e, rng=11)
            res.append([rel[g].value.tolist() for g in rel])
        assert res[0] == res[2]
        assert res[1] == res[3]
        assert 4 not in res[0][0]  # the listed group without rows has no classes ...
        assert len(res[1]) == 3  # ... yet it is released


def test_bounding_uniform_over_groups() -> None:
    """5 groups, m = 2: each of the 10 kept subsets has probability 1/10 (χ², α = 1e-6)."""
    groups = ["g0", "g1", "g2", "g3", "g4"]
    n_items = 20000
    seen = {}
    for i in range(n_items):
        ranks = sorted((pair_rank(KEY.hex(), str(i), g), g) for g in groups)
        kept = tuple(sorted(g for _, g in ranks[:2]))
        seen[kept] = seen.get(kept, 0) + 1
    assert len(seen) == math.comb(5, 2)
    _, p = stats.chisquare(list(seen.values()))
    assert p > 1e-6
    # the engine keeps exactly these subsets: per-group kept item counts agree
    df = pd.DataFrame({"u": np.repeat(np.arange(n_items), 5), "g": groups * n_items})
    gp = get_engine("duckdb").grouped_count_of_counts(
        df, item="u", group="g", groups=groups, max_groups_per_item=2, hash_key=KEY,
        max_count=1)
    per_group = {g: sum(v for k, v in seen.items() if g in k) for g in groups}
    kept = dict(zip(gp.group_index.tolist(), gp.prevalences.tolist(), strict=True))
    assert {groups[i]: p for i, p in kept.items()} == per_group


@pytest.mark.parametrize(("kwargs", "param"), [
    ({"group": "g", "groups": ["a"]}, "max_groups_per_item"),
    ({"group": "g", "groups": ["a"], "max_groups_per_item": 0}, "max_groups_per_item"),
    ({"group": "g", "groups": [], "max_groups_per_item": 1}, "groups"),
    ({"group": "g", "max_groups_per_item": 1}, "groups"),
    ({"max_groups_per_item": 1, "groups": ["a"]}, "group"),
])
def test_bad_parameters_spend_nothing(kwargs: dict, param: str) -> None:
    acct = Accountant(PrivacyBudget(5.0))
    with pytest.raises(ParameterError, match=f"^{param} of release_profile must"):
        release_profile(_frame([(1, "a")]), item="u", domain_size=10, max_count=2,
                        epsilon=1.0, unit="item", accountant=acct, **kwargs)
    assert acct.remaining.epsilon == 5.0


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
@pytest.mark.parametrize("groups_col", [None, "missing"])
def test_bad_group_column_spends_nothing(engine: str, groups_col: str | None) -> None:
    df = pd.DataFrame({"u": [1, 2], "g": [None, None]})
    acct = Accountant(PrivacyBudget(5.0))
    with pytest.raises(DataError) as info:
        release_profile(df, item="u", group=groups_col or "g", groups=["a"],
                        max_groups_per_item=1, domain_size=10, max_count=2, epsilon=1.0,
                        unit="item", accountant=acct, engine=engine)
    assert "\n" not in str(info.value)
    assert acct.remaining.epsilon == 5.0


def test_grouped_release_outputs() -> None:
    import json

    import matplotlib

    matplotlib.use("Agg")
    df = pd.DataFrame({"u": [1, 1, 2, 3], "g": ["a", "b", "a", "b"]})
    rel = release_profile(df, item="u", group="g", groups=["a", "b", "c"],
                          max_groups_per_item=1, domain_size=10, max_count=2, epsilon=1.0,
                          unit="item", rng=2)
    table = rel.to_pandas()  # each group's own table, group column first (issue 50)
    assert list(table.columns) == ["g", "t", "estimate", "lower", "upper", "band_lower",
                                   "band_upper", "items"]
    assert table.shape == (9, 8)
    assert table.attrs["epsilon"] == 1.0
    assert table.attrs["unit"] == "item"
    assert table.attrs["confidence"] == 0.95
    assert table.attrs["group_column"] == "g"
    assert table.attrs["groups"] == ["a", "b", "c"]
    doc = json.loads(rel.to_json())
    assert list(doc["groups"]) == ["a", "b", "c"]
    assert doc["groups"]["c"]["unit"] == "item"
    assert rel.simultaneous.confidence == 0.95
    assert len(rel.plot(max_panels=2).axes) >= 2
