"""Window parameter B, Theorem 1.1 error bounds and memory needs of the Wu & Pagh reconstruction.

The noisy values of the sketch are counted on the window ``t ∈ [−B .. n+B]``; B is chosen so
that, with probability at least ``1 − η``, no noise value leaves it (a union bound over the
``d`` discrete Laplace draws), and so that the truncated kernel is invertible. The bounds of
Wu & Pagh (2024), Theorem 1.1, are evaluated with explicit constants and the exact inverse
norms of the kernel. Everything here is a deterministic function of public parameters.

Internally every function works with γ, the exact fraction of ε the noise was drawn with
(``γ <= ε``, possibly a hair below the smallest ε accepted), so no internal value is ever checked
against the range of ε a user may type.
"""

from __future__ import annotations

import math

from dpfreq._validate import check_epsilon, check_int, check_open_unit, message
from dpfreq.errors import ParameterError, public_errors
from dpfreq.noise import discrete_laplace_gamma
from dpfreq.profile.intervals import SIMULATION_DRAWS
from dpfreq.profile.kernel import CirculantKernel, get_kernel

__all__ = [
    "USEFUL_L1",
    "bound_parameter",
    "default_bound_parameter",
    "event_probability",
    "minimum_bound_parameter",
    "profile_error_bounds",
    "reconstruction_memory",
    "sketch_l1_bound",
    "useful_sketch_epsilon",
    "window_bound",
]

USEFUL_L1 = 0.1  # an ℓ1 bound at or below this is called useful (5 % of the items misplaced)


def window_bound(domain_size: int, gamma: float, eta: float) -> int:
    """:func:`bound_parameter` for the exact noise parameter γ (a float > 0, unchecked: it may
    sit just below the smallest ε accepted): ``max(0, ⌈(1/γ) ln max{2d/(η(e^γ+1)),
    8e^γ/(e^{2γ}−1)}⌉)`` in log space."""
    head = math.log(2.0 * domain_size / eta)
    t1 = head - (math.log1p(math.exp(gamma)) if gamma <= 700 else gamma)
    return max(0, math.ceil(max(t1, _min_term(gamma)) / gamma))


def _min_term(gamma: float) -> float:
    return math.log(8.0) - gamma - math.log1p(-math.exp(-2.0 * gamma))


@public_errors("bound_parameter")
def bound_parameter(domain_size: int, epsilon: float, eta: float) -> int:
    """``B = max(0, ⌈(1/ε) ln max{2d/(η(e^ε+1)), 8e^ε/(e^{2ε}−1)}⌉)`` (Wu & Pagh 2024).

    With this B a union bound gives ``Pr[some |Z_ℓ| > B] <= η`` for the ``d`` draws
    ``Z_ℓ ~ DLap(e^{−ε})``, and the truncated kernel is invertible with controlled inverse norms.

    Parameters
    ----------
    domain_size : int
        ``d >= 1``.
    epsilon : float
        ε of the discrete Laplace noise (``α = e^{−ε}``).
    eta : float
        Failure probability in ``(0, 1)``.

    Returns
    -------
    int
    """
    d = check_int(domain_size, "domain_size", minimum=1)
    eps = check_epsilon(epsilon, "epsilon")
    et = check_open_unit(eta, "eta")
    return window_bound(d, eps, et)


@public_errors("minimum_bound_parameter")
def minimum_bound_parameter(epsilon: float) -> int:
    """``B_min = max(0, ⌈(1/ε) ln(8e^ε/(e^{2ε}−1))⌉)``: the smallest B accepted.

    ``epsilon`` may be the exact γ of the noise (``discrete_laplace_gamma(ε)``, as a float),
    which can sit just below the smallest ε accepted elsewhere.
    """
    g = float(epsilon)
    if not (math.isfinite(g) and g > 0):
        raise ParameterError(message("epsilon", "a number > 0",
                                     epsilon))
    return max(0, math.ceil(_min_term(g) / g))


@public_errors("default_bound_parameter")
def default_bound_parameter(domain_size: int, max_count: int, epsilon: float, eta: float) -> int:
    """The smallest ``B >= bound_parameter(d, γ, η)`` with ``n + 2B + 1`` a fast FFT length.

    ``γ = discrete_laplace_gamma(ε)`` is the exact ε fraction the sketch noise uses (never
    above ε), so B is admissible for the noise actually drawn. ``P = n + 2B + 1`` has the
    parity of ``n + 1``; the 11-smooth lengths of ``scipy.fft.next_fast_len(real=False)`` are
    as fast for scipy's real FFT as 5-smooth ones and much denser, and the search stops after
    ``max(64, P/16)`` steps.
    """
    d = check_int(domain_size, "domain_size", minimum=1)
    n = check_int(max_count, "max_count", minimum=0)
    eps = check_epsilon(epsilon, "epsilon")
    et = check_open_unit(eta, "eta")
    import scipy.fft  # here, not at the top: 0.2 s to import, and planning rarely needs it

    b0 = window_bound(d, float(discrete_laplace_gamma(eps)), et)
    limit = b0 + max(64, (n + 2 * b0 + 1) // 16)
    for B in range(b0, limit + 1):
        P = n + 2 * B + 1
        if scipy.fft.next_fast_len(P, real=False) == P:
            return B
    return b0  # pragma: no cover - 11-smooth lengths are far denser than 1/16


def event_probability(domain_size: int, B: int, gamma: float) -> float:
    """``Pr[some |Z_ℓ| > B] <= d · 2α^{B+1}/(1+α)`` (union bound over ``d`` draws), capped at 1."""
    alpha = math.exp(-gamma)
    log_p = math.log(2.0 * domain_size) - (B + 1) * gamma - math.log1p(alpha)
    return min(1.0, math.exp(log_p)) if log_p < 0 else 1.0


def profile_error_bounds(kernel: CirculantKernel, *, domain_size: int,
                         eta: float) -> dict[str, float]:
    """The ℓ1, ℓ2 and ℓ∞ bounds of Wu & Pagh's Theorem 1.1 with the exact inverse norms of A.

    ``Err_1 <= 2‖A^{-1}‖_1 (√P + √(2 ln(1/η))) / √d``;
    ``Err_2 <= 2‖A^{-1}‖_2 (1 + √(ln(1/η))) / √d``;
    ``Err_∞ <= 4‖A^{-1}‖_∞ (√(2L/(d P_norm)) + 2L/(3d))`` with ``L = ln(2P/η)``.
    Each holds, on the event that no noise value leaves the window, with probability at least
    ``1 − η`` (McDiarmid for ℓ1/ℓ2, Bernstein and a union bound for ℓ∞); rounding onto the
    simplex does not increase the ℓ1/ℓ2 error and at most doubles the ℓ∞ error.
    ``‖A^{-1}‖_1 = ‖A^{-1}‖_∞`` is the absolute row sum of the circulant inverse and
    ``‖A^{-1}‖_2 = 1/min φ``, both computed exactly by FFT.
    """
    d = float(domain_size)
    P = kernel.size
    n1 = kernel.inverse_norm_1()
    n2 = kernel.inverse_norm_2()
    lg = math.log(1.0 / eta)
    L = math.log(2.0 * P / eta)
    return {
        "1": 2.0 * n1 * (math.sqrt(P) + math.sqrt(2.0 * lg)) / math.sqrt(d),
        "2": 2.0 * n2 * (1.0 + math.sqrt(lg)) / math.sqrt(d),
        "inf": 4.0 * n1 * (math.sqrt(2.0 * L / (d * kernel.norm_constant)) + 2.0 * L / (3.0 * d)),
    }


def sketch_l1_bound(domain_size: int, max_count: int, epsilon: float, confidence: float) -> float:
    """Theorem 1.1's ℓ1 bound (capped at 2) of a sketch reconstruction holding with probability
    ``confidence`` (``η = (1 − confidence)/2``: the theorem holds with probability ``1 − 2η``)."""
    eta = (1.0 - confidence) / 2.0
    b = default_bound_parameter(domain_size, max_count, epsilon, eta)
    alpha = math.exp(-float(discrete_laplace_gamma(epsilon)))
    kernel = get_kernel(max_count, b, alpha)
    return min(2.0, profile_error_bounds(kernel, domain_size=domain_size, eta=eta)["1"])


def useful_sketch_epsilon(domain_size: int, max_count: int, epsilon: float,
                          confidence: float) -> float | None:
    """The smallest ε >= ``epsilon`` (3 significant digits, rounded up) at which
    :func:`sketch_l1_bound` falls to :data:`USEFUL_L1`; None if not even at ε = 1000.

    Searched upwards from ``epsilon`` only, so no kernel larger than the one at ``epsilon`` is
    ever built (the bound is non-increasing in ε)."""
    def value(eps: float) -> float:
        return sketch_l1_bound(domain_size, max_count, eps, confidence)

    if value(1000.0) > USEFUL_L1:
        return None
    if value(epsilon) <= USEFUL_L1:
        return epsilon
    lo, hi = math.log(epsilon), math.log(1000.0)
    for _ in range(30):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if value(math.exp(mid)) > USEFUL_L1 else (lo, mid)
    eps = math.exp(hi)
    scale = 10 ** (math.floor(math.log10(eps)) - 2)
    return float(f"{min(math.ceil(eps / scale) * scale, 1000.0):.3g}")


def reconstruction_memory(max_count: int, B: int) -> int:
    """Bytes a reconstruction needs: some 24 float arrays of ``P = n + 2B + 1`` (kernel, FFT
    buffers, inversion), and its intervals: ``SIMULATION_DRAWS`` simulated sketches of ``P``
    counts each, pushed through the same inversion at once (counts, fractions, FFT buffers,
    inverted rows and EM's work arrays: measured with ``tracemalloc`` at 5.1 (fft) and 7.3
    (mle) arrays of that shape at the peak for ``P`` = 11,319; 8 are counted), and their
    estimates of ``n + 1`` entries.

    The simulated sketches dominate as soon as ``B`` is large (small ε): at ε = 1e-6 they need
    hundreds of GiB, which must be refused before the budget is spent rather than fail after
    it.
    """
    P = max_count + 2 * B + 1
    return 8 * (24 * P + 8 * SIMULATION_DRAWS * P + 2 * SIMULATION_DRAWS * (max_count + 1))
