"""Maximum-likelihood (EM) deconvolution of the noisy profile (beyond the paper).

Model: conditioned on the event ``E_B`` (no noise value exceeds ``B`` in absolute value), each
item with true count ``k ∈ [0..n]`` lands at noisy value ``t ∈ [-B..n+B]`` with probability
``A[t][k]`` (Wu & Pagh 2024, Lemma 4.2). The ``d`` items are independent, so the noisy profile
``f~`` (counts / d) is an average of independent categorical draws with mean ``A r``. The
log-likelihood of a candidate profile ``r`` (per item) is

    ``L(r) = Σ_t f~[t] · ln (A r)[t]``

and the EM algorithm for this mixture (Vardi–Shepp / Richardson–Lucy) is the multiplicative update

    ``r ← r · Aᵀ(f~ / A r)`` restricted to ``0..n``, renormalized to sum 1,

which never leaves the probability simplex and never decreases ``L`` (the standard EM
monotonicity). ``A`` is a symmetric circulant, so each step is two circulant products (real
FFTs, or a dense product for small kernels); the simulated sketches of the intervals run EM on
all their noisy profiles at once (:func:`em_profiles`). A zero entry stays zero under the
update, so the iteration starts from a strictly positive point: the paper's Algorithm 2+3
solution mixed with the uniform profile. Entries that the updates drive below 1e-150 are set to
0 (subnormal floats make numpy arithmetic ~100× slower); the likelihood changes by less than
1e-150 per such entry. The default iteration is accelerated by a safeguarded SQUAREM scheme
that keeps both properties (see ``em_profile``).

The Theorem 1.1 bound of Wu & Pagh (2024) is proved for the paper's method, not for this one; a
release made with ``method="mle"`` says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from threadpoolctl import threadpool_limits

from dpfreq.profile.kernel import CirculantKernel

__all__ = ["EMResult", "em_profile", "em_profiles", "log_likelihood", "smooth_profile"]

_FLOOR = 1e-300
_FLUSH = 1e-150  # squares stay normal floats too


@dataclass(frozen=True)
class EMResult:
    """Outcome of :func:`em_profile`: the profile ``r[0..n]`` and convergence diagnostics."""

    profile: NDArray[np.float64]
    iterations: int
    converged: bool
    log_likelihood: float
    start_log_likelihood: float


def _padded(r: NDArray[np.float64], kernel: CirculantKernel) -> NDArray[np.float64]:
    x = np.zeros(kernel.size, dtype=np.float64)
    x[kernel.B : kernel.B + kernel.max_count + 1] = r
    return x


def log_likelihood(profile: NDArray[np.float64], noisy_profile: NDArray[np.float64],
                   kernel: CirculantKernel) -> float:
    """``Σ_t f~[t] ln (A r)[t]`` (per item; ``-inf`` if ``A r`` vanishes where ``f~ > 0``)."""
    q = kernel.apply(_padded(np.asarray(profile, dtype=np.float64), kernel))
    mask = noisy_profile > 0
    qm = q[mask]
    if qm.size and float(qm.min()) <= 0.0:
        return -math.inf
    return float(np.dot(noisy_profile[mask], np.log(qm)))


def _em_step(r: NDArray[np.float64], f: NDArray[np.float64], mask: NDArray[np.bool_],
             kernel: CirculantKernel, x: NDArray[np.float64],
             ratio: NDArray[np.float64]) -> NDArray[np.float64]:
    """One multiplicative EM update ``r · Aᵀ(f~ / A r)`` on ``0..n``, renormalized."""
    n, B = kernel.max_count, kernel.B
    x[B : B + n + 1] = r
    q = kernel.apply(x)
    ratio[mask] = f[mask] / np.maximum(q[mask], _FLOOR)
    back = kernel.apply(ratio)[B : B + n + 1]
    new = r * np.maximum(back, 0.0)
    new[new < _FLUSH] = 0.0  # avoid subnormal floats (100x slower arithmetic); mass < 1e-150
    return new / new.sum()


def em_profile(noisy_profile: NDArray[np.float64], kernel: CirculantKernel, *,
               start: NDArray[np.float64], max_iter: int = 3000, tol: float = 1e-9,
               accelerate: bool = True, record: list[float] | None = None) -> EMResult:
    """Run EM from ``start`` (a strictly positive profile on ``0..n``).

    Parameters
    ----------
    noisy_profile : numpy.ndarray
        ``f~`` on ``t = -B..n+B`` (length ``P``); it is renormalized to sum 1 internally
        (values outside the window were dropped).
    kernel : CirculantKernel
        The kernel ``A`` for ``(n, B, α)``.
    start : numpy.ndarray
        Strictly positive starting point of length ``n + 1`` (renormalized).
    max_iter : int
        Iteration cap (iterations of the accelerated scheme count one each; each costs three
        EM updates and two likelihood evaluations).
    tol : float
        Convergence rule: stop when ``‖r_{k+1} − r_k‖_1 ≤ tol``.
    accelerate : bool, default True
        SQUAREM (Varadhan & Roland 2008, scheme S3) with safeguards: the extrapolated point is
        pulled back towards the plain two-step EM point until it is non-negative, followed
        by one EM update, and it is only accepted if its likelihood is at least that of the
        plain two-step EM point. Every iterate therefore stays in the simplex and the
        likelihood never decreases, as for plain EM.
    record : list, optional
        If given, the log-likelihood after every iteration is appended (for tests).

    Returns
    -------
    EMResult
    """
    f = np.asarray(noisy_profile, dtype=np.float64)
    total = float(f.sum())
    f = f / total if total > 0 else np.full(f.size, 1.0 / f.size)
    mask = f > 0
    r = np.maximum(np.asarray(start, dtype=np.float64), 0.0)
    r = r / r.sum()
    x = np.zeros(kernel.size, dtype=np.float64)
    ratio = np.zeros(kernel.size, dtype=np.float64)
    converged = False
    it = 0
    ll0 = log_likelihood(r, f, kernel)
    for it in range(1, max_iter + 1):  # noqa: B007 - the count is reported
        r1 = _em_step(r, f, mask, kernel, x, ratio)
        if accelerate:
            r2 = _em_step(r1, f, mask, kernel, x, ratio)
            s1 = r1 - r
            v = r2 - r1 - s1
            nv = float(np.linalg.norm(v))
            new = r2
            if nv > 0:
                a = min(-float(np.linalg.norm(s1)) / nv, -1.0)
                for _ in range(30):
                    if a >= -1.0 + 1e-12:
                        break
                    cand = r - 2.0 * a * s1 + a * a * v
                    if float(cand.min()) >= 0.0:
                        cand = _em_step(cand / cand.sum(), f, mask, kernel, x, ratio)
                        if log_likelihood(cand, f, kernel) >= log_likelihood(r2, f, kernel):
                            new = cand
                        break
                    a = (a - 1.0) / 2.0
        else:
            new = r1
        step = float(np.abs(new - r).sum())
        r = new
        if record is not None:
            record.append(log_likelihood(r, f, kernel))
        if step <= tol:
            converged = True
            break
    return EMResult(profile=r, iterations=it, converged=converged,
                    log_likelihood=log_likelihood(r, f, kernel), start_log_likelihood=ll0)


def smooth_profile(noisy_profile: NDArray[np.float64], kernel: CirculantKernel, *,
                   reference: NDArray[np.float64], items: float,
                   max_iter: int = 5000) -> NDArray[np.float64] | None:
    """The first plain EM iterate from the uniform profile that the data cannot tell apart from
    ``reference``: its total log-likelihood is within ``n/2`` of the reference's.

    Parameters
    ----------
    noisy_profile : numpy.ndarray
        ``f~`` on ``t = -B..n+B`` (renormalized internally).
    kernel : CirculantKernel
        The kernel ``A`` for ``(n, B, α)``.
    reference : numpy.ndarray
        A profile on ``0..n`` (the released maximum-likelihood estimate).
    items : float
        The number of items behind ``f~`` (the per-item log-likelihood is multiplied by it).
    max_iter : int
        EM updates tried before giving up.

    Returns
    -------
    numpy.ndarray or None
        The profile, or None when ``max_iter`` updates do not come within ``n/2``.

    Notes
    -----
    The maximum-likelihood estimate of a mixing distribution is sparse when the noise is large
    (mass on a few classes, zeros between them), unlike the profiles it estimates; the error of
    the estimator around such a point is not its error around the truth. Under Wilks' theorem
    the truth's log-likelihood is below the maximum by ``χ²_n / 2`` (mean ``n/2``), so a profile
    within ``n/2`` is as plausible as the truth typically is; EM from the uniform profile
    reaches it through smooth profiles (early-stopped EM is the classic regularised
    deconvolution), with every class positive. Deterministic post-processing.
    """
    f = np.asarray(noisy_profile, dtype=np.float64)
    total = float(f.sum())
    if total <= 0:
        return None
    f = f / total
    mask = f > 0
    target = log_likelihood(np.asarray(reference, dtype=np.float64), f, kernel)
    gap = kernel.max_count / 2.0
    r = np.full(kernel.max_count + 1, 1.0 / (kernel.max_count + 1))
    x = np.zeros(kernel.size, dtype=np.float64)
    ratio = np.zeros(kernel.size, dtype=np.float64)
    for _ in range(max_iter):
        if items * (target - log_likelihood(r, f, kernel)) <= gap:
            return r
        r = _em_step(r, f, mask, kernel, x, ratio)
    return None


def _fitted_rows(r: NDArray[np.float64], kernel: CirculantKernel) -> NDArray[np.float64]:
    """``A r`` for every row of ``r`` (each padded to ``t = -B..n+B``)."""
    n, B = kernel.max_count, kernel.B
    x = np.zeros((r.shape[0], kernel.size), dtype=np.float64)
    x[:, B : B + n + 1] = r
    return kernel.apply(x)


def _em_steps(r: NDArray[np.float64], f: NDArray[np.float64], mask: NDArray[np.bool_],
              kernel: CirculantKernel) -> NDArray[np.float64]:
    """:func:`_em_step` on every row of ``r`` (row ``i`` against the noisy profile ``f[i]``)."""
    n, B = kernel.max_count, kernel.B
    ratio = np.where(mask, f / np.maximum(_fitted_rows(r, kernel), _FLOOR), 0.0)
    new = r * np.maximum(kernel.apply(ratio)[:, B : B + n + 1], 0.0)
    new[new < _FLUSH] = 0.0
    return new / new.sum(axis=1, keepdims=True)


def _log_likelihoods(r: NDArray[np.float64], f: NDArray[np.float64], mask: NDArray[np.bool_],
                     kernel: CirculantKernel) -> NDArray[np.float64]:
    """:func:`log_likelihood` of every row of ``r`` against ``f`` (same row)."""
    q = _fitted_rows(r, kernel)
    dead = (mask & (q <= 0.0)).any(axis=1)
    ll = np.where(mask, f * np.log(np.where(mask & (q > 0.0), q, 1.0)), 0.0).sum(axis=1)
    return np.where(dead, -math.inf, ll)


def em_profiles(noisy_profiles: NDArray[np.float64], kernel: CirculantKernel, *,
                starts: NDArray[np.float64], max_iter: int = 3000,
                tol: float = 1e-9) -> NDArray[np.float64]:
    """:func:`em_profile` (accelerated) on many noisy profiles at once, one per row.

    The same iteration as :func:`em_profile` row by row (SQUAREM with its safeguards, the same
    cap and convergence rule), with each kernel product done for all unconverged rows in one
    matrix product: the simulated sketches of the intervals run EM hundreds of times on the
    same kernel. Results equal the row-by-row ones up to floating-point summation order.

    Parameters
    ----------
    noisy_profiles : numpy.ndarray
        ``f~`` per row, shape ``(m, P)`` (each renormalized to sum 1; an all-zero row is
        replaced by the uniform profile, as in :func:`em_profile`).
    kernel : CirculantKernel
        The kernel ``A`` for ``(n, B, α)``.
    starts : numpy.ndarray
        Strictly positive starting points, shape ``(m, n + 1)``.
    max_iter, tol
        As in :func:`em_profile`.

    Returns
    -------
    numpy.ndarray
        The profiles, shape ``(m, n + 1)``.
    """
    f = np.asarray(noisy_profiles, dtype=np.float64)
    totals = f.sum(axis=1, keepdims=True)
    f = np.where(totals > 0, f / np.where(totals > 0, totals, 1.0), 1.0 / f.shape[1])
    mask = f > 0
    out = np.maximum(np.asarray(starts, dtype=np.float64), 0.0)
    out = out / out.sum(axis=1, keepdims=True)
    # one BLAS thread: the products are small (at most 320 columns), and OpenBLAS's threads
    # made two concurrent releases 2.5x slower each (2.0 s against 0.8 s on 2 cores)
    with threadpool_limits(limits=1, user_api="blas"):
        _em_rows(out, f, mask, kernel, max_iter=max_iter, tol=tol)
    return out


def _em_rows(out: NDArray[np.float64], f: NDArray[np.float64], mask: NDArray[np.bool_],
             kernel: CirculantKernel, *, max_iter: int, tol: float) -> None:
    """The iteration of :func:`em_profiles`, updating the rows of ``out`` in place."""
    active = np.arange(out.shape[0])
    for _ in range(max_iter):
        if active.size == 0:
            break
        r, fa, ma = out[active], f[active], mask[active]
        r1 = _em_steps(r, fa, ma, kernel)
        r2 = _em_steps(r1, fa, ma, kernel)
        s1, v = r1 - r, r2 - 2.0 * r1 + r
        nv = np.linalg.norm(v, axis=1)
        a = np.where(nv > 0, np.minimum(-np.linalg.norm(s1, axis=1) / np.where(nv > 0, nv, 1.0),
                                        -1.0), -1.0)
        new = r2.copy()
        searching = nv > 0
        for _ in range(30):
            searching &= a < -1.0 + 1e-12
            idx = np.flatnonzero(searching)
            if idx.size == 0:
                break
            cand = r[idx] - 2.0 * a[idx, None] * s1[idx] + (a[idx] ** 2)[:, None] * v[idx]
            ok = cand.min(axis=1) >= 0.0
            done = idx[ok]
            if done.size:
                c = cand[ok] / cand[ok].sum(axis=1, keepdims=True)
                c = _em_steps(c, fa[done], ma[done], kernel)
                better = (_log_likelihoods(c, fa[done], ma[done], kernel)
                          >= _log_likelihoods(r2[done], fa[done], ma[done], kernel))
                new[done[better]] = c[better]
                searching[done] = False
            a[idx[~ok]] = (a[idx[~ok]] - 1.0) / 2.0
        moved = np.abs(new - r).sum(axis=1)
        out[active] = new
        active = active[moved > tol]
