"""dpfreq: differentially private frequency statistics.

Four systems share one set of primitives (exact noise on a secure RNG, budgets, releases):
private profiles (Wu & Pagh 2024), anonymized histograms (PrivHist, Suresh 2019), reach and
frequency over time windows (Ghazi et al. 2023) and longitudinal local DP (FutureRand,
Ohrimenko–Wirth–Wu 2022).
"""

from __future__ import annotations

from dpfreq.budget import (
    Accountant,
    PrivacyBudget,
    advanced_composition,
    group_privacy,
    sequential_composition,
)
from dpfreq.errors import (
    BudgetExceededError,
    DataError,
    DPFreqError,
    DPFreqWarning,
    EngineUnavailableError,
    ParameterError,
)
from dpfreq.release import ErrorStatement, Release

__version__ = "0.1.0"

__all__ = [
    "Accountant",
    "BudgetExceededError",
    "DPFreqError",
    "DPFreqWarning",
    "DataError",
    "EngineUnavailableError",
    "ErrorStatement",
    "ParameterError",
    "PrivacyBudget",
    "Release",
    "__version__",
    "advanced_composition",
    "group_privacy",
    "sequential_composition",
]
