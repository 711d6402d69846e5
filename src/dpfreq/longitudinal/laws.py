"""Distance laws of the longitudinal randomizers, stated and sampled exactly.

Every randomizer except Erlingsson et al. is *distance based*: the pre-computed vector
``v ∈ {±1}^k`` has ``Pr[v = y] = q(ℓ)`` with ``ℓ`` the number of ``−1`` entries of ``y``
(Ohrimenko, Wirth and Wu 2022, "Randomize the future"). The privacy loss of the whole
randomizer is ``ln(max_ℓ q(ℓ) / min_ℓ q(ℓ))``: an output on a support of ``s ≤ k`` non-zero
inputs is a marginal of ``v``, a sum of ``2^{k−s}`` values of ``q`` with the same number of
terms for every input, so its ratio lies between those extremes.

The law that is sampled
-----------------------
The ideal laws (``q`` from exponentials) are real numbers; a float comparison against a float
cumulative sum would realise some other law (distances of tiny probability can get probability
0, which is an infinite privacy loss). So each law is rounded, once, to **integer weights**
``w(ℓ) ≥ 2^62`` per vector (``w(ℓ) = ⌊2^62·q(ℓ)/min q⌋``, the largest ones capped at
``⌊min w · L⌋`` with ``L ≤ e^ε`` a rigorous rational lower bound), and the law sampled *is*

    Pr[v = y] = w(ℓ) / N,   N = Σ_ℓ C(k, ℓ) w(ℓ),

stated exactly by :attr:`DistanceLaw.sampled_pmf` (fractions). Its certificate is the exact
ratio ``max w / min w ≤ L ≤ e^ε`` (checked in integers), every distance has positive
probability, and ``c_gap`` is computed exactly on it. The distance is drawn by integer
thresholds on uniform random integers with exact rejection (:meth:`DistanceLaw.sample_distances`)
and the flipped positions by a uniform permutation (:meth:`DistanceLaw.sample`).
"""

from __future__ import annotations

import bisect
import decimal
import functools
import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from dpfreq import _validate
from dpfreq.errors import ParameterError, public_caller
from dpfreq.noise import epsilon_to_fraction

__all__ = [
    "DISTANCE_MODES",
    "MAX_CHANGES",
    "MODES",
    "DistanceLaw",
    "auto_law",
    "calibrated_law",
    "distance_law",
    "erlingsson_c_gap",
    "exp_lower_bound",
    "futurerand_law",
    "rr_law",
    "threshold_law",
]

MODES = ("auto", "calibrated", "erlingsson", "futurerand", "rr", "threshold")
DISTANCE_MODES = ("auto", "calibrated", "futurerand", "rr", "threshold")
#: Largest change budget k: the law's integer weights have about k + 1.45ε + 62 bits.
MAX_CHANGES = 4096
_WEIGHT_BITS = 62
_LN2 = math.log(2.0)


def _log_binom(k: int) -> NDArray[np.float64]:
    from scipy.special import gammaln

    ell = np.arange(k + 1, dtype=np.float64)
    return gammaln(k + 1.0) - gammaln(ell + 1.0) - gammaln(k - ell + 1.0)


def _logsumexp(a: NDArray[np.float64]) -> float:
    m = float(np.max(a))
    return m + math.log(float(np.sum(np.exp(a - m))))


@functools.lru_cache(maxsize=16)
def _binomials(k: int) -> tuple[int, ...]:
    """``C(k, ℓ)`` for ``ℓ = 0..k`` as exact integers (one recurrence, O(k) big-int steps)."""
    out = [1]
    for ell in range(k):
        out.append(out[-1] * (k - ell) // (ell + 1))
    return tuple(out)


@functools.lru_cache(maxsize=64)
def exp_lower_bound(epsilon: float) -> Fraction:
    """A rational ``L ≤ e^ε`` within a relative ``10^{-48}`` of it (ε taken at its exact value).

    :meth:`decimal.Decimal.exp` is correctly rounded at 50 significant digits (within half a
    unit in the last place); one unit in the last place less is a rigorous lower bound.
    """
    with decimal.localcontext() as ctx:
        ctx.prec = 50
        e = decimal.Decimal(epsilon).exp()
        ulp = decimal.Decimal(1).scaleb(e.adjusted() - 49)
    return Fraction(e) - Fraction(ulp)


def _integer_weights(log_q: NDArray[np.float64], epsilon: float) -> tuple[int, ...]:
    """``w(ℓ) = ⌊2^62 · e^{log q(ℓ) − min log q}⌋``, capped at ``⌊2^62 · L⌋`` (``L ≤ e^ε``).

    The smallest weight is exactly ``2^62``; the cap makes ``max w / min w ≤ L`` hold exactly
    (it only removes float rounding above a ratio the ideal law already meets).
    """
    x = log_q - float(np.min(log_q))
    cap_ratio = exp_lower_bound(epsilon)
    cap = ((1 << _WEIGHT_BITS) * cap_ratio.numerator) // cap_ratio.denominator
    out = []
    for xi in x.tolist():
        a = int(xi // _LN2)
        w = int(math.ldexp(math.exp(xi - a * _LN2), _WEIGHT_BITS)) << a
        out.append(max(1 << _WEIGHT_BITS, min(w, cap)))
    return tuple(out)


@dataclass(frozen=True)
class DistanceLaw:
    """Law of ``v = R(1^k)``: ideal ``log q(ℓ)`` and the exactly stated law that is sampled.

    Attributes
    ----------
    name : str
        Randomizer id (``"rr"``, ``"futurerand"``, ``"calibrated"``, ``"threshold"``).
    k : int
        Length of ``v`` (change budget).
    epsilon : float
        The ε the construction is certified against.
    log_q : numpy.ndarray
        Ideal ``log q(ℓ)``, ``ℓ = 0..k`` (normalised: ``Σ C(k,ℓ) q(ℓ) = 1``); a description of
        the construction, **not** what is sampled.
    params : dict
        Construction constants (ε', LB, UB, c, threshold ...).
    weights : tuple of int
        Integer weight ``w(ℓ)`` of one vector at distance ℓ in the sampled law.

    Examples
    --------
    >>> import numpy as np
    >>> law = distance_law("futurerand", 4, 1.0)
    >>> v = law.sample(3, rng=np.random.default_rng(0))
    >>> v.shape, set(np.unique(v).tolist()) <= {-1, 1}
    ((3, 4), True)
    >>> law.certificate_ratio <= exp_lower_bound(1.0)
    True
    """

    name: str
    k: int
    epsilon: float
    log_q: NDArray[np.float64]
    params: dict
    weights: tuple[int, ...] = field(repr=False)

    @functools.cached_property
    def _cumulative(self) -> tuple[int, ...]:
        out, acc = [], 0
        for b, w in zip(_binomials(self.k), self.weights, strict=True):
            acc += b * w
            out.append(acc)
        return tuple(out)

    @property
    def cumulative(self) -> tuple[int, ...]:
        """``c_ℓ = Σ_{i≤ℓ} C(k,i)·w(i)``, ``ℓ = 0..k`` (exact integers; ``c_k = N``)."""
        return self._cumulative

    @property
    def total(self) -> int:
        """``N = Σ_ℓ C(k,ℓ) w(ℓ)``: one vector at distance ℓ has probability ``w(ℓ)/N``."""
        return self._cumulative[-1]

    @functools.cached_property
    def sampled_pmf(self) -> tuple[Fraction, ...]:
        """Exact ``Pr[distance = ℓ] = C(k,ℓ)·w(ℓ)/N`` of the sampler, ``ℓ = 0..k``."""
        cum = (0, *self._cumulative)
        n = self.total
        return tuple(Fraction(cum[i + 1] - cum[i], n) for i in range(self.k + 1))

    @property
    def certificate_ratio(self) -> Fraction:
        """Exact ``max_ℓ Pr[v = y_ℓ] / min_ℓ Pr[v = y_ℓ] = max w / min w`` of the sampled law."""
        return Fraction(max(self.weights), min(self.weights))

    @functools.cached_property
    def certificate(self) -> float:
        """``ln(p_max/p_min)`` of the **sampled** law, always ``≤ ε``.

        The natural log of the exact ratio of integers at 50 significant digits, rounded to the
        nearest float: as ε is itself a float, the result is ``≤ ε`` whenever the ratio is.
        Computed once per law (laws are immutable and cached; every device's randomizer asks).
        """
        with decimal.localcontext() as ctx:
            ctx.prec = 50
            value = decimal.Decimal(max(self.weights)).ln() - decimal.Decimal(
                min(self.weights)).ln()
        return float(value)

    @property
    def ideal_log_ratio(self) -> float:
        """``ln(max q / min q)`` of the ideal (unrounded) law."""
        return float(np.max(self.log_q) - np.min(self.log_q))

    @functools.cached_property
    def distance_pmf(self) -> NDArray[np.float64]:
        """:attr:`sampled_pmf` as floats."""
        return np.array([float(p) for p in self.sampled_pmf])

    @functools.cached_property
    def c_gap(self) -> float:
        """``E[v_i] = Σ_ℓ Pr[ℓ]·(1 − 2ℓ/k)`` of the sampled law (exact, then rounded once)."""
        k, cum = self.k, (0, *self._cumulative)
        num = sum((cum[ell + 1] - cum[ell]) * (k - 2 * ell) for ell in range(k + 1))
        return float(Fraction(num, k * self.total))

    @functools.cached_property
    def _top_words(self) -> tuple[int, NDArray[np.uint64]]:
        shift = self.total.bit_length() - 64
        return shift, np.array([c >> shift for c in self._cumulative], dtype=np.uint64)

    def sample_distances(self, size: int, *, rng: np.random.Generator) -> NDArray[np.int64]:
        """``size`` independent distances from :attr:`sampled_pmf`, exactly.

        A uniform integer ``U`` in ``[0, 2^b)`` (``b`` = bits of ``N``) is drawn; ``U ≥ N`` is
        rejected and redrawn, otherwise ``ℓ`` is the first index with ``U < Σ_{i≤ℓ} C(k,i)w(i)``.
        Only the top 64 bits of ``U`` are drawn at first: they decide the comparison with
        every threshold except when they equal a threshold's top 64 bits (probability about
        ``(k+1)/2^64``), and then the remaining bits are drawn and ``U`` is compared in integers.
        Given uniform random words the output law is exactly :attr:`sampled_pmf`.
        """
        shift, tops = self._top_words
        cum = self._cumulative
        out = np.empty(size, dtype=np.int64)
        pending = np.arange(size)
        while pending.size:
            u = rng.integers(0, 2**64, size=pending.size, dtype=np.uint64)
            idx = np.searchsorted(tops, u, side="right")
            tie = (idx > 0) & (tops[np.maximum(idx - 1, 0)] == u)
            done = (idx <= self.k) & ~tie
            out[pending[done]] = idx[done]
            for i in np.flatnonzero(tie):
                nbytes = (shift + 7) // 8
                low = int.from_bytes(rng.bytes(nbytes), "big") >> (8 * nbytes - shift)
                value = (int(u[i]) << shift) | low
                if value < cum[-1]:
                    out[pending[i]] = bisect.bisect_right(cum, value)
                    done[i] = True
            pending = pending[~done]
        return out

    def sample(self, size: int, *, rng: np.random.Generator) -> NDArray[np.int8]:
        """``size`` independent vectors ``v ∈ {±1}^k`` (rows) from the sampled law.

        The distance ℓ comes from :meth:`sample_distances`; the ℓ positions set to −1 are those
        whose label in a uniformly random permutation of ``0..k−1`` is below ℓ, a uniform
        ℓ-subset. :meth:`numpy.random.Generator.permuted` shuffles each row by Fisher–Yates with
        bounded integers drawn by rejection, so the permutation is exactly uniform given
        uniform random words; together every vector at distance ℓ has probability ``w(ℓ)/N``.
        """
        ell = self.sample_distances(size, rng=rng)
        labels = np.broadcast_to(np.arange(self.k, dtype=np.int32), (size, self.k))
        perm = rng.permuted(labels, axis=1)
        return np.where(perm < ell[:, None], np.int8(-1), np.int8(1))


def _build(name: str, k: int, epsilon: float, log_w: NDArray[np.float64],
           params: dict) -> DistanceLaw:
    """Normalise the ideal law, round it to the sampled law and certify it."""
    func = public_caller()
    log_q = log_w - _logsumexp(_log_binom(k) + log_w)
    log_q.setflags(write=False)
    if not (np.all(np.isfinite(log_q))
            and float(np.max(log_q) - np.min(log_q)) <= epsilon * (1 + CERTIFICATE_TOLERANCE)):
        raise ParameterError(
            f"{func}: the privacy loss ln(p_max/p_min) of the {name} law exceeds epsilon "
            f"{epsilon!r} for k = {k}; refusing these parameters."
        )
    law = DistanceLaw(name, k, epsilon, log_q, params, _integer_weights(log_q, epsilon))
    _certify(law)
    return law


def _check(k: int, epsilon: float) -> tuple[int, float]:
    k = _validate.check_int(k, "k", minimum=1)
    if k > MAX_CHANGES:
        raise ParameterError(_validate.message("k", f"an integer in 1..{MAX_CHANGES}", k))
    epsilon = _validate.check_epsilon(epsilon, "epsilon")
    return k, epsilon


def rr_law(k: int, epsilon: float) -> DistanceLaw:
    """Independent randomized response with ε/k per coordinate: ``c_gap ≈ tanh(ε/2k)``."""
    k, epsilon = _check(k, epsilon)
    e = epsilon / k
    ell = np.arange(k + 1, dtype=np.float64)
    # keep probability e^e/(1+e^e), flip 1/(1+e^e): log q = (k-ℓ)·e − k·log(1+e^e)
    return _build("rr", k, epsilon, (k - ell) * e, {"epsilon_per_coordinate": e})


def _futurerand_ideal(k: int, epsilon: float, c: float) -> tuple[NDArray[np.float64], dict]:
    """Ideal FutureRand ``log q`` with ``ε' = ε/(c√k)``: the ``Binomial(k, 1/(e^{ε'}+1))``
    vector law inside the annulus ``[μ − 2√k, UB]``, uniform on its complement."""
    ep = epsilon / (c * math.sqrt(k))
    mu = k * math.exp(-ep) / (1.0 + math.exp(-ep))
    ub = (k / ep) * (_LN2 - math.log1p(math.exp(-ep)))
    lb = mu - 2.0 * math.sqrt(k)
    ell = np.arange(k + 1, dtype=np.float64)
    log_p = ep * (k - ell) - k * (ep + math.log1p(math.exp(-ep)))
    lbin = _log_binom(k)
    inside = (ell >= lb) & (ell <= ub)
    log_q = log_p
    if not np.all(inside):
        log_pmiss = _logsumexp((lbin + log_p)[~inside])
        log_abar = _logsumexp(lbin[~inside])
        log_q = np.where(inside, log_p, log_pmiss - log_abar)
    log_q = log_q - _logsumexp(lbin + log_q)
    return log_q, {"c": c, "epsilon_prime": ep, "mu": mu, "LB": lb, "UB": ub}


def futurerand_law(k: int, epsilon: float) -> DistanceLaw:
    """FutureRand ``CR(1^k)`` with the paper's constants: ``ε' = ε/(5√k)``, annulus
    ``[μ−2√k, UB]``, a vector outside resampled uniformly from the complement."""
    k, epsilon = _check(k, epsilon)
    log_q, params = _futurerand_ideal(k, epsilon, 5.0)
    return _build("futurerand", k, epsilon, log_q, params)


def calibrated_law(k: int, epsilon: float) -> DistanceLaw:
    """Calibrated FutureRand: the smallest c in ε' = ε/(c√k) whose ideal loss is ≤ ε.

    The loss is not monotone in c (the annulus ends move in integer steps), so the smallest
    feasible c is located on the grid ``c = 0.10, 0.11, ..., 5.00`` (O(k) per point) and then
    refined by 30 bisection steps between it and the infeasible grid point below it, keeping the
    feasible end. ``c = 5`` is the paper's constant. The chosen law is then rounded to integer
    weights and certified like every other.
    """
    k, epsilon = _check(k, epsilon)

    def feasible(c: float) -> bool:
        log_q = _futurerand_ideal(k, epsilon, c)[0]
        return float(np.max(log_q) - np.min(log_q)) <= epsilon

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
    log_q, params = _futurerand_ideal(k, epsilon, hi)
    return _build("calibrated", k, epsilon, log_q, params)


def threshold_law(k: int, epsilon: float) -> DistanceLaw:
    """Threshold (Hamming-ball) randomizer: ``q = e^ε·a`` for ℓ < m, ``a`` for ℓ ≥ m.

    An intermediate value at one distance is allowed by the construction, but ``c_gap`` is a
    linear-fractional function of that fraction, so its optimum is at an endpoint, i.e. an
    integer ``m``: the search over ``m ∈ {1..k}`` is exact. With ``b(ℓ) = C(k,ℓ)/2^k`` (so
    ``Σ b(ℓ)(1−2ℓ/k) = 0``), ``c_gap(m) = S₁(m) / (1/(e^ε−1) + S₀(m))`` where
    ``S₀(m) = Σ_{ℓ<m} b(ℓ)`` and ``S₁(m) = Σ_{ℓ<m} b(ℓ)(1−2ℓ/k)``: one cumulative sum, O(k)
    for all m at once. ``1/(e^ε−1)`` is computed as ``e^{−ε}/(1−e^{−ε})`` (no overflow).
    """
    k, epsilon = _check(k, epsilon)
    ell = np.arange(k + 1, dtype=np.float64)
    b = np.exp(_log_binom(k) - k * _LN2)
    s0 = np.cumsum(b)[:-1]  # m = 1..k
    s1 = np.cumsum(b * (1.0 - 2.0 * ell / k))[:-1]
    gaps = s1 / (math.exp(-epsilon) / -math.expm1(-epsilon) + s0)
    m = int(np.argmax(gaps)) + 1
    return _build("threshold", k, epsilon, np.where(ell < m, epsilon, 0.0), {"m": m})


def erlingsson_c_gap(k: int, epsilon: float) -> float:
    """Effective ``c_gap = tanh(γ/2)/k`` of Erlingsson et al. (2020) as used here.

    ``γ ≤ ε`` is ε rounded down to the exact fraction the randomized-response sampler uses
    (:func:`dpfreq.noise.epsilon_to_fraction`; ``|γ − ε| ≤ 2^{-32}``), so client and server agree.
    """
    k, epsilon = _check(k, epsilon)
    return math.tanh(float(epsilon_to_fraction(epsilon)) / 2.0) / k


def auto_law(k: int, epsilon: float) -> DistanceLaw:
    """Auto mode: the largest exact ``c_gap`` among rr, futurerand, calibrated and threshold."""
    laws = [
        rr_law(k, epsilon),
        futurerand_law(k, epsilon),
        calibrated_law(k, epsilon),
        threshold_law(k, epsilon),
    ]
    return max(laws, key=lambda law: law.c_gap)


def distance_law(mode: str, k: int, epsilon: float) -> DistanceLaw:
    """The distance law of ``mode`` (one of rr, futurerand, calibrated, threshold, auto).

    Laws depend only on ``(mode, k, ε)`` and are immutable; they are cached (the table can ship
    with the parameters instead of being recomputed on every device).

    Parameters
    ----------
    mode : {"rr", "futurerand", "calibrated", "threshold", "auto"}
        The construction; ``"auto"`` picks the one with the largest exact gap.
    k : int
        Length of ``v`` (the change budget), in ``1..4096`` (``MAX_CHANGES``).
    epsilon : float
        The local ε the law is certified against.

    Returns
    -------
    DistanceLaw
        The certified law (its sampled law's worst-case ratio is at most ``e^ε``).

    Raises
    ------
    ParameterError
        If ``mode`` is unknown, ``k`` is out of range or ε is not a valid ε.

    Examples
    --------
    >>> law = distance_law("threshold", 8, 1.0)
    >>> sum(law.sampled_pmf)
    Fraction(1, 1)
    >>> law.certificate <= 1.0, min(law.sampled_pmf) > 0
    (True, True)
    """
    mode = _validate.check_choice(mode, "mode", DISTANCE_MODES)
    k, epsilon = _check(k, epsilon)
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


#: Relative slack allowed between the ideal law's float loss and ε (float rounding only); the
#: sampled law is held to ε exactly.
CERTIFICATE_TOLERANCE = 1e-12


def _certify(law: DistanceLaw) -> None:
    """Refuse a law whose ideal loss exceeds ε, whose **sampled** law's exact ratio exceeds
    ``e^ε``, or whose gap is not > 0."""
    func = public_caller()
    bound = exp_lower_bound(law.epsilon)
    ratio = law.certificate_ratio
    if not (law.ideal_log_ratio <= law.epsilon * (1 + CERTIFICATE_TOLERANCE)
            and ratio.numerator * bound.denominator <= bound.numerator * ratio.denominator):
        raise ParameterError(
            f"{func}: the privacy loss ln(p_max/p_min) of the {law.name} law exceeds epsilon "
            f"{law.epsilon!r} for k = {law.k}; refusing these parameters."
        )
    # a gap below a millionth of independent RR's is rounding noise around 0, not a randomizer
    if not law.c_gap > 1e-6 * math.tanh(law.epsilon / (2 * law.k)):
        raise ParameterError(
            f"{func}: the {law.name} randomizer has no positive gap c_gap for k = {law.k}, "
            f"epsilon = {law.epsilon!r} (the estimator would be undefined); choose a larger "
            "epsilon or another randomizer."
        )
