"""The direct profile mechanism: a noisy count-of-counts and an exact integral projection.

The profile of a data set over a public domain of ``d`` items with count cap ``n`` is the
count-of-counts ``c[t]`` = number of domain items whose (clamped) count is ``t``, ``t = 0..n``
(never-seen items are in ``c[0] = d − Σ_{t≥1} c[t]``). The direct mechanism adds independent
exact discrete Laplace noise to each of these ``n + 1`` numbers, calibrated to ℓ1 sensitivity 2,
and then maps the noisy vector to the nearest non-negative integer vector summing to ``d``
(post-processing). This is the central-model approach of Hay, Li, Miklau & Jensen (2009) and
Hay, Rastogi, Miklau & Suciu (2010) for degree sequences and histograms of counts.

Everything but :func:`noisy_classes` is deterministic and takes no ``rng``.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import check_epsilon
from dpfreq.noise import discrete_laplace_gamma, sample_discrete_laplace

__all__ = [
    "DIRECT_SENSITIVITY",
    "DOMAIN_LIMIT",
    "direct_gamma",
    "noisy_classes",
    "project_to_simplex",
]

DIRECT_SENSITIVITY = 2
DOMAIN_LIMIT = 2**62


def direct_gamma(epsilon: float) -> Fraction:
    """γ of the discrete Laplace noise: ``ε / 2`` as an exact fraction, rounded down.

    Notes
    -----
    Under either unit of privacy a neighbouring data set moves one item from one class to
    another (or leaves the classes unchanged), so the count-of-counts changes by at most 1 in
    two coordinates: ℓ1 sensitivity 2. Noise ``DLap(e^{−γ})`` with ``γ ≤ ε/2`` on each class is
    then ε-DP (Ghosh, Roughgarden & Sundararajan 2009).
    """
    eps = check_epsilon(epsilon, "epsilon", "direct_gamma")
    return discrete_laplace_gamma(eps, sensitivity=DIRECT_SENSITIVITY)


def noisy_classes(classes: NDArray[np.int64], gamma: Fraction,
                  generator: np.random.Generator) -> NDArray[np.int64]:
    """``classes + Z`` with ``Z[t] ~ DLap(e^{−γ})`` i.i.d., drawn exactly (:mod:`dpfreq.noise`).

    ``classes`` must hold integers in ``[0, 2^62)`` (the caller checks ``d < 2^62``); the noise
    of the exact sampler at ``γ ≥ 5·10^-7`` exceeds ``2^60`` in absolute value with probability
    below ``e^{−5·10^11}``, so the sum never leaves the int64 range in practice; it is checked
    anyway and a noise value that large would raise :class:`OverflowError` after the draw.
    """
    z = sample_discrete_laplace(gamma, classes.size, rng=generator)
    if z.size and int(np.abs(z).max()) >= 2**60:  # pragma: no cover - probability < e^-10^11
        raise OverflowError("a discrete Laplace draw exceeded 2^60")
    return classes.astype(np.int64) + z


def _shift_int64(y: NDArray[np.int64], d: int) -> int:
    """The smallest integer ``s`` with ``Σ max(y − s, 0) <= d``, by bisection in int64.

    Only called when ``len(y) · max|y| < 2^60`` and ``d < 2^62``: then every ``s`` visited has
    ``|s| <= max|y| + d/len(y) + 1`` and every partial sum stays below ``2^63``.
    """
    hi = int(y.max())  # S(hi) = 0 <= d
    lo = int(y.min()) - (d // y.size) - 1  # S(lo) >= len(y) · (d // len(y) + 1) > d
    while hi - lo > 1:  # invariant: S(lo) > d >= S(hi)
        mid = (lo + hi) // 2
        if int(np.maximum(y - mid, 0).sum()) > d:
            lo = mid
        else:
            hi = mid
    return hi


def _shift_exact(y: NDArray[np.int64], d: int) -> int:
    """The same ``s`` with Python integers (any magnitudes), from the sorted values.

    With ``v`` sorted decreasingly and ``P_k = v_0 + … + v_{k−1}``, on ``v_k <= s <= v_{k−1}``
    the sum is ``P_k − k·s``, which is ``<= d`` iff ``s >= ⌈(P_k − d)/k⌉``; the answer is the
    smallest such ``s`` over all ``k``.
    """
    v = sorted((int(t) for t in y), reverse=True)
    best = v[0]
    prefix = 0
    for k in range(1, len(v) + 1):
        prefix += v[k - 1]
        cand = -((d - prefix) // k)  # ⌈(P_k − d)/k⌉
        if k < len(v):
            cand = max(cand, v[k])
        if cand <= v[k - 1]:
            best = min(best, cand)
    return best


def project_to_simplex(noisy: NDArray[np.int64], total: int) -> NDArray[np.int64]:
    """The nearest vector of non-negative integers summing to ``total`` (ℓ2, hence also ℓ1).

    Parameters
    ----------
    noisy : numpy.ndarray of int64
        The noisy count-of-counts ``y`` (any sign).
    total : int
        ``d`` (``1 <= d < 2^62``).

    Returns
    -------
    numpy.ndarray of int64
        ``x`` with ``x >= 0``, ``Σ x = d``, minimizing ``‖x − y‖_2`` over all such integer
        vectors; ties broken towards the smallest index ``t``.

    Notes
    -----
    Minimizing ``Σ (x_t − y_t)²`` over integers ``x_t >= 0`` with ``Σ x_t = d`` is a separable
    convex allocation problem: raising ``x_t`` from ``k`` to ``k + 1`` costs
    ``2(k − y_t) + 1``, increasing in ``k``, so choosing the ``d`` cheapest unit increments
    (greedily) is optimal. The ``d`` cheapest increments are those below a threshold: for the
    smallest integer ``s`` with ``S(s) = Σ max(y_t − s, 0) <= d``, take ``x_t = max(y_t − s, 0)``
    and give one more unit to the ``r = d − S(s)`` first indices with ``y_t >= s`` (their next
    increment costs exactly ``1 − 2s``, the cheapest left; ``r`` is smaller than their number
    because ``S(s − 1) − S(s) = #{t : y_t >= s}`` and ``S(s − 1) > d``). ``s`` is found by
    bisection in int64 when that is exact, else from the sorted values in Python integers. The
    result is also a nearest point in ℓ1: if
    ``Σ max(y, 0) >= d`` then ``0 <= x <= max(y, 0)`` and every such ``x`` has the same ℓ1
    distance ``Σ max(y, 0) − d + Σ max(−y, 0)``; otherwise ``x >= max(y, 0)`` and the same
    holds with the roles swapped. Since the true count-of-counts ``c`` is one of the feasible
    vectors, ``‖x − c‖_1 <= ‖x − y‖_1 + ‖y − c‖_1 <= 2‖y − c‖_1`` (projection at most doubles
    the ℓ1 error; in practice it lowers it: negative entries are raised to 0 and the total is
    fixed). Post-processing: no privacy cost.
    """
    y = np.asarray(noisy, dtype=np.int64)
    d = int(total)
    if y.size * max(abs(int(y.max())), abs(int(y.min()))) < 2**60:
        s = _shift_int64(y, d)
    else:
        s = _shift_exact(y, d)
    x = np.maximum(y - s, 0)
    rest = d - int(x.sum())
    if rest:
        eligible = np.flatnonzero(y >= s)[:rest]
        x[eligible] += 1
    return x
