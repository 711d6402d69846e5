"""Baselines for profile reconstruction: the naive estimator and the exact P2 optimum.

* :func:`naive_profile` reads the profile directly off the noisy histogram (``f~[0..n]``
  clipped to [0, 1]); its error does not vanish as ``d`` grows.
* :func:`lp_profile` solves problem P2 exactly — minimise ``‖A r − f~‖_p`` over the probability
  simplex on ``0..n`` — with scipy's HiGHS LP solver for ``p ∈ {1, ∞}``. For ``p = 2`` (a QP,
  which scipy's HiGHS interface does not expose) it runs Lawson–Hanson NNLS with the equality
  constraint as a heavily weighted row and then solves the KKT system exactly on the support it
  found, checking the KKT conditions. Only columns ``0..n`` of ``A`` are used; they have no
  wrap-around, so the banded matrix ``A[t][k] = α^{|t−k|}/P_norm`` (``|t−k| ≤ B``) is exact.

Both are deterministic post-processing of the ε-DP sketch (no ``rng``, no privacy cost).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import check_count_array, check_epsilon, check_int, message
from dpfreq.errors import DataError, public_errors
from dpfreq.noise import discrete_laplace_gamma
from dpfreq.profile.checks import integer_array, norm_name
from dpfreq.profile.kernel import p_norm

if TYPE_CHECKING:
    import scipy.sparse

__all__ = ["banded_kernel", "lp_profile", "naive_profile"]


@public_errors("naive_profile")
def naive_profile(noisy_histogram: Any, *, max_count: int,
                  renormalize: bool = False) -> NDArray[np.float64]:
    """The naive estimator ``clip(f~[0..n], 0, 1)``.

    Parameters
    ----------
    noisy_histogram : array-like of int
        The (unclipped or clipped) noisy counters, one per domain item.
    max_count : int
        Public count cap ``n``.
    renormalize : bool, default False
        Divide by the sum (when positive) so that the result is a probability vector.

    Returns
    -------
    numpy.ndarray of float64, length ``n + 1``

    Examples
    --------
    >>> import numpy as np
    >>> from dpfreq.profile import naive_profile
    >>> naive_profile(np.array([0, 1, 1, 5, -2]), max_count=3)  # -2 and 5 fall outside 0..3
    array([0.2, 0.4, 0. , 0. ])
    """
    n = check_int(max_count, "max_count", minimum=0)
    h = integer_array(noisy_histogram, "noisy_histogram")
    if h.size == 0:
        raise DataError(message("noisy_histogram", "a non-empty array of integers",
                                "an empty array"))
    counts = np.zeros(n + 3, dtype=np.int64)
    chunk = 1 << 22
    for start in range(0, h.size, chunk):
        v = np.clip(h[start : start + chunk].astype(np.int64, copy=False), -1, n + 1) + 1
        counts += np.bincount(v, minlength=n + 3)
    f = np.clip(counts[1:-1] / h.size, 0.0, 1.0)
    if renormalize and f.sum() > 0:
        f = f / f.sum()
    return f


def banded_kernel(max_count: int, B: int, alpha: float) -> scipy.sparse.csr_matrix:
    """Columns ``0..n`` of ``A`` as a sparse ``P × (n+1)`` matrix (rows ``t = −B..n+B``)."""
    import scipy.sparse  # here, not at module level: only the baselines need it (0.2 s import)

    n = max_count
    offsets = np.arange(-B, B + 1)
    k = np.repeat(np.arange(n + 1), offsets.size)
    o = np.tile(offsets, n + 1)
    rows = k + B + o
    vals = float(alpha) ** np.abs(o).astype(np.float64) / p_norm(B, alpha)
    return scipy.sparse.csr_matrix((vals, (rows, k)), shape=(n + 2 * B + 1, n + 1))


def _lp(A: scipy.sparse.csr_matrix, f: NDArray[np.float64], norm: str) -> NDArray[np.float64]:
    import scipy.optimize
    import scipy.sparse

    P, m = A.shape
    eq = scipy.sparse.hstack([scipy.sparse.csr_matrix(np.ones((1, m))),
                              scipy.sparse.csr_matrix((1, P if norm == "1" else 1))])
    if norm == "1":
        eye = scipy.sparse.identity(P, format="csr")
        A_ub = scipy.sparse.vstack([scipy.sparse.hstack([A, -eye]),
                                    scipy.sparse.hstack([-A, -eye])]).tocsr()
        cost = np.concatenate([np.zeros(m), np.ones(P)])
        bounds = [(0.0, 1.0)] * m + [(0.0, None)] * P
    else:
        col = scipy.sparse.csr_matrix(-np.ones((P, 1)))
        A_ub = scipy.sparse.vstack([scipy.sparse.hstack([A, col]),
                                    scipy.sparse.hstack([-A, col])]).tocsr()
        cost = np.concatenate([np.zeros(m), [1.0]])
        bounds = [(0.0, 1.0)] * m + [(0.0, None)]
    # HiGHS's dual simplex was seen to cycle for > 10 minutes on some P2 instances (n = 300,
    # p = 1); the interior-point method with crossover (an exact vertex optimum) does not.
    for method in ("highs-ipm", "highs-ds"):
        res = scipy.optimize.linprog(cost, A_ub=A_ub, b_ub=np.concatenate([f, -f]),
                                     A_eq=eq.tocsr(), b_eq=[1.0], bounds=bounds, method=method,
                                     options={"time_limit": 600.0})
        if res.status == 0:
            break
    else:  # pragma: no cover - P2 is always feasible and bounded
        raise ArithmeticError(f"HiGHS failed on problem P2: {res.message}")
    return np.asarray(res.x[:m], dtype=np.float64)


def _qp(A: scipy.sparse.csr_matrix, f: NDArray[np.float64]) -> NDArray[np.float64]:
    """min ‖A r − f‖² on the simplex: weighted-row NNLS, then an exact KKT solve on its support."""
    import scipy.optimize

    Ad = A.toarray()
    P, m = Ad.shape
    weight = 1e4 * math.sqrt(P)
    aug = np.vstack([Ad, weight * np.ones((1, m))])
    rhs = np.concatenate([f, [weight]])
    r, _ = scipy.optimize.nnls(aug, rhs, maxiter=50 * m)
    support = np.flatnonzero(r > 0)
    if support.size:
        As = Ad[:, support]
        kkt = np.zeros((support.size + 1, support.size + 1))
        kkt[:-1, :-1] = 2.0 * As.T @ As
        kkt[:-1, -1] = 1.0
        kkt[-1, :-1] = 1.0
        sol = np.linalg.lstsq(kkt, np.concatenate([2.0 * As.T @ f, [1.0]]), rcond=None)[0]
        cand = np.zeros(m)
        cand[support] = sol[:-1]
        lam = sol[-1]
        grad = 2.0 * Ad.T @ (Ad @ cand - f) + lam
        if cand.min() >= 0 and grad.min() >= -1e-9:
            return cand
    return r / r.sum()


@public_errors("lp_profile")
def lp_profile(profile_counts: Any, *, domain_size: int, max_count: int, epsilon: float,
               norm: int | float | str = 1, B: int) -> NDArray[np.float64]:
    """Exact optimum of problem P2: the reference baseline for Algorithms 2+3.

    Parameters
    ----------
    profile_counts : array-like of int
        Counts of noisy values on ``t = −B..n+B`` (from ``noisy_profile_counts``).
    domain_size, max_count, epsilon, B
        As in ``reconstruct_profile_from_counts`` (``α = exp(−γ)``, γ the sketch's ε fraction).
    norm : 1, 2 or "inf"
        ``p`` of the objective ``‖A r − f~‖_p``.

    Returns
    -------
    numpy.ndarray of float64
        ``r[0..n]`` on the simplex minimising the objective.

    Examples
    --------
    >>> import numpy as np
    >>> from dpfreq.profile import ProfileSketch, lp_profile
    >>> from dpfreq.profile.reconstruct import noisy_profile_counts
    >>> sketch = ProfileSketch.from_counts(np.array([0, 1, 1, 2, 3]), domain_size=200,
    ...                                    max_count=3, epsilon=2.0, rng=3)
    >>> counts = noisy_profile_counts(sketch.noisy_counts(), max_count=3, B=4)
    >>> r = lp_profile(counts, domain_size=200, max_count=3, epsilon=2.0, B=4)
    >>> r.shape, bool(np.isclose(r.sum(), 1.0)), bool(r.min() >= 0)
    ((4,), True, True)
    """
    d = check_int(domain_size, "domain_size", minimum=1)
    n = check_int(max_count, "max_count", minimum=0)
    eps = check_epsilon(epsilon, "epsilon")
    b = check_int(B, "B", minimum=0)
    norm_s = norm_name(norm)
    counts = check_count_array(profile_counts, "profile_counts")
    if counts.size != n + 2 * b + 1:
        raise DataError(message("profile_counts", f"of length n + 2B + 1 = {n + 2 * b + 1}",
                                f"length {counts.size}"))
    alpha = math.exp(-float(discrete_laplace_gamma(eps)))
    A = banded_kernel(n, b, alpha)
    f = counts.astype(np.float64) / d
    if norm_s == "2":
        return _qp(A, f)
    return _lp(A, f, norm_s)
