"""Hypothesis invariants of the EM (method="mle") reconstruction."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dpfreq.profile.kernel import get_kernel
from dpfreq.profile.mle import em_profile, log_likelihood
from dpfreq.profile.reconstruct import minimum_bound_parameter


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 25), st.floats(0.2, 4.0), st.integers(0, 4), st.booleans(), st.data())
def test_em_monotone_and_on_simplex(n: int, eps: float, extra: int, accelerate: bool,
                                    data: st.DataObject) -> None:
    B = minimum_bound_parameter(eps) + extra
    k = get_kernel(n, B, float(np.exp(-eps)))
    counts = np.array(data.draw(st.lists(st.integers(0, 50), min_size=k.size,
                                         max_size=k.size)), dtype=float)
    if counts.sum() == 0:
        counts[B] = 1.0
    f = counts / counts.sum()
    start = np.full(n + 1, 1.0 / (n + 1))
    record: list[float] = [log_likelihood(start, f, k)]
    res = em_profile(f, k, start=start, max_iter=25, tol=0.0, accelerate=accelerate,
                     record=record)
    assert res.profile.min() >= 0
    assert abs(res.profile.sum() - 1) <= 1e-12
    assert np.diff(record).min() >= -1e-10 * max(1.0, abs(record[-1]))
