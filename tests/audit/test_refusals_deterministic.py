"""Whether a release is refused depends on the data and the parameters, never on a draw, and
a refused call spends nothing (nothing random runs before the budget is charged).

Each refused call is made under many seeds and with the secure source: it must refuse every
time with the same message and leave the accountant untouched; each admissible call near the
refusal's edge must succeed under every seed.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpfreq.budget import Accountant, PrivacyBudget
from dpfreq.errors import DPFreqError
from dpfreq.profile import ProfileSketch

SEEDS = [None, *range(40)]


def _refusals(call) -> set[str]:
    """The messages of ``call(rng, accountant)`` under every seed; asserts nothing was spent."""
    out = set()
    for seed in SEEDS:
        acct = Accountant(PrivacyBudget(10.0, 1e-4))
        with pytest.raises(DPFreqError) as info:
            call(seed, acct)
        assert (acct.spent.epsilon, acct.spent.delta) == (0.0, 0.0)
        out.add(str(info.value))
    return out


def test_sketch_sampling_refusal_is_decided_before_any_draw():
    # ρ·d < 1: refused from the public parameters alone, under every seed, one message
    msgs = _refusals(lambda seed, acct: ProfileSketch(
        3, max_count=4, epsilon=1.0, sample_rate=0.2, rng=seed, accountant=acct))
    assert len(msgs) == 1
    assert "sample_rate" in msgs.pop()


def test_sketch_with_a_drawn_sampling_key_never_refuses():
    """ρ·d = 1: a drawn key keeps no item with probability (1 − ρ)^d = 1/4; the key is drawn
    after the spend and drawn again, so no seed is refused and each spends once."""
    for seed in SEEDS:
        acct = Accountant(PrivacyBudget(10.0))
        sk = ProfileSketch(2, max_count=4, epsilon=1.0, sample_rate=0.5, rng=seed,
                           accountant=acct)
        assert sk.sampled_domain_size >= 1
        assert (acct.spent.epsilon, acct.spent.delta) == (1.0, 0.0)


def test_sketch_with_a_given_key_that_keeps_nothing_is_refused_before_the_spend():
    key = next(k.to_bytes(8, "little") for k in range(1000)
               if _sample_size(2, 0.5, k.to_bytes(8, "little")) == 0)
    msgs = _refusals(lambda seed, acct: ProfileSketch(
        2, max_count=4, epsilon=1.0, sample_rate=0.5, sample_key=key, rng=seed,
        accountant=acct))
    assert len(msgs) == 1
    assert "sample_key" in msgs.pop()


def _sample_size(d: int, rate: float, key: bytes) -> int:
    from dpfreq.profile.domain_sampling import sample_domain

    return int(np.size(sample_domain(d, rate=rate, key=key)))


def _grouped_log(extra_rows: int = 0):
    """Items in three campaigns over 6 days; campaign "b" has two events on day 2."""
    u = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10] + [11] * extra_rows
    g = ["a", "a", "b", "b", "c", "c", "a", "b", "c", "a"] + ["c"] * extra_rows
    t = [1, 2, 2, 2, 3, 4, 5, 6, 1, 3] + [7] * extra_rows
    return {"user": np.array(u), "campaign": np.array(g), "day": np.array(t)}


@pytest.mark.parametrize("groups", [None, ["a", "b", "c"]])
def test_grouped_window_refusals_are_decided_before_any_draw(groups):
    from dpfreq.windows import release_window_counts

    kw = {"item": "user", "time": "day", "group": "campaign", "groups": groups,
          "max_groups_per_item": 1, "horizon": 6, "epsilon": 1.0, "unit": "item",
          "k_values": [1], "windows": ["all"]}
    if groups is None:
        kw["delta"] = 1e-6
    # two events in one period of one group: singleton=True is refused whatever the selection
    # or the bounding key would have been
    msgs = _refusals(lambda seed, acct: release_window_counts(
        _grouped_log(), singleton=True, rng=seed, accountant=acct, **kw))
    assert len(msgs) == 1
    assert "singleton" in msgs.pop()
    # a row after the horizon with out_of_range="error": refused the same way every time
    msgs = _refusals(lambda seed, acct: release_window_counts(
        _grouped_log(extra_rows=1), rng=seed, accountant=acct, **kw))
    assert len(msgs) == 1
    assert "outside" in msgs.pop()


def test_grouped_profile_refusal_is_decided_on_the_rows_before_the_bounding():
    """Campaign "a" holds 4 distinct users and domain_size is 3: refused under every seed,
    even though after a bounding that drops one of its users the group would fit."""
    from dpfreq import release_profile

    log = {"user": np.array([1, 2, 3, 4, 4]), "campaign": np.array(["a", "a", "a", "a", "b"])}
    msgs = _refusals(lambda seed, acct: release_profile(
        log, item="user", group="campaign", groups=["a", "b"], max_groups_per_item=1,
        domain_size=3, max_count=2, epsilon=1.0, unit="item", rng=seed, accountant=acct))
    assert len(msgs) == 1
    assert "domain_size" in msgs.pop()


@pytest.mark.parametrize("selection", ["truncated_geometric", "set_union"])
def test_grouped_refusals_under_either_selection_are_decided_before_any_draw(selection):
    """Without a public list and with m = 2, either selection (the set union's weights are
    counted after the spend under the one bounding key) leaves every refusal to the rows read
    before it: the same message under every seed, nothing spent."""
    from dpfreq import release_profile
    from dpfreq.windows import release_window_counts

    kw = {"item": "user", "group": "campaign", "delta": 1e-6, "max_groups_per_item": 2,
          "epsilon": 1.0, "unit": "item", "selection": selection}
    msgs = _refusals(lambda seed, acct: release_window_counts(
        _grouped_log(), time="day", horizon=6, k_values=[1], windows=["all"], singleton=True,
        rng=seed, accountant=acct, **kw))
    assert len(msgs) == 1
    assert "singleton" in msgs.pop()
    log = {"user": np.array([1, 2, 3, 4, 4]), "campaign": np.array(["a", "a", "a", "a", "b"])}
    msgs = _refusals(lambda seed, acct: release_profile(
        log, domain_size=3, max_count=2, rng=seed, accountant=acct, **kw))
    assert len(msgs) == 1
    assert "domain_size" in msgs.pop()


def test_ungrouped_and_anonymized_refusals_are_decided_before_any_draw():
    from dpfreq import release_anonymized_histogram, release_profile
    from dpfreq.windows import release_window_counts

    calls = [
        lambda seed, acct: release_profile(np.array([1, 2, 3, 4]), domain_size=3, max_count=4,
                                           epsilon=1.0, unit="item", rng=seed, accountant=acct),
        lambda seed, acct: release_window_counts(
            (np.array([1, 2]), np.array([1, 9])), horizon=4, epsilon=1.0, unit="event",
            k_values=[1], windows=["cumulative"], rng=seed, accountant=acct),
        lambda seed, acct: release_anonymized_histogram(
            {"user": np.array([1, 1, 2, 3]), "campaign": np.array(["a", "a", "b", "b"])},
            item="user", group="campaign", delta=1e-6, domain_size=1, epsilon=1.0,
            unit="event", rng=seed, accountant=acct),
    ]
    for call in calls:
        assert len(_refusals(call)) == 1
