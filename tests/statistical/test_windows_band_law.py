"""The simulated band of the consistent trees against the real noise path.

:func:`dpfreq.windows.structures.bands.band_multiplier` draws the family's noise vector from the
exact node law through the consistency map; the release draws its noise through the keyed structure
(:meth:`Structure.attach`, :meth:`Structure.noise`). If the two laws are the same, the real
maximum ``max_w |N_w| / h_w`` of a fresh key (``h_w``: the window's own half-width at ``β``)
and the ``N`` simulated maxima are i.i.d., and the number of ``M`` fresh keys whose maximum is
at most the ``k``-th simulated order statistic (``k = ⌈(N + 1)(1 − β)⌉``) is exactly
Beta-Binomial(``M``, ``k``, ``N + 1 − k``) (continuous maxima: the weights are not integers).
Two-sided test at α = 1e-6 per case: at N = M = 3,000 it fails when the simulated law's band
level is off by about 4 points or more (measured: shrinking the band by 5 % moved the real
level 4 points and gave p = 1.3e-6).

The trees without consistency (blocks, single, product trees) have integer noises, so their
maxima tie: then the number of fresh keys whose maximum is at most the order statistic is
stochastically larger than that Beta-Binomial, and the number strictly below it stochastically
smaller. The test checks the first count's lower tail and the second's upper tail (measured,
blocks and tree2d: a band 10 % narrower or wider gives p < 1e-8, 5 % gives p < 1e-4).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpfreq.windows.structures.bands import band_multiplier
from dpfreq.windows.structures.base import build_structure

pytestmark = pytest.mark.statistical

ALPHA = 1e-6
DRAWS = 3000
KEYS = 3000
BETA = 0.1

CASES = [
    ("cumulative", "tree", 48, "event", {}),
    ("all", "per_start", 10, "item", {}),
    ("all", "compressed", 14, "item", {"group_size": 3}),  # per-start trees on groups of 3
    ("cumulative", "tree", 24, "event", {"rho": 0.5, "noise_kind": "gaussian"}),
]


@pytest.mark.parametrize(("family", "method", "horizon", "level", "extra"), CASES)
def test_simulated_maxima_have_the_law_of_the_real_noise(seed, family, method, horizon,
                                                       level, extra):
    s = build_structure(family, method, 1, horizon, level, Fraction(1), 0.0, **extra)
    assert s.consistent
    t1, t2 = s.family_queries()
    scale = s.halfwidth(t1, t2, BETA)
    c = band_multiplier(s, BETA, seed.to_bytes(8, "little") * 4, ("sim",), draws=DRAWS)
    assert c is not None
    below = 0
    for i in range(KEYS):
        s.attach(seed.to_bytes(8, "little") + i.to_bytes(24, "little"), (family, 1))
        below += bool(np.max(np.abs(s.noise(t1, t2)) / scale) <= c)
    k = math.ceil((DRAWS + 1) * (1 - BETA))
    law = stats.betabinom(KEYS, k, DRAWS + 1 - k)
    assert law.cdf(below) > ALPHA / 2
    assert law.sf(below - 1) > ALPHA / 2


COVER_CASES = [
    ("rolling", "blocks", 30, "event", {"width": 7}),
    ("all", "tree2d", 10, "event", {}),
    ("rolling", "single", 20, "event", {"width": 5, "rho": 0.5, "noise_kind": "gaussian"}),
]


@pytest.mark.parametrize(("family", "method", "horizon", "level", "extra"), COVER_CASES)
def test_simulated_maxima_of_cover_sums_have_the_law_of_the_real_noise(seed, family, method,
                                                                     horizon, level, extra):
    s = build_structure(family, method, 1, horizon, level, Fraction(1), 0.0, **extra)
    assert not s.consistent
    t1, t2 = s.family_queries()
    scale = np.maximum(s.halfwidth(t1, t2, BETA), 1.0)
    c = band_multiplier(s, BETA, seed.to_bytes(8, "little") * 4, ("sim",), draws=DRAWS)
    assert c is not None
    at_most = below = 0
    for i in range(KEYS):
        s.attach(seed.to_bytes(8, "little") + i.to_bytes(24, "little"), (family, 1))
        real = float(np.max(np.abs(s.noise(t1, t2)) / scale))
        at_most += real <= c
        below += real < c
    k = math.ceil((DRAWS + 1) * (1 - BETA))
    law = stats.betabinom(KEYS, k, DRAWS + 1 - k)
    assert law.cdf(at_most) > ALPHA / 2
    assert law.sf(below - 1) > ALPHA / 2
