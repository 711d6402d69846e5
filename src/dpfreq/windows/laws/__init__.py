"""Exact laws from public parameters: the node laws as values (:mod:`~dpfreq.windows.laws.node`),
the laws of sums of node noises (:mod:`~dpfreq.windows.laws.sums`), of least-squares
combinations (:mod:`~dpfreq.windows.laws.weighted`) and the half-widths of answers
(:mod:`~dpfreq.windows.laws.answers`), each a function of the law and the cover."""

from dpfreq.windows.laws.answers import consistent_halfwidth, cover_halfwidth
from dpfreq.windows.laws.node import DiscreteGaussian, DiscreteLaplace, NodeLaw

__all__ = ["DiscreteGaussian", "DiscreteLaplace", "NodeLaw", "consistent_halfwidth",
           "cover_halfwidth"]
