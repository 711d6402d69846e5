"""The truncated discrete-Laplace kernel of Wu & Pagh as a symmetric circulant.

Rows and columns are indexed by ``t ∈ [-B .. n+B]`` (array position ``t + B``); the length is
``P = n + 2B + 1``. ``c`` has ``c_k = α^k`` for ``k ∈ [0..B]``, ``c_{P-k} = α^k`` for
``k ∈ [1..B]`` and zeros elsewhere; ``A = circ(c) / P_norm`` with
``P_norm = Σ_{|k|≤B} α^{|k|}``. Products with ``A^{-1}`` go through real FFTs; products with
``A`` too, except for small kernels (``P <= 320``), where a dense matrix-vector product is
several times faster than an FFT call (EM applies ``A`` hundreds of times per solve).
Eigenvalues are real (``A`` is a real symmetric circulant) and available in closed form
(Lemma 4.6) or from ``rfft(c)``.

Everything in this module is deterministic post-processing and takes no ``rng``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "CirculantKernel",
    "eigenvalues_closed_form",
    "eigenvalues_fft",
    "get_kernel",
    "inverse_norm_bounds",
    "kernel_vector",
    "p_norm",
]

_WORKERS = None  # scipy.fft default; set to -1 to use all cores
#: Largest ``P`` for which ``A`` is applied as a dense matrix (measured: 2 µs against 22 µs by
#: FFT at P = 71, 10 against 33 µs at P = 251, 30 against 26 µs at P = 451).
_DENSE_MAX = 320


def _fft() -> Any:
    """``scipy.fft``, imported on first use: importing it takes 0.2 s, which every command that
    imports the profile package (``dpfreq plan profile`` among them) would pay at start-up."""
    import scipy.fft

    return scipy.fft


def p_norm(B: int, alpha: float) -> float:
    """``P_norm = Σ_{|k|≤B} α^{|k|} = (1 + α − 2α^{B+1}) / (1 − α)``.

    Computed as ``1 + 2 Σ_{k=1..B} α^k`` (a geometric sum evaluated stably for every α ∈ [0, 1)).
    """
    if alpha == 0.0 or B == 0:
        return 1.0
    one_minus = 1.0 - alpha
    # 2 α (1 − α^B) / (1 − α), with 1 − α^B = −expm1(B ln α) kept accurate for α close to 1
    return 1.0 + 2.0 * alpha * (-math.expm1(B * math.log(alpha))) / one_minus


def kernel_vector(max_count: int, B: int, alpha: float) -> NDArray[np.float64]:
    """The first row ``c`` of ``circ(c)`` (length ``P = n + 2B + 1``, not normalized)."""
    P = max_count + 2 * B + 1
    c = np.zeros(P, dtype=np.float64)
    powers = float(alpha) ** np.arange(B + 1, dtype=np.float64)  # 0.0**0 == 1
    c[: B + 1] = powers
    if B:
        c[P - B :] = powers[1:][::-1]
    return c


def eigenvalues_closed_form(max_count: int, B: int, alpha: float) -> NDArray[np.float64]:
    """All ``P`` eigenvalues ``φ_m`` of ``A`` by the closed form of Lemma 4.6.

    ``φ_m = [1 − α² − 2α^{B+1} cos((B+1)θ) + 2α^{B+2} cos(Bθ)] /
    [P_norm (1 − 2α cos θ + α²)]`` with ``θ = 2πm/P``, ``m = 0..P−1``.
    """
    P = max_count + 2 * B + 1
    theta = 2.0 * np.pi * np.arange(P, dtype=np.float64) / P
    a = float(alpha)
    num = (1.0 - a * a - 2.0 * a ** (B + 1) * np.cos((B + 1) * theta)
           + 2.0 * a ** (B + 2) * np.cos(B * theta))
    den = p_norm(B, a) * (1.0 - 2.0 * a * np.cos(theta) + a * a)
    return num / den


def eigenvalues_fft(max_count: int, B: int, alpha: float) -> NDArray[np.float64]:
    """The eigenvalues ``φ_m`` for ``m = 0..⌊P/2⌋`` as ``rfft(c) / P_norm`` (real part).

    The remaining ones follow from ``φ_{P−m} = φ_m``. The imaginary part is round-off only
    (``c`` is symmetric) and is checked to be below ``1e-9``.
    """
    c = kernel_vector(max_count, B, alpha)
    spec = _fft().rfft(c, workers=_WORKERS) / p_norm(B, alpha)
    if spec.size and float(np.max(np.abs(spec.imag))) > 1e-9:  # pragma: no cover - by symmetry
        raise ArithmeticError("circulant kernel has non-real eigenvalues; c is not symmetric")
    return np.ascontiguousarray(spec.real)


def inverse_norm_bounds(B: int, alpha: float) -> tuple[float, float]:
    """Lemma 4.10 upper bounds on ``(‖A^{-1}‖_1 = ‖A^{-1}‖_∞, ‖A^{-1}‖_2)``.

    ``‖A^{-1}‖_2 ≤ P_norm (1+α)/(1 − α − 2α^{B+1})`` and
    ``‖A^{-1}‖_1 ≤ P_norm (2 + α + 1/α) / (1/α − α − 4α^B)``; both require the condition on B of
    :func:`~dpfreq.profile.bounds.bound_parameter`.
    Returns ``inf`` where the denominator is not positive. With ``α = 0`` both are 1.
    """
    pn = p_norm(B, alpha)
    if alpha == 0.0:
        return 1.0, 1.0
    den2 = 1.0 - alpha - 2.0 * alpha ** (B + 1)
    b2 = pn * (1.0 + alpha) / den2 if den2 > 0 else math.inf
    den1 = 1.0 / alpha - alpha - 4.0 * alpha**B
    b1 = pn * (2.0 + alpha + 1.0 / alpha) / den1 if den1 > 0 else math.inf
    return b1, b2


@dataclass(frozen=True, eq=False)
class CirculantKernel:
    """``A = circ(c)/P_norm`` for given ``(n, B, α)``, applied and inverted by real FFTs.

    Attributes
    ----------
    max_count, B : int
        The cap ``n`` and the bound parameter.
    alpha : float
        ``α = e^{-γ}`` of the discrete Laplace noise that was drawn.
    size : int
        ``P = n + 2B + 1``.
    norm_constant : float
        ``P_norm``.
    eigenvalues : numpy.ndarray
        ``rfft(c)/P_norm`` (real, length ``P//2 + 1``).
    """

    max_count: int
    B: int
    alpha: float
    size: int
    norm_constant: float
    eigenvalues: NDArray[np.float64]

    @classmethod
    def build(cls, max_count: int, B: int, alpha: float) -> CirculantKernel:
        """Compute ``P_norm`` and the eigenvalues (one real FFT of ``c``)."""
        lam = eigenvalues_fft(max_count, B, alpha)
        lam.setflags(write=False)
        return cls(max_count=max_count, B=B, alpha=float(alpha), size=max_count + 2 * B + 1,
                   norm_constant=p_norm(B, alpha), eigenvalues=lam)

    @property
    def min_eigenvalue(self) -> float:
        """``min_m φ_m`` (positive under the B condition)."""
        return float(self.eigenvalues.min())

    @cached_property
    def _dense(self) -> NDArray[np.float64] | None:
        """``A`` as a dense ``P × P`` matrix when ``P <= _DENSE_MAX``, else None."""
        if self.size > _DENSE_MAX:
            return None
        c = kernel_vector(self.max_count, self.B, self.alpha) / self.norm_constant
        idx = np.arange(self.size)
        return np.ascontiguousarray(c[(idx[:, None] - idx[None, :]) % self.size])

    def apply(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        """``A x`` for a vector (or the last axis of an array) of length ``P``."""
        dense = self._dense
        if dense is not None:
            return np.asarray(x, dtype=np.float64) @ dense  # A is symmetric: x·A = (A x)ᵀ
        fx = _fft().rfft(x, axis=-1, workers=_WORKERS)
        fx *= self.eigenvalues
        return _fft().irfft(fx, n=self.size, axis=-1, workers=_WORKERS)

    def solve(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        """``A^{-1} x`` for a vector (or the last axis of an array) of length ``P``."""
        fx = _fft().rfft(x, axis=-1, workers=_WORKERS)
        fx /= self.eigenvalues
        return _fft().irfft(fx, n=self.size, axis=-1, workers=_WORKERS)

    def inverse_row(self) -> NDArray[np.float64]:
        """The first row (= first column) of the symmetric circulant ``A^{-1}``."""
        return _fft().irfft(1.0 / self.eigenvalues, n=self.size, workers=_WORKERS)

    @cached_property
    def _inverse_norms(self) -> tuple[float, float]:
        return (float(np.abs(self.inverse_row()).sum()),
                float(1.0 / np.abs(self.eigenvalues).min()))

    def inverse_norm_1(self) -> float:
        """Exact ``‖A^{-1}‖_1 = ‖A^{-1}‖_∞`` (absolute row sum of the circulant inverse)."""
        return self._inverse_norms[0]

    def inverse_norm_2(self) -> float:
        """Exact ``‖A^{-1}‖_2 = 1 / min_m |φ_m|``."""
        return self._inverse_norms[1]


@lru_cache(maxsize=32)
def get_kernel(max_count: int, B: int, alpha: float) -> CirculantKernel:
    """A cached :class:`CirculantKernel` (eigenvalues are computed once per ``(n, B, α)``)."""
    return CirculantKernel.build(int(max_count), int(B), float(alpha))
