"""Property tests of dpfreq.longitudinal (hypothesis)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dpfreq.longitudinal.dyadic import partial_sums, prefix_decomposition
from dpfreq.longitudinal.laws import distance_law


@settings(max_examples=40, deadline=None)
@given(
    mode=st.sampled_from(["rr", "futurerand", "calibrated", "threshold", "auto"]),
    k=st.integers(1, 300),
    eps=st.floats(0.05, 5.0),
)
def test_certificate_and_gap(mode: str, k: int, eps: float) -> None:
    law = distance_law(mode, k, eps)
    assert law.certificate <= eps
    assert law.c_gap > 0
    assert abs(law.distance_pmf.sum() - 1) < 1e-9


@settings(max_examples=40, deadline=None)
@given(bits=st.lists(st.integers(0, 1), min_size=16, max_size=16))
def test_prefix_reconstruction(bits: list[int]) -> None:
    x = np.array([bits])
    s = {h: partial_sums(x, h)[0] for h in range(5)}
    for t in range(1, 17):
        assert sum(int(s[h][j - 1]) for h, j in prefix_decomposition(t)) == bits[t - 1]
