"""The deterministic core of a Wu & Pagh reconstruction (ICML 2024): noisy profile → profile.

Algorithm 2 (:func:`fast_inversion`, the exact minimizer of ``‖A r − f~‖_p`` under ``Σ r = 1``
by three circulant solves with real FFTs), Algorithm 3 (:func:`round_profile`, rounding onto the
simplex with an O(n log n) threshold) and the EM maximum-likelihood alternative
(:func:`solve_profile`, :func:`solve_profiles`). Everything here is post-processing: no ``rng``,
no budget.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.profile.kernel import CirculantKernel
from dpfreq.profile.mle import em_profile, em_profiles, log_likelihoods

__all__ = [
    "DRAW_EM_ITERATIONS",
    "EM_ITERATIONS",
    "fast_inversion",
    "round_profile",
    "rounding_threshold",
    "solve_profile",
    "solve_profiles",
]

_MLE_MIX = 0.1  # weight of the uniform profile in the EM starting point
EM_ITERATIONS = 3000  # EM cap of a released estimate
DRAW_EM_ITERATIONS = 100  # EM cap of each simulated draw of the intervals (see sketch_release)



def fast_inversion(noisy_profile: NDArray[np.float64], kernel: CirculantKernel,
                   norm: str = "1") -> NDArray[np.float64]:
    """Algorithm 2: the exact minimizer of P3 (``‖A r − f~‖_p`` s.t. ``Σ_{0..n} r = 1``).

    Three circulant solves by real FFTs. Returns ``r`` of length ``P`` (positions ``t = −B..n+B``)
    with ``Σ_{t=0..n} r[t] = 1`` (for each row, when ``noisy_profile`` has rows). Ties of the
    p = 1 direction go to the smallest ``t`` among the entries with
    ``|g_t| >= (1 − 1e-12) max|g|``; ``sign(0) = +1`` for p = ∞.
    """
    n, B = kernel.max_count, kernel.B
    inner = slice(B, B + n + 1)
    u = kernel.solve(np.asarray(noisy_profile, dtype=np.float64))
    ind = np.zeros(kernel.size, dtype=np.float64)
    ind[inner] = 1.0
    g = kernel.solve(ind)
    if norm == "1":
        absg = np.abs(g)
        t_star = int(np.flatnonzero(absg >= (1.0 - 1e-12) * absg.max())[0])
        a = np.zeros(kernel.size, dtype=np.float64)
        a[t_star] = 1.0 if g[t_star] >= 0 else -1.0
    elif norm == "2":
        a = g / np.linalg.norm(g)
    else:
        a = np.where(g >= 0, 1.0, -1.0)
    w = kernel.solve(a)
    step = (u[..., inner].sum(axis=-1) - 1.0) / w[inner].sum()
    return u - np.multiply.outer(step, w)


def rounding_threshold(x: NDArray[np.float64], s: float) -> float:
    """τ >= 0 with ``Σ_t min(τ, x_t) = s`` for ``x`` in ``[0, 1]`` and ``0 < s <= Σ x`` (Thm 4.7).

    Sort ascending; ``k*`` is the smallest k with ``Σ_{j<k} x_j + (m − k) x_k >= s`` (m = len x);
    ``τ = (s − Σ_{j<k*} x_j) / (m − k*)``. One sort and one linear scan.
    """
    x = np.asarray(x, dtype=np.float64)
    return float(_thresholds(x[None, :], np.array([s], dtype=np.float64))[0])


def _thresholds(x: NDArray[np.float64], s: NDArray[np.float64]) -> NDArray[np.float64]:
    """:func:`rounding_threshold` of every row of ``x`` with its own ``s`` (0 where ``s = 0``)."""
    xs = np.sort(x, axis=1)
    m = xs.shape[1]
    prefix = np.concatenate((np.zeros((xs.shape[0], 1)), np.cumsum(xs, axis=1)[:, :-1]), axis=1)
    cond = prefix + (m - np.arange(m)) * xs >= s[:, None]
    k = np.where(cond.any(axis=1), cond.argmax(axis=1), m - 1)
    return (s - prefix[np.arange(xs.shape[0]), k]) / (m - k)


def round_profile(r: NDArray[np.float64], *, B: int, max_count: int) -> NDArray[np.float64]:
    """Algorithm 3: map Algorithm 2's output onto the probability simplex on ``0..n`` (each row,
    when ``r`` has rows).

    Phase 1 drops the padding, Phase 2 clips to ``[0, 1]``, Phase 3 subtracts ``min(τ, r[t])``
    with the τ of :func:`rounding_threshold` (equivalently, the Euclidean projection of the
    clipped vector onto the simplex). Round-off left after Phase 3 (or an input whose window
    does not sum to 1 exactly) is removed by a final renormalization.
    """
    r = np.asarray(r, dtype=np.float64)
    x = np.clip(r[..., B : B + max_count + 1], 0.0, 1.0).reshape(-1, max_count + 1)
    excess = np.maximum(x.sum(axis=1) - 1.0, 0.0)  # no Phase 3 where the sum is at most 1
    x = np.maximum(x - _thresholds(x, excess)[:, None], 0.0)
    total = x.sum(axis=1, keepdims=True)
    # a zero total is only reachable with an input far from summing to 1
    x = np.where(total > 0, x / np.where(total > 0, total, 1.0), 1.0 / (max_count + 1))
    return x.reshape((*r.shape[:-1], max_count + 1))


def solve_profile(noisy_profile: NDArray[np.float64], kernel: CirculantKernel, *,
                  norm: str = "1", method: str = "fft",
                  em_iterations: int = EM_ITERATIONS) -> tuple[NDArray[np.float64],
                                                               dict[str, Any]]:
    """Deterministic core: ``f~`` (length ``P``) → ``r[0..n]`` by Algorithms 2+3 or by EM.

    ``method="mle"`` starts EM from the Algorithms 2+3 solution mixed with the uniform profile
    (weight 0.1) and returns the EM result only when its likelihood exceeds that of the
    Algorithms 2+3 solution by more than rounding noise (relative 1e-12), so an exact,
    noise-free ``f~ = A f`` gives back ``f``. ``em_iterations`` caps EM (the simulated draws
    of the intervals use a smaller cap). Returns the profile and diagnostics (empty for
    ``"fft"``).
    """
    n, B = kernel.max_count, kernel.B
    r = round_profile(fast_inversion(noisy_profile, kernel, norm), B=B, max_count=n)
    if method != "mle":
        return r, {}
    start = (1.0 - _MLE_MIX) * r + _MLE_MIX / (n + 1)
    em = em_profile(noisy_profile, kernel, start=start, max_iter=em_iterations)
    use_em, ll_fft = _em_wins(r[None, :], em.profile[None, :], noisy_profile[None, :], kernel)
    return em.profile if use_em[0] else r, {
        "em_iterations": em.iterations, "em_converged": em.converged,
        "em_log_likelihood": em.log_likelihood, "fft_log_likelihood": float(ll_fft[0]),
        "mle_selected": "em" if use_em[0] else "fft", "bound_applies_to": "fft"}


def _em_wins(r_fft: NDArray[np.float64], r_em: NDArray[np.float64],
             noisy_profiles: NDArray[np.float64],
             kernel: CirculantKernel) -> tuple[NDArray[np.bool_], NDArray[np.float64]]:
    """Per row: whether EM's profile beats the Algorithms 2+3 one by more than rounding noise
    (on an exact ``f~`` both sit at the maximum, and a float tie must not swap the exact
    solution for EM's iterate), and the latter's log-likelihood."""
    totals = noisy_profiles.sum(axis=1, keepdims=True)
    f = noisy_profiles / np.where(totals > 0, totals, 1.0)
    ll_fft = log_likelihoods(r_fft, f, kernel)
    # (an Algorithms 2+3 profile of likelihood 0 loses to any EM profile that explains the data)
    margin = np.where(np.isfinite(ll_fft), 1e-12 * np.maximum(1.0, np.abs(ll_fft)), 0.0)
    return log_likelihoods(r_em, f, kernel) > ll_fft + margin, ll_fft


def solve_profiles(noisy_profiles: NDArray[np.float64], kernel: CirculantKernel, *,
                   norm: str, method: str, em_iterations: int) -> NDArray[np.float64]:
    """:func:`solve_profile` on every row of ``noisy_profiles`` (the simulated sketches of the
    intervals), all rows at once (EM by :func:`~dpfreq.profile.mle.em_profiles`)."""
    n, B = kernel.max_count, kernel.B
    fft = round_profile(fast_inversion(noisy_profiles, kernel, norm), B=B, max_count=n)
    if method != "mle":
        return fft
    em = em_profiles(noisy_profiles, kernel, starts=(1.0 - _MLE_MIX) * fft + _MLE_MIX / (n + 1),
                     max_iter=em_iterations)
    return np.where(_em_wins(fft, em, noisy_profiles, kernel)[0][:, None], em, fft)
