"""Private profiles (frequency of frequencies) from ε-DP noisy histograms (Wu & Pagh, ICML 2024).

* :func:`release_profile`: one call from data (count vector, CSV/Parquet, SQL, DuckDB, Spark)
  to a :class:`ProfileRelease` with its high-probability error bound.
* :func:`reconstruct_profile` / :func:`reconstruct_profile_from_counts`: the reconstruction
  (Algorithms 2+3, or EM with ``method="mle"``) from a noisy histogram or its noisy profile.
* :class:`ProfileSketch`: the updatable ε-DP noisy histogram (save/load, clipped release).
* :func:`naive_profile`, :func:`lp_profile`: baselines (spec §10).

Spec: ``profile_reconstruction.md``. Reconstruction is deterministic post-processing of the
ε-DP sketch: running it many times (other norms, η, methods) spends no further budget.
"""

from __future__ import annotations

from dpfreq.profile.api import release_profile
from dpfreq.profile.baselines import lp_profile, naive_profile
from dpfreq.profile.plan import ProfilePlan, plan_profile
from dpfreq.profile.reconstruct import (
    bound_parameter,
    default_bound_parameter,
    minimum_bound_parameter,
    noisy_profile_counts,
    reconstruct_profile,
    reconstruct_profile_from_counts,
    unfold_clipped,
)
from dpfreq.profile.result import ProfileRelease
from dpfreq.profile.sketch import ProfileSketch

__all__ = [
    "ProfilePlan",
    "ProfileRelease",
    "ProfileSketch",
    "bound_parameter",
    "default_bound_parameter",
    "lp_profile",
    "minimum_bound_parameter",
    "naive_profile",
    "noisy_profile_counts",
    "plan_profile",
    "reconstruct_profile",
    "reconstruct_profile_from_counts",
    "release_profile",
    "unfold_clipped",
]
