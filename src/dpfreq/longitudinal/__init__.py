"""Locally private longitudinal frequency estimation (FutureRand, spec futurerand.md).

Devices run :class:`LongitudinalClient` (one report per multiple of ``2^h``, randomized on the
device by one of the :mod:`~dpfreq.longitudinal.randomizers`); the server runs
:class:`LongitudinalAggregator` or :func:`aggregate_reports_file`;
:func:`simulate_longitudinal` runs the whole protocol vectorized for many users.

Privacy: ε-local DP per device, user-level (neighbouring = any two sequences of the device with
at most ``k`` changes each); estimates are post-processing.
"""

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
from .randomizers import ErlingssonRR, FutureRand, IndependentRR, Randomizer, make_randomizer
from .server import LongitudinalAggregator, aggregate_reports_file
from .simulate import (
    LongitudinalEstimate,
    estimate_from_sums,
    fair_coin_sums,
    freeze_after_k_changes,
    partial_sums,
    prefix_decomposition,
    simulate_longitudinal,
    synthetic_change_times,
    synthetic_changes,
)

__all__ = [
    "DistanceLaw",
    "ErlingssonRR",
    "FutureRand",
    "IndependentRR",
    "LongitudinalAggregator",
    "LongitudinalClient",
    "LongitudinalEstimate",
    "ProtocolParams",
    "Randomizer",
    "aggregate_reports_file",
    "auto_law",
    "calibrated_law",
    "distance_law",
    "erlingsson_c_gap",
    "estimate_from_sums",
    "fair_coin_sums",
    "freeze_after_k_changes",
    "futurerand_law",
    "make_params",
    "make_randomizer",
    "partial_sums",
    "prefix_decomposition",
    "rr_law",
    "simulate_longitudinal",
    "synthetic_change_times",
    "synthetic_changes",
    "threshold_law",
]
