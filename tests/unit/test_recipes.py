"""The contributor recipes of docs/contributing.md, each exercised with a toy implementation."""

from __future__ import annotations

import numpy as np
import pytest

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
