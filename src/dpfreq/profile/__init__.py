"""Private profiles (frequency of frequencies): the direct mechanism and Wu & Pagh's sketch.

* :func:`release_profile`: one call from data (count vector, CSV/Parquet, SQL, DuckDB, Spark)
  to a :class:`ProfileRelease` with intervals; :func:`plan_profile` predicts its accuracy.
* :class:`ProfileSketch`: the updatable ε-DP noisy histogram in memory (save/load, clipped
  release); :class:`DistributedProfileSketch`: the same on Spark.
* :func:`reconstruct_profile`: the reconstruction (Wu & Pagh 2024, Algorithms 2+3, or EM with
  ``method="mle"``) from a noisy histogram, with simulated intervals and the Theorem 1.1 ℓ1
  bound. Building blocks (the noisy profile of a histogram, reconstruction from it, the window
  parameter ``B``, unfolding a clipped histogram) stay importable from
  :mod:`dpfreq.profile.reconstruct` and :mod:`dpfreq.profile.bounds`.
* :func:`naive_profile`, :func:`lp_profile`: baselines.

Reconstruction is deterministic post-processing of the ε-DP sketch: running it many times
(other norms, confidence levels, methods) spends no further budget.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dpfreq.profile.api import release_profile
    from dpfreq.profile.baselines import lp_profile, naive_profile
    from dpfreq.profile.distributed import DistributedProfileSketch
    from dpfreq.profile.plan import ProfilePlan, plan_profile
    from dpfreq.profile.reconstruct import reconstruct_profile
    from dpfreq.profile.result import ProfileRelease
    from dpfreq.profile.sketch import ProfileSketch

# Public name -> defining module, imported on first use (PEP 562): ``dpfreq plan profile`` needs
# only the planner, not the engines, the sketch or scipy's FFT.
_EXPORTS: dict[str, str] = {
    "DistributedProfileSketch": "dpfreq.profile.distributed",
    "ProfilePlan": "dpfreq.profile.plan",
    "ProfileRelease": "dpfreq.profile.result",
    "ProfileSketch": "dpfreq.profile.sketch",
    "lp_profile": "dpfreq.profile.baselines",
    "naive_profile": "dpfreq.profile.baselines",
    "plan_profile": "dpfreq.profile.plan",
    "reconstruct_profile": "dpfreq.profile.reconstruct",
    "release_profile": "dpfreq.profile.api",
}

__all__ = [
    "DistributedProfileSketch",
    "ProfilePlan",
    "ProfileRelease",
    "ProfileSketch",
    "lp_profile",
    "naive_profile",
    "plan_profile",
    "reconstruct_profile",
    "release_profile",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dpfreq.profile' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
