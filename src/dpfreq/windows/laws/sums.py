"""Exact two-sided quantiles of sums of independent, identically distributed integer node noises.

An answer of a tree (or per-query) structure without consistency post-processing is
``exact count + Σ_{v in its cover} ±Z_v`` with ``Z_v`` i.i.d. discrete Laplace ``DLap(γ)``
(``Pr[z] ∝ e^{−γ|z|}``) or discrete Gaussian (``Pr[z] ∝ e^{−z²/(2σ²)}``). Both laws are
symmetric, so the signs do not matter and the noise of an answer covered by ``m`` nodes has the
law of ``S_m``, the sum of ``m`` i.i.d. copies: the ``m``-fold convolution of the node pmf.

Computation (public parameters only, cached per ``(law, m)``, so the cost is per distinct
cover size, not per answer):

1. ``R`` with ``Pr[|S_m| > R] <= τ`` (``τ = 1e-13``) from a Chernoff bound (discrete Laplace)
   or the sub-Gaussian tail of the discrete Gaussian (Canonne, Kamath and Steinke 2020,
   "The discrete Gaussian for differential privacy").
2. The law of ``S_m`` folded onto a circle of ``n >= 2R + 1`` points: for discrete Laplace
   from its characteristic function (exact Fourier coefficients ``φ(2πk/n)^m``); for the
   discrete Gaussian the node pmf restricted to ``[−R, R]`` raised to the ``m``-th power in
   the Fourier domain (a sub-probability law: only lowers the mass).
3. Lower bound. On ``[−R, R]`` the folded law exceeds the true pmf by at most the mass folded
   back from outside, ``Pr[|S_m| > R] <= τ``. So ``Pr[|S_m| <= b] >= c(b) − τ − ϵ_fft`` with
   ``c`` the computed mass of ``[−b, b]`` and ``ϵ_fft`` an allowance for floating-point
   rounding of the transforms.
4. The half-width is the smallest integer ``b`` with that lower bound ``>= 1 − β``; it is never
   larger than the Chernoff / sub-Gaussian bound (the smaller of the two valid values is used).

For discrete Laplace with small ``γ`` the folded law has only a few Fourier coefficients that
are not negligible (``φ(θ)^m`` falls fast away from ``θ = 0``), so the mass of ``[−b, b]`` is a
short sum against the Dirichlet kernel (:func:`_dirichlet_quantiles`, the omitted terms bounded
by ``TRUNC``): ``b`` is found by a search over ``b`` for every cover size of a batch instead of
one transform of ``n >= 2R + 1`` points per size. ``log φ`` is computed in the form without
cancellation (:func:`_log_phi`). With the compiled kernels of :mod:`dpfreq.windows.noise.kernel`
loaded, the Chernoff minima and the searches run as compiled loops that give the same numbers
(a secant search per size ends at the same certified ``b`` as the numpy bisection: the smallest
``b`` certified with ``b − 1`` not); the numpy path is the fallback.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from statistics import NormalDist
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import fft as sfft

from dpfreq.windows.noise import kernel as node_kernel

__all__ = [
    "TAIL",
    "WEIGHT_DECIMALS",
    "sum_abs_cdf",
    "sum_quantile",
]

#: mass left outside the computed support (counted against the interval)
TAIL = 1e-13

#: weights of a linear combination of node noises that agree to this many decimals are grouped
#: (one convolution per group in :func:`weighted_sum_law`; one term per group in the Chernoff
#: bound of :mod:`dpfreq.windows.structures.base`)
WEIGHT_DECIMALS = 12

#: largest support radius ``R`` computed exactly; beyond it the tail bound alone is used
MAX_RADIUS = 1 << 21

#: bound on the Fourier terms left out of a sum in :func:`_dirichlet_quantiles`
TRUNC = 1e-17


@functools.lru_cache(maxsize=64)
def _chernoff_grid(gamma: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(λ, log M(λ))`` on the grid of :func:`_chernoff_radius` (shared by every ``m``)."""
    alpha = math.exp(-gamma)
    lam = gamma * np.concatenate((np.geomspace(1e-6, 0.5, 2000),
                                  1 - np.geomspace(0.5, 1e-7, 2000)))
    # α·e^{±λ} = e^{±λ−γ}: no overflow for large γ
    log_m = (2 * math.log1p(-alpha) - np.log1p(-np.exp(lam - gamma))
             - np.log1p(-np.exp(-lam - gamma)))
    lam.setflags(write=False)
    log_m.setflags(write=False)
    return lam, log_m


def _chernoff_radius(m: Any, gamma: float, beta: float) -> Any:
    """``x`` with ``Pr[|S_m| > x] <= β`` for ``S_m`` a sum of ``m`` i.i.d. ``DLap(γ)``.

    ``Pr[|S| > x] <= 2 e^{−λx} M(λ)^m`` for every ``0 < λ < γ``, with the moment generating
    function ``M(λ) = (1−α)²/((1−αe^λ)(1−αe^{−λ}))``, ``α = e^{−γ}``; the smallest over a grid.
    ``m`` may be an array of cover sizes (one radius each, the same arithmetic per entry).
    """
    lam, log_m = _chernoff_grid(gamma)
    if np.ndim(m):
        ms = np.array(m, dtype=np.int64)  # a fresh array: the type the kernel was built for
        kern = node_kernel.loaded()
        if kern is not None:  # the same arithmetic in one compiled pass
            out = np.empty(ms.size, dtype=np.float64)
            kern.chernoff_floor(ms, log_m, lam, math.log(2.0 / beta), out)
            return out
        return np.floor(_grid_minimum(ms, log_m, lam, math.log(2.0 / beta)))
    return float(np.floor(np.min((m * log_m + math.log(2.0 / beta)) / lam)))


def _grid_minimum(ms: NDArray[np.int64], log_m: NDArray[np.float64], lam: NDArray[np.float64],
                  c: float, width: int = 512) -> NDArray[np.float64]:
    """``min_j (m·log_m_j + c)/λ_j`` per ``m``: the terms of ``width`` grid points around the
    minimizer of every 16th point, kept where the bounds of ``node_kernel_jit.chernoff_floor``
    (the grid's ``c/λ`` below, ``m·log_m/λ`` above) prove the other terms no smaller; the
    whole grid for the other sizes. The same value as the whole grid's minimum."""
    col = ms[:, None]
    start = np.clip(np.argmin((col * log_m[::16] + c) / lam[::16], axis=1) * 16 - width // 2,
                    0, max(0, lam.size - width))
    idx = np.minimum(start[:, None] + np.arange(width), lam.size - 1)
    best = np.min((col * log_m[idx] + c) / lam[idx], axis=1)
    sure = log_m >= 0.0 if c >= 0.0 else np.zeros(lam.size, dtype=np.bool_)
    down = np.minimum.accumulate(np.where(sure, c / lam, -np.inf))
    up = np.minimum.accumulate(np.where(sure, log_m / lam * (1.0 - 1e-13), -np.inf)[::-1])[::-1]
    end = start + width
    below = np.where(start > 0, down[np.maximum(start - 1, 0)], np.inf)
    above = np.where(end < lam.size, ms * up[np.minimum(end, lam.size - 1)], np.inf)
    rest = np.flatnonzero(~((below >= best) & (above >= best)))
    if rest.size:
        best[rest] = np.min((col[rest] * log_m + c) / lam, axis=1)
    out: NDArray[np.float64] = best
    return out


def _gaussian_radius(m: int, sigma2: int, beta: float) -> float:
    """``x`` with ``Pr[|S_m| > x] <= β``: ``S_m`` is sub-Gaussian with variance proxy ``mσ²``."""
    return float(math.floor(math.sqrt(2.0 * m * sigma2 * math.log(2.0 / beta))))


@functools.lru_cache(maxsize=4096)
def tail_radius(m: int, beta: float, *, gamma: Fraction | None = None,
                sigma2: int | None = None) -> float:
    """The tail-bound half-width (Chernoff or sub-Gaussian) of a sum of ``m`` node noises
    (cached: answers ask the same few cover sizes again and again)."""
    if gamma is not None:
        return _chernoff_radius(m, float(gamma), beta)
    return _gaussian_radius(m, int(sigma2 or 0), beta)


def _log_phi(k: NDArray[np.float64], n: int, gamma: float) -> NDArray[np.float64]:
    """``log φ(2πk/n)`` of ``DLap(γ)``, to a few ulp.

    ``φ(θ) = (1−α)²/(1 − 2α cos θ + α²) = 1/(1 + 4α sin²(θ/2)/(1−α)²)``; the second form
    has no cancellation (the first loses about ``log10(1/γ²)`` digits near ``θ = 0``, so that
    ``φ(0)`` is not exactly 1 for small ``γ``).
    """
    alpha = math.exp(-gamma)
    one_minus = -math.expm1(-gamma)
    half = np.sin(np.pi * k / n)
    out: NDArray[np.float64] = -np.log1p((4.0 * alpha / (one_minus * one_minus)) * half * half)
    return out


def _circular_power(m: int, r: int, gamma: Fraction | None, sigma2: int | None
                    ) -> tuple[int, NDArray[np.float64]]:
    """``(n, c)``: the law of ``S_m`` folded onto a circle of ``n >= 2r + 1`` points (index
    ``s mod n``), clipped at 0 after rounding.

    Discrete Laplace: the Fourier coefficients of the folded law are exactly
    ``φ(2πk/n)^m`` with the characteristic function ``φ(θ) = (1−α)²/(1 − 2α cos θ + α²)``.
    Discrete Gaussian: the node pmf on ``[−r, r]`` (a sub-probability) is transformed and
    raised to the ``m``-th power (real: the pmf is symmetric). Either way ``c`` is at least the
    mass of the event "every node and the sum within ``[−r, r]``" at each point of ``[−r, r]``
    and exceeds ``Pr[S_m = s]`` there by at most the folded mass ``Pr[|S_m| > r] <= τ``.
    """
    n = sfft.next_fast_len(2 * r + 1, real=True)
    if gamma is not None:
        log_phi = _log_phi(np.arange(n // 2 + 1, dtype=np.float64), n, float(gamma))
        law = sfft.irfft(np.exp(m * log_phi), n)
    else:
        s2 = float(sigma2 or 0)
        z = np.arange(r + 1, dtype=np.float64)
        half = int(40 * math.sqrt(s2)) + 10
        zz = np.arange(-half, half + 1, dtype=np.float64)
        node = np.exp(-(z**2) / (2.0 * s2)) / float(np.sum(np.exp(-(zz**2) / (2.0 * s2))))
        circ = np.zeros(n, dtype=np.float64)
        circ[:r + 1] = node
        if r:
            circ[n - r:] = node[:0:-1]
        law = sfft.irfft(sfft.rfft(circ).real ** m, n)
    np.clip(law, 0.0, None, out=law)
    return n, law


@functools.lru_cache(maxsize=256)
def sum_abs_cdf(m: int, gamma: Fraction | None = None, sigma2: int | None = None
                ) -> NDArray[np.float64] | None:
    """``L[b] <= Pr[|S_m| <= b]`` for ``b = 0 … R`` (see the module docstring), or ``None`` when
    the support is too long to compute (then only the tail bound is used). Read-only, cached.
    """
    r = int(tail_radius(m, TAIL, gamma=gamma, sigma2=sigma2))
    if r > MAX_RADIUS:
        return None
    n, law = _circular_power(m, r, gamma, sigma2)
    pos = law[1:r + 1] + law[n - r:][::-1]
    mass = np.concatenate(([law[0]], pos)).cumsum()
    out: NDArray[np.float64] = mass - _slack(m, n)
    out.setflags(write=False)
    return out


def _slack(m: int, n: int) -> float:
    """What :func:`sum_abs_cdf` subtracts: the folded mass and a rounding allowance."""
    return TAIL + 1e-15 * n * max(1, m).bit_length() + 1e-12


def _dirichlet_terms(m: int, n: int, gamma: float) -> int | None:
    """``K`` of :func:`_dirichlet_weights`, or ``None`` when it is not small against ``n``."""
    alpha = math.exp(-gamma)
    one_minus = -math.expm1(-gamma)
    # φ(θ)^m <= t  ⟺  sin²(θ/2) >= (1/t − 1)(1−α)²/(4α)
    s2 = math.expm1(-math.log(2.0 * TRUNC / n) / m) * one_minus * one_minus / (4.0 * alpha) \
        if alpha > 0 else math.inf
    if not s2 < 1.0:
        return None
    k_max = math.ceil(math.asin(math.sqrt(s2)) * n / math.pi) + 1
    return None if 8 * k_max >= n else k_max


def _dirichlet_weights(m: Any, n: Any, k: Any, gamma: float) -> NDArray[np.float64]:
    """``w_k = 2φ_k^m/(n sin(πk/n))`` with ``|M(b) − (2b+1)/n − Σ_{k<=K} w_k sin(π(2b+1)k/n)|
    <= TRUNC`` (``K`` from :func:`_dirichlet_terms`; ``m``, ``n``, ``k`` broadcast, so the
    terms of many rows come from one pass).

    ``M(b)`` is the mass of ``[−b, b]`` under the law of ``S_m`` folded onto ``n`` points:
    ``M(b) = (1/n) Σ_{k<n} φ_k^m D_b(2πk/n)`` with the Dirichlet kernel
    ``D_b(θ) = sin((2b+1)θ/2)/sin(θ/2)``. ``φ`` decreases on ``[0, π]``; for ``k > K`` it is
    ``φ_k^m <= 2·TRUNC/n``, and ``|D_b(2πk/n)| <= n/(2k)``, so the omitted terms sum to at
    most ``TRUNC``.
    """
    out: NDArray[np.float64] = (2.0 / n) * np.exp(m * _log_phi(k, n, gamma)) / np.sin(
        np.pi * k / n)
    return out


def _dirichlet_quantiles(ms: list[int], rs: list[int], beta: float, gamma: float
                         ) -> dict[int, float]:
    """The certified quantile of :func:`sum_quantile` for every ``m`` whose folded law has few
    Fourier terms (:func:`_dirichlet_terms`): the smallest ``b <= r`` with
    ``M(b) − slack >= 1 − β`` (``b`` certified, ``b − 1`` not). ``M(b)`` is the quantity
    :func:`sum_abs_cdf` computes with a transform of ``n >= 2r + 1`` points, here from ``K``
    terms (rounding error ``<= 1e-13``: ``|w_k| <= 1/k``), with the same ``slack`` plus
    ``TRUNC``; an ``m`` not certified at ``b = r`` is left out. The compiled search of
    :mod:`dpfreq.windows.noise.kernel` when loaded (a secant search per row from a normal
    guess, a few sums instead of a bisection's ~18), else the same search in numpy.
    """
    rows = []
    for m, r in zip(ms, rs, strict=True):
        n = sfft.next_fast_len(2 * r + 1, real=True)
        k_max = _dirichlet_terms(m, n, gamma)
        if k_max is not None:
            rows.append((m, r, n, k_max))
    if not rows:
        return {}
    m_col, r_col, n_col, k_col = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
    offs = np.concatenate(([0], np.cumsum(k_col)))
    row_of = np.repeat(np.arange(k_col.size), k_col)
    ks = np.arange(offs[-1], dtype=np.int64) - offs[row_of] + 1
    w_flat = _dirichlet_weights(m_col[row_of], n_col[row_of], ks.astype(np.float64), gamma)
    slack = np.array([_slack(m, n) + TRUNC for m, _, n, _ in rows])
    z = NormalDist().inv_cdf(1.0 - beta / 2.0)  # the guess: a normal law of the same variance
    guess = (z * np.sqrt(m_col * (2.0 * math.exp(-gamma))) / -math.expm1(-gamma)
             ).astype(np.int64)
    kern = node_kernel.loaded()
    if kern is not None:
        out = np.empty(k_col.size, dtype=np.int64)
        kern.dirichlet_search(w_flat, offs, n_col, r_col, slack, 1.0 - beta, guess, out)
    else:
        w_all = np.zeros((k_col.size, int(k_col.max())), dtype=np.float64)
        w_all[row_of, ks - 1] = w_flat
        out = _dirichlet_search(w_all, n_col, r_col, slack, beta, guess)
    return {m: float(b) for m, b in zip(m_col.tolist(), out.tolist(), strict=True) if b >= 0}


def _dirichlet_search(w_all: NDArray[np.float64], n: NDArray[np.int64], r: NDArray[np.int64],
                      slack: NDArray[np.float64], beta: float, guess: NDArray[np.int64]
                      ) -> NDArray[np.int64]:
    """The search of :func:`_dirichlet_quantiles` without the compiled kernels: the secant search
    of ``node_kernel_jit.dirichlet_search`` (the same steps) for all rows at once, ``w_all`` the
    rows' terms zero-padded; ``−1`` where ``r`` is not certified."""
    ks = np.arange(1, w_all.shape[1] + 1, dtype=np.int64)

    def excess(rows: NDArray[np.intp], b: NDArray[np.int64]) -> NDArray[np.float64]:
        n_col, odd = n[rows][:, None], (2 * b + 1)[:, None]
        sines = np.sin(np.pi * ((odd * ks) % (2 * n_col)) / n_col)
        mass = odd[:, 0] / n_col[:, 0] + np.sum(w_all[rows] * sines, axis=1)
        out: NDArray[np.float64] = (mass - slack[rows]) - (1.0 - beta)
        return out

    hi, lo = r.copy(), np.full(r.size, -1, dtype=np.int64)
    keep = excess(np.arange(r.size), hi) >= 0.0
    x, x0 = np.minimum(np.maximum(guess, 0), hi - 1), lo.copy()
    f0, w1 = np.zeros(r.size), hi + 1
    w2 = w1.copy()
    active, it = keep & (hi - lo > 1), 0
    while active.any():
        rows = np.flatnonzero(active)
        xa, xp, fp = x[rows], x0[rows], f0[rows]
        f = excess(rows, xa)
        ok = f >= 0.0
        h, lo_r = np.where(ok, xa, hi[rows]), np.where(ok, lo[rows], xa)
        hi[rows], lo[rows], it = h, lo_r, it + 1
        step = np.where(ok, -1, 1) * np.maximum(1, xa // 64)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            est = np.where(xp < 0, (xa + step).astype(np.float64),
                           np.where(f != fp, xa - f * (xa - xp) / (f - fp), -2.0))
        bis = ((it >= 3) & (2 * (h - lo_r) > w2[rows])) | ~((lo_r < est) & (est < h))
        est = np.where(bis, 0.0, est)
        near = np.clip(np.where(ok, np.floor(est), np.ceil(est)), lo_r + 1, h - 1)
        x[rows] = np.where(bis, (lo_r + h) // 2, near.astype(np.int64))
        w2[rows], w1[rows] = w1[rows], h - lo_r
        x0[rows], f0[rows] = xa, f
        active[rows] = h - lo_r > 1
    out: NDArray[np.int64] = np.where(keep, hi, -1)
    return out


#: certified quantiles already computed, per (law, β) and m: public parameters only (one table
#: per level, so a look-up hashes the law once, not once per cover size)
_QUANTILES: dict[tuple[Fraction | None, int | None, float], dict[int, float]] = {}


def sum_quantile(nodes: object, beta: float, *, gamma: Fraction | None = None,
                 sigma2: int | None = None) -> NDArray[np.float64]:
    """Smallest integer ``b`` with ``Pr[|S_m| <= b] >= 1 − β`` certified, per entry of ``nodes``.

    ``nodes`` holds cover sizes ``m`` (``0`` gives ``0``); node noise is ``DLap(gamma)`` or the
    discrete Gaussian with ``sigma2``. Uses the exact law (:func:`sum_abs_cdf`, or for discrete
    Laplace the same folded law summed in :func:`_dirichlet_quantiles`) where it certifies a
    smaller value than the tail bound, else the tail bound. Cached per distinct ``m``.
    """
    m_arr = np.asarray(nodes, dtype=np.int64)
    small = m_arr.size > 0 and int(m_arr.min()) >= 0 and int(m_arr.max()) < 1 << 16
    if small:  # cover sizes are small: a count per size instead of a sort
        uniq = np.flatnonzero(np.bincount(m_arr.ravel()))
    else:
        uniq, inv = np.unique(m_arr, return_inverse=True)
    table = _QUANTILES.get((gamma, sigma2, beta))
    if table is None:
        if len(_QUANTILES) > 1 << 8:
            _QUANTILES.clear()
        table = _QUANTILES.setdefault((gamma, sigma2, beta), {})
    sizes = uniq.tolist()
    want = [m for m in sizes if m > 0 and m not in table]
    new = dict(zip(want, _compute_quantiles(want, beta, gamma, sigma2), strict=True)) \
        if want else {}
    if len(table) > 1 << 16:
        table.clear()
    table.update(new)
    vals = np.array([0.0 if m <= 0 else new[m] if m in new else table[m] for m in sizes],
                    dtype=np.float64)
    if small:
        lut = np.zeros(sizes[-1] + 1, dtype=np.float64)
        lut[uniq] = vals
        out: NDArray[np.float64] = lut[m_arr.ravel()].reshape(m_arr.shape)
        return out
    out = vals[inv].reshape(m_arr.shape)
    return out


def _compute_quantiles(ms: list[int], beta: float, gamma: Fraction | None,
                       sigma2: int | None) -> list[float]:
    """:func:`sum_quantile` of the distinct positive cover sizes ``ms`` (not cached)."""
    if gamma is not None:
        x = _chernoff_radius(np.array(ms), float(gamma), beta).tolist()
    else:
        x = [_gaussian_radius(m, int(sigma2 or 0), beta) for m in ms]
    if beta <= 10 * TAIL:
        return [float(v) for v in x]
    # the exact law certifies nothing when its slack is >= β (its mass is at most 1); the slack
    # grows with the radius, and the radius at τ <= β is at least the one at β (the same
    # rounded operations with a larger constant), so a size the radius at β rules out is skipped
    some = [m for m, v in zip(ms, x, strict=True) if _usable(m, int(v), beta)]
    todo = [(m, r) for m, r in zip(some, _tail_radii(some, gamma, sigma2), strict=True)
            if _usable(m, r, beta)]
    exact: dict[int, float] = {}
    if gamma is not None:
        exact = _dirichlet_quantiles([m for m, _ in todo], [r for _, r in todo], beta,
                                     float(gamma))
    for m, _ in todo:
        if m in exact:
            continue
        cdf = sum_abs_cdf(m, gamma, sigma2)
        if cdf is not None:
            b = int(np.searchsorted(cdf, 1.0 - beta, side="left"))
            if b < cdf.size:
                exact[m] = float(b)
    return [min(float(v), exact.get(m, math.inf)) for m, v in zip(ms, x, strict=True)]


def _tail_radii(ms: list[int], gamma: Fraction | None, sigma2: int | None) -> list[int]:
    """:func:`tail_radius` at ``τ`` of every ``m`` (the discrete Laplace ones in one pass)."""
    if gamma is not None and ms:
        return [int(r) for r in _chernoff_radius(np.array(ms), float(gamma), TAIL).tolist()]
    return [int(tail_radius(m, TAIL, sigma2=sigma2)) for m in ms]


def _usable(m: int, r: int, beta: float) -> bool:
    """Whether the exact law of ``S_m`` (support radius ``r``) can certify a quantile at β."""
    return r <= MAX_RADIUS and _slack(m, sfft.next_fast_len(2 * r + 1, real=True)) + TRUNC < beta


@functools.lru_cache(maxsize=256)
def sum_pmf(m: int, gamma: Fraction | None = None, sigma2: int | None = None
            ) -> tuple[int, NDArray[np.float64]] | None:
    """``(r, p)``: ``p[y + r]`` is ``Pr[S_m = y]`` on ``[−r, r]`` plus folded-back mass (at most
    ``τ`` in total, as ``Pr[|S_m| > r] <= τ``), which the callers subtract. ``None`` when the
    support is too long to compute."""
    r = int(tail_radius(m, TAIL, gamma=gamma, sigma2=sigma2))
    if r > MAX_RADIUS:
        return None
    n, law = _circular_power(m, r, gamma, sigma2)
    out = np.concatenate((law[n - r:], law[:r + 1]))
    out.setflags(write=False)
    return r, out


@functools.lru_cache(maxsize=256)
def _sum_cdf(m: int, gamma: Fraction | None, sigma2: int | None
             ) -> tuple[int, NDArray[np.float64]] | None:
    """``(r, C)`` with ``C[i] = Σ_{y < i − r} p(y)`` (``p`` from :func:`sum_pmf`)."""
    law = sum_pmf(m, gamma, sigma2)
    if law is None:
        return None
    r, p = law
    return r, np.concatenate(([0.0], np.cumsum(p)))


def weighted_sum_law(weights: NDArray[np.float64], radius: float, *,
                     gamma: Fraction | None = None, sigma2: int | None = None,
                     grid: int = 2048) -> tuple[NDArray[np.float64], float, float, float] | None:
    """Certified law of ``S = Σ_v a_v Z_v`` (non-integer weights, ``Z_v`` i.i.d. node noise).

    Nodes with equal ``|a_v|`` (to 12 decimals) form groups ``g`` with integer sums ``Y_g``
    (exact law, :func:`sum_pmf`); ``S = Σ_g w_g Y_g + ρ`` with ``|ρ| <= 1e-12·Σ|Z_v|``. Each
    ``w_g Y_g`` is rounded to the grid ``hℤ`` (``h = radius / grid``; symmetric rounding, so the
    errors ``e_g`` have mean 0, lie in an interval of length ``min(h, 2 w_g r_g)`` and are
    independent across groups) and the rounded variables ``J_g`` are convolved on a circle
    covering ``|S| <= radius`` (``radius`` must satisfy ``Pr[|S| > radius] <= τ``). Returns
    ``(L, h, Σ_g len_g², ρ_max)``: ``L[c] <= Pr[|Σ_g J_g| <= c]`` with every truncated and
    folded mass subtracted, the step, the Hoeffding range term and a bound on ``|ρ|`` holding
    with probability ``>= 1 − τ``. ``None`` when a group's law is too long to compute.
    """
    a = np.abs(np.asarray(weights, dtype=np.float64))
    a = a[a > 0]
    w_all = np.round(a, WEIGHT_DECIMALS)
    ws, counts = np.unique(w_all, return_counts=True)
    h = radius / grid
    n_groups = int(ws.size)
    half = grid + n_groups
    n = sfft.next_fast_len(2 * half + 1, real=True)
    tables = [_sum_cdf(int(c), gamma, sigma2) for c in counts.tolist()]
    if any(t is None for t in tables):
        return None
    rs = np.array([t[0] for t in tables if t is not None], dtype=np.int64)
    j = np.arange(half + 1, dtype=np.float64)[None, :]
    step = (h / ws)[:, None]
    top = (rs + 1)[:, None]
    lo = np.minimum(np.ceil((j - 0.5) * step), top).astype(np.int64) + rs[:, None]
    hi = np.minimum(np.ceil((j + 0.5) * step), top).astype(np.int64) + rs[:, None]
    lo[:, 0] = 1 - hi[:, 0] + 2 * rs  # J = 0 holds |y| <= hi_0 − 1
    pos = np.empty((n_groups, half + 1), dtype=np.float64)
    for i, t in enumerate(tables):
        if t is not None:
            pos[i] = t[1][hi[i]] - t[1][lo[i]]
    circ = np.zeros((n_groups, n), dtype=np.float64)
    circ[:, :half + 1] = pos
    circ[:, n - half:] = pos[:, :0:-1]
    spec = np.prod(sfft.rfft(circ, axis=1), axis=0)
    law_j = np.clip(sfft.irfft(spec, n), 0.0, None)
    mass = np.concatenate(([law_j[0]], law_j[1:half + 1] + law_j[n - half:][::-1])).cumsum()
    slack = (3 + 2 * n_groups) * TAIL + 1e-15 * n * (n_groups + 1) + 1e-12
    node_r = tail_radius(1, TAIL / max(1, a.size), gamma=gamma, sigma2=sigma2)
    rho = float(np.max(np.abs(a - w_all))) * a.size * node_r if a.size else 0.0
    ranges = float(np.sum(np.minimum(h, 2 * ws * rs) ** 2))
    out: NDArray[np.float64] = mass - slack
    out.setflags(write=False)
    return out, h, ranges, rho


def weighted_quantile(law: tuple[NDArray[np.float64], float, int, float], beta: float
                      ) -> float | None:
    """``b`` with ``Pr[|S| > b] <= β`` from :func:`weighted_sum_law`, or ``None`` if not certified.

    ``Pr[|S| > hc + t + ρ] <= Pr[|hΣJ_g| > hc] + Pr[|Σ e_g| > t] + τ``; the rounding errors are
    bounded by Hoeffding's inequality, ``t = √(Σ_g len_g² · ln(2/β_e)/2)`` with ``β_e = β/20``.
    """
    cdf, h, ranges, rho = law
    beta_e = beta / 20
    c = int(np.searchsorted(cdf, 1.0 - beta + beta_e + TAIL, side="left"))
    if c >= cdf.size or beta <= 1e3 * TAIL:
        return None
    t = math.sqrt(ranges * math.log(2.0 / beta_e) / 2.0)
    return h * c + t + rho
