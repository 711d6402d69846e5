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
