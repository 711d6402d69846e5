"""PRIVHIST (Suresh, NeurIPS 2019): differentially private anonymized histograms in Õ(√n).

Implements spec ``privhist.md`` §3–§5 on the prevalence form, and the public entry point
:func:`release_anonymized_histogram` (PrivHist with the paper's or a tuned budget split, the
Hay et al. baseline of :mod:`dpfreq.anonymized.hay`, or the data-independent choice of
:mod:`dpfreq.anonymized.auto`).

Never expands the histogram to ``n`` entries (spec §13): the work is a dense vector of length
``T ≈ sqrt(N·min(ε, 1))`` (small counts), the ``K ≈ n/T + M`` large counts (noised in chunks
and kept in prevalence form), and sweeps over the ``t ≤ sqrt(2n)`` distinct counts.

The deterministic steps are private functions that take their noise as arguments, so that the
worked examples of spec §12 are tested exactly (``tests/unit/test_anonymized_privhist.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import isotonic_regression

from dpfreq._validate import check_choice, check_epsilon, message
from dpfreq.anonymized import auto
from dpfreq.anonymized._input import as_prevalences, total_of
from dpfreq.anonymized.result import AnonymizedHistogramRelease
from dpfreq.errors import DataError, ParameterError
from dpfreq.noise import discrete_laplace_tail_bound, epsilon_to_fraction, sample_discrete_laplace
from dpfreq.release import ErrorStatement
from dpfreq.rng import RNGLike, resolve_rng

__all__ = ["METHODS", "release_anonymized_histogram"]

I64 = NDArray[np.int64]
METHODS = ("auto", "privhist", "privhist-tuned", "hay")
_CHUNK = 1 << 20  # large counts noised per chunk (bounded memory even for a huge M)
_FUNC = "release_anonymized_histogram"


# ----------------------------------------------------------------------------------------------
# noise and shared helpers


class NoiseSource(Protocol):
    """Where the mechanism's noise comes from (exact sampler in production, fixed in tests)."""

    def geometric(self, epsilon: float, size: int) -> I64:
        """``size`` i.i.d. two-sided geometric ``G(e^{-ε})`` draws (spec §2)."""
        ...


class ExactNoise:
    """Two-sided geometric noise from :func:`dpfreq.noise.sample_discrete_laplace` (exact).

    ``G(e^{-ε})`` of spec §2 is the discrete Laplace with ``γ = ε`` (rounded down to a fraction,
    so the noise is never smaller than asked for).
    """

    def __init__(self, generator: np.random.Generator) -> None:
        self.generator = generator

    def geometric(self, epsilon: float, size: int) -> I64:
        if size == 0:
            return np.zeros(0, dtype=np.int64)
        gamma = epsilon_to_fraction(epsilon)
        return sample_discrete_laplace(gamma, size, rng=self.generator)


def expected_abs_geometric(epsilon: float) -> float:
    """``E|Z| = 2α/(1 − α²)`` for ``Z ~ G(α)``, ``α = e^{-ε}`` (spec §2, §7)."""
    alpha = math.exp(-epsilon)
    return 2.0 * alpha / -math.expm1(-2.0 * epsilon)


def merge_prevalences(counts: I64, prevalences: I64) -> tuple[I64, I64]:
    """Sum the prevalences of equal counts; drop zero prevalences; ascending counts."""
    if counts.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    keys, inverse = np.unique(counts, return_inverse=True)
    sums = np.zeros(keys.size, dtype=np.int64)
    np.add.at(sums, inverse, prevalences)
    keep = sums > 0
    return keys[keep].astype(np.int64), sums[keep]


def round_half_up(num: Any, den: Any) -> Any:
    """``round(max(num/den, 0))`` with ``round(x) = ⌊x + 1/2⌋`` (spec §8), exactly in integers."""
    out = (2 * num + den) // (2 * den)
    return np.maximum(out, 0) if isinstance(out, np.ndarray) else max(out, 0)


def fit_non_increasing(values: NDArray[Any], weights: NDArray[Any] | None = None
                       ) -> NDArray[np.float64]:
    """Weighted least-squares non-increasing fit (PAVA, spec §8), via scipy."""
    if values.size == 0:
        return np.zeros(0, dtype=np.float64)
    w = None if weights is None else np.asarray(weights, dtype=np.float64)
    res = isotonic_regression(np.asarray(values, dtype=np.float64), weights=w, increasing=False)
    return np.asarray(res.x, dtype=np.float64)


def _blocks(values: NDArray[Any], weights: NDArray[Any] | None = None) -> I64:
    """Block start indices (plus the end) of the non-increasing PAVA fit."""
    w = None if weights is None else np.asarray(weights, dtype=np.float64)
    res = isotonic_regression(np.asarray(values, dtype=np.float64), weights=w, increasing=False)
    return np.asarray(res.blocks, dtype=np.int64)


def rounded_isotonic(numerators: I64, gaps: I64 | None = None) -> I64:
    """Steps L1 / H5–H6: non-increasing fit, clamp at 0, round — exactly on integers.

    With ``gaps=None`` the data are the integers ``numerators`` with unit weights (L1). With gaps
    ``g_i`` the data are ``numerators_i / g_i`` with weights ``g_i²`` (H5), so a block's weighted
    mean is ``Σ g_i·numerators_i / Σ g_i²``, computed in Python integers (no overflow) and
    rounded with :func:`round_half_up`. scipy supplies the block structure.
    """
    m = numerators.size
    if m == 0:
        return np.zeros(0, dtype=np.int64)
    if gaps is None:
        starts = _blocks(numerators)
        sums = np.add.reduceat(numerators, starts[:-1])
        lens = np.diff(starts)
        block_values = round_half_up(sums, lens).astype(np.int64)
    else:
        g = gaps.astype(np.float64)
        starts = _blocks(numerators / g, g * g)
        gi = gaps.astype(object)
        num = np.add.reduceat(gi * numerators.astype(object), starts[:-1])
        den = np.add.reduceat(gi * gi, starts[:-1])
        block_values = np.array([round_half_up(int(a), int(b)) for a, b in zip(num, den,
                                                                                strict=True)],
                                dtype=np.int64)
    return np.repeat(block_values, np.diff(starts))


def sorted_unique(values: I64) -> I64:
    """Sorted distinct values (sort-based; numpy's hash-based ``unique`` is slower here)."""
    a = np.sort(values)
    if a.size == 0:
        return a
    return a[np.concatenate(([True], a[1:] != a[:-1]))]


def cumulative_to_prevalences(positions: I64, cumulative: I64) -> tuple[I64, I64]:
    """Prevalences ``y_i − y_{i+1}`` (``y_{m+1} = 0``) of a non-increasing cumulative vector."""
    prev = cumulative - np.append(cumulative[1:], 0)
    keep = prev > 0
    return positions[keep].astype(np.int64), prev[keep].astype(np.int64)


# ----------------------------------------------------------------------------------------------
# spec §3 step 2: parameters and the sensitivity-preserving split


def threshold_t(n_estimate: int, epsilon: float) -> int:
    """``T = ⌈sqrt(N·min(ε, 1))⌉`` with the total ε (spec §3, A8); exact for ε ≥ 1."""
    if epsilon >= 1.0:
        r = math.isqrt(n_estimate)
        return r if r * r == n_estimate else r + 1
    return max(math.ceil(math.sqrt(n_estimate * epsilon)), 1)


def fake_count_m(n_estimate: int, epsilon2: float) -> int:
    """``M = ⌈max(2(ln N + ε2)/ε2, 1)⌉`` fake counts at ``T`` and ``T+1`` (spec §3, A3)."""
    return math.ceil(max(2.0 * (math.log(n_estimate) + epsilon2) / epsilon2, 1.0))


def split_histogram(counts: I64, prevalences: I64, t: int, m: int, z_b: int
                    ) -> tuple[I64, I64, I64]:
    """Spec §3 step 2: add ``M`` fake counts at ``T`` and ``T+1``, move ``Z^b`` of them, split.

    Returns
    -------
    small_cumulative : int64 array of length T
        ``φ^{bs}_{r+} = max(0, Σ_{s=r}^{T} φ^b_s)`` for ``r = 1..T``.
    large_counts, large_prevalences : int64 arrays
        ``H^{bℓ}`` (counts ``>= T+1``) in prevalence form, from
        ``max(0, Σ_{s=T+1}^{r} φ^b_s)`` differenced.
    """
    below = counts < t
    phi_t = int(prevalences[counts == t].sum())
    phi_t1 = int(prevalences[counts == t + 1].sum())
    dense = np.zeros(t + 1, dtype=np.int64)  # index r = 1..T
    dense[counts[below]] = prevalences[below]
    dense[t] = phi_t + m - z_b
    tail = np.cumsum(dense[:0:-1])[::-1]  # Σ_{s=r}^{T} φ^b_s for r = 1..T
    small_cumulative = np.maximum(tail, 0)
    above = counts > t + 1
    large_counts = np.concatenate(([t + 1], counts[above])).astype(np.int64)
    large_phi = np.concatenate(([phi_t1 + m + z_b], prevalences[above])).astype(np.int64)
    cum = np.maximum(np.cumsum(large_phi), 0)
    large_prev = np.diff(cum, prepend=0)
    keep = large_prev > 0
    return small_cumulative, large_counts[keep], large_prev[keep]


def noisy_large_counts(large_counts: I64, large_prevalences: I64, epsilon2: float,
                       noise: NoiseSource, *, isotonic: bool = False) -> tuple[I64, I64]:
    """Step 4: ``N^{bℓ}_(i) + Z^{cℓ}_i`` over the sorted (descending) large counts.

    The noise is drawn in descending order of the counts, in chunks of at most 2^20 elements,
    and the multiset of noisy values is returned in prevalence form (values may be ``<= 0``).

    With ``isotonic=True`` (``privhist-tuned``) the noisy vector, in the order of the sorted
    true counts, is replaced by its non-increasing least-squares fit, clamped at 0 and rounded
    (Hay et al.'s consistency step applied to the large part). The vector indexed by sorted
    position is what the privacy argument protects (spec §6), so this is post-processing; it
    needs ``O(K)`` memory for the ``K`` large counts.
    """
    total = int(large_prevalences.sum())
    if total == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    c_desc = large_counts[::-1]
    p_desc = large_prevalences[::-1]
    ends = np.cumsum(p_desc)
    starts_el = ends - p_desc
    keys: list[I64] = []
    mults: list[I64] = []
    ordered: list[I64] = []
    start = 0
    while start < total:
        stop = min(start + _CHUNK, total)
        i0 = int(np.searchsorted(ends, start, side="right"))
        i1 = int(np.searchsorted(ends, stop - 1, side="right"))
        reps = (np.minimum(ends[i0:i1 + 1], stop) - np.maximum(starts_el[i0:i1 + 1], start))
        base = np.repeat(c_desc[i0:i1 + 1], reps)
        values = base + noise.geometric(epsilon2, stop - start)
        start = stop
        if isotonic:
            ordered.append(values)
            continue
        u, k = np.unique(values, return_counts=True)
        keys.append(u.astype(np.int64))
        mults.append(k.astype(np.int64))
    if isotonic:
        fitted = rounded_isotonic(np.concatenate(ordered))
        return merge_prevalences(fitted, np.ones(fitted.size, dtype=np.int64))
    return merge_prevalences(np.concatenate(keys), np.concatenate(mults))


# ----------------------------------------------------------------------------------------------
# spec §4: low privacy


def remove_nearest(counts: I64, prevalences: I64, target: int, m: int, *, prefer_larger: bool
                   ) -> tuple[I64, I64]:
    """Remove the ``m`` elements closest to ``target`` (spec L4 with tie rule A7)."""
    if counts.size == 0 or m <= 0:
        return counts, prevalences
    dist = np.abs(counts - target)
    tie = -counts if prefer_larger else counts
    order = np.lexsort((tie, dist))
    p = prevalences[order]
    before = np.cumsum(p) - p
    removed = np.minimum(p, np.maximum(m - before, 0))
    out = prevalences.copy()
    out[order] -= removed
    keep = out > 0
    return counts[keep], out[keep]


def low_privacy(noisy_small_cumulative: I64, noisy_large: tuple[I64, I64], t: int, m: int
                ) -> tuple[I64, I64]:
    """PRIVHIST-LOWPRIVACY (spec §4, L1–L4) on ``H^{cs}`` and ``H^{cℓ}`` (prevalence form)."""
    y = rounded_isotonic(noisy_small_cumulative)  # L1 (a)+(b)
    small_c, small_p = cumulative_to_prevalences(np.arange(1, t + 1, dtype=np.int64), y)
    large_c, large_p = noisy_large
    large_c = np.maximum(large_c, t)  # L2
    c, p = merge_prevalences(np.concatenate((small_c, large_c)),
                             np.concatenate((small_p, large_p)))  # L3
    c, p = remove_nearest(c, p, t + 1, m, prefer_larger=True)  # L4
    return remove_nearest(c, p, t, m, prefer_larger=False)


# ----------------------------------------------------------------------------------------------
# spec §5: high privacy


def t_prime(n_estimate: int, epsilon3: float, reading: str = "A") -> int:
    """``T'`` of H2 under the readings of ambiguity A1 (default (A): ``⌈10·sqrt(N/ε3)⌉``)."""
    if reading == "A":
        return math.ceil(10.0 * math.sqrt(n_estimate / epsilon3))
    if reading == "B":
        return math.ceil(10.0 * math.sqrt(n_estimate / epsilon3**3))
    if reading == "C":
        return math.ceil(10.0 * math.sqrt(n_estimate) / epsilon3)
    raise ParameterError(message("t_prime_reading", _FUNC, "one of 'A', 'B', 'C'", reading))


def grid_q(n_estimate: int, epsilon3: float) -> float | None:
    """``q = sqrt(ln(1/ε3)/(N·ε3))``; ``None`` when ``ε3 >= 1`` (grid skipped, A10)."""
    if epsilon3 >= 1.0:
        return None
    return math.sqrt(math.log(1.0 / epsilon3) / (n_estimate * epsilon3))


def geometric_grid(n_estimate: int, t: int, epsilon3: float, reading: str = "A") -> I64:
    """H2 grid ``{⌊T(1+q)^i⌋ : i = 0..⌊log_{1+q}(T'/T)⌋}`` (sorted, de-duplicated)."""
    q = grid_q(n_estimate, epsilon3)
    tp = t_prime(n_estimate, epsilon3, reading)
    if q is None or q <= 0 or tp <= t:
        return np.zeros(0, dtype=np.int64)
    i_max = math.floor(math.log(tp / t) / math.log1p(q))
    powers = np.exp(np.arange(i_max + 1, dtype=np.float64) * math.log1p(q))
    return sorted_unique(np.floor(t * powers).astype(np.int64))


def boundaries(n_estimate: int, t: int, epsilon3: float, large_values: I64,
               reading: str = "A") -> I64:
    """H2: ``S = {1..T} ∪ grid ∪ {noisy large >= T'} ∪ {2N}``, cut at ``2N`` (A9), sorted."""
    cap = 2 * n_estimate
    tp = t_prime(n_estimate, epsilon3, reading)
    parts = [np.arange(1, t + 1, dtype=np.int64),
             geometric_grid(n_estimate, t, epsilon3, reading),
             large_values[large_values >= tp].astype(np.int64),
             np.array([cap], dtype=np.int64)]
    s = sorted_unique(np.concatenate(parts))
    return s[(s >= 1) & (s <= cap)]


def cap_counts(counts: I64, prevalences: I64, cap: int) -> tuple[I64, I64]:
    """H1: every count ``>= cap`` becomes ``cap``."""
    return merge_prevalences(np.minimum(counts, cap), prevalences)


def smoothed_scaled_cumulative(counts: I64, prevalences: I64, s: I64) -> tuple[I64, I64]:
    """H3 as integers: ``(Y, g)`` with ``Y_i = g_i·φ^v_{s_i+}``, ``g_i = s_i − s_{i−1}``.

    ``Y_i = g_i·#{elements with count > s_i} + Σ_{s_{i−1} < j <= s_i} φ_j (j − s_{i−1})`` is an
    integer; moving one element ``j → j+1`` (or adding one with count 1) changes exactly one
    ``Y_i`` by exactly 1, so ``Y`` has ℓ1 sensitivity 1 for fixed ``S``. Counts must be
    ``<= s[-1]`` (apply :func:`cap_counts` first).
    """
    g = np.diff(s, prepend=0).astype(np.int64)
    m = s.size
    within = np.zeros(m, dtype=np.int64)
    cnt = np.zeros(m, dtype=np.int64)
    if counts.size:
        k = np.searchsorted(s, counts, side="left")
        if int(k.max()) >= m:
            raise DataError(message("counts", "smoothed_scaled_cumulative",
                                    f"<= the last boundary {int(s[-1])}", int(counts.max())))
        lower = np.where(k > 0, s[np.maximum(k - 1, 0)], 0)
        np.add.at(within, k, prevalences * (counts - lower))
        np.add.at(cnt, k, prevalences)
    above = np.cumsum(cnt[::-1])[::-1] - cnt  # elements in later intervals
    return g * above + within, g


def smoothed_prevalences(counts: I64, prevalences: I64, s: I64) -> NDArray[np.float64]:
    """H3 prevalences ``φ^v_{s_i}`` (floats, for tests and diagnostics)."""
    y, g = smoothed_scaled_cumulative(counts, prevalences, s)
    cum = y / g
    return np.asarray(cum - np.append(cum[1:], 0.0), dtype=np.float64)


def high_privacy(noisy_scaled: I64, s: I64) -> tuple[I64, I64]:
    """H5–H6: weighted isotonic fit of ``φ^w = noisy_scaled / g`` (weights ``g²``), round."""
    g = np.diff(s, prepend=0).astype(np.int64)
    y = rounded_isotonic(noisy_scaled, g)
    return cumulative_to_prevalences(s, y)


# ----------------------------------------------------------------------------------------------
# the whole mechanism


@dataclass
class Outcome:
    """What a mechanism run produced (internal; turned into a release by the entry point)."""

    counts: I64
    prevalences: I64
    n_estimate: int
    regime: str
    noise_l1_scale: float = 0.0
    params: dict[str, Any] = field(default_factory=dict)


def privhist(counts: I64, prevalences: I64, *, epsilon: float,
             split: tuple[float, float, float], noise: NoiseSource,
             t_prime_reading: str = "A", m_override: int | None = None,
             low_privacy_branch: bool | None = None, isotonic_large: bool = False) -> Outcome:
    """PRIVHIST (spec §3) on a validated prevalence form; noise from ``noise``.

    ``low_privacy_branch`` overrides the paper's rule (low-privacy branch iff ε > 1);
    ``isotonic_large`` fits the noisy large counts isotonically in the low-privacy branch
    (:func:`noisy_large_counts`). Both defaults are the paper's algorithm.
    """
    eps1, eps2, eps3 = split
    n = total_of(counts, prevalences)
    n_est = max(n + int(noise.geometric(eps1, 1)[0]), 0)  # step 1
    if n_est == 0:
        return Outcome(np.zeros(0, np.int64), np.zeros(0, np.int64), 0, "empty")
    t = threshold_t(n_est, epsilon)
    m = fake_count_m(n_est, eps2) if m_override is None else m_override
    z_b = int(noise.geometric(eps2, 1)[0])
    small_cum, large_c, large_p = split_histogram(counts, prevalences, t, m, z_b)
    if low_privacy_branch is None:
        low_privacy_branch = epsilon > 1.0
    noisy_large = noisy_large_counts(large_c, large_p, eps2, noise,
                                     isotonic=isotonic_large and low_privacy_branch)  # step 4
    k = int(large_p.sum())
    params: dict[str, Any] = {"T": t, "M": m, "K": k}
    if low_privacy_branch:  # step 5
        params["isotonic_large"] = isotonic_large
        noisy_small = small_cum + noise.geometric(eps2, t)  # step 3
        c, p = low_privacy(noisy_small, noisy_large, t, m)
        scale = (t + k) * expected_abs_geometric(eps2)
        return Outcome(c, p, n_est, "low-privacy", scale, params)
    # step 6: high privacy (H^{cs} is not used there, so step 3 is skipped)
    s = boundaries(n_est, t, eps3, noisy_large[0], t_prime_reading)
    hc, hp = cap_counts(counts, prevalences, 2 * n_est)  # H1
    y, _ = smoothed_scaled_cumulative(hc, hp, s)  # H3 (integer form)
    noisy = y + noise.geometric(eps3, s.size)  # H4 (discrete; see release docstring)
    c, p = high_privacy(noisy, s)
    q = grid_q(n_est, eps3)
    params.update({"boundaries": int(s.size), "T_prime": t_prime(n_est, eps3, t_prime_reading),
                   "q": q, "t_prime_reading": t_prime_reading})
    return Outcome(c, p, n_est, "high-privacy", s.size * expected_abs_geometric(eps3), params)


# ----------------------------------------------------------------------------------------------
# the public entry point


def _check_split(split: Any, epsilon: float, method: str) -> tuple[float, float, float]:
    high = method != "hay" and not auto.plan_for(method, epsilon).low_privacy_branch
    if method == "hay":
        rule = (f"a sequence (ε1, ε2[, 0]) of finite numbers with ε1 > 0, ε2 > 0 and sum <= "
                f"epsilon = {epsilon!r}")
    else:
        rule = ("a sequence (ε1, ε2, ε3) of finite numbers >= 0 with ε1 > 0, ε2 > 0, "
                + ("ε3 > 0 (high-privacy branch), " if high else "")
                + f"and sum <= epsilon = {epsilon!r}")
    if isinstance(split, str | bytes) or not isinstance(split, Sequence):
        raise ParameterError(message("split", _FUNC, rule, split))
    try:
        values = [float(v) for v in split]
    except (TypeError, ValueError):
        raise ParameterError(message("split", _FUNC, rule, split)) from None
    if method == "hay" and len(values) == 2:
        values.append(0.0)
    if len(values) != 3 or any(not math.isfinite(v) or v < 0 for v in values):
        raise ParameterError(message("split", _FUNC, rule, split))
    e1, e2, e3 = values
    if e1 <= 0 or e2 <= 0 or sum(values) > epsilon * (1 + 1e-9):
        raise ParameterError(message("split", _FUNC, rule, split))
    if (method == "hay" and e3 != 0) or (high and e3 <= 0):
        raise ParameterError(message("split", _FUNC, rule, split))
    return e1, e2, e3


def _read_source(source: Any, label: str | None, engine: Any) -> tuple[I64, I64, str | None]:
    if label is None:
        if engine is not None:
            raise ParameterError(message("label", _FUNC, "a column name when engine is given",
                                         None))
        if isinstance(source, str | bytes) or type(source).__module__.startswith(
                ("pyspark", "duckdb", "pathlib")):
            raise ParameterError(message(
                "label", _FUNC, "the label column's name when source is a file, SQL, a DuckDB "
                "relation or a Spark DataFrame", None))
        counts, prev = as_prevalences(source, _FUNC)
        return counts, prev, None
    if not isinstance(label, str) or not label:
        raise ParameterError(message("label", _FUNC, "a non-empty column name", label))
    from dpfreq.engines import get_engine

    eng = get_engine(engine, source)
    agg = eng.count_of_counts(source, item=label)
    counts, prev = as_prevalences(agg, _FUNC)
    return counts, prev, eng.name


def _error_statement(out: Outcome, method: str) -> ErrorStatement:
    if out.regime == "empty":
        return ErrorStatement(kind="scale", confidence=None, value=0.0, description=(
            "N = 0: the empty histogram is released; its sorted-ℓ1 error is the true n"))
    where = {
        "low-privacy": "the T noisy small cumulative prevalences and the K noisy large counts "
                       "(E|Z| = 2α/(1−α²) each, α = e^{−ε2})",
        "high-privacy": "the noisy smoothed cumulative prevalences at the |S| boundaries "
                        "(E|Z| each, α = e^{−ε3}); the smoothing bias (H3) comes on top",
        "sorted-counts": "the L = N noisy sorted counts (E|Z| each, α = e^{−ε2})",
    }[out.regime]
    return ErrorStatement(kind="scale", confidence=None, value=float(out.noise_l1_scale),
                          description=(
        f"sorted-ℓ1 error scale: expected ℓ1 size of the noise added to {where}, before "
        "isotonic regression and rounding (which usually shrink it). A scale, not a bound: "
        "Theorem 1 of Suresh (2019) gives E ℓ1 = O(sqrt(n)·e^{−cε}) for ε > 1 and "
        "O(sqrt(n/ε·log(2/ε))) for ε <= 1 with unstated constants"))


def release_anonymized_histogram(
    source: Any,
    *,
    epsilon: float,
    label: str | None = None,
    method: str = "auto",
    split: Sequence[float] | None = None,
    engine: Any = None,
    rng: RNGLike = None,
) -> AnonymizedHistogramRelease:
    """Release an anonymized histogram (the multiset of counts) and its total under ε-DP.

    Parameters
    ----------
    source : mapping, array-like, Prevalences or data source
        Without ``label``: the histogram as a mapping ``{count r: number of labels with count
        r}`` (the compact form PRIVHIST runs on, ``O(sqrt n)`` pairs), a 1-d array of per-label
        counts (integers ``>= 1``), or an object with ``counts``/``prevalences`` arrays such as
        :class:`dpfreq.engines.base.Prevalences`. With ``label``: a data source with one row per
        occurrence (CSV/Parquet path, SQL, DuckDB relation, Spark DataFrame, or a mapping of
        columns), aggregated exactly by the engine's ``count_of_counts``.
    epsilon : float
        Total privacy budget ε > 0 (no default).
    label : str, optional
        The label column (passwords, node ids, ...) of a data source.
    method : {"auto", "privhist", "privhist-tuned", "hay"}
        ``"privhist"``: PRIVHIST with the paper's split ε/3 each (or ``split``).
        ``"privhist-tuned"``: PRIVHIST with the measured split of
        :func:`dpfreq.anonymized.auto.tuned_split`, running the low-privacy branch (L1–L4)
        for every ε >= 0.01 (not only ε > 1; privacy does not depend on the branch), with an
        extra isotonic fit of the noisy large counts (post-processing), and the high-privacy
        branch below. ``"hay"``: the Hay et al. sorted-count baseline (``O(n)`` memory,
        refused above ``HAY_MAX_LENGTH``). ``"auto"``: chosen from ε alone by
        :func:`dpfreq.anonymized.auto.choose` (never from the data); currently tuned PrivHist
        at every ε, which beat both the paper split and Hay et al. by 2–20× in sorted-ℓ1 on
        Zipf data (measurements in :mod:`dpfreq.anonymized.auto`).
    split : sequence of float, optional
        ``(ε1, ε2, ε3)`` in absolute units, sum ``<= epsilon``: ε1 for ``N``, ε2 for the split
        and the noisy counts, ε3 for the high-privacy smoothed histogram (``ε <= 1``; unused
        for ``ε > 1``). For ``"hay"``: ``(ε1, ε2)``. Not allowed with ``"auto"``.
    engine : str, engine instance or SparkSession, optional
        Where a data source is aggregated (default: inferred from the source).
    rng : None, int or numpy.random.Generator
        Random source; ``None`` is the secure default. Seeds are for tests only.

    Returns
    -------
    AnonymizedHistogramRelease
        Prevalence form of ``H``, ``N``, the split, the regime and an error-scale statement.

    Raises
    ------
    ParameterError
        Invalid ε, split, method, label or engine; ``"hay"`` with ``N`` above its limit.
    DataError
        Zero, negative, non-integer or NaN counts or prevalences; repeated counts.

    Notes
    -----
    **Privacy.** Unit of privacy: one occurrence of one label. Two histograms are neighbours
    when their sorted-ℓ1 distance is 1 (spec §1; Hay et al. 2010, Suresh 2019): one label's
    count moves by ±1, including a new label appearing with count 1 or a count-1 label
    disappearing; equivalently, one row is added to or removed from the raw data. The pair
    ``(H, N)`` is ε-DP (pure, central model) by basic composition: ``N`` is ε1-DP (sensitivity
    1, two-sided geometric noise); given ``N``, the split with ``M`` fake counts at ``T`` and
    ``T+1`` and the noise ``Z^b`` keeps the ℓ1 sensitivity of (noisy small cumulative
    prevalences, sorted large counts) at 1, so step 3–4 are ε2-DP (spec §6); the high-privacy
    branch adds ε3-DP noise to the smoothed cumulative prevalences (sensitivity ``1/gap``). All
    later steps are post-processing. The argument holds for either branch at any ε, so
    ``privhist-tuned`` may run the low-privacy branch at ε ≤ 1; its isotonic fit of the noisy
    large counts acts on the ε2-DP vector indexed by sorted position (post-processing). The
    method choice of ``"auto"`` depends on ε only. Hay et al.: ε1 for ``N`` plus ε2 for the
    sorted counts padded to the public length ``L = N`` (sensitivity 1); its refusal above
    ``HAY_MAX_LENGTH`` depends on ``N`` only.

    **Noise.** All noise is exact integer two-sided geometric noise from :mod:`dpfreq.noise`.
    In H4, instead of continuous Laplace ``L(1/(ε3·g_i))`` on ``φ^v_{s_i+}``, the integer
    ``Y_i = g_i·φ^v_{s_i+}`` (sensitivity 1 in one coordinate) gets ``G(e^{−ε3})`` and is
    divided by ``g_i``: the same scale, exactly ε3-DP, and no floating-point Laplace pitfalls
    (spec A16).

    **Cost.** ``Õ(sqrt(n))`` time and memory for ε > 1, ``Õ(sqrt(n/ε) + 1/ε)`` for ε ≤ 1, on the
    prevalence form (spec §13); the histogram is never expanded to ``n`` entries.

    References
    ----------
    A. T. Suresh, "Differentially Private Anonymized Histograms", NeurIPS 2019 (PRIVHIST).
    M. Hay, C. Li, G. Miklau, D. Jensen, "Accurate estimation of the degree distribution of
    private networks", ICDM 2009; M. Hay et al., "Boosting the accuracy of differentially
    private histograms through consistency", VLDB 2010.

    Examples
    --------
    >>> rel = release_anonymized_histogram({1: 2, 2: 1, 5: 1, 9: 1}, epsilon=4.0,
    ...                                    method="privhist", rng=0)
    >>> rel.regime, rel.split
    ('low-privacy', (1.3333333333333333, 1.3333333333333333, 1.3333333333333333))
    """
    epsilon = check_epsilon(epsilon, "epsilon", _FUNC)
    check_choice(method, "method", _FUNC, METHODS)
    if method == "auto" and split is not None:
        raise ParameterError(message("split", _FUNC, "None when method='auto' (auto picks "
                                     "its own split)", split))
    checked = None if split is None else _check_split(split, epsilon, method)
    plan = auto.plan_for(method, epsilon, checked)
    used, eps_split = plan.method, plan.split
    counts, prev, engine_name = _read_source(source, label, engine)
    resolved = resolve_rng(rng, _FUNC)
    noise = ExactNoise(resolved.generator)
    if used == "hay":
        from dpfreq.anonymized.hay import hay

        out = hay(counts, prev, split=eps_split, noise=noise, func=_FUNC)
        mechanism = "hay-sorted-counts"
    else:
        out = privhist(counts, prev, epsilon=epsilon, split=eps_split, noise=noise,
                       low_privacy_branch=plan.low_privacy_branch,
                       isotonic_large=plan.isotonic_large)
        mechanism = "privhist"
    gamma1 = epsilon_to_fraction(eps_split[0])
    params: dict[str, Any] = {
        "requested_method": method,
        "epsilon_fractions": [epsilon_to_fraction(e) if e > 0 else Fraction(0)
                              for e in eps_split],
        "n_estimate_ci95_halfwidth": discrete_laplace_tail_bound(0.05, gamma1),
        **out.params,
    }
    if engine_name is not None:
        params["engine"] = engine_name
    return AnonymizedHistogramRelease(
        value={"counts": out.counts, "prevalences": out.prevalences,
               "n_estimate": out.n_estimate},
        epsilon=epsilon, delta=0.0, mechanism=mechanism, mechanism_params=params,
        seeded=resolved.seeded, error=_error_statement(out, used),
        counts=out.counts, prevalences=out.prevalences, n_estimate=out.n_estimate,
        split=tuple(float(e) for e in eps_split),  # type: ignore[arg-type]
        regime=out.regime, method=used)
