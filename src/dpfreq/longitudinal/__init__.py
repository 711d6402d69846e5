"""Locally private longitudinal frequency estimation (FutureRand, spec futurerand.md)."""

from .client import LongitudinalClient, ProtocolParams, make_params
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
from .server import LongitudinalAggregator, aggregate_reports_file
from .simulate import (
    LongitudinalEstimate,
    estimate_from_sums,
    partial_sums,
    prefix_decomposition,
    simulate_longitudinal,
    synthetic_change_times,
    synthetic_changes,
)

__all__ = [
    "DistanceLaw",
    "LongitudinalAggregator",
    "LongitudinalClient",
    "LongitudinalEstimate",
    "ProtocolParams",
    "aggregate_reports_file",
    "auto_law",
    "calibrated_law",
    "distance_law",
    "erlingsson_c_gap",
    "estimate_from_sums",
    "futurerand_law",
    "make_params",
    "partial_sums",
    "prefix_decomposition",
    "rr_law",
    "simulate_longitudinal",
    "synthetic_change_times",
    "synthetic_changes",
    "threshold_law",
]
