"""Locally private longitudinal counts (FutureRand; Ohrimenko, Wirth and Wu 2022).

Devices run :class:`LongitudinalClient` (one report per interval of their order, randomized on
the device by one of the :mod:`~dpfreq.longitudinal.randomizers`); the server runs
:class:`LongitudinalAggregator` (incremental) or :func:`aggregate_reports_file` (a reports file
or table, validated and summed by an engine); :func:`simulate_longitudinal` runs the whole
protocol vectorized for many devices. Every law a device samples is stated exactly
(:attr:`DistanceLaw.sampled_pmf`) and certified on what is sampled.

Privacy: ε-local DP per device, device level (neighbouring = any two sequences of the device
with at most ``max_changes`` changes each); estimates are post-processing.
"""

from .client import LongitudinalClient, ProtocolParams, make_params
from .dyadic import estimate_from_sums, partial_sums, prefix_decomposition
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
from .result import LongitudinalEstimate
from .server import (
    LongitudinalAggregator,
    aggregate_reports_file,
    estimate_from_report_sums,
)
from .simulate import (
    fair_coin_sums,
    freeze_after_k_changes,
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
    "estimate_from_report_sums",
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
