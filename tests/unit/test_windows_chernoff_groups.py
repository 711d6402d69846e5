"""The grouped Chernoff bound of consistent prefixes: never below the weight-by-weight log-mgf
(each group stands for its largest member), and every weight counted once."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpfreq.windows.laws.weighted import weight_groups, weighted_log_mgf
from dpfreq.windows.layouts.weights import layout_weights

LAYOUTS = [("heap", 1), ("heap", 8), ("heap", 64), ("heap", 256), ("layer", 81, 3, True),
           ("layer", 60, 8, False)]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_groups_count_every_weight_and_keep_the_largest(layout: tuple) -> None:
    w = np.abs(layout_weights(layout))
    values, counts = weight_groups(layout)
    assert np.array_equal(counts.sum(axis=1), np.full(w.shape[0], w.shape[1]))
    assert np.array_equal(values.max(axis=1), w.max(axis=1))
    for x in range(w.shape[0]):  # each weight lies at or below its group's value, within 1e-12
        used = values[x, counts[x] > 0]
        assert np.all(np.isin(np.round(w[x], 12), np.round(used, 12)))


@pytest.mark.parametrize(("layout", "gamma"),
                         [(("heap", 64), (1, 3)), (("heap", 256), (1, 1)), (("heap", 256), (5, 2)),
                          (("layer", 81, 3, False), (1, 2))])
def test_grouped_log_mgf_is_never_below_the_exact_one(layout: tuple, gamma: tuple[int, int]
                                                      ) -> None:
    lam, log_m = weighted_log_mgf(layout, *gamma)
    w = np.abs(layout_weights(layout))
    alpha = math.exp(-gamma[0] / gamma[1])
    base = 2 * math.log1p(-alpha)
    for j in range(lam.shape[1]):
        u = w * lam[:, j:j + 1]
        exact = (base - np.log1p(-alpha * np.exp(u)) - np.log1p(-alpha * np.exp(-u))).sum(axis=1)
        assert np.all(log_m[:, j] >= exact)
