"""Node noise as a keyed function: the exact keyed discrete Laplace and Gaussian sources
(:mod:`~dpfreq.windows.noise.keyed`), their compiled kernels (:mod:`~dpfreq.windows.noise.kernel`),
the noise trees (:mod:`~dpfreq.windows.noise.trees`) and the dominance sums of the product trees
(:mod:`~dpfreq.windows.noise.dominance`)."""

from dpfreq.windows.noise.keyed import KeyedDiscreteGaussian, KeyedDiscreteLaplace

__all__ = ["KeyedDiscreteGaussian", "KeyedDiscreteLaplace"]
