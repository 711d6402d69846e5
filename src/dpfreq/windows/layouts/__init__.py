"""Where noise goes: the dyadic node layout and its covers (:mod:`~dpfreq.windows.layouts.dyadic`),
the layered B-ary blocks of the counters (:mod:`~dpfreq.windows.layouts.layered`), the square-root
factorization (:mod:`~dpfreq.windows.layouts.factorization`) and the exact dyadic least-squares
weights (:mod:`~dpfreq.windows.layouts.weights`, :mod:`~dpfreq.windows.layouts.least_squares`).
Public parameters only: nothing here sees data or noise."""

from dpfreq.windows.layouts.weights import (
    Layout,
    consistent_estimates,
    layout_weights,
    row_squares,
)

__all__ = ["Layout", "consistent_estimates", "layout_weights", "row_squares"]
