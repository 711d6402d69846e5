"""The exact law of one answer's noise: the half-width of its interval from public parameters.

An answer's noise is a sum of i.i.d. node noises over its cover, or (least-squares estimates) a
fixed linear combination of them; both laws depend on the structure's layout and node law only
(:class:`~dpfreq.windows.structures.protocol.WindowStructure`).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from dpfreq.windows.laws.sums import (
    TAIL,
    sum_quantile,
    tail_radius,
    weighted_quantile,
    weighted_sum_law,
)
from dpfreq.windows.layouts.weights import consistent_laws, row_squares, weighted_log_mgf
from dpfreq.windows.structures.protocol import WindowStructure

__all__ = ["consistent_halfwidth", "cover_halfwidth"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


def cover_halfwidth(s: WindowStructure, nodes: IntArray, beta: float, exact: bool = True
                    ) -> FloatArray:
    """``x`` with ``Pr[|noise| > x] <= β`` for answers that sum ``nodes`` i.i.d. node noises.

    ``x`` is the certified quantile of the exact law of the sum (the convolution of the node
    pmf, :func:`dpfreq.windows.laws.sums.sum_quantile`). ``exact=False`` gives the tail bounds
    alone (never smaller than the exact value; cheap, used by
    :meth:`~dpfreq.windows.WindowCountsPlan.epsilon_for` to bracket its search).
    """
    sigma2 = int(s.sigma2) if s.noise_kind == "gaussian" else None
    gamma = None if sigma2 is not None else s.gamma
    if not exact:
        out_t = np.zeros(nodes.shape, dtype=np.float64)
        for m in np.unique(nodes).tolist():
            if m > 0:
                out_t[nodes == m] = tail_radius(m, beta, gamma=gamma, sigma2=sigma2)
        return out_t
    if sigma2 is not None:
        return sum_quantile(nodes, beta, sigma2=sigma2)
    return sum_quantile(nodes, beta, gamma=s.gamma)


def consistent_halfwidth(s: WindowStructure, prefix: IntArray, beta: float, exact: bool = True
                         ) -> FloatArray:
    """:func:`cover_halfwidth` of least-squares estimates of the prefixes ``prefix``.

    A consistent estimate is a linear combination ``Σ a_v Z_v`` with non-integer weights: the
    certified grid convolution of :func:`dpfreq.windows.laws.sums.weighted_sum_law` (computed
    once per prefix and law), whose support radius comes from the tail bound — a Chernoff bound
    for discrete Laplace (the moment generating function is the product of ``M(λ a_v)``), the
    σ-sub-Gaussian tail for discrete Gaussian (Canonne–Kamath–Steinke 2020),
    ``x = √(2 σ² Σa² ln(2/β))``. The smaller of the two valid values is returned.
    """
    xs, inv = np.unique(prefix, return_inverse=True)
    if s.noise_kind == "gaussian":
        proxy = row_squares(s.layout) * s.sigma2
        bound = np.sqrt(2.0 * proxy * math.log(2.0 / beta))
        radius = np.sqrt(2.0 * proxy * math.log(2.0 / TAIL))
    else:
        lam, log_m = weighted_log_mgf(s.layout, s.gamma.numerator, s.gamma.denominator)
        bound = np.min((log_m + math.log(2.0 / beta)) / lam, axis=1)
        radius = np.min((log_m + math.log(2.0 / TAIL)) / lam, axis=1)
    gamma = None if s.noise_kind == "gaussian" else s.gamma
    sigma2 = int(s.sigma2) if s.noise_kind == "gaussian" else None
    vals = bound[xs]
    if not exact:
        return vals[inv].reshape(np.shape(inv))
    laws = consistent_laws(s.layout, gamma, sigma2)
    for i, x in enumerate(xs.tolist()):
        if x not in laws:
            laws[x] = weighted_sum_law(s.weights()[x], float(radius[x]), gamma=gamma,
                                       sigma2=sigma2)
        law = laws[x]
        q = weighted_quantile(law, beta) if law is not None else None
        if q is not None:
            vals[i] = min(vals[i], q)
    out: FloatArray = vals[inv].reshape(np.shape(inv))
    return out
