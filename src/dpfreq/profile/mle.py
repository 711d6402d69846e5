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

__all__ = ["EMResult", "em_profile", "em_profiles", "log_likelihood", "log_likelihoods",
           "smooth_profile"]

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


def _fitted_rows(r: NDArray[np.float64], kernel: CirculantKernel) -> NDArray[np.float64]:
    """``A r`` for every row of ``r`` (each padded to ``t = -B..n+B``)."""
    n, B = kernel.max_count, kernel.B
    x = np.zeros((r.shape[0], kernel.size), dtype=np.float64)
    x[:, B : B + n + 1] = r
    return kernel.apply(x)


def _log_likelihoods(r: NDArray[np.float64], f: NDArray[np.float64], mask: NDArray[np.bool_],
                     kernel: CirculantKernel) -> NDArray[np.float64]:
    """:func:`log_likelihood` of every row of ``r`` against the same row of ``f``."""
    q = np.where(mask, _fitted_rows(r, kernel), 1.0)  # f~ = 0 elsewhere: those terms are 0
    dead = np.asarray((q <= 0.0).any(axis=1), dtype=bool)
    ll = (f * np.log(np.where(dead[:, None], 1.0, q))).sum(axis=1)
    return np.where(dead, -math.inf, ll)


def log_likelihoods(profiles: NDArray[np.float64], noisy_profiles: NDArray[np.float64],
                    kernel: CirculantKernel) -> NDArray[np.float64]:
    """:func:`log_likelihood` of every row of ``profiles`` against the same row of
    ``noisy_profiles``."""
    f = np.asarray(noisy_profiles, dtype=np.float64)
    return _log_likelihoods(np.asarray(profiles, dtype=np.float64), f, f > 0, kernel)


def log_likelihood(profile: NDArray[np.float64], noisy_profile: NDArray[np.float64],
                   kernel: CirculantKernel) -> float:
    """``Σ_t f~[t] ln (A r)[t]`` (per item; ``-inf`` if ``A r`` vanishes where ``f~ > 0``)."""
    return float(log_likelihoods(np.asarray(profile)[None, :], np.asarray(noisy_profile)[None, :],
                                 kernel)[0])


def _em_steps(r: NDArray[np.float64], f: NDArray[np.float64], mask: NDArray[np.bool_],
              kernel: CirculantKernel) -> NDArray[np.float64]:
    """One multiplicative EM update ``r · Aᵀ(f~ / A r)`` on ``0..n``, renormalized, of every row
    of ``r`` against the same row of ``f``."""
    n, B = kernel.max_count, kernel.B
    ratio = np.where(mask, f / np.maximum(_fitted_rows(r, kernel), _FLOOR), 0.0)
    new = r * np.maximum(kernel.apply(ratio)[:, B : B + n + 1], 0.0)
    new[new < _FLUSH] = 0.0  # avoid subnormal floats (100x slower arithmetic); mass < 1e-150
    return new / new.sum(axis=1, keepdims=True)


def _normalised(noisy_profiles: NDArray[np.float64],
                starts: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Rows of ``f~`` renormalized to sum 1 (an all-zero row becomes the uniform data) and the
    starting points, clipped at 0 and renormalized."""
    f = np.asarray(noisy_profiles, dtype=np.float64)
    totals = f.sum(axis=1, keepdims=True)
    f = np.where(totals > 0, f / np.where(totals > 0, totals, 1.0), 1.0 / f.shape[1])
    r = np.maximum(np.asarray(starts, dtype=np.float64), 0.0)
    return f, r / r.sum(axis=1, keepdims=True)


def _em_rows(out: NDArray[np.float64], f: NDArray[np.float64], kernel: CirculantKernel, *,
             max_iter: int, tol: float, accelerate: bool,
             record: list[float] | None) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """EM on every row of ``out`` (updated in place) against the same row of ``f``; returns the
    iterations run and whether each row converged. Each kernel product is one matrix product
    for all unconverged rows, under one BLAS thread: the products are small (at most 320
    columns), and OpenBLAS's threads made two concurrent releases 2.5x slower each (2.0 s
    against 0.8 s on 2 cores). ``record`` gets the first row's log-likelihood after every
    iteration."""
    mask = f > 0
    iterations = np.zeros(out.shape[0], dtype=np.int64)
    converged = np.zeros(out.shape[0], dtype=bool)
    active = np.arange(out.shape[0])
    with threadpool_limits(limits=1, user_api="blas"):
        for _ in range(max_iter):
            if active.size == 0:
                break
            r, fa, ma = out[active], f[active], mask[active]
            r1 = _em_steps(r, fa, ma, kernel)
            new = _squarem(r, r1, fa, ma, kernel) if accelerate else r1
            moved = np.abs(new - r).sum(axis=1)
            out[active] = new
            iterations[active] += 1
            if record is not None:
                record.append(float(_log_likelihoods(out[:1], f[:1], mask[:1], kernel)[0]))
            converged[active[moved <= tol]] = True
            active = active[moved > tol]
    return iterations, converged


def _squarem(r: NDArray[np.float64], r1: NDArray[np.float64], f: NDArray[np.float64],
             mask: NDArray[np.bool_], kernel: CirculantKernel) -> NDArray[np.float64]:
    """One safeguarded SQUAREM iteration (scheme S3) per row, from ``r`` and its EM update
    ``r1`` (see :func:`em_profile`)."""
    r2 = _em_steps(r1, f, mask, kernel)
    s1, v = r1 - r, r2 - 2.0 * r1 + r
    nv = np.linalg.norm(v, axis=1)
    a = np.where(nv > 0, np.minimum(-np.linalg.norm(s1, axis=1) / np.where(nv > 0, nv, 1.0),
                                    -1.0), -1.0)
    new = r2.copy()
    searching = nv > 0
    for _ in range(30):  # pull a back towards −1 until the extrapolated point is non-negative
        searching &= a < -1.0 + 1e-12
        idx = np.flatnonzero(searching)
        if idx.size == 0:
            break
        cand = r[idx] - 2.0 * a[idx, None] * s1[idx] + (a[idx] ** 2)[:, None] * v[idx]
        ok = cand.min(axis=1) >= 0.0
        done = idx[ok]
        if done.size:
            c = _em_steps(cand[ok] / cand[ok].sum(axis=1, keepdims=True), f[done], mask[done],
                          kernel)
            better = (_log_likelihoods(c, f[done], mask[done], kernel)
                      >= _log_likelihoods(r2[done], f[done], mask[done], kernel))
            new[done[better]] = c[better]
            searching[done] = False
        a[idx[~ok]] = (a[idx[~ok]] - 1.0) / 2.0
    return new


def em_profile(noisy_profile: NDArray[np.float64], kernel: CirculantKernel, *,
               start: NDArray[np.float64], max_iter: int = 3000, tol: float = 1e-9,
               accelerate: bool = True, record: list[float] | None = None) -> EMResult:
    """Run EM from ``start`` (a strictly positive profile on ``0..n``).

    Parameters
    ----------
    noisy_profile : numpy.ndarray
        ``f~`` on ``t = -B..n+B`` (length ``P``); it is renormalized to sum 1 internally
        (values outside the window were dropped; all zeros are read as the uniform data).
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
    f, r = _normalised(np.asarray(noisy_profile)[None, :], np.asarray(start)[None, :])
    ll0 = float(_log_likelihoods(r, f, f > 0, kernel)[0])
    iterations, converged = _em_rows(r, f, kernel, max_iter=max_iter, tol=tol,
                                     accelerate=accelerate, record=record)
    return EMResult(profile=r[0], iterations=int(iterations[0]), converged=bool(converged[0]),
                    log_likelihood=float(_log_likelihoods(r, f, f > 0, kernel)[0]),
                    start_log_likelihood=ll0)


def em_profiles(noisy_profiles: NDArray[np.float64], kernel: CirculantKernel, *,
                starts: NDArray[np.float64], max_iter: int = 3000,
                tol: float = 1e-9) -> NDArray[np.float64]:
    """:func:`em_profile` (accelerated) on many noisy profiles at once, one per row.

    The same iteration, cap and convergence rule row by row, with each kernel product done
    for all unconverged rows in one matrix product: the simulated sketches of the intervals
    run EM hundreds of times on the same kernel.

    Parameters
    ----------
    noisy_profiles : numpy.ndarray
        ``f~`` per row, shape ``(m, P)`` (renormalized as in :func:`em_profile`).
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
    f, out = _normalised(noisy_profiles, starts)
    _em_rows(out, f, kernel, max_iter=max_iter, tol=tol, accelerate=True, record=None)
    return out


def _atom_start(reference: NDArray[np.float64]) -> NDArray[np.float64]:
    """EM's start for :func:`smooth_profile`: the reference's mass at the cap ``n`` there, the
    rest uniform on ``0..n−1`` (every class kept positive so that EM can move it)."""
    n = reference.size - 1
    top = float(min(max(reference[n], 0.0), 1.0))
    start = np.full((1, n + 1), (1.0 - top) / max(n, 1))
    start[0, n] = top
    return np.maximum(start, 1e-12)


def smooth_profile(noisy_profile: NDArray[np.float64], kernel: CirculantKernel, *,
                   reference: NDArray[np.float64], items: float,
                   max_iter: int = 5000) -> NDArray[np.float64] | None:
    """The first plain EM iterate from a flat start that the data cannot tell apart from
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
    within ``n/2`` is as plausible as the truth typically is; EM from a flat start reaches it
    through smooth profiles (early-stopped EM is the classic regularised deconvolution), with
    every class positive. The cap class ``n`` holds every item with count ``>= n``, a lump by
    construction rather than part of a smooth shape, so the start keeps the reference's mass
    there and is uniform on ``0..n−1``. From the fully uniform start the early-stopped profile
    spread the cap's mass into class ``n−1`` (0.04 there against 0.01 in the data of
    ``benchmarks/bench_sketch_intervals.py`` at ε = 0.25), and the simulated errors of the top
    classes came out larger than the real ones (at ε = 0.25 and 0.5 the band held in 0.930 and
    0.941 of 1,000 releases at nominal 0.9; from this start, with the band centred as the
    release centres it, 0.923 and 0.924). Deterministic post-processing.
    """
    if float(np.sum(noisy_profile)) <= 0:
        return None
    n = kernel.max_count
    ref = np.asarray(reference, dtype=np.float64)
    f, r = _normalised(np.asarray(noisy_profile)[None, :], _atom_start(ref))
    mask = f > 0
    target = log_likelihood(ref, f[0], kernel)
    with threadpool_limits(limits=1, user_api="blas"):
        for _ in range(max_iter):
            if items * (target - float(_log_likelihoods(r, f, mask, kernel)[0])) <= n / 2.0:
                return r[0]
            r = _em_steps(r, f, mask, kernel)
    return None
