"""All-windows releases over long horizons answer without listing their T(T+1)/2 windows."""

from __future__ import annotations

import tracemalloc

import numpy as np

from dpfreq import release_window_counts


def test_all_windows_at_two_to_the_sixteen_periods_stays_small() -> None:
    """T = 2^16 has 2.1e9 windows (17 GB of indices if listed); the band falls back to the
    union bound instead, so the first ask stays within a few hundred MB."""
    horizon = 1 << 16
    gen = np.random.default_rng(3)
    events = (gen.integers(0, 1000, 5000), gen.integers(0, horizon, 5000))
    rel = release_window_counts(events, horizon=horizon, epsilon=1.0, unit="event",
                                k_values=[1], windows=["all"], rng=1)
    t = gen.integers(1, horizon + 1, size=(2, 200))
    tracemalloc.start()
    try:
        ans = rel.window(t.min(axis=0), t.max(axis=0), 1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert np.all(np.isfinite(np.asarray(ans.estimate, dtype=np.float64)))
    assert peak < 500 * 2**20
