"""The frequency distribution of the union from summed noisy frequency registers (post-processing).

**Register classes.** Summing the frequency registers of ``P`` parties gives ``w[r] = s[r] +
N[r]`` per register, ``s[r]`` the sum of the parties' capped frequencies and ``N[r]`` a sum of
``P`` independent ``DLap(α)``. The generating function of ``DLap(α)`` is
``(1−α)^2 / ((1 − αx)(1 − α/x))``; its inverse is the three-term Laurent polynomial
``((1+α^2) − α(x + 1/x)) / (1−α)^2``, so the ``P``-th power of that polynomial, ``h``
(``2P + 1`` coefficients), undoes the noise exactly in expectation:
``E[Σ_j h_j 1[w = t + j]] = 1[s = t]``. Hence the number ``C_t`` of registers with ``s = t``
(``t = 0..K−1``) has the **unbiased** linear estimate ``Ĉ_t = Σ_j h_j H[t + j]`` from the
histogram ``H`` of ``w``, and since products of indicators of different values vanish, its
covariance has the unbiased estimate ``Σ_v h_{v−t} h_{v−u} H[v] − δ_{tu} Ĉ_t``. The
coefficients grow like ``((1+α)/(1−α))^{2P}``: a second reason why local noise limits merges.

**From registers to users.** Users fall into registers uniformly, so a register's sum is a
compound Poisson variable: a Poisson(λ) number of users, each with a frequency drawn from the
union's frequency law ``g``. For ``t < K`` the capped sums equal the true sums, and Panjer's
recursion ``p_t = (λ/t) Σ_{j<=t} j g_j p_{t−j}`` inverts to

    λ = −ln p_0,   g_t = (t p_t/λ − Σ_{j=1}^{t−1} j g_j p_{t−j}) / (t p_0),

with ``p_0`` the empty fraction (from the reach bits) and ``p_t = Ĉ_t / R``. The recursion is
differentiated alongside (forward mode) for the delta method.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["class_estimates", "compound_inverse", "inverse_filter"]


def inverse_filter(alpha: float, parties: int) -> NDArray[np.float64]:
    """The ``2P + 1`` coefficients ``h_{−P..P}`` of ``[((1+α²) − α(x + 1/x))/(1−α)²]^P``.

    Examples
    --------
    >>> inverse_filter(0.5, 1).tolist()
    [-2.0, 5.0, -2.0]
    >>> float(inverse_filter(0.5, 2).sum())  # the polynomial at x = 1: 1
    1.0
    """
    base = np.array([-alpha, 1.0 + alpha * alpha, -alpha]) / (1.0 - alpha) ** 2
    out = np.ones(1)
    with np.errstate(over="ignore", invalid="ignore"):
        for _ in range(parties):
            out = np.convolve(out, base)
    return out


def class_estimates(sums: NDArray[np.signedinteger[Any]], *, parties: int, max_frequency: int,
                    alpha: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(Ĉ, Cov)``: unbiased estimates of the number of registers whose summed capped
    frequency is ``t = 0..K−1``, and the unbiased estimate of their covariance.

    Examples
    --------
    With no noise (α → 0) the histogram is returned as it is:

    >>> C, cov = class_estimates(np.array([0, 0, 1, 2, 5]), parties=1, max_frequency=3,
    ...                          alpha=1e-12)
    >>> np.round(C, 6).tolist()
    [2.0, 1.0, 1.0]
    """
    P, K = parties, max_frequency
    h = inverse_filter(alpha, P)
    info = np.iinfo(sums.dtype)
    if info.min > -P - 1 or info.max < K + 2 * P + 1:  # a narrow type read from a file
        sums = sums.astype(np.int64)
    # values outside -P..K-1+P go to two edge bins, dropped: the filter is zero there
    edges = np.bincount(np.clip(sums, -P - 1, K + P) + (P + 1), minlength=K + 2 * P + 2)
    H = edges[1:-1].astype(np.float64)
    A = np.zeros((K, K + 2 * P))
    for t in range(K):
        A[t, t:t + 2 * P + 1] = h
    with np.errstate(over="ignore", invalid="ignore"):
        C = A @ H
        cov = (A * H) @ A.T - np.diag(C)
    return C, cov


def compound_inverse(p: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(g_1..g_{K−1}, ∂g/∂p)`` from register class fractions ``p = (p_0, .., p_{K−1})``.

    Examples
    --------
    Users seen once (2/3) or twice (1/3), λ = 0.5 users per register:

    >>> lam, g1, g2 = 0.5, 2 / 3, 1 / 3
    >>> p0 = math.exp(-lam); p1 = lam * g1 * p0; p2 = (lam / 2) * (g1 * p1 + 2 * g2 * p0)
    >>> g, grad = compound_inverse(np.array([p0, p1, p2]))
    >>> np.round(g, 12).tolist(), grad.shape
    ([0.666666666667, 0.333333333333], (2, 3))
    """
    K = p.size
    p0 = float(p[0])
    g = np.zeros(K)
    G = np.zeros((K, K))
    if not (0.0 < p0 < 1.0) or not np.all(np.isfinite(p)):
        g[1:] = np.nan
        G[1:] = np.nan
        return g[1:], G[1:]
    lam = -math.log(p0)
    dlam = np.zeros(K)
    dlam[0] = -1.0 / p0
    for t in range(1, K):
        j = np.arange(1, t)
        weights = j * p[t - j]
        S = float(np.dot(weights, g[j]))
        dS = weights @ G[j] if t > 1 else np.zeros(K)
        np.add.at(dS, t - j, j * g[j])
        A = t * p[t] / lam - S
        dA = -t * p[t] / lam**2 * dlam - dS
        dA[t] += t / lam
        g[t] = A / (t * p0)
        G[t] = dA / (t * p0)
        G[t, 0] -= A / (t * p0**2)
    return g[1:], G[1:]
