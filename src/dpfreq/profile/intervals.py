"""Per-class intervals and simultaneous bands for released profiles.

Two constructions, both deterministic post-processing (no ``rng``, no privacy cost):

* :func:`direct_intervals` — exact, from the discrete Laplace law of the direct mechanism's
  noise (:mod:`dpfreq.profile.direct`);
* :func:`simulated_intervals` — for the sketch reconstructions (Wu & Pagh ``fft``/``mle``):
  noise from the known law is pushed through the same reconstruction around the released
  estimate, with a generator derived from the release itself.
"""

from __future__ import annotations

import functools
import hashlib
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.noise import discrete_laplace_pmf, discrete_laplace_tail_bound
from dpfreq.order_stats import order_quantile
from dpfreq.rng import keyed_generator

__all__ = [
    "SIMULATION_DRAWS",
    "IntervalSet",
    "band_constant",
    "band_level",
    "bootstrap_intervals",
    "direct_half_widths",
    "direct_intervals",
    "direct_width_values",
    "direct_widths",
    "integer_classes",
    "release_key",
    "simulated_intervals",
    "sum_half_width",
]

SIMULATION_DRAWS = 200
_MULTINOMIAL_CELLS = 4_000_000  # (n+1)·P above this: Poisson approximation of the window counts


@dataclass(frozen=True)
class IntervalSet:
    """Interval ends for the ``n + 1`` profile entries, in fractions of the domain.

    ``lower``/``upper`` hold entry by entry with probability at least the confidence;
    ``band_lower``/``band_upper`` hold for all entries at once with that probability.
    """

    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    band_lower: NDArray[np.float64]
    band_upper: NDArray[np.float64]

    @property
    def band_l1(self) -> float:
        """ℓ1 bound implied by the band: ``Σ_t (band_upper − band_lower)`` capped at 2.

        When the truth and the estimate both lie in the band, every entry differs by at most the
        band's width there.
        """
        return float(min(2.0, np.sum(self.band_upper - self.band_lower)))

    @property
    def vacuous(self) -> bool:
        """True when the band allows any profile (its widths sum to 2 or more: ℓ1 bound 2)."""
        return self.band_l1 >= 2.0


def band_level(confidence: float, classes: int) -> float:
    """Per-class tail probability ``η_b`` of an exact simultaneous band over independent noise.

    With ``classes`` independent noise values each outside ``[−q, q]`` with probability at most
    ``η_b = 1 − confidence^(1/classes)``, all of them are inside with probability at least
    ``(1 − η_b)^classes = confidence`` (exact for independent noise, no union bound).
    """
    return -math.expm1(math.log(confidence) / classes)


def direct_half_widths(gamma: Fraction, classes: int, confidence: float) -> tuple[int, int]:
    """``(q, q_band)``: exact discrete Laplace quantiles for one class and for all at once.

    ``q`` is the smallest integer with ``Pr[|Z| > q] <= 1 − confidence``; ``q_band`` the
    smallest with ``Pr[max_t |Z_t| > q_band] <= 1 − confidence`` over ``classes`` i.i.d. draws.
    """
    q = discrete_laplace_tail_bound(1.0 - confidence, gamma)
    q_band = discrete_laplace_tail_bound(band_level(confidence, classes), gamma)
    return q, q_band


def direct_widths(gamma: Fraction, max_count: int, confidence: float, *,
                  derive_zero: bool) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Per-class and band half-widths (items) of the noisy vector of the direct mechanism.

    Parameters
    ----------
    gamma : Fraction
        γ of the noise ``DLap(e^{−γ})`` on each noised class.
    max_count : int
        ``n``; the vector has ``n + 1`` classes.
    confidence : float
        Level of each per-class interval and of the band.
    derive_zero : bool
        False: all ``n + 1`` classes are noised (:func:`direct_half_widths` for each). True:
        the classes ``t ≥ 1`` are noised and class 0 is ``d − Σ_{t≥1}`` of them, so its error
        is minus the sum of the ``n`` draws.

    Returns
    -------
    (half, band) : two int64 arrays of length ``n + 1``

    Notes
    -----
    With class 0 derived, class ``t ≥ 1`` gets the exact quantile ``q`` of one draw and class
    0 the exact quantile of the sum of ``n`` draws (:func:`sum_half_width`; where that
    convolution is too large, ``n·q_band``, valid because every draw lies in ``±q_band`` with
    probability at least ``confidence``). The band is the narrower (in total width, a choice
    from public parameters) of two valid constructions: (a) the exact band ``q_band`` over the
    ``n`` independent draws, which forces ``|Σ| <= n·q_band`` for class 0; (b) a band at level
    ``1 − η/2`` over the ``n`` draws and the sum's quantile at ``1 − η/2`` for class 0, with
    ``η = 1 − confidence`` (union bound).
    """
    q, q_band, q0, q0_band = direct_width_values(gamma, max_count, confidence,
                                                 derive_zero=derive_zero)
    n = int(max_count)
    half = np.full(n + 1, q, dtype=np.int64)
    band = np.full(n + 1, q_band, dtype=np.int64)
    half[0], band[0] = q0, q0_band
    return half, band


@functools.lru_cache(maxsize=256)  # public widths: grouped releases ask them per group
def direct_width_values(gamma: Fraction, max_count: int, confidence: float, *,
                        derive_zero: bool) -> tuple[int, int, int, int]:
    """``(q, q_band, q0, q0_band)``: the widths of :func:`direct_widths` without the arrays
    (a noised class ``t >= 1`` and class 0), for plans of any ``n``."""
    n = int(max_count)
    if not derive_zero:
        q, q_band = direct_half_widths(gamma, n + 1, confidence)
        return q, q_band, q, q_band
    if n == 0:  # class 0 = d exactly: nothing is noised
        return 0, 0, 0, 0
    q, q_band = direct_half_widths(gamma, n, confidence)
    q0 = sum_half_width(gamma, n, confidence)
    eta = (1.0 - confidence) / 2.0
    q_split = discrete_laplace_tail_bound(band_level(1.0 - eta, n), gamma)
    q0_split = sum_half_width(gamma, n, 1.0 - eta)
    half0 = n * q_band if q0 is None else q0
    if q0_split is not None and n * q_split + q0_split < 2 * n * q_band:
        return q, q_split, half0, q0_split
    return q, q_band, half0, n * q_band


def direct_intervals(noisy: NDArray[np.int64], estimate: NDArray[np.int64], *, gamma: Fraction,
                     domain_size: int, confidence: float,
                     derive_zero: bool = False) -> IntervalSet:
    """Exact intervals for the count-of-counts of the direct mechanism (as fractions of ``d``).

    Parameters
    ----------
    noisy : numpy.ndarray of int64
        The noisy count-of-counts ``y = c + Z`` before projection (with class 0 derived:
        ``(d − Σ_{t≥1} y_t, y_1, …, y_n)``).
    estimate : numpy.ndarray of int64
        The released projection ``x`` (non-negative, summing to ``d``).
    gamma : Fraction
        γ of the noise ``Z[t] ~ DLap(e^{−γ})``.
    domain_size : int
        ``d``.
    confidence : float
        Level of the per-class intervals and of the band.
    derive_zero : bool, default False
        Whether class 0 was derived from ``d`` (see :func:`direct_widths`).

    Returns
    -------
    IntervalSet

    Notes
    -----
    For each class ``[y_t − q_t, y_t + q_t]`` contains ``c_t`` exactly when the class's noise
    (one draw, or minus the sum of ``n`` draws for a derived class 0) is at most ``q_t`` in
    absolute value, which has probability at least ``confidence`` whatever ``c``: an exact
    interval (the discrete Laplace law is known exactly). The band uses the widths of
    :func:`direct_widths` and holds for all classes at once with probability at least
    ``confidence``. The released intervals are the smallest intervals containing both
    ``[y_t − q_t, y_t + q_t]`` and the released ``x_t``, intersected with ``[0, d]`` (where
    ``c_t`` lies anyway): enlarging an interval keeps its coverage, so the guarantee above holds
    for them unchanged, and they contain the released estimate. The enlargement is
    ``|x_t − y_t|``, the projection's shift (typically 0 or 1 item; larger only for classes
    whose noisy count was negative).
    """
    y = np.asarray(noisy, dtype=np.int64)
    x = np.asarray(estimate, dtype=np.int64)
    d = int(domain_size)
    q, q_band = direct_widths(gamma, y.size - 1, confidence, derive_zero=derive_zero)

    def hull(width: NDArray[np.int64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        lo = np.minimum(x.astype(np.float64), y.astype(np.float64) - width)
        hi = np.maximum(x.astype(np.float64), y.astype(np.float64) + width)
        return np.clip(lo, 0.0, d) / d, np.clip(hi, 0.0, d) / d

    lower, upper = hull(q)
    band_lower, band_upper = hull(q_band)
    return IntervalSet(lower=lower, upper=upper, band_lower=band_lower, band_upper=band_upper)


def sum_half_width(gamma: Fraction, classes: int, confidence: float) -> int | None:
    """Smallest ``q`` with ``Pr[|Z_1 + … + Z_k| > q] <= 1 − confidence`` for ``k`` i.i.d.
    ``DLap(e^{−γ})`` draws (the noise of a sum of ``k`` noisy classes), or None when the
    convolution would need more than 2^22 points.

    The law of the sum is the ``k``-fold convolution of the pmf, truncated where one draw's
    tail is below ``10^-15 / k`` (computed by FFT; float accuracy suffices for a quantile).
    """
    k = int(classes)
    if k == 1:
        return discrete_laplace_tail_bound(1.0 - confidence, gamma)
    t = discrete_laplace_tail_bound(min(0.5, 1e-15 / k), gamma)
    size = k * 2 * t + 1
    if size > 1 << 22:
        return None
    one = np.zeros(size, dtype=np.float64)
    one[: 2 * t + 1] = discrete_laplace_pmf(np.arange(-t, t + 1), gamma)
    law = np.fft.irfft(np.fft.rfft(one) ** k, n=size)  # support −k·t .. k·t, shifted by k·t
    mass = np.clip(law, 0.0, None)
    centre = k * t
    # Pr[|S| <= q] = mass over centre − q .. centre + q
    left = np.concatenate(([0.0], np.cumsum(mass[centre - 1 :: -1])))
    inside = np.cumsum(mass[centre:]) + left[: size - centre]
    ok = np.flatnonzero(inside >= confidence)
    return int(ok[0]) if ok.size else None


def integer_classes(profile: NDArray[np.float64], domain_size: int) -> NDArray[np.int64]:
    """Class sizes ``m[t]`` summing to ``d`` nearest to ``profile · d`` (largest remainders)."""
    d = int(domain_size)
    scaled = np.asarray(profile, dtype=np.float64) * d
    m = np.floor(scaled).astype(np.int64)
    rest = d - int(m.sum())
    if rest > 0:
        order = np.argsort(-(scaled - m), kind="stable")
        m[order[:rest]] += 1
    elif rest < 0:  # float round-off only
        order = np.argsort(scaled - m, kind="stable")
        take = order[:-rest]
        m[take] = np.maximum(m[take] - 1, 0)
    return m


def _window_probabilities(max_count: int, B: int, gamma: Fraction) -> NDArray[np.float64]:
    """Row ``k``: probability that ``k + Z`` lands at each window position ``t = −B..n+B``,
    followed by the probability that it lands outside the window (those items are not counted)."""
    n, P = max_count, max_count + 2 * B + 1
    pos = np.arange(P) - B
    z = pos[None, :] - np.arange(n + 1)[:, None]
    probs = discrete_laplace_pmf(z, gamma)
    outside = np.clip(1.0 - probs.sum(axis=1), 0.0, 1.0)
    return np.concatenate([probs, outside[:, None]], axis=1)


def _window_means(m: NDArray[np.int64], B: int, gamma: Fraction) -> NDArray[np.float64]:
    """Expected counts of noisy values at ``t = −B..n+B``: ``Σ_k m[k] Pr[Z = t − k]`` (by FFT)."""
    import scipy.signal  # here, not at the top: importing it takes ~1 s (it pulls scipy.stats)

    n = m.size - 1
    z = np.arange(-(n + B), n + B + 1)
    full = scipy.signal.fftconvolve(m.astype(np.float64), discrete_laplace_pmf(z, gamma))
    # full[j] = Σ_k m[k] pmf(z[j − k]) = expected count at t = j − (n + B)
    return np.clip(full[n : 2 * n + 2 * B + 1], 0.0, None)


def _simulated_counts(m: NDArray[np.int64], B: int, gamma: Fraction, draws: int,
                      gen: np.random.Generator) -> NDArray[np.int64]:
    """Counts of the noisy values in the window for class sizes ``m``, one row per simulated
    sketch (``draws`` rows).

    Exact multinomial per class when the table is small, otherwise the Poisson approximation
    with the same means (independent cells; accurate in the regime of large ``n``, where no
    cell holds a large share of the items). The law is computed once and the sketches are drawn
    several per call (the generator fills them in row order, as one call per sketch would),
    with at most ``_MULTINOMIAL_CELLS`` multinomial cells per call.
    """
    n = m.size - 1
    cells = (n + 1) * (n + 2 * B + 2)
    if cells <= _MULTINOMIAL_CELLS:
        probs = _window_probabilities(n, B, gamma)
        pvals = probs / probs.sum(axis=1, keepdims=True)
        step = max(1, _MULTINOMIAL_CELLS // cells)
        return np.concatenate([  # per class and cell, (rows, n + 1, P + 1); drop "outside"
            gen.multinomial(m, pvals, size=(min(step, draws - i), n + 1))[:, :, :-1].sum(axis=1)
            for i in range(0, draws, step)]).astype(np.int64)
    means = _window_means(m, B, gamma)
    return gen.poisson(means, size=(draws, means.size)).astype(np.int64)


def release_key(*parts: Any) -> bytes:
    """A key derived from the released numbers: SHA-256 over their canonical bytes."""
    h = hashlib.sha256(b"dpfreq profile intervals")
    for part in parts:
        data = (np.ascontiguousarray(part, dtype=np.int64).tobytes()
                if isinstance(part, np.ndarray) else str(part).encode("utf-8"))
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.digest()


def simulated_intervals(estimate: NDArray[np.float64], noisy_counts: NDArray[np.int64], *,
                        solve: Any, domain_size: int, max_count: int, B: int, gamma: Fraction,
                        confidence: float, label: str, centre: NDArray[np.float64] | None = None,
                        draws: int = SIMULATION_DRAWS) -> IntervalSet:
    """Intervals for a sketch reconstruction by simulation from the known noise law.

    Parameters
    ----------
    estimate : numpy.ndarray
        The released profile ``r̂[0..n]``.
    noisy_counts : numpy.ndarray of int64
        The released counts of noisy values on ``[−B .. n+B]`` (the input of the solver).
    solve : callable
        ``solve(counts) -> profiles``: the same deterministic reconstruction that produced
        ``estimate`` from ``noisy_counts``, applied to each row of a ``(draws, n + 2B + 1)``
        array of simulated counts (all at once, so that it can batch its work).
    domain_size, max_count, B : int
        ``d``, ``n`` and the window parameter.
    gamma : Fraction
        γ of the per-item noise ``DLap(e^{−γ})``.
    confidence : float
        Level of the intervals and of the band.
    label : str
        Names the reconstruction (e.g. ``"fft/1"``) in the key derivation.
    centre : numpy.ndarray, optional
        The profile the simulated data sets have (default: ``estimate``); the errors are
        measured from it. EM passes a smooth profile as plausible as the truth
        (:func:`dpfreq.profile.mle.smooth_profile`), as its sparse estimate is a poor stand-in.
    draws : int
        Number of simulated sketches.

    Returns
    -------
    IntervalSet

    Notes
    -----
    A parametric bootstrap: take class sizes ``m̂`` nearest to ``centre · d``, simulate the
    counts of noisy values that a sketch of a data set with that profile would give (each
    item's noisy value is ``k + Z``; the counts per class are multinomial, or Poisson for large
    tables), reconstruct each with ``solve`` and record the errors ``r* − m̂/d``; the intervals
    and the band around ``r̂`` are built from them by :func:`bootstrap_intervals` (bias-aware,
    with finite-sample order statistics). Coverage is approximate (the simulation starts from
    an estimate, not the unknown truth) and is measured by
    ``benchmarks/bench_sketch_intervals.py``. The generator
    is ChaCha20 keyed by SHA-256 of the released counts and the public parameters, so the
    intervals are a deterministic function of the release: anyone holding it recomputes them.
    Post-processing only: no privacy cost.
    """
    d, n = int(domain_size), int(max_count)
    r_hat = np.asarray(estimate, dtype=np.float64)
    key = release_key(np.asarray(noisy_counts, dtype=np.int64), d, n, B, gamma, label)
    gen = keyed_generator(key, "profile-intervals")
    m = integer_classes(r_hat if centre is None else np.asarray(centre, dtype=np.float64), d)
    start = m / d
    sketches = _simulated_counts(m, B, gamma, draws, gen)
    errors = np.asarray(solve(sketches), dtype=np.float64) - start
    return bootstrap_intervals(r_hat, errors, domain_size=d, confidence=confidence, seen=m > 0,
                               corrected_band=centre is not None)


def bootstrap_intervals(r_hat: NDArray[np.float64], errors: NDArray[np.float64], *,
                        domain_size: int, confidence: float,
                        seen: NDArray[np.bool_] | None = None,
                        corrected_band: bool = False) -> IntervalSet:
    """Per-class intervals and band from simulated errors ``r* − r̂`` (one row per draw).

    ``seen`` marks the classes that hold items in the simulated data sets (default:
    ``r̂ > 0``, for a simulation started from ``r̂``). ``corrected_band`` centres the band on
    the bias-corrected ``r̂ − b`` instead of the hull (for a simulation started elsewhere than
    ``r̂``; see below).

    The simulated bias ``b = mean(r* − r̂)`` estimates how far the reconstruction sits from
    its input on average (the simplex projection pulls small classes to 0 and pushes mass
    elsewhere); the centred deviations ``e − b`` give the spread. Each interval is the hull
    of ``r̂`` and the bias-corrected ``r̂ − b``, widened by the order-statistic quantile
    (:func:`order_quantile`) of ``|e_t − b_t|``; the band widens the same hull by ``c·s_t``
    with ``s_t`` the simulated standard deviation (floored at ``1/d``) and ``c`` the
    leave-one-out quantile of ``max_t |e_t − b_t| / s_t`` (:func:`band_constant`). ``c`` is
    calibrated on the bias-corrected deviations, so the band proper is ``r̂ − b ± c·s``; the
    hull hedges a bias measured around ``r̂`` that understates the bias around the truth, as it
    does when the simulation starts from ``r̂`` itself (fft: measured at ε = 0.5, nominal 0.9,
    the band centred on ``r̂ − b`` held in 0.82 of 400 releases, the hull in 0.90). When the
    simulation starts from a smooth profile instead (EM), the hedge only widens a band that
    already errs wide: on the same 400 releases the centred band held in 0.915 / 0.930 / 0.918 /
    0.900 at ε = 0.25 / 0.5 / 1 / 4, the hull in 0.920 / 0.940 / 0.928 / 0.915 (lower at every
    ε, each by less than the 1.5-point standard error), so such a simulation asks for
    ``corrected_band``. A class
    absent from every simulated data set has a spread that says nothing about how much mass
    the projection removed there: it gets the pooled quantile of the classes seen and their
    largest ``s_t``.

    When the band is no better than the trivial bound (its widths sum to 2 or more) the
    reconstruction cannot resolve single classes, and the simulation around ``r̂`` is then no
    guide to the error around the truth (measured: a band at nominal 0.95 held in 0.855 of
    200 releases, some classes' intervals in 0.86). Every interval and the band are then the
    trivial ``[0, 1]``, which holds with probability 1; the release flags the statement as
    vacuous and names the ε that would make it useful.
    """
    d = int(domain_size)
    seen = r_hat > 0 if seen is None else np.asarray(seen, dtype=bool)
    bias, s = _centre_and_scale(errors, seen, d)
    dev = np.abs(errors - bias)
    w = order_quantile(dev, confidence, axis=0)
    if seen.any() and not seen.all():
        w = np.where(seen, w, np.maximum(w, order_quantile(dev[:, seen], confidence)))
    c = band_constant(errors, seen, domain_size=d, confidence=confidence)
    lo, hi = np.minimum(r_hat, r_hat - bias), np.maximum(r_hat, r_hat - bias)
    band_lo, band_hi = (r_hat - bias, r_hat - bias) if corrected_band else (lo, hi)
    band_lower = np.clip(band_lo - c * s, 0.0, 1.0)
    band_upper = np.clip(band_hi + c * s, 0.0, 1.0)
    lower, upper = np.clip(lo - w, 0.0, 1.0), np.clip(hi + w, 0.0, 1.0)
    iv = IntervalSet(lower=lower, upper=upper, band_lower=band_lower, band_upper=band_upper)
    if iv.vacuous:
        zeros, ones = np.zeros(r_hat.size), np.ones(r_hat.size)
        iv = IntervalSet(lower=zeros, upper=ones, band_lower=zeros.copy(), band_upper=ones.copy())
    return iv


def _centre_and_scale(errors: NDArray[np.float64], seen: NDArray[np.bool_],
                      d: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Simulated bias and standard deviation per class (floored at ``1/d``; a class estimated
    at 0 gets at least the largest deviation of the classes seen)."""
    bias = errors.mean(axis=0)
    return bias, _pool_unseen(np.maximum((errors - bias).std(axis=0), 1.0 / d), seen)


def _pool_unseen(s: NDArray[np.float64], seen: NDArray[np.bool_]) -> NDArray[np.float64]:
    """Spreads along the last axis with each unseen class raised to the largest seen one."""
    if not seen.any() or seen.all():
        return s
    return np.where(seen, s, np.maximum(s, s[..., seen].max(axis=-1, keepdims=True)))


def band_constant(errors: NDArray[np.float64], seen: NDArray[np.bool_], *, domain_size: int,
                  confidence: float) -> float:
    """The band's multiplier ``c``: a leave-one-out quantile of ``max_t |e_t − b_t| / s_t``.

    The released band is ``r̂ − b ± c·s`` with ``b`` and ``s`` estimated from all ``N``
    simulated draws, and the real error ``r̂ − r`` is independent of those draws. Each draw
    ``e_i`` is therefore standardised by the bias ``b_{−i}`` and spread ``s_{−i}`` of the other
    ``N − 1`` draws, which stand to it as the ``N`` draws stand to the real error; ``c`` is the
    order-statistic quantile (:func:`order_quantile`) of the ``N`` leave-one-out maxima. Were the
    simulated law the real one, the real error and the draws would be exchangeable and the band
    would hold at the nominal level up to the ``N − 1`` versus ``N`` difference. Standardising a
    draw by estimates that include it makes its maximum too small (the band under-covers); a
    split into halves makes the estimates noisier than the released ones (it over-covers). In a
    Gaussian model of the errors (11 correlated classes, 200 draws, 4,000 trials at nominal
    0.9) the three gave 0.892, 0.903 (leave-one-out) and 0.913. The leave-one-out moments come
    in closed form from the centred draws ``c_i = e_i − ē``: ``e_i − b_{−i} = c_i·N/(N − 1)``
    and ``s_{−i}² = (Σ_j c_j² − c_i²)/(N − 1) − c_i²/(N − 1)²``. With fewer than 3 draws the
    in-sample maxima are used. Coverage on the sketch reconstructions is measured by
    ``benchmarks/bench_sketch_intervals.py`` (table in the accuracy page of the docs).
    """
    d = int(domain_size)
    count = errors.shape[0]
    if count < 3:
        bias, s = _centre_and_scale(errors, seen, d)
        return float(order_quantile((np.abs(errors - bias) / s).max(axis=1), confidence))
    centred = errors - errors.mean(axis=0)
    sq = centred * centred
    var = (sq.sum(axis=0) - sq) / (count - 1) - sq / (count - 1) ** 2
    s = _pool_unseen(np.maximum(np.sqrt(np.maximum(var, 0.0)), 1.0 / d), seen)
    maxima = (np.abs(centred) * (count / (count - 1)) / s).max(axis=1)
    return float(order_quantile(maxima, confidence))
