"""Grouped plans: per-group predictions at the per-group ε, the simultaneous plan, the
selection's threshold, agreement with the release, bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpfreq.anonymized import plan_anonymized
from dpfreq.errors import ParameterError, PrivacyWarning
from dpfreq.grouped.selection import plan_partition_selection
from dpfreq.profile import plan_profile, release_profile

BASE = {"domain_size": 10**5, "max_count": 10, "epsilon": 1.0, "unit": "item"}


def test_profile_plan_with_a_public_list() -> None:
    plan = plan_profile(**BASE, group="g", max_groups_per_item=4, groups=["a", "b", "c"])
    one = plan_profile(**{**BASE, "epsilon": 0.25})
    assert plan.epsilon_per_group == 0.25
    assert plan.per_group.half_width == one.half_width
    assert plan.per_group.l1_bound == one.l1_bound
    assert plan.simultaneous.confidence == pytest.approx(1 - 0.05 / 3)
    assert plan.simultaneous.half_width >= plan.per_group.half_width
    assert plan.selection is None
    assert plan.delta == 0.0
    assert plan.to_dict()["groups"] == ["a", "b", "c"]


def test_profile_plan_with_selection() -> None:
    plan = plan_profile(**BASE, group="g", max_groups_per_item=4, delta=1e-7)
    assert plan.epsilon_per_group == pytest.approx(0.125)
    assert plan.selection == plan_partition_selection(0.5, 1e-7, 4)
    assert plan.simultaneous is None
    assert f"τ = {plan.selection.threshold}" in plan.description


def test_profile_plan_matches_the_release() -> None:
    gen = np.random.default_rng(0)
    df = pd.DataFrame({"u": gen.integers(0, 2000, 8000), "g": gen.choice(["a", "b"], 8000)})
    plan = plan_profile(**BASE, group="g", max_groups_per_item=2, delta=1e-6)
    rel = release_profile(df, item="u", **BASE, group="g", max_groups_per_item=2, delta=1e-6,
                          rng=1)
    assert rel.mechanism_params["selection"]["threshold"] == plan.selection.threshold
    for name in rel:
        assert rel[name].mechanism_params["half_width_items"][-1] == plan.per_group.half_width


def test_anonymized_plan_grouped() -> None:
    plan = plan_anonymized(n_range=(1000, 10_000), epsilon=2.0, group="s", delta=1e-6)
    one = plan_anonymized(n_range=(1000, 10_000), epsilon=1.0)
    assert plan.epsilon_per_group == 1.0
    assert plan.per_group.total_halfwidth == one.total_halfwidth
    assert plan.selection == plan_partition_selection(1.0, 1e-6, 1)
    assert plan.max_groups_per_item is None
    listed = plan_anonymized(n_range=(1000, 10_000), epsilon=2.0, group="s", groups=["x", "y"])
    assert listed.epsilon_per_group == 2.0
    assert listed.simultaneous.total_halfwidth >= listed.per_group.total_halfwidth


@pytest.mark.parametrize(("call", "text"), [
    (lambda: plan_profile(**BASE, group="g", max_groups_per_item=2),
     "groups of plan_profile must be a public list of group names, or give delta="),
    (lambda: plan_profile(**BASE, group="g", delta=1e-6),
     "max_groups_per_item of plan_profile must be given"),
    (lambda: plan_profile(**BASE, max_groups_per_item=2, delta=1e-6),
     "group of plan_profile must be the group column"),
    (lambda: plan_profile(**BASE, group="g", max_groups_per_item=0, groups=["a"]),
     "max_groups_per_item of plan_profile must be an integer >= 1"),
    (lambda: plan_profile(**{**BASE, "unit": "event"}, group="g", max_groups_per_item=1,
                          groups=["a"]), "unit of plan_profile must be 'item'"),
    (lambda: plan_profile(**BASE, group="g", max_groups_per_item=2, delta=2e-3),
     "delta of plan_profile must be a number in (0, 1e-3]"),
    (lambda: plan_anonymized(n_range=(10, 100), epsilon=1.0, group="s", groups=["a"],
                             max_groups_per_item=2),
     "max_groups_per_item of plan_anonymized must be None at unit='event'"),
    (lambda: plan_anonymized(n_range=(10, 100), target_l1=50.0, group="s", groups=["a"]),
     "target_l1 of plan_anonymized must be None with group="),
    (lambda: plan_anonymized(n_range=(10, 100), epsilon=1.0, group="s", groups=["a"],
                             delta=1e-6), "delta of plan_anonymized must be None when groups="),
])
def test_bad_grouped_plans_are_one_line(call: object, text: str) -> None:
    with pytest.raises(ParameterError) as info:
        call()  # type: ignore[operator]
    assert text in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("domain_size", [10**6, 10**7])
def test_selection_delta_of_one_over_the_domain_or_more_warns(domain_size: int) -> None:
    args = {"domain_size": domain_size, "max_count": 5, "epsilon": 1.0, "unit": "item",
            "group": "g", "max_groups_per_item": 2, "delta": 1e-6}
    with pytest.warns(PrivacyWarning, match=r"^delta of plan_profile is 1e-06, at least 1/"):
        plan_profile(**args)
    df = pd.DataFrame({"u": [1, 2, 3], "g": ["a", "a", "b"]})
    with pytest.warns(PrivacyWarning, match=r"^delta of release_profile is 1e-06, at least 1/"):
        release_profile(df, item="u", rng=0, **args)


def test_selection_delta_below_one_over_the_domain_is_silent() -> None:
    args = {"domain_size": 999_999, "max_count": 5, "epsilon": 1.0, "unit": "item",
            "group": "g", "max_groups_per_item": 2, "delta": 1e-6}
    plan_profile(**args)  # warnings are errors in this suite
    df = pd.DataFrame({"u": [1, 2, 3], "g": ["a", "a", "b"]})
    rel = release_profile(df, item="u", rng=0, **args)
    assert rel.delta == 1e-6


def _grouped_log() -> pd.DataFrame:
    gen = np.random.default_rng(3)
    return pd.DataFrame({"u": gen.integers(0, 2000, 20_000),
                         "g": gen.choice(["a", "b", "c", "x"], 20_000)})


@pytest.mark.parametrize("extra", [
    {"groups": ["a", "b", "c"], "capping_epsilon": 0.2},
    {"delta": 1e-7, "selection_epsilon": 0.3},
    {"delta": 1e-7, "selection_epsilon": 0.3, "selection": "truncated_geometric",
     "capping_epsilon": 0.1},
])
def test_profile_plan_takes_the_release_options_and_agrees_with_it(extra: dict) -> None:
    """plan_profile takes selection_epsilon=, selection= and capping_epsilon= as
    release_profile does, and plans each group at the ε the release gives it."""
    kw = {**BASE, "domain_size": 2000, "group": "g", "max_groups_per_item": 4, **extra}
    plan = plan_profile(**kw)
    rel = release_profile(_grouped_log(), item="u", rng=1, **kw)
    assert plan.epsilon_per_group == pytest.approx(rel[next(iter(rel))].epsilon, rel=1e-12)
    assert plan.capping_epsilon == extra.get("capping_epsilon")
    if "selection_epsilon" in extra:
        assert plan.selection.epsilon == extra["selection_epsilon"]
        stated = rel.mechanism_params["selection"]["mechanism"]
        assert stated.startswith(plan.selection.mechanism.replace("_", " "))


def test_profile_plan_with_auto_bound_plans_every_candidate() -> None:
    kw = {**BASE, "group": "g", "groups": ["a", "b", "c"], "capping_epsilon": 0.2}
    auto = plan_profile(**kw, max_groups_per_item="auto")
    assert sorted(auto.candidates) == [1, 2, 3]
    assert auto.max_groups_per_item == 3
    for m, at in auto.candidates.items():
        assert at.epsilon_per_group == plan_profile(**kw, max_groups_per_item=m).epsilon_per_group
    assert "chosen privately in 1..3" in auto.description
    assert auto.to_dict()["candidates"] == [1, 2, 3]


@pytest.mark.parametrize(("kw", "text"), [
    ({"capping_epsilon": 0.1}, r"^capping_epsilon of plan_profile must be None without group="),
    ({"selection_epsilon": 0.3}, r"^selection_epsilon of plan_profile must be 'auto' without "),
    ({"group": "g", "max_groups_per_item": "auto"},
     r"^capping_epsilon of plan_profile must be a number in \(0, epsilon\) with "
     r"max_groups_per_item='auto'"),
])
def test_profile_plan_release_options_refused_in_one_line(kw: dict, text: str) -> None:
    with pytest.raises(ParameterError, match=text) as info:
        plan_profile(**BASE, **kw)
    assert "\n" not in str(info.value)
