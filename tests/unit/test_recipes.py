"""The contributor recipes of docs/contributing.md, each exercised with a toy implementation."""

from __future__ import annotations

import numpy as np
import pytest

from dpfreq.budget import Accountant, PrivacyBudget
from dpfreq.engines import CountRequest, Grouping, get_engine
from dpfreq.errors import DataError
from dpfreq.grouped.driver import Candidates, GroupedCall, run_grouped
from dpfreq.grouped.selection import plan_selection
from dpfreq.noise import discrete_laplace_gamma, sample_discrete_laplace
from dpfreq.pipeline import Charge, Reading
from dpfreq.rng import resolve_rng
from dpfreq.windows import WindowCountsRelease, plan_window_counts, release_window_counts
from dpfreq.windows.structures import METHODS, Structure, register, registry
from dpfreq.windows.structures.protocol import PerQueryShape


@pytest.fixture
def toy_structure():
    """A structure for the whole period: one count plus one node noise, registered for the
    test and removed after it."""

    @register
    class OneNoisyTotal(Structure):
        name = "toy_one_noisy_total"
        families = ("total",)
        independent_answers = True

        def _shape(self):
            return PerQueryShape(1, 1, 1.0, windows=1)

        def nodes(self, t1, t2):
            return np.ones(np.broadcast(np.asarray(t1), np.asarray(t2)).shape, dtype=np.int64)

        def _draw(self, key, name):
            self._z = int(self.noise_source(key, (*name, 0)).noise([0])[0])

        def noise(self, t1, t2):
            return self._z * self.nodes(t1, t2)

    try:
        yield OneNoisyTotal
    finally:
        registry().pop(OneNoisyTotal.name)


def test_a_new_window_structure_is_one_class(toy_structure, tmp_path):
    assert toy_structure.name in METHODS["total"]
    items, times = np.array([1, 2, 2, 3, 4]), np.array([1, 1, 2, 3, 3])
    kw = {"horizon": 3, "epsilon": 1.0, "unit": "item", "k_values": [1], "windows": ["total"],
          "method": {"total": toy_structure.name}}
    rel = release_window_counts((items, times), rng=3, **kw)
    s = rel._state.structures[("total", 1)]
    assert isinstance(s, toy_structure)
    assert rel.mechanism_params["methods"]["total, k=1"]["method"] == toy_structure.name
    # the answer is the exact count (4 items) plus the structure's one keyed noise
    assert int(rel.value["total"][1][0]) == 4 + s._z
    # the base class states its interval (the exact law of one node noise) and the plan agrees
    plan = plan_window_counts(**kw)
    np.testing.assert_allclose(plan.halfwidth["total"][1], rel.error.value["total"][1])
    # and it is saved and loaded like any other structure
    back = WindowCountsRelease.load(rel.save(tmp_path / "toy.dpfreq"))
    assert back.value["total"][1].tolist() == rel.value["total"][1].tolist()


def test_a_registered_name_cannot_be_taken_twice(toy_structure):
    from dpfreq.errors import ParameterError

    class Other(toy_structure):
        pass

    with pytest.raises(ParameterError, match="not yet registered"):
        register(Other)


class _ItemCounts:
    """The adapter of docs/contributing.md: each group's distinct items, each item counted in
    at most ``m`` groups, the exact discrete Laplace at ``ε/m`` per group; with no public list
    the truncated geometric selection at half of ε."""

    keyed = True

    def __init__(self, call, source):
        self.call, self.source = call, source

    def plan(self):
        c, eps = self.call, self.call.charge.epsilon
        if c.groups is None:
            return plan_selection(eps / 2, c.charge.delta, c.max_groups_per_item), eps / 2
        return None, eps

    def selection(self, plan):
        return plan[0]

    def read(self, plan):
        if self.source[self.call.group].isna().any():
            raise DataError("group of item_counts must have no missing value.")
        return Reading(get_engine("memory"), source="memory")

    def _count(self, engine, bounding):
        grouping = Grouping(self.call.group, bounding.groups, bounding.max_groups_per_item,
                            bounding.key)
        gp = engine.grouped_count_of_counts(self.source, CountRequest("user", grouping))
        n = np.bincount(gp.group_index, weights=gp.prevalences, minlength=len(gp.groups))
        return Candidates(gp.groups, n.astype(np.int64))

    def sizes(self, plan, engine, bounding, selection):
        return self._count(engine, bounding)

    def aggregate(self, plan, engine, bounding, counted):
        counted = self._count(engine, bounding) if counted is None else counted
        size = dict(zip(counted.names, counted.sizes, strict=True))
        return [int(size[g]) for g in bounding.groups]

    def release(self, plan, counts, names, secret, rng):
        gamma = discrete_laplace_gamma(plan[1], self.call.max_groups_per_item)
        return {g: int(n + sample_discrete_laplace(gamma, 1, rng=rng.generator)[0])
                for g, n in zip(names, counts, strict=True)}

    def result(self, plan, drawn):
        return drawn.outs


def _visits(missing: bool = False):
    """300 users on site a, one in three also on b, one user on c (and on a)."""
    import pandas as pd

    users = np.arange(300)
    sites = ["a"] * 300 + ["b"] * 100 + [None if missing else "c"]
    return pd.DataFrame({"user": np.r_[users, users[::3], 7], "site": sites})


def _call(groups, delta=0.0):
    return GroupedCall(Charge(1.0, delta, "item", "item_counts"), "site", groups, 2)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_a_new_grouped_statistic_is_one_adapter(seed):
    # with a public list: the exact bounded counts (no item holds more than m = 2 of a, b)
    # plus the noise the driver draws after the 32 bytes of the secret, group by group
    out = run_grouped(_ItemCounts(_call(("b", "a", "z")), _visits()), accountant=None, rng=seed)
    assert list(out) == ["b", "a", "z"]
    generator = resolve_rng(seed).generator
    generator.bytes(32)
    gamma = discrete_laplace_gamma(1.0, 2)
    noise = [int(sample_discrete_laplace(gamma, 1, rng=generator)[0]) for _ in range(3)]
    assert [out[g] for g in ("b", "a", "z")] == [100 + noise[0], 300 + noise[1], noise[2]]
    # without a list: a group released with probability 1 (300 items >= 2k + 1 under the
    # truncated geometric's exact law) always is, and a group absent from the data never
    plan = plan_selection(0.5, 1e-6, 2)
    assert 2 * plan.truncation + 1 <= 300
    selected = run_grouped(_ItemCounts(_call(None, 1e-6), _visits()), accountant=None,
                           rng=seed)
    assert "a" in selected
    assert "z" not in selected
    assert list(selected) == sorted(selected)


def test_a_grouped_adapter_refuses_alike_under_every_seed_and_spends_nothing():
    messages = set()
    for seed in (0, 1, 2, None):
        acct = Accountant(PrivacyBudget(5.0, 1e-5))
        for groups, delta in ((("a", "b"), 0.0), (None, 1e-6)):
            with pytest.raises(DataError) as exc:
                run_grouped(_ItemCounts(_call(groups, delta), _visits(missing=True)),
                            accountant=acct, rng=seed)
            messages.add(str(exc.value))
        assert (acct.spent.epsilon, acct.spent.delta) == (0.0, 0.0)
    assert messages == {"group of item_counts must have no missing value."}
    acct = Accountant(PrivacyBudget(5.0, 1e-5))
    run_grouped(_ItemCounts(_call(None, 1e-6), _visits()), accountant=acct, rng=0)
    assert (acct.spent.epsilon, acct.spent.delta) == (1.0, 1e-6)
