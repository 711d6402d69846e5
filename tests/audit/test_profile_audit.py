"""Privacy audit of the direct profile release (``release_profile(method="direct")``).

* Exact: the ratio of the exact laws of the released noisy count-of-counts for neighbouring data
  sets is at most e^ε (``tests/unit/test_profile_direct.py`` enumerates every neighbour of small
  domains at every unit); here the extreme pairs are checked in closed form.
* Clopper–Pearson (slow): the whole public call, run on two neighbouring count vectors (one
  item's rows all removed: ``item``; replaced: ``item_replace``), many times with seeded
  generators; a one-sided lower
  bound on the privacy loss of an output event, at α = 1e-6, must not exceed the claimed ε.
* Refused calls spend nothing, and no release escapes the domain limit silently.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy.stats import beta

from dpfreq.budget import Accountant, PrivacyBudget
from dpfreq.errors import ParameterError
from dpfreq.noise import discrete_laplace_pmf
from dpfreq.profile import release_profile
from dpfreq.profile.direct import direct_layout

ALPHA = 1e-6


def _lower_bound_epsilon(hits_a: int, hits_b: int, trials: int) -> float:
    """ln(p_lo / q_hi): Clopper–Pearson bounds, each one-sided at α/2 (jointly α)."""
    p_lo = beta.ppf(ALPHA / 2, hits_a, trials - hits_a + 1) if hits_a else 0.0
    q_hi = beta.ppf(1 - ALPHA / 2, hits_b + 1, trials - hits_b) if hits_b < trials else 1.0
    if p_lo <= 0:
        return 0.0
    return math.log(p_lo / q_hi)


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0])
def test_extreme_pairs_ratio_in_closed_form(epsilon: float) -> None:
    """``item``: an item with count 2 removed moves one class t >= 1 by one (class 0 is derived
    from d, post-processing): the worst ratio of the noisy classes 1..n is exactly e^γ <= e^ε.
    ``item_replace``: the item's rows replaced (class 2 -> class 1) moves two classes: e^{2γ}."""
    grid = np.stack(np.meshgrid(np.arange(-5, 6), np.arange(-5, 8), indexing="ij"),
                    axis=-1).reshape(-1, 2)
    for unit, c, c2, factor in (("item", [0, 2], [0, 1], 1), ("item_replace", [0, 2], [1, 1], 2)):
        layout = direct_layout(unit, epsilon, 2)
        gamma = layout.gamma
        p = np.prod(discrete_laplace_pmf(grid - np.array(c), gamma), axis=1)
        q = np.prod(discrete_laplace_pmf(grid - np.array(c2), gamma), axis=1)
        worst = float(np.max(np.abs(np.log(p) - np.log(q))))
        assert worst == pytest.approx(factor * float(gamma), rel=1e-9)
        assert factor * gamma <= epsilon  # exact fractions: the calibration never exceeds ε


@pytest.mark.slow
@pytest.mark.parametrize(("unit", "without", "event", "trials"), [
    ("item", [0, 1, 1, 2], lambda y, d: y[3] >= 1, 4_000),
    ("item_replace", [1, 1, 1, 2], lambda y, d: y[3] >= 1 and y[1] <= 2, 8_000),
    ("event", [2, 1, 1, 2], lambda y, d: y[3] >= 1 and y[2] <= 2, 8_000),
])
def test_clopper_pearson_lower_bound_does_not_exceed_epsilon(unit: str, without: list[int],
                                                             event: Any, trials: int) -> None:
    """Neighbours at ``unit``: 1000 items, n = 3; one item with 3 rows removed (``item``),
    its rows replaced by one row (``item_replace``) or one of its rows removed (``event``).

    Event: the released noisy class 3 is at least its value with the item (and the class the
    item moves to at most its value with the item). Its probability ratio is e^γ = e^ε at
    ``item`` (one class moves, γ = ε) and e^{2γ} = e^ε at ``item_replace`` and ``event`` (two
    classes move, γ = ε/2), so the audit has power. Trials per side from 2,000 simulated
    audits of the event's probabilities (estimated from 1,500 releases per side): the lower
    bound lands near 0.84ε (``item``, 4,000 trials; its releases cost twice the others'),
    0.83ε (``item_replace``, 8,000) and 0.63ε (``event``, 8,000), above 0.5ε in every
    simulated audit, and an event loss of 1.3ε fails with probability ≥ 0.99. It must stay ≤ ε.
    """
    epsilon = 1.0
    with_item = np.array([3, 1, 1, 2])
    d, n = 1000, 3
    hits = []
    for k, counts in enumerate((with_item, np.array(without))):
        hit = 0
        for t in range(trials):
            rel = release_profile(counts, domain_size=d, max_count=n, epsilon=epsilon,
                                  unit=unit, rng=1_000_000 * k + t)
            hit += int(event(rel.mechanism_params["noisy_count_of_counts"], d))
        hits.append(hit)
    lower = _lower_bound_epsilon(hits[0], hits[1], trials)
    assert lower <= epsilon
    assert lower > 0.5 * epsilon  # the audit can see the loss (power)


def test_refused_calls_spend_nothing_and_huge_domains_are_refused() -> None:
    acct = Accountant(PrivacyBudget(2.0))
    for kw in ({"epsilon": 1e300}, {"epsilon": 1e-9}, {"domain_size": 2**63},
               {"max_count": 10**12}, {"unit": "device"}):
        args = {"domain_size": 10, "max_count": 5, "epsilon": 1.0, "unit": "item", **kw}
        with pytest.raises(ParameterError):
            release_profile(np.full(10, 5), accountant=acct, **args)
    assert (acct.spent.epsilon, acct.spent.delta) == (0.0, 0.0)
    with pytest.raises(ParameterError, match="domain_size"):
        release_profile(np.full(1000, 5), domain_size=2**63, max_count=5, epsilon=1,
                        unit="event")
