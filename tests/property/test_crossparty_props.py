"""Hypothesis invariants of the cross-party post-processing (deterministic, no noise)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from dpfreq.crossparty.consistency import consistent_kplus, star_projection
from dpfreq.crossparty.frequency import compound_inverse
from dpfreq.crossparty.reach import users_from_empty

values = st.floats(-1e6, 1e7, allow_nan=False)
weights = st.floats(1e-6, 1e3, allow_nan=False)


@settings(max_examples=50, deadline=None)
@given(center=values, leaves=arrays(np.float64, st.integers(1, 6), elements=values),
       w_center=weights, data=st.data())
def test_star_projection_is_the_weighted_projection(center: float, leaves: np.ndarray,
                                                    w_center: float,
                                                    data: st.DataObject) -> None:
    """Feasible, idempotent, and no farther (in the weighted norm) from any feasible point
    than the input is — the characterization of the projection onto a convex set."""
    w = data.draw(arrays(np.float64, leaves.size, elements=weights))
    c, out = star_projection(center, leaves, w_center, w)
    assert np.all(out <= c + 1e-9 * (1 + abs(c)))
    c2, out2 = star_projection(c, out, w_center, w)
    assert math.isclose(c2, c, rel_tol=1e-9, abs_tol=1e-6)
    np.testing.assert_allclose(out2, out, rtol=1e-9, atol=1e-6)
    y_leaves = data.draw(arrays(np.float64, leaves.size, elements=values))
    y_center = max(data.draw(values), float(y_leaves.max()))

    def dist(a: float, b: np.ndarray) -> float:
        return w_center * (a - y_center) ** 2 + float((w * (b - y_leaves) ** 2).sum())

    assert dist(c, out) <= dist(center, leaves) * (1 + 1e-9) + 1e-6


@settings(max_examples=50, deadline=None)
@given(k=st.integers(1, 5), parties=st.integers(1, 5), data=st.data())
def test_consistent_kplus_invariants(k: int, parties: int, data: st.DataObject) -> None:
    union = data.draw(arrays(np.float64, k, elements=values))
    party = data.draw(arrays(np.float64, (parties, k), elements=values))
    sd = data.draw(arrays(np.float64, k, elements=st.floats(0.1, 1e4)))
    psd = data.draw(arrays(np.float64, (parties, k), elements=st.floats(0.1, 1e4)))
    u, p = consistent_kplus(union, sd, party, psd)
    assert np.all(u >= 0)
    assert np.all(p >= 0)
    assert np.all(np.diff(u) <= 0)
    assert np.all(np.diff(p, axis=1) <= 0)
    assert np.all(u[None, :] >= p - 1e-6 * (1 + np.abs(p)))
    assert u[0] <= p[:, 0].sum() * (1 + 1e-12) + 1e-6
    # consistent inputs are left as they are
    u2, p2 = consistent_kplus(u, sd, p, psd)
    np.testing.assert_allclose(u2, u, rtol=1e-9, atol=1e-6)
    np.testing.assert_allclose(p2, p, rtol=1e-9, atol=1e-6)


@settings(max_examples=50, deadline=None)
@given(lam=st.floats(0.01, 4.0), g=arrays(np.float64, 4, elements=st.floats(0.01, 1.0)))
def test_compound_inverse_round_trips(lam: float, g: np.ndarray) -> None:
    g = g / g.sum()
    p = np.zeros(4)
    p[0] = math.exp(-lam)
    for t in range(1, 4):
        j = np.arange(1, t + 1)
        p[t] = lam / t * float((j * g[j - 1] * p[t - j]).sum())
    est, _ = compound_inverse(p)
    np.testing.assert_allclose(est, g[:3], rtol=1e-7, atol=1e-12)


@given(R=st.integers(2, 10**7), load=st.floats(0.0, 50.0))
def test_linear_counting_is_monotone_and_inverts(R: int, load: float) -> None:
    """Up to 50 users per register (beyond, no register is empty in practice)."""
    n = int(load * R)
    empty = R * (1 - 1 / R) ** n
    assert math.isclose(users_from_empty(empty, R), n, rel_tol=1e-6, abs_tol=1e-6)
    assert users_from_empty(empty * 0.999, R) >= users_from_empty(empty, R)
