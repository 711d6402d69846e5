"""The exact law of one answer's noise: the half-width of its interval from public parameters.

An answer's noise is a sum of i.i.d. node noises over its cover, or (least-squares estimates) a
fixed linear combination of them; both laws are functions of the node law
(:mod:`dpfreq.windows.laws.node`) and the cover (its size, or the layout's weights) only.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from dpfreq.windows.laws.node import DiscreteGaussian, NodeLaw
from dpfreq.windows.laws.sums import TAIL, weighted_quantile, weighted_sum_law
from dpfreq.windows.laws.weighted import consistent_laws, weighted_log_mgf
from dpfreq.windows.layouts.weights import Layout, layout_weights, row_squares

__all__ = ["consistent_halfwidth", "cover_halfwidth"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


def cover_halfwidth(law: NodeLaw, nodes: IntArray, beta: float, exact: bool = True
                    ) -> FloatArray:
    """``x`` with ``Pr[|noise| > x] <= β`` for answers that sum ``nodes`` i.i.d. draws of
    ``law``.

    ``x`` is the certified quantile of the exact law of the sum (the convolution of the node
    pmf, :func:`dpfreq.windows.laws.sums.sum_quantile`). ``exact=False`` gives the tail bounds
    alone (never smaller than the exact value; cheap, used by
    :meth:`~dpfreq.windows.WindowCountsPlan.epsilon_for` to bracket its search).
    """
    if not exact:
        out_t = np.zeros(nodes.shape, dtype=np.float64)
        for m in np.unique(nodes).tolist():
            if m > 0:
                out_t[nodes == m] = law.tail_radius(m, beta)
        return out_t
    return law.sum_quantile(nodes, beta)


def consistent_halfwidth(law: NodeLaw, layout: Layout, prefix: IntArray, beta: float,
                         exact: bool = True) -> FloatArray:
    """:func:`cover_halfwidth` of least-squares estimates of the prefixes ``prefix`` of
    ``layout``.

    A consistent estimate is a linear combination ``Σ a_v Z_v`` with non-integer weights: the
    certified grid convolution of :func:`dpfreq.windows.laws.sums.weighted_sum_law` (computed
    once per prefix and law), whose support radius comes from the tail bound — a Chernoff bound
    for discrete Laplace (the moment generating function is the product of ``M(λ a_v)``), the
    σ-sub-Gaussian tail for discrete Gaussian (Canonne–Kamath–Steinke 2020),
    ``x = √(2 σ² Σa² ln(2/β))``. The smaller of the two valid values is returned.
    """
    xs, inv = np.unique(prefix, return_inverse=True)
    bound, radius = _tail_bounds(law, layout, beta)
    vals = bound[xs]
    if not exact:
        return vals[inv].reshape(np.shape(inv))
    terms = law.terms()
    laws = consistent_laws(layout, terms["gamma"], terms["sigma2"])
    weights = layout_weights(layout)
    for i, x in enumerate(xs.tolist()):
        if x not in laws:
            laws[x] = weighted_sum_law(weights[x], float(radius[x]), **terms)
        one = laws[x]
        q = weighted_quantile(one, beta) if one is not None else None
        if q is not None:
            vals[i] = min(vals[i], q)
    out: FloatArray = vals[inv].reshape(np.shape(inv))
    return out


def _tail_bounds(law: NodeLaw, layout: Layout, beta: float) -> tuple[FloatArray, FloatArray]:
    """Per prefix: the tail bound at ``β`` and the support radius at :data:`TAIL`."""
    if isinstance(law, DiscreteGaussian):  # σ²-sub-Gaussian: Σ a_v Z_v is (σ² Σa²)-sub-Gaussian
        proxy = row_squares(layout) * law.sigma2
        return (np.sqrt(2.0 * proxy * math.log(2.0 / beta)),
                np.sqrt(2.0 * proxy * math.log(2.0 / TAIL)))
    lam, log_m = weighted_log_mgf(layout, law.gamma.numerator, law.gamma.denominator)
    return (np.min((log_m + math.log(2.0 / beta)) / lam, axis=1),
            np.min((log_m + math.log(2.0 / TAIL)) / lam, axis=1))
