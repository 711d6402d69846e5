"""Grouped anonymized histograms: per-group histograms, parallel composition at unit="event",
selection of the data's groups, engines agree, bad input with nothing spent."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from dpfreq.anonymized import release_anonymized_histogram, sorted_l1_distance
from dpfreq.anonymized.grouped import _histograms
from dpfreq.budget import Accountant, PrivacyBudget
from dpfreq.engines import CountRequest, Grouping, get_engine
from dpfreq.errors import ParameterError
from dpfreq.grouped import GroupedRelease


def _log() -> pd.DataFrame:
    gen = np.random.default_rng(4)
    return pd.DataFrame({"w": gen.zipf(1.6, 30_000) % 800,
                         "site": gen.choice(["a", "b", "c"], 30_000)})


def _hist(rows: list[tuple[int, str]]) -> dict[str, dict[int, int]]:
    gp = get_engine("memory").grouped_count_of_counts(
        {"w": [r[0] for r in rows], "site": [r[1] for r in rows]},
        CountRequest("w", Grouping("site", ("a", "b"), None)))
    return {g: dict(zip(c.tolist(), p.tolist(), strict=True))
            for g, (c, p) in _histograms(gp).items()}


def test_group_histograms_are_the_exact_per_group_histograms() -> None:
    df = _log()
    gp = get_engine("duckdb").grouped_count_of_counts(
        df, CountRequest("w", Grouping("site", ("a", "c", "zz"), None)))
    hists = _histograms(gp)
    for g in ("a", "c"):
        want = df[df.site == g].groupby("w").size().value_counts().sort_index()
        assert hists[g][0].tolist() == want.index.tolist()
        assert hists[g][1].tolist() == want.tolist()
    assert hists["zz"][0].size == 0


def test_one_row_moves_one_group_by_sorted_l1_one() -> None:
    """Every data set of up to 3 rows over 2 items x 2 groups and each remove-one-row
    neighbour: exactly one group's histogram changes, by sorted-ℓ1 distance 1."""
    cells = [(w, g) for w in (1, 2) for g in ("a", "b")]
    for k in range(1, 4):
        for rows in itertools.combinations_with_replacement(cells, k):
            full = _hist(list(rows))
            for i in range(k):
                fewer = _hist(list(rows[:i] + rows[i + 1:]))
                moved = [g for g in ("a", "b") if full[g] != fewer[g]]
                assert len(moved) == 1
                assert sorted_l1_distance(full[moved[0]], fewer[moved[0]]) == 1


def test_public_list_gives_every_group_the_whole_epsilon() -> None:
    acct = Accountant(PrivacyBudget(5.0))
    rel = release_anonymized_histogram(_log(), item="w", group="site", groups=["a", "b", "zz"],
                                       epsilon=1.0, unit="event", rng=2, accountant=acct)
    assert isinstance(rel, GroupedRelease)
    assert rel.groups == ("a", "b", "zz")
    assert (acct.spent.epsilon, acct.spent.delta) == (1.0, 0.0)
    assert rel.delta == 0.0
    assert all(rel[g].epsilon == 1.0 for g in rel)
    assert rel.mechanism_params["epsilon_per_group"] == 1.0
    assert rel["a"].unit == "event"
    assert rel.simultaneous.confidence == 0.95
    frame = rel.to_pandas()
    assert {"a", "b"} <= set(frame["site"]) <= {"a", "b", "zz"}
    assert '"kind": "grouped"' in rel.to_json()


def test_engines_give_identical_seeded_grouped_releases() -> None:
    df = _log()
    rels = [release_anonymized_histogram(df, item="w", group="site", delta=1e-6,
                                         epsilon=1.0, unit="event", rng=8, engine=e)
            for e in ("memory", "duckdb")]
    assert rels[0].groups == rels[1].groups
    for g in rels[0]:
        assert rels[0][g].to_mapping() == rels[1][g].to_mapping()


def test_selection_spends_epsilon_and_delta_once_and_halves_epsilon() -> None:
    acct = Accountant(PrivacyBudget(5.0, 1e-5))
    df = pd.concat([_log(), pd.DataFrame({"w": [1], "site": ["lone"]})])
    rel = release_anonymized_histogram(df, item="w", group="site", delta=1e-6, epsilon=1.0,
                                       unit="event", rng=2, accountant=acct)
    assert (acct.spent.epsilon, acct.spent.delta) == (1.0, 1e-6)
    assert rel.delta == 1e-6
    assert rel.mechanism_params["selection"]["max_groups_per_item"] == 1
    assert all(rel[g].epsilon == 0.5 for g in rel)
    # a one-row group is published with probability p₁ <= 1e-6 (stated false-alarm rate);
    # the three ~10,000-row groups pass except with probability far below 1e-300
    assert rel.groups == ("a", "b", "c")


BAD = [
    ({"group": "site", "groups": ["a"], "max_groups_per_item": 2},
     "max_groups_per_item of release_anonymized_histogram must be None at unit='event'"),
    ({"group": "site"}, "groups of release_anonymized_histogram must be a public list of "
     "group names, or give delta= > 0"),
    ({"group": "site", "delta": 0.5}, "delta of release_anonymized_histogram must be a number "
     "in (0, 1e-3]"),
    ({"group": "site", "groups": ["a"], "count": "w"}, "count of "
     "release_anonymized_histogram must be None with group="),
    ({"group": "site", "groups": ["a"], "unit": "item"}, "unit of "
     "release_anonymized_histogram must be one of 'event'"),
    ({"groups": ["a"]}, "group of release_anonymized_histogram must be the group column"),
    ({"group": "", "groups": ["a"]}, "group of release_anonymized_histogram must be a "
     "non-empty column name"),
    ({"group": "site", "groups": []}, "groups of release_anonymized_histogram must be a "
     "non-empty list"),
]


@pytest.mark.parametrize(("kwargs", "text"), BAD)
def test_bad_grouped_input_is_one_line_and_spends_nothing(kwargs: dict[str, object],
                                                          text: str) -> None:
    acct = Accountant(PrivacyBudget(5.0, 1e-3))
    args: dict[str, object] = {"item": "w", "epsilon": 1.0, "unit": "event", "rng": 0,
                               "accountant": acct}
    args.update(kwargs)
    with pytest.raises(ParameterError) as info:
        release_anonymized_histogram(_log(), **args)
    assert text in str(info.value)
    assert "\n" not in str(info.value)
    assert (acct.spent.epsilon, acct.spent.delta) == (0.0, 0.0)


def test_group_without_item_is_refused() -> None:
    with pytest.raises(ParameterError, match="item of release_anonymized_histogram must be "
                                             "the item column"):
        release_anonymized_histogram({1: 3}, group="site", groups=["a"], epsilon=1.0,
                                     unit="event")
