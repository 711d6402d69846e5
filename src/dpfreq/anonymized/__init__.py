"""Differentially private anonymized histograms.

:func:`release_anonymized_histogram` releases the multiset of counts of a dataset (items
dropped) and a private total under pure ε-DP: PRIVHIST (Suresh, NeurIPS 2019) in ``Õ(sqrt n)``
on the prevalence form, the Hay et al. sorted-count baseline, or a data-independent automatic
choice between them. Symmetric properties (entropy, support size, unseen species, ...) are
plug-in estimates on a release (post-processing, no further budget); distances score releases
in sorted ℓ1 / ℓ2² without expanding them. :func:`plan_anonymized` predicts the error
statement from public parameters before any data is touched. Building blocks (the method
names ``METHODS`` in ``api``, ``HAY_MAX_LENGTH`` in ``hay``, ``PROPERTY_NAMES`` and
``lipschitz_constant`` in ``properties``) stay in their modules.
"""

from dpfreq.anonymized.api import release_anonymized_histogram
from dpfreq.anonymized.distance import sorted_l1_distance, sorted_l2_squared_distance
from dpfreq.anonymized.plan import AnonymizedPlan, plan_anonymized
from dpfreq.anonymized.properties import (
    PropertyEstimate,
    estimate_distance_to_uniformity,
    estimate_entropy,
    estimate_power_sum,
    estimate_properties,
    estimate_renyi_entropy,
    estimate_support_coverage,
    estimate_support_size,
    estimate_unseen_species,
)
from dpfreq.anonymized.result import AnonymizedHistogramRelease

__all__ = [
    "AnonymizedHistogramRelease",
    "AnonymizedPlan",
    "PropertyEstimate",
    "estimate_distance_to_uniformity",
    "estimate_entropy",
    "estimate_power_sum",
    "estimate_properties",
    "estimate_renyi_entropy",
    "estimate_support_coverage",
    "estimate_support_size",
    "estimate_unseen_species",
    "plan_anonymized",
    "release_anonymized_histogram",
    "sorted_l1_distance",
    "sorted_l2_squared_distance",
]
