"""Grouped bounding: every engine gives the same per-group count-of-counts and releases."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpfreq.engines import CountRequest, Grouping, get_engine
from dpfreq.profile import release_profile

KEY = bytes(range(1, 33))


def _data() -> pd.DataFrame:
    gen = np.random.default_rng(9)
    return pd.DataFrame({"u": gen.integers(0, 200, 3000),
                         "g": gen.choice(["a", "b", "c", "x"], 3000)})


def _aggregate(engine: Any, df: pd.DataFrame) -> tuple[list[int], list[int], list[int]]:
    gp = engine.grouped_count_of_counts(df, CountRequest(
        "u", Grouping("g", ("a", "b", "c", "e"), 2, KEY), max_count=9))
    return gp.group_index.tolist(), gp.counts.tolist(), gp.prevalences.tolist()


@pytest.mark.spark
def test_spark_grouped_matches_memory(spark: Any) -> None:
    df = _data()
    want = _aggregate(get_engine("memory"), df)
    assert _aggregate(get_engine(spark), df) == want
    rels = [release_profile(df, item="u", group="g", groups=["a", "b"], max_groups_per_item=2,
                            domain_size=500, max_count=9, epsilon=1.0, unit="item", rng=4,
                            engine=e)
            for e in ("memory", get_engine(spark))]
    assert [r.value.tolist() for r in rels[0].releases.values()] == \
        [r.value.tolist() for r in rels[1].releases.values()]


def _distinct(engine: Any, df: Any, names: tuple[str, ...] | None
              ) -> tuple[tuple[str, ...], list[int], list[int], list[int]]:
    gp = engine.grouped_count_of_counts(df, CountRequest(
        "u", Grouping("g", names, None), per_item="distinct_groups"))
    return gp.groups, gp.group_index.tolist(), gp.counts.tolist(), gp.prevalences.tolist()


def test_distinct_groups_same_on_memory_and_duckdb() -> None:
    """What the dropped-fraction estimate sums (``per_item="distinct_groups"``)."""
    df = _data()
    for names in (None, ("a", "b", "c", "e")):
        assert _distinct(get_engine("duckdb"), df, names) == _distinct(
            get_engine("memory"), df, names)


@pytest.mark.spark
def test_spark_distinct_groups_matches_memory(spark: Any) -> None:
    df = _data()
    for names in (None, ("a", "b", "c", "e")):
        assert _distinct(get_engine(spark), df, names) == _distinct(
            get_engine("memory"), df, names)
