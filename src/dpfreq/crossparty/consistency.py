"""The consistency step: per-party and union figures that agree with each other.

Raw estimates of different entities are noisy independently and may contradict what must hold
for the true figures. For every ``k``, the union's k+ reach is at least each party's (a user
seen ``k`` times at one party is seen at least ``k`` times in the union); the union's reach is
at most the sum of the parties'; every k+ reach is non-negative and non-increasing in ``k``.
The step, deterministic post-processing of the raw estimates:

1. clip every estimate at 0;
2. for each ``k``, the weighted least-squares projection onto ``union >= party`` for every
   party (weights ``1/sd²``): the union and the parties above it are pooled to their weighted
   mean, added largest first while a party lies above the pool's mean — the exact solution for
   this star-shaped order;
3. the union's reach is lowered to the sum of the parties' reach if above it;
4. each entity's k+ reach is replaced by its running minimum over ``k`` (which keeps 2 and 3).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["consistent_kplus", "star_projection"]

_TINY = 1e-300


def star_projection(center: float, leaves: NDArray[np.float64], w_center: float,
                    w_leaves: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
    """Weighted least squares under ``center >= leaf`` for every leaf.

    Examples
    --------
    >>> c, l = star_projection(10.0, np.array([14.0, 4.0]), 1.0, np.array([1.0, 1.0]))
    >>> c, l.tolist()
    (12.0, [12.0, 4.0])
    """
    out = np.asarray(leaves, dtype=np.float64).copy()
    wl = np.maximum(np.asarray(w_leaves, dtype=np.float64), _TINY)
    total_w = max(w_center, _TINY)
    total = total_w * center
    mean = center
    pooled = []
    for i in np.argsort(-out, kind="stable"):
        if out[i] <= mean:
            break
        total += wl[i] * out[i]
        total_w += wl[i]
        mean = total / total_w
        pooled.append(i)
    out[pooled] = mean
    return float(mean), out


def _weights(sd: NDArray[np.float64]) -> NDArray[np.float64]:
    ok = np.isfinite(sd) & (sd > 0)
    return np.where(ok, 1.0 / np.where(ok, sd, 1.0) ** 2, np.where(sd == 0, 1e300, _TINY))


def consistent_kplus(union: NDArray[np.float64], union_sd: NDArray[np.float64],
                     parties: NDArray[np.float64], parties_sd: NDArray[np.float64]
                     ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Consistent k+ reach of the union (``K``) and of the parties (``P × K``).

    Examples
    --------
    >>> u, p = consistent_kplus(np.array([90.0, 50.0]), np.array([5.0, 5.0]),
    ...                         np.array([[100.0, 60.0], [30.0, 35.0]]),
    ...                         np.array([[5.0, 5.0], [5.0, 5.0]]))
    >>> u.tolist(), p.tolist()
    ([95.0, 55.0], [[95.0, 55.0], [30.0, 30.0]])
    """
    u = np.clip(np.asarray(union, dtype=np.float64), 0.0, None)
    p = np.clip(np.asarray(parties, dtype=np.float64), 0.0, None)
    finite = np.isfinite(p)
    p = np.where(finite, p, 0.0)
    wu, wp = _weights(np.asarray(union_sd)), _weights(np.asarray(parties_sd))
    for k in range(u.size):
        if np.isfinite(u[k]):
            u[k], p[:, k] = star_projection(u[k], p[:, k], float(wu[k]), wp[:, k])
    p = np.where(finite, p, np.inf)
    if p.shape[0] and np.all(np.isfinite(p[:, 0])):
        u[0] = min(u[0], float(p[:, 0].sum()))
    return np.minimum.accumulate(u), np.minimum.accumulate(p, axis=1)
