"""Private profiles (frequency of frequencies): the direct mechanism and Wu & Pagh's sketch.

* :func:`release_profile`: one call from data (count vector, CSV/Parquet, SQL, DuckDB, Spark)
  to a :class:`ProfileRelease` with intervals; :func:`plan_profile` predicts its accuracy.
* :class:`ProfileSketch`: the updatable ε-DP noisy histogram in memory (save/load, clipped
  release); :class:`DistributedProfileSketch`: the same on Spark.
* :func:`reconstruct_profile` / :func:`reconstruct_profile_from_counts`: the reconstruction
  (Wu & Pagh 2024, Algorithms 2+3, or EM with ``method="mle"``) from a noisy histogram or its
  noisy profile, with simulated intervals and the Theorem 1.1 ℓ1 bound.
* :func:`naive_profile`, :func:`lp_profile`: baselines.

Reconstruction is deterministic post-processing of the ε-DP sketch: running it many times
(other norms, confidence levels, methods) spends no further budget.
"""

from __future__ import annotations

from dpfreq.profile.api import release_profile
from dpfreq.profile.baselines import lp_profile, naive_profile
from dpfreq.profile.distributed import DistributedProfileSketch
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
    "DistributedProfileSketch",
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
