"""Differentially private anonymized histograms (spec ``privhist.md``, issue 4).

:func:`release_anonymized_histogram` releases the multiset of counts of a dataset (labels
dropped) and a private total under pure ε-DP: PRIVHIST (Suresh, NeurIPS 2019) in ``Õ(sqrt n)``
on the prevalence form, the Hay et al. sorted-count baseline, or a data-independent automatic
choice between them.
"""

from dpfreq.anonymized.hay import HAY_MAX_LENGTH
from dpfreq.anonymized.privhist import METHODS, release_anonymized_histogram
from dpfreq.anonymized.result import AnonymizedHistogramRelease

__all__ = ["HAY_MAX_LENGTH", "METHODS", "AnonymizedHistogramRelease",
           "release_anonymized_histogram"]
