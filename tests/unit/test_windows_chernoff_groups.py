"""The grouped Chernoff bound of consistent prefixes: never below the weight-by-weight log-mgf
(each group stands for its largest member), and every weight counted once."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpfreq.windows.strategy import _weight_groups, _weighted_log_mgf
from dpfreq.windows.tree import prefix_weights


@pytest.mark.parametrize(("domain", "branching"), [(1, 2), (8, 2), (64, 2), (256, 2), (81, 3),
                                                   (64, 8)])
def test_groups_count_every_weight_and_keep_the_largest(domain: int, branching: int) -> None:
    w = np.abs(prefix_weights(domain, branching))
    values, counts = _weight_groups(domain, branching)
    assert np.array_equal(counts.sum(axis=1), np.full(w.shape[0], w.shape[1]))
    assert np.array_equal(values.max(axis=1), w.max(axis=1))
    for x in range(w.shape[0]):  # each weight lies at or below its group's value, within 1e-12
        used = values[x, counts[x] > 0]
        assert np.all(np.isin(np.round(w[x], 12), np.round(used, 12)))


@pytest.mark.parametrize(("domain", "branching", "gamma"),
                         [(64, 2, (1, 3)), (256, 2, (1, 1)), (256, 2, (5, 2)), (81, 3, (1, 2))])
def test_grouped_log_mgf_is_never_below_the_exact_one(domain: int, branching: int,
                                                      gamma: tuple[int, int]) -> None:
    lam, log_m = _weighted_log_mgf(domain, branching, *gamma)
    w = np.abs(prefix_weights(domain, branching))
    alpha = math.exp(-gamma[0] / gamma[1])
    base = 2 * math.log1p(-alpha)
    for j in range(lam.shape[1]):
        u = w * lam[:, j:j + 1]
        exact = (base - np.log1p(-alpha * np.exp(u)) - np.log1p(-alpha * np.exp(-u))).sum(axis=1)
        assert np.all(log_m[:, j] >= exact)
