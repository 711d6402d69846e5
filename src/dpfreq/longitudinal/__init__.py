"""Locally private longitudinal counts (FutureRand; Ohrimenko, Wirth and Wu 2022).

Devices run :class:`LongitudinalClient` (one report per interval of their order, randomized on
the device by the randomizer the ``method`` of :func:`make_params` names); the server runs
:class:`LongitudinalAggregator` (incremental) or :func:`aggregate_reports_file` (a reports file
or table, validated and summed by an engine), or :func:`estimate_from_report_sums` on running
totals kept elsewhere; :func:`simulate_longitudinal` runs the whole protocol vectorized for many
devices, and :func:`plan_longitudinal` predicts the estimate's error from public parameters.
Every law a device samples is stated exactly (``DistanceLaw.sampled_pmf`` in ``laws``) and
certified on what is sampled. The building blocks (the individual laws and
:func:`~dpfreq.longitudinal.randomizers.make_randomizer`, the dyadic decomposition, the
simulation helpers) live in the submodules ``laws``, ``randomizers``,
``dyadic``, ``params`` and ``simulate``; ``keyed`` states how every draw of a device is a keyed
function of its secret (replays send identical reports) and ``enrolment`` reads the enrolled
population the offline aggregation takes.

Privacy: ε-local DP per device, device level (neighbouring = any two sequences of the device
with at most ``max_changes`` changes each); estimates are post-processing.
"""

from .bundle import device_bundle
from .client import LongitudinalClient
from .params import ProtocolParams, make_params
from .plan import LongitudinalPlan, plan_longitudinal
from .result import LongitudinalEstimate
from .server import LongitudinalAggregator, aggregate_reports_file, estimate_from_report_sums
from .simulate import simulate_longitudinal

__all__ = [
    "LongitudinalAggregator",
    "LongitudinalClient",
    "LongitudinalEstimate",
    "LongitudinalPlan",
    "ProtocolParams",
    "aggregate_reports_file",
    "device_bundle",
    "estimate_from_report_sums",
    "make_params",
    "plan_longitudinal",
    "simulate_longitudinal",
]
