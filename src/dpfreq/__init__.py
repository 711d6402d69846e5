"""dpfreq: differentially private frequency statistics.

Four systems share one set of primitives (exact noise on a secure RNG, budgets, releases):
private profiles (Wu & Pagh 2024, and the direct count-of-counts mechanism), anonymized
histograms (PrivHist, Suresh 2019), reach and frequency over time windows (Ghazi et al. 2023) and
longitudinal local DP (FutureRand, Ohrimenko–Wirth–Wu 2022); reach and frequency across
publishers merge each party's private sketch (``dpfreq.crossparty``); reach streams release the
windows' cumulative counts every period from one budget (``dpfreq.stream``, continual release).

The public names below are imported on first use (PEP 562), so ``import dpfreq`` is light and a
program that uses one system never imports the others.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines (or re-exports) it
_EXPORTS: dict[str, str] = {
    "Accountant": "dpfreq.budget",
    "AnonymizedHistogramRelease": "dpfreq.anonymized",
    "AnonymizedPlan": "dpfreq.anonymized",
    "BudgetAccountant": "dpfreq.budget",
    "BudgetExceededError": "dpfreq.errors",
    "CrossPartyParams": "dpfreq.crossparty",
    "CrossPartyRelease": "dpfreq.crossparty",
    "DPFreqError": "dpfreq.errors",
    "DPFreqWarning": "dpfreq.errors",
    "DataError": "dpfreq.errors",
    "DistributedProfileSketch": "dpfreq.profile",
    "EngineUnavailableError": "dpfreq.errors",
    "ErrorStatement": "dpfreq.release",
    "Ledger": "dpfreq.ledger",
    "LongitudinalAggregator": "dpfreq.longitudinal",
    "LongitudinalClient": "dpfreq.longitudinal",
    "LongitudinalEstimate": "dpfreq.longitudinal",
    "LongitudinalPlan": "dpfreq.longitudinal",
    "ParameterError": "dpfreq.errors",
    "PartySketch": "dpfreq.crossparty",
    "PrivacyBudget": "dpfreq.budget",
    "PrivacyWarning": "dpfreq.errors",
    "ProfilePlan": "dpfreq.profile",
    "ProfileRelease": "dpfreq.profile",
    "ProfileSketch": "dpfreq.profile",
    "PropertyEstimate": "dpfreq.anonymized",
    "ProtocolParams": "dpfreq.longitudinal",
    "ReachStream": "dpfreq.stream",
    "Release": "dpfreq.release",
    "StreamForecast": "dpfreq.stream",
    "StreamRelease": "dpfreq.stream",
    "WindowAnswer": "dpfreq.windows",
    "WindowCountsPlan": "dpfreq.windows",
    "WindowCountsRelease": "dpfreq.windows",
    "advanced_composition": "dpfreq.budget",
    "aggregate_reports_file": "dpfreq.longitudinal",
    "build_sketch": "dpfreq.crossparty",
    "estimate_from_report_sums": "dpfreq.longitudinal",
    "estimate_properties": "dpfreq.anonymized",
    "get_engine": "dpfreq.engines",
    "group_privacy": "dpfreq.budget",
    "key_fingerprint": "dpfreq.crossparty",
    "make_params": "dpfreq.longitudinal",
    "merge_sketches": "dpfreq.crossparty",
    "new_hash_key": "dpfreq.crossparty",
    "plan_anonymized": "dpfreq.anonymized",
    "plan_longitudinal": "dpfreq.longitudinal",
    "plan_profile": "dpfreq.profile",
    "plan_reach_stream": "dpfreq.stream",
    "plan_window_counts": "dpfreq.windows",
    "reconstruct_profile": "dpfreq.profile",
    "release_anonymized_histogram": "dpfreq.anonymized",
    "release_profile": "dpfreq.profile",
    "release_window_counts": "dpfreq.windows",
    "sequential_composition": "dpfreq.budget",
    "simulate_longitudinal": "dpfreq.longitudinal",
    "sorted_l1_distance": "dpfreq.anonymized",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dpfreq' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public API only (``dir(dpfreq)``): the names of ``__all__``."""
    return list(__all__)
