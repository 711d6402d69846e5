"""Which neighbouring relations the anonymized histogram supports, by exact enumeration.

PrivHist and Hay et al. are calibrated to sorted-ℓ1 sensitivity 1. Enumerating small data sets
and all their neighbours: under ``event`` (add or remove one row) the sorted count vectors are
exactly at sorted-ℓ1 distance 1; under ``item`` and ``item_replace`` the distance reaches the
largest count, which has no public cap, so those units are refused with a one-line reason.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dpfreq.anonymized import release_anonymized_histogram
from dpfreq.budget import Accountant, PrivacyBudget
from dpfreq.errors import ParameterError

TOP = 4  # counts 0..TOP on a domain of 3 items


def _sorted_l1(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    return int(np.abs(np.sort(a)[::-1] - np.sort(b)[::-1]).sum())


def _neighbours(counts: tuple[int, ...], unit: str) -> list[tuple[int, ...]]:
    out = []
    for i, c in enumerate(counts):
        if unit == "event":
            others: tuple[int, ...] | range = (c - 1, c + 1)
        elif unit == "item":
            others = (0,) if c else range(1, TOP + 1)
        else:
            others = range(TOP + 1)
        out += [(*counts[:i], c2, *counts[i + 1 :]) for c2 in others
                if 0 <= c2 <= TOP and c2 != c]
    return out


@pytest.mark.parametrize(("unit", "largest"), [("event", 1), ("item", TOP),
                                               ("item_replace", TOP)])
def test_sorted_l1_sensitivity_by_enumeration(unit: str, largest: int) -> None:
    data = list(itertools.product(range(TOP + 1), repeat=3))
    dist = {_sorted_l1(a, b) for a in data for b in _neighbours(a, unit)}
    assert max(dist) == largest  # exact: grows with the (uncapped) largest count
    if unit == "event":
        assert dist == {1}


@pytest.mark.parametrize("unit", ["item", "item_replace", "device", None])
def test_other_units_are_refused_in_one_line_and_spend_nothing(unit: str | None) -> None:
    acct = Accountant(PrivacyBudget(1.0))
    with pytest.raises(ParameterError) as info:
        release_anonymized_histogram({1: 3, 2: 1}, epsilon=0.5, unit=unit, accountant=acct,
                                     rng=0)
    text = str(info.value)
    assert text.startswith("unit of release_anonymized_histogram must be")
    assert "\n" not in text
    assert (acct.spent.epsilon, acct.spent.delta) == (0.0, 0.0)


def test_event_release_states_its_relation() -> None:
    rel = release_anonymized_histogram({1: 3, 2: 1}, epsilon=1.0, unit="event", rng=0)
    assert rel.unit == "event"
    assert rel.mechanism_params["relation"] == "add or remove one event (one row)"
