"""Every group of the data (groups=None), no bound and no clamp: Spark gives the same
aggregates and the same seeded selected releases as the memory reference."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpfreq.anonymized import release_anonymized_histogram
from dpfreq.engines import CountRequest, Grouping, get_engine
from dpfreq.profile import release_profile

KEY = bytes(range(2, 34))


def _data() -> pd.DataFrame:
    gen = np.random.default_rng(10)
    df = pd.DataFrame({"u": gen.integers(0, 300, 4000),
                       "g": gen.choice(["a", "b", "c", "x"], 4000)})
    return pd.concat([df, pd.DataFrame({"u": [10**6], "g": ["lone"]})], ignore_index=True)


def _aggregate(engine: Any, df: pd.DataFrame, groups: Any, m: Any, n: Any) -> tuple[Any, ...]:
    gp = engine.grouped_count_of_counts(df, CountRequest(
        "u", Grouping("g", None if groups is None else tuple(groups), m, KEY), max_count=n))
    return (gp.groups, gp.group_index.tolist(), gp.counts.tolist(), gp.prevalences.tolist(),
            gp.n_pairs, gp.n_pairs_kept)


@pytest.mark.parametrize("groups", [None, ["a", "b", "c", "e"]])
@pytest.mark.parametrize("m", [None, 2])
@pytest.mark.parametrize("n", [None, 6])
def test_duckdb_matches_memory_in_every_form(groups: Any, m: Any, n: Any) -> None:
    df = _data()
    want = _aggregate(get_engine("memory"), df, groups, m, n)
    assert _aggregate(get_engine("duckdb"), df, groups, m, n) == want
    if groups is None:
        assert "lone" in want[0]  # the data's groups, private until selected


@pytest.mark.spark
def test_spark_all_groups_and_no_bound_match_memory(spark: Any) -> None:
    df = _data()
    for groups, m, n in ((None, 2, 6), (None, None, None), (["a", "zz"], None, None)):
        want = _aggregate(get_engine("memory"), df, groups, m, n)
        assert _aggregate(get_engine(spark), df, groups, m, n) == want
    rels = [release_profile(df, item="u", group="g", max_groups_per_item=2, delta=1e-6,
                            domain_size=10**5, max_count=6, epsilon=2.0, unit="item", rng=5,
                            engine=e) for e in ("memory", get_engine(spark))]
    assert rels[0].groups == rels[1].groups
    for name in rels[0]:
        assert rels[0][name].value.tolist() == rels[1][name].value.tolist()
    hists = [release_anonymized_histogram(df, item="u", group="g", delta=1e-6, epsilon=2.0,
                                          unit="event", rng=6, engine=e)
             for e in ("memory", get_engine(spark))]
    assert hists[0].groups == hists[1].groups
    for name in hists[0]:
        assert hists[0][name].to_mapping() == hists[1][name].to_mapping()
