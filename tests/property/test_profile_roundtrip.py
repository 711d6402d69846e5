"""Hypothesis invariants of the profile reconstruction (STYLE.md rule 21)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dpfreq.profile.kernel import get_kernel
from dpfreq.profile.reconstruct import minimum_bound_parameter
from dpfreq.profile.solve import fast_inversion, round_profile


@st.composite
def noise_free_case(draw: st.DrawFn) -> tuple[np.ndarray, int, int, float]:
    n = draw(st.integers(0, 60))
    eps = draw(st.floats(0.2, 6.0))
    B = minimum_bound_parameter(eps) + draw(st.integers(0, 6))
    weights = np.array(draw(st.lists(st.floats(0.0, 1.0), min_size=n + 1, max_size=n + 1)))
    if weights.sum() == 0:
        weights[draw(st.integers(0, n))] = 1.0
    return weights / weights.sum(), n, B, float(np.exp(-eps))


@settings(max_examples=150, deadline=None)
@given(noise_free_case(), st.sampled_from(["1", "2", "inf"]))
def test_fft_reconstruction_round_trips_noise_free_profiles(case, norm: str) -> None:
    f, n, B, alpha = case
    k = get_kernel(n, B, alpha)
    fpad = np.zeros(k.size)
    fpad[B : B + n + 1] = f
    r = fast_inversion(k.apply(fpad), k, norm)
    np.testing.assert_allclose(r, fpad, atol=1e-9)
    np.testing.assert_allclose(round_profile(r, B=B, max_count=n), f, atol=1e-9)


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 40), st.integers(0, 6), st.data())
def test_rounding_output_is_on_simplex(n: int, B: int, data: st.DataObject) -> None:
    P = n + 2 * B + 1
    r = np.array(data.draw(st.lists(st.floats(-3, 3), min_size=P, max_size=P)))
    r[B : B + n + 1] += (1 - r[B : B + n + 1].sum()) / (n + 1)
    out = round_profile(r, B=B, max_count=n)
    assert out.shape == (n + 1,)
    assert out.min() >= 0
    assert out.max() <= 1
    assert abs(out.sum() - 1) <= 1e-12
