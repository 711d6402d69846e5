"""Exact distance laws of the longitudinal randomizers (spec futurerand.md §4.3, §5.2, §5.7).

Every randomizer except Erlingsson et al. is *distance based*: the pre-computed vector
``v ∈ {±1}^k`` has ``Pr[v = y] = q(ℓ)`` with ``ℓ`` the number of ``−1`` entries of ``y``.
A :class:`DistanceLaw` stores ``log q(ℓ)`` for ``ℓ = 0..k`` (log space, O(k)), from which the
exact ``c_gap`` (Property II), the privacy certificate ``ln(p_max/p_min)`` (Property I, Lemma
5.2) and the distance pmf ``C(k,ℓ)·q(ℓ)`` follow.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from dpfreq import _validate
from dpfreq.errors import ParameterError
from dpfreq.noise import epsilon_to_fraction

__all__ = [
    "MODES",
    "DistanceLaw",
    "auto_law",
    "calibrated_law",
    "distance_law",
    "erlingsson_c_gap",
    "futurerand_law",
    "rr_law",
    "sample_distance_vectors",
    "threshold_law",
]

MODES = ("auto", "calibrated", "erlingsson", "futurerand", "rr", "threshold")


def _log_binom(k: int) -> NDArray[np.float64]:
    ell = np.arange(k + 1, dtype=np.float64)
    from scipy.special import gammaln

    return gammaln(k + 1.0) - gammaln(ell + 1.0) - gammaln(k - ell + 1.0)


def _logsumexp(a: NDArray[np.float64]) -> float:
    m = float(np.max(a))
    return m + math.log(float(np.sum(np.exp(a - m))))


@dataclass(frozen=True)
class DistanceLaw:
    """Law of ``v = R(1^k)`` as ``log q(ℓ)``, the log-probability of one vector at distance ℓ.

    Attributes
    ----------
    name : str
        Randomizer id (``"rr"``, ``"futurerand"``, ``"calibrated"``, ``"threshold"``).
    k : int
        Length of ``v`` (change budget).
    epsilon : float
        The ε the construction was certified against.
    log_q : numpy.ndarray
        ``log q(ℓ)``, ``ℓ = 0..k``; normalised so that ``Σ C(k,ℓ) q(ℓ) = 1``.
    params : dict
        Construction constants (ε', LB, UB, c, threshold ...).
    """

    name: str
    k: int
    epsilon: float
    log_q: NDArray[np.float64]
    params: dict

    @property
    def distance_pmf(self) -> NDArray[np.float64]:
        """``Pr[distance = ℓ] = C(k,ℓ)·q(ℓ)``."""
        w = _log_binom(self.k) + self.log_q
        return np.exp(w - _logsumexp(w))

    @property
    def c_gap(self) -> float:
        """Exact ``E[v_i] = Σ_ℓ C(k,ℓ) q(ℓ) (1 − 2ℓ/k)`` (Property II)."""
        ell = np.arange(self.k + 1)
        return float(np.sum(self.distance_pmf * (1.0 - 2.0 * ell / self.k)))

    @property
    def log_ratio(self) -> float:
        """Privacy certificate ``ln(max q / min q)`` (equals the whole randomizer's, §5.3)."""
        return float(np.max(self.log_q) - np.min(self.log_q))

    def sample(self, size: int, *, rng: np.random.Generator) -> NDArray[np.int8]:
        """``size`` independent vectors ``v`` (rows), see :func:`sample_distance_vectors`."""
        return sample_distance_vectors(self.distance_pmf, self.k, size, rng=rng)


def sample_distance_vectors(
    pmf: NDArray[np.float64], k: int, size: int, *, rng: np.random.Generator
) -> NDArray[np.int8]:
    """Draw vectors in ``{±1}^k``: distance ℓ from ``pmf``, then a uniform ℓ-subset flipped to −1.

    The distance is drawn by inverse-CDF inversion of a 53-bit uniform against the float
    cumulative sum of the log-space law (pitfall 10: a high-resolution uniform, never a coarse
    comparison); the test suite checks this sampler against the exact law with a chi-square test
    at α = 1e-6. The subset is uniform: sorting i.i.d. uniform keys gives a uniform permutation,
    and its first ℓ positions are flipped.
    """
    cdf = np.cumsum(pmf)
    cdf[-1] = 1.0
    u = rng.random(size)
    ell = np.minimum(np.searchsorted(cdf, u, side="right"), k)
    perm = np.argsort(rng.random((size, k)), axis=1)
    flip = np.arange(k) < ell[:, None]
    out = np.ones((size, k), dtype=np.int8)
    out[np.nonzero(flip)[0], perm[flip]] = -1
    return out


def _normalise(
    name: str, k: int, epsilon: float, log_w: NDArray[np.float64], params: dict
) -> DistanceLaw:
    log_q = log_w - _logsumexp(_log_binom(k) + log_w)
    log_q.setflags(write=False)
    return DistanceLaw(name, k, epsilon, log_q, params)


def _check(k: int, epsilon: float, func: str) -> tuple[int, float]:
    k = _validate.check_int(k, "k", func, minimum=1)
    epsilon = _validate.check_epsilon(epsilon, "epsilon", func)
    return k, epsilon


def rr_law(k: int, epsilon: float) -> DistanceLaw:
    """Independent randomized response with ε/k per coordinate (§4.3): ``c_gap = tanh(ε/2k)``."""
    k, epsilon = _check(k, epsilon, "rr_law")
    e = epsilon / k
    ell = np.arange(k + 1, dtype=np.float64)
    # keep probability e^e/(1+e^e), flip 1/(1+e^e): log q = (k-ℓ)·e − k·log(1+e^e)
    log_w = (k - ell) * e
    law = _normalise("rr", k, epsilon, log_w, {"epsilon_per_coordinate": e})
    _certify(law, "rr_law")
    return law


def _futurerand_from_c(k: int, epsilon: float, c: float, name: str) -> DistanceLaw:
    ep = epsilon / (c * math.sqrt(k))
    mu = k / (math.exp(ep) + 1.0)
    ub = (k / ep) * math.log(2.0 * math.exp(ep) / (math.exp(ep) + 1.0))
    lb = mu - 2.0 * math.sqrt(k)
    ell = np.arange(k + 1, dtype=np.float64)
    log_p = ep * (k - ell) - k * math.log1p(math.exp(ep))
    lbin = _log_binom(k)
    inside = (ell >= lb) & (ell <= ub)
    if np.all(inside):
        log_q = log_p
    else:
        log_pmiss = _logsumexp((lbin + log_p)[~inside])
        log_abar = _logsumexp(lbin[~inside])
        log_q = np.where(inside, log_p, log_pmiss - log_abar)
    params = {"c": c, "epsilon_prime": ep, "mu": mu, "LB": lb, "UB": ub}
    return _normalise(name, k, epsilon, log_q, params)


def futurerand_law(k: int, epsilon: float) -> DistanceLaw:
    """FutureRand CR(1^k), paper constants (§5.2): ε' = ε/(5√k), annulus [μ−2√k, UB],
    resampling uniformly from the **complement** of the annulus."""
    k, epsilon = _check(k, epsilon, "futurerand_law")
    law = _futurerand_from_c(k, epsilon, 5.0, "futurerand")
    _certify(law, "futurerand_law")
    return law


def calibrated_law(k: int, epsilon: float) -> DistanceLaw:
    """Calibrated FutureRand (§5.7.1): the smallest c in ε' = ε/(c√k) with exact loss ≤ ε.

    The loss is not monotone in c (the annulus ends move in integer steps), so the smallest
    feasible c is located on the grid ``c = 0.10, 0.11, ..., 5.00`` (O(k) per point) and then
    refined by 30 bisection steps between it and the infeasible grid point below it, keeping the
    feasible end. ``c = 5`` is the paper's constant.
    """
    k, epsilon = _check(k, epsilon, "calibrated_law")

    def feasible(c: float) -> bool:
        return _futurerand_from_c(k, epsilon, c, "calibrated").log_ratio <= epsilon

    grid = np.round(np.arange(10, 501) / 100.0, 2)
    first = next((i for i, c in enumerate(grid) if feasible(float(c))), len(grid) - 1)
    hi = float(grid[first])
    if first > 0 and feasible(hi):
        lo = float(grid[first - 1])
        for _ in range(30):
            mid = 0.5 * (lo + hi)
            if feasible(mid):
                hi = mid
            else:
                lo = mid
    law = _futurerand_from_c(k, epsilon, hi, "calibrated")
    _certify(law, "calibrated_law")
    return law


def threshold_law(k: int, epsilon: float) -> DistanceLaw:
    """Threshold (Hamming-ball) randomizer (§5.7.2): ``q = e^ε·a`` for ℓ < m, ``a`` for ℓ ≥ m.

    The spec allows an intermediate value at one distance; ``c_gap`` is a linear-fractional
    function of that fraction, so its optimum is at an endpoint, i.e. an integer ``m``: the
    search over ``m ∈ {1..k}`` is exact. With ``b(ℓ) = C(k,ℓ)/2^k`` (so ``Σ b(ℓ)(1−2ℓ/k) = 0``),
    ``c_gap(m) = S₁(m) / (1/(e^ε−1) + S₀(m))`` where ``S₀(m) = Σ_{ℓ<m} b(ℓ)`` and
    ``S₁(m) = Σ_{ℓ<m} b(ℓ)(1−2ℓ/k)``: one cumulative sum, O(k) for all m at once.
    """
    k, epsilon = _check(k, epsilon, "threshold_law")
    ell = np.arange(k + 1, dtype=np.float64)
    b = np.exp(_log_binom(k) - k * math.log(2.0))
    s0 = np.cumsum(b)[:-1]  # m = 1..k
    s1 = np.cumsum(b * (1.0 - 2.0 * ell / k))[:-1]
    gaps = s1 / (1.0 / math.expm1(epsilon) + s0)
    m = int(np.argmax(gaps)) + 1
    law = _normalise("threshold", k, epsilon, np.where(ell < m, epsilon, 0.0), {"m": m})
    _certify(law, "threshold_law")
    return law


def erlingsson_c_gap(k: int, epsilon: float) -> float:
    """Effective ``c_gap = tanh(γ/2)/k`` of Erlingsson et al. with the spec's corrections (§4.4).

    ``γ ≤ ε`` is ε rounded down to the exact fraction the randomized-response sampler uses
    (:func:`dpfreq.noise.epsilon_to_fraction`; ``|γ − ε| ≤ 2^{-32}``), so client and server agree.
    """
    k, epsilon = _check(k, epsilon, "erlingsson_c_gap")
    return math.tanh(float(epsilon_to_fraction(epsilon)) / 2.0) / k


def auto_law(k: int, epsilon: float) -> DistanceLaw:
    """Auto mode (§5.7.3): the largest ``c_gap`` among rr, futurerand, calibrated, threshold."""
    laws = [
        rr_law(k, epsilon),
        futurerand_law(k, epsilon),
        calibrated_law(k, epsilon),
        threshold_law(k, epsilon),
    ]
    return max(laws, key=lambda law: law.c_gap)


def distance_law(mode: str, k: int, epsilon: float) -> DistanceLaw:
    """The distance law of ``mode`` (one of rr, futurerand, calibrated, threshold, auto).

    Laws depend only on ``(mode, k, ε)`` and are immutable; they are cached (§7.1: the table can
    ship with the parameters instead of being recomputed on every device).
    """
    mode = _validate.check_choice(
        mode, "mode", "distance_law", ("auto", "calibrated", "futurerand", "rr", "threshold")
    )
    k, epsilon = _check(k, epsilon, "distance_law")
    return _cached_law(mode, k, epsilon)


@functools.lru_cache(maxsize=256)
def _cached_law(mode: str, k: int, epsilon: float) -> DistanceLaw:
    return {
        "rr": rr_law,
        "futurerand": futurerand_law,
        "calibrated": calibrated_law,
        "threshold": threshold_law,
        "auto": auto_law,
    }[mode](k, epsilon)


#: Relative tolerance of the certificate check: float rounding of the log-space law only.
CERTIFICATE_TOLERANCE = 1e-12


def _certify(law: DistanceLaw, func: str) -> None:
    """Refuse a law whose certificate ``ln(max q / min q)`` exceeds ε or whose gap is not > 0."""
    if not law.log_ratio <= law.epsilon * (1 + CERTIFICATE_TOLERANCE):
        raise ParameterError(
            f"{func}: the exact privacy loss ln(p_max/p_min) = {law.log_ratio!r} exceeds epsilon "
            f"{law.epsilon!r} for k = {law.k}; refusing these parameters."
        )
    # a gap below a millionth of independent RR's is float noise around 0, not a randomizer
    if not law.c_gap > 1e-6 * math.tanh(law.epsilon / (2 * law.k)):
        raise ParameterError(
            f"{func}: c_gap = {law.c_gap!r} is not > 0 for k = {law.k}, epsilon = "
            f"{law.epsilon!r}; the estimator would be undefined; refusing these parameters."
        )
