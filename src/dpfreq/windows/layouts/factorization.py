"""The (damped) square-root factorization of prefix sums, on integers, with discrete Gaussian
noise.

A cumulative family answers the prefix sums ``A x`` of ``x``, the per-period counts of items
whose k-th occurrence falls in the period (``A`` the lower-triangular matrix of ones). A
factorization mechanism writes ``A = L R``, releases ``y = R x + z`` and answers ``L y =
A x + L z``. The simple counter is ``R = I``; a tree is ``R`` = its block incidence. Here ``R``
is the lower-triangular Toeplitz matrix of the integers

    ``c_j = round(S · g_j)``,   ``S = 2^16``,

with ``g_j`` the coefficients of ``(1 − λx)^{−a}``: ``g_0 = 1``, ``g_j = g_{j−1}·(j − 1 + a)/j·λ``.
At ``a = 1/2``, ``λ = 1`` these are ``C(2j, j)/4^j``, whose square is the series of ``A``: the
square-root factorization (Fichtenberger, Henzinger and Upadhyay 2023; Henzinger, Upadhyay and
Upadhyay 2023), near-optimal as ``T`` grows. For a finite horizon a slightly heavier, slowly
damped shape answers the mean prefix with less variance: :func:`factor_shape` picks ``(a, λ)``
for ``T`` from a fixed grid holding the square root, by the exact mean variance of the real
shape at the unit's sensitivity (public: ``T`` and the unit only), at ``item`` 4.5 % below
the square root's at ``T = 30`` and 3.3 % at ``T = 365``; where points move (``event``,
``item_replace``) a damped shape overlaps less with its shift, and ``λ = 1`` stays. ``R x`` is
an integer vector, so the exact discrete Gaussian (Canonne, Kamath and Steinke 2020) applies;
``L = A R^{-1}`` is lower-triangular Toeplitz with coefficients ``e = cumsum(d)``, ``d`` the
power-series inverse of ``c`` (post-processing, computed in floating point from public values
as the solution of ``c * e = 1``: :func:`prefix_coefficients`).

Sensitivity (exact, in integers, per unit; one neighbour changes ``x`` as stated in
:mod:`dpfreq.windows.structures.base`): at ``item`` one item adds or removes one point,
``x`` moves by
``±e_t`` and the ℓ2 sensitivity of ``R x`` is the norm of a column, largest for the first:
``‖c‖``. At ``event`` and ``item_replace`` a point also moves (``e_t − e_{t'}``); the norm of
``R(e_t − e_{t+g})`` grows with the rows below ``t``, so the largest is at ``t = 0`` and
``max(‖c‖, max_g ‖c − shift_g c‖)`` is exact (computed from the integer autocorrelation of ``c``).

Measurement boundary. The release measures ``u = R x + z`` (integers) and publishes ``L u``
computed from ``u`` alone by one fixed float routine (:func:`prefix_answer`); it never adds
floats to the exact counts. ``L u = A x + L z`` as real numbers, so the published answer is
the exact prefix plus ``L z`` up to a floating-point allowance computed from ``u``
(:data:`ALLOWANCE`), which the intervals include.

Error law. The noise of prefix ``t`` is ``Σ_{m<=t} e_m z_{t−m}`` with ``z_j`` i.i.d. discrete
Gaussian: variance ``Var(z)·Σ_{m<=t} e_m²``; the discrete Gaussian with parameter ``σ²`` is
σ²-sub-Gaussian (Canonne–Kamath–Steinke 2020), so ``Pr[|noise| > x] <= β`` at
``x = √(2σ² Σ e_m² ln(2/β))``. With pure ε the ℓ1 norm of a column, ``Σ c_j ≈ 2S√(T/π)``,
makes this factorization worse than the simple counter at every horizon (the plan still
predicts it and says so); it is offered with zCDP accounting only.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "ALLOWANCE",
    "MAX_HORIZON",
    "SCALE",
    "coefficients",
    "factor_shape",
    "measurement",
    "prefix_answer",
    "prefix_answers",
    "prefix_coefficients",
    "sensitivity",
    "sub_gaussian_halfwidth",
]

#: the integer scale ``S`` of the coefficients (the smallest one, about 200 at ``T = 8192``, is
#: moved by the rounding by less than 0.3 %)
SCALE = 1 << 16

#: the published ``L u`` (:func:`prefix_answer`) is within ``ALLOWANCE · Σ_m e_m |u_{t−m}|`` of
#: the exact real ``Σ_m ℓ_m u_{t−m}`` with the exact coefficients ``ℓ`` of ``L = A R^{-1}``:
#: the float coefficients ``e`` are within a relative ``2^{-40}`` of ``ℓ`` (certified from the
#: exact integer residual of ``e * c`` in the tests, up to :data:`MAX_HORIZON`) and numpy's
#: pairwise float sum of ``t <= 2^13`` terms errs by less than ``30 · 2^{-53} < 2^{-48}`` of
#: the sum of their magnitudes; the intervals add this allowance
ALLOWANCE = 2.0 ** -39

#: longest horizon factorized (the sensitivity's autocorrelation is O(T²) integer work)
MAX_HORIZON = 1 << 13

#: the exponents ``a`` of the shapes tried (binary fractions: exact in float64)
SHAPE_EXPONENTS = (0.5, 0.53125, 0.5625, 0.59375, 0.625)

#: ``1 − λ`` of the shapes tried: ``2^{−s}``, ``s`` in quarter steps from 2 to 14 (products of
#: exact powers of two and the four float64 constants ``2^{−q/4}``), and ``λ = 1``
SHAPE_DAMPINGS = (*(math.ldexp(f, -i) for i in range(2, 14)
                     for f in (1.0, 0.8408964152537145, 0.7071067811865476, 0.5946035575013605)),
                  0.0)

IntArray = NDArray[np.int64]


def _moved_norm(g: NDArray[np.float64]) -> float:
    """``max(‖g‖², max_k ‖g − shift_k g‖²)`` in floats (the autocorrelation by FFT): the ℓ2²
    sensitivity of the real shape when a point may move (module docstring)."""
    n = g.size
    spec = np.fft.rfft(g, 2 * n)
    auto = np.fft.irfft(spec * np.conj(spec), 2 * n)[:n]
    sq = np.concatenate(([0.0], np.cumsum(g * g)))
    moved = sq[n] + sq[n - np.arange(1, n)] - 2 * auto[1:]
    return float(max(sq[n], float(moved.max(initial=0.0))))


def _shape(horizon: int, a: float, damping: float, moves: bool = False
           ) -> tuple[NDArray[np.float64], float]:
    """``(g, mean variance factor)`` of the real shape ``(1 − λx)^{−a}``, ``λ = 1 − damping``:
    ``Δ₂² · mean_t Σ_{m<=t} e_m²`` with ``e = cumsum`` of the inverse series ``(1 − λx)^a`` and
    ``Δ₂² = ‖g‖²`` (a point appears or disappears) or :func:`_moved_norm` (``moves``)."""
    lam = 1.0 - damping
    j = np.arange(1, horizon, dtype=np.float64)
    one = np.ones(1, dtype=np.float64)
    g = np.cumprod(np.concatenate((one, (j - 1 + a) / j * lam)), dtype=np.float64)
    d = np.cumprod(np.concatenate((one, (j - 1 - a) / j * lam)), dtype=np.float64)
    e = np.cumsum(d)
    norm = _moved_norm(g) if moves else float(g @ g)
    return g, norm * float(np.mean(np.cumsum(e * e)))


@functools.lru_cache(maxsize=64)
def factor_shape(horizon: int, moves: bool) -> tuple[float, float]:
    """``(a, 1 − λ)`` of the shape for ``horizon`` periods: the least mean variance over
    :data:`SHAPE_EXPONENTS` × :data:`SHAPE_DAMPINGS` at the sensitivity of the unit (``moves``:
    ``event`` and ``item_replace``, where a point may move; a damped shape overlaps less with
    its shift, so there the square root usually stays); a shape within ``10^{-9}``
    (relative) of the best loses to the earlier one, the square root ``(1/2, 0)`` first, so
    float noise in the scores never changes the choice.

    Examples
    --------
    >>> factor_shape(1, False)
    (0.5, 0.0)
    >>> a, damping = factor_shape(365, False)
    >>> a > 0.5 and 0 < damping < 0.01
    True
    """
    if not 1 <= horizon <= MAX_HORIZON:
        raise ValueError(f"horizon must be in [1, {MAX_HORIZON}]")
    shapes = [(0.5, 0.0)] + [(a, dmp) for a in SHAPE_EXPONENTS for dmp in SHAPE_DAMPINGS
                             if (a, dmp) != (0.5, 0.0)]
    scores = [_shape(horizon, a, dmp, moves)[1] for a, dmp in shapes]
    best = min(scores)
    return next(s for s, v in zip(shapes, scores, strict=True) if v <= best * (1 + 1e-9))


@functools.lru_cache(maxsize=32)
def coefficients(horizon: int, moves: bool) -> IntArray:
    """``c_j = round(S · g_j)`` for ``j < horizon``, ``g`` the shape of :func:`factor_shape`
    for the unit (``moves``: ``event``, ``item_replace``; read-only, cached).

    ``g_j/g_{j−1} = (j − 1 + a)/j · λ < 1`` for ``j >= 1`` (``a < 1``, ``λ <= 1``), so ``c`` is
    non-increasing and non-negative (the rounding is monotone).
    """
    g, _ = _shape(horizon, *factor_shape(horizon, moves))
    out = np.rint(SCALE * g).astype(np.int64)
    out.setflags(write=False)
    return out


@functools.lru_cache(maxsize=32)
def _autocorrelation(horizon: int, moves: bool) -> IntArray:
    """``a[g] = Σ_{i<T−g} c_i c_{i+g}`` in exact integer arithmetic (``c_i <= 2^16``, so every
    sum stays below ``2^45``)."""
    c = coefficients(horizon, moves)
    full = np.correlate(c, c, mode="full")  # int64 throughout: exact
    return np.asarray(full[horizon - 1:], dtype=np.int64)


@functools.lru_cache(maxsize=64)
def sensitivity(horizon: int, unit: str, moves: bool) -> tuple[int, int]:
    """``(ℓ1, ℓ2²)`` sensitivity of ``R x`` for ``unit`` (``item``, ``item_replace`` or
    ``event``), exact integers (module docstring), ``R`` the coefficients shaped for a unit
    with (``moves``) or without moved points."""
    c = [int(v) for v in coefficients(horizon, moves)]
    l1, l2sq = sum(c), sum(v * v for v in c)
    if unit == "item":
        return l1, l2sq
    if unit not in ("event", "item_replace"):
        raise ValueError(f"unknown unit {unit!r}")
    prefix = np.concatenate(([0], np.cumsum(np.asarray(c, dtype=np.int64))))
    sq = np.concatenate(([0], np.cumsum(np.asarray(c, dtype=np.int64) ** 2)))
    g = np.arange(1, horizon, dtype=np.int64)
    # ‖c − shift_g c‖₁: c_i for i < g, then c_{i−g} − c_i >= 0 (c non-increasing)
    moved_l1 = 2 * prefix[g] + prefix[horizon - g] - prefix[horizon]
    # ‖c − shift_g c‖₂² = Σ c² + Σ_{i<T−g} c_i² − 2 a[g]
    moved_l2 = sq[horizon] + sq[horizon - g] - 2 * _autocorrelation(horizon, moves)[1:]
    return (max(l1, int(moved_l1.max(initial=0))), max(l2sq, int(moved_l2.max(initial=0))))


@functools.lru_cache(maxsize=32)
def prefix_coefficients(horizon: int, moves: bool) -> NDArray[np.float64]:
    """``e`` with ``L = A R^{-1}`` the lower-triangular Toeplitz matrix of ``e`` (read-only).

    ``e`` is the power series of ``1 / ((1 − x) c(x))``: it solves ``c * e = 1`` at every
    index, so each ``e_n = (1 − Σ_{j>=1} c_j e_{n−j}) / c_0`` (``O(T²)`` work on public
    numbers). Solving for ``e`` itself (not for the inverse of ``c`` and then its running sum)
    keeps the residual ``c * e − 1`` at each step's own rounding, which is what bounds
    ``|e − ℓ|`` (:data:`ALLOWANCE`). Each step's products ``c_j e_{n−j}`` are exact (``e``
    split in two halves of its mantissa, ``c_j <= 2^16``) and summed by numpy's pairwise
    summation, not a BLAS dot product, so ``e`` has the same bits on every machine.
    """
    c = coefficients(horizon, moves).astype(np.float64)
    e = np.zeros(horizon, dtype=np.float64)
    e[0] = 1.0 / c[0]
    for n in range(1, horizon):
        past = e[n - 1::-1]
        split = past * 134217729.0  # 2^27 + 1: Veltkamp's split of a float64 mantissa
        high = split - (split - past)
        low = past - high  # past = high + low; c_j · high and c_j · low are exact
        head = c[1:n + 1]
        e[n] = (1.0 - (float(np.sum(head * high)) + float(np.sum(head * low)))) / c[0]
    e.setflags(write=False)
    return e


def measurement(x: IntArray, z: IntArray, moves: bool) -> IntArray:
    """The noisy measurement ``u = R x + z`` in exact integers: ``x`` the per-period counts
    (length ``T``, non-negative), ``z`` the node noises (length ``T``), ``R`` the coefficients
    of the unit (``moves``).

    ``R x`` is the integer lower-triangular Toeplitz product (``c_j <= 2^16``): exact in int64
    while ``Σ x < 2^46`` (checked)."""
    x = np.asarray(x, dtype=np.int64)
    if x.size and int(x.sum()) >= 1 << 46:
        raise OverflowError("the factorization counts at most 2^46 points")
    c = coefficients(int(x.size), moves)
    out: IntArray = np.convolve(c, x)[:x.size] + np.asarray(z, dtype=np.int64)
    return out


def prefix_answer(u: IntArray, t: int, horizon: int, moves: bool) -> float:
    """The published answer of prefix ``t`` (0-based, periods ``0 … t``) of the factorization
    over ``horizon`` periods (coefficients of the unit: ``moves``): ``Σ_{m<=t} e_m u_{t−m}``
    from the noisy measurements ``u`` (at least ``t + 1`` of them) alone.

    One fixed routine — the products ``e_m·u_{t−m}`` in float64, summed by numpy's pairwise
    summation of one contiguous array of ``t + 1`` terms — so the answer is a deterministic
    function of ``u`` (and the public ``e``): recomputing it from stored measurements, or in a
    stream that has seen ``t + 1`` periods so far, gives the same bits."""
    e = prefix_coefficients(horizon, moves)
    terms = e[:t + 1] * np.asarray(u[t::-1] if t else u[:1], dtype=np.float64)
    return float(np.sum(terms))


def prefix_answers(u: IntArray, moves: bool) -> NDArray[np.float64]:
    """:func:`prefix_answer` of every prefix ``0 … T−1`` (``T = len(u)``)."""
    u = np.asarray(u, dtype=np.int64)
    return np.array([prefix_answer(u, t, u.size, moves) for t in range(u.size)],
                    dtype=np.float64)


def prefix_variance_factors(horizon: int, moves: bool) -> NDArray[np.float64]:
    """``Σ_{m<=t} e_m²`` for ``t = 0 … T−1``: the prefix's variance over ``Var(z)``."""
    e = prefix_coefficients(horizon, moves)
    out: NDArray[np.float64] = np.cumsum(e * e)
    return out


def sub_gaussian_halfwidth(factors: NDArray[np.float64], sigma2: int, beta: float
                           ) -> NDArray[np.float64]:
    """``√(2σ² f ln(2/β))``: ``Pr[|Σ e_m z_m| > x] <= β`` for σ²-sub-Gaussian ``z``."""
    return np.sqrt(2.0 * sigma2 * factors * math.log(2.0 / beta))
