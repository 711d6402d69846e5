"""Locally private longitudinal frequency estimation (FutureRand, spec futurerand.md)."""

from .laws import (
    DistanceLaw,
    auto_law,
    calibrated_law,
    distance_law,
    erlingsson_c_gap,
    futurerand_law,
    rr_law,
    threshold_law,
)
from .simulate import (
    LongitudinalEstimate,
    estimate_from_sums,
    partial_sums,
    prefix_decomposition,
    simulate_longitudinal,
    synthetic_changes,
)

__all__ = [
    "DistanceLaw",
    "LongitudinalEstimate",
    "auto_law",
    "calibrated_law",
    "distance_law",
    "erlingsson_c_gap",
    "estimate_from_sums",
    "futurerand_law",
    "partial_sums",
    "prefix_decomposition",
    "rr_law",
    "simulate_longitudinal",
    "synthetic_changes",
    "threshold_law",
]
