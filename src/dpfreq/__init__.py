"""dpfreq: differentially private frequency statistics.

Four systems share one set of primitives (exact noise on a secure RNG, budgets, releases):
private profiles (Wu & Pagh 2024), anonymized histograms (PrivHist, Suresh 2019), reach and
frequency over time windows (Ghazi et al. 2023) and longitudinal local DP (FutureRand,
Ohrimenko–Wirth–Wu 2022).
"""

from __future__ import annotations

from dpfreq.anonymized import (
    AnonymizedHistogramRelease,
    PropertyEstimate,
    estimate_properties,
    release_anonymized_histogram,
    sorted_l1_distance,
)
from dpfreq.budget import (
    Accountant,
    PrivacyBudget,
    advanced_composition,
    group_privacy,
    sequential_composition,
)
from dpfreq.engines import get_engine
from dpfreq.errors import (
    BudgetExceededError,
    DataError,
    DPFreqError,
    DPFreqWarning,
    EngineUnavailableError,
    ParameterError,
)
from dpfreq.longitudinal import (
    LongitudinalAggregator,
    LongitudinalClient,
    LongitudinalEstimate,
    ProtocolParams,
    aggregate_reports_file,
    make_params,
    make_randomizer,
    simulate_longitudinal,
)
from dpfreq.profile import (
    ProfileRelease,
    ProfileSketch,
    reconstruct_profile,
    release_profile,
)
from dpfreq.release import ErrorStatement, Release
from dpfreq.windows import (
    WindowAnswer,
    WindowCountsRelease,
    release_window_counts,
)

__version__ = "0.1.0"

__all__ = [
    "Accountant",
    "AnonymizedHistogramRelease",
    "BudgetExceededError",
    "DPFreqError",
    "DPFreqWarning",
    "DataError",
    "EngineUnavailableError",
    "ErrorStatement",
    "LongitudinalAggregator",
    "LongitudinalClient",
    "LongitudinalEstimate",
    "ParameterError",
    "PrivacyBudget",
    "ProfileRelease",
    "ProfileSketch",
    "PropertyEstimate",
    "ProtocolParams",
    "Release",
    "WindowAnswer",
    "WindowCountsRelease",
    "__version__",
    "advanced_composition",
    "aggregate_reports_file",
    "estimate_properties",
    "get_engine",
    "group_privacy",
    "make_params",
    "make_randomizer",
    "reconstruct_profile",
    "release_anonymized_histogram",
    "release_profile",
    "release_window_counts",
    "sequential_composition",
    "simulate_longitudinal",
    "sorted_l1_distance",
]
