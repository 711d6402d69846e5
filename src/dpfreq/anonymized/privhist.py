"""PrivHist (Suresh, NeurIPS 2019): differentially private anonymized histograms in Õ(√n).

The mechanism on the prevalence form ``{count r: number of items with count r}``:

1. a private total ``N = max(n + Z, 0)`` (ε1, two-sided geometric noise);
2. ``M`` fake counts at ``T`` and ``T + 1`` (``T ≈ sqrt(N·min(ε, 1))``) and a noisy move ``Z^b``
   of them across the threshold, then a split into small counts (``< T + 1``, kept as the
   cumulative prevalences ``φ_{r+}``, ``r = 1..T``) and large counts (``>= T + 1``);
3. ε2 noise on the ``T`` small cumulative prevalences and on each of the ``K`` large counts;
4. the low-privacy branch fits, merges and removes the fake counts again (:func:`low_privacy`);
   the high-privacy branch noises a smoothed histogram on a geometric grid with ε3
   (:func:`high_privacy`).

Never expands the histogram to ``n`` entries: the work is a dense vector of length ``T``, the
``K ≈ n/T + M`` large counts (noised in chunks and kept in prevalence form) and sweeps over the
``t ≤ sqrt(2n)`` distinct counts. The deterministic steps are public functions that take their
noise as arguments, so that they are tested exactly.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import message
from dpfreq.anonymized.histogram_input import total_of
from dpfreq.anonymized.steps import (
    I64,
    NoiseSource,
    Outcome,
    cumulative_to_prevalences,
    merge_prevalences,
    rounded_isotonic,
    sorted_unique,
)
from dpfreq.errors import DataError, ParameterError, public_errors

__all__ = [
    "boundaries",
    "cap_counts",
    "fake_count_m",
    "geometric_grid",
    "grid_q",
    "high_privacy",
    "low_privacy",
    "noisy_large_counts",
    "privhist",
    "remove_nearest",
    "smoothed_prevalences",
    "smoothed_scaled_cumulative",
    "split_histogram",
    "t_prime",
    "threshold_t",
]

CHUNK = 1 << 20  # large counts noised per chunk (bounded memory even for a huge M)

# ----------------------------------------------------------------------------------------------
# parameters and the sensitivity-preserving split


def threshold_t(n_estimate: int, epsilon: float) -> int:
    """``T = ⌈sqrt(N·min(ε, 1))⌉`` with the total ε; exact for ε ≥ 1."""
    if epsilon >= 1.0:
        r = math.isqrt(n_estimate)
        return r if r * r == n_estimate else r + 1
    return max(math.ceil(math.sqrt(n_estimate * epsilon)), 1)


def fake_count_m(n_estimate: int, epsilon2: float) -> int:
    """``M = ⌈max(2(ln N + ε2)/ε2, 1)⌉`` fake counts at ``T`` and ``T+1``."""
    return math.ceil(max(2.0 * (math.log(n_estimate) + epsilon2) / epsilon2, 1.0))


def split_histogram(counts: I64, prevalences: I64, t: int, m: int, z_b: int
                    ) -> tuple[I64, I64, I64]:
    """Add ``M`` fake counts at ``T`` and ``T+1``, move ``Z^b`` of them, split.

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
    position is what the privacy argument protects, so this is post-processing; it
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
        stop = min(start + CHUNK, total)
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
# low privacy


def remove_nearest(counts: I64, prevalences: I64, target: int, m: int, *, prefer_larger: bool
                   ) -> tuple[I64, I64]:
    """Remove the ``m`` elements closest to ``target``."""
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
    """PRIVHIST-LOWPRIVACY on ``H^{cs}`` and ``H^{cℓ}`` (prevalence form)."""
    y = rounded_isotonic(noisy_small_cumulative)  # L1 (a)+(b)
    small_c, small_p = cumulative_to_prevalences(np.arange(1, t + 1, dtype=np.int64), y)
    large_c, large_p = noisy_large
    large_c = np.maximum(large_c, t)  # L2
    c, p = merge_prevalences(np.concatenate((small_c, large_c)),
                             np.concatenate((small_p, large_p)))  # L3
    c, p = remove_nearest(c, p, t + 1, m, prefer_larger=True)  # L4
    return remove_nearest(c, p, t, m, prefer_larger=False)


# ----------------------------------------------------------------------------------------------
# high privacy


def t_prime(n_estimate: int, epsilon3: float, reading: str = "A") -> int:
    """``T'`` of H2 under three readings of the paper's formula (default "A":
    ``⌈10·sqrt(N/ε3)⌉``)."""
    if reading == "A":
        return math.ceil(10.0 * math.sqrt(n_estimate / epsilon3))
    if reading == "B":
        return math.ceil(10.0 * math.sqrt(n_estimate / epsilon3**3))
    if reading == "C":
        return math.ceil(10.0 * math.sqrt(n_estimate) / epsilon3)
    raise ParameterError(message("t_prime_reading", "one of 'A', 'B', 'C'", reading))


def grid_q(n_estimate: int, epsilon3: float) -> float | None:
    """``q = sqrt(ln(1/ε3)/(N·ε3))``; ``None`` when ``ε3 >= 1`` (grid skipped)."""
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
    """H2: ``S = {1..T} ∪ grid ∪ {noisy large >= T'} ∪ {2N}``, cut at ``2N``, sorted."""
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


@public_errors("smoothed_scaled_cumulative")
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
            raise DataError(message("counts",
                                    f"<= the last boundary {int(s[-1])}", "a larger count"))
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


def privhist(counts: I64, prevalences: I64, *, epsilon: float,
             split: tuple[float, float, float], noise: NoiseSource,
             t_prime_reading: str = "A", m_override: int | None = None,
             low_privacy_branch: bool | None = None, isotonic_large: bool = False) -> Outcome:
    """PRIVHIST on a validated prevalence form; noise from ``noise``.

    ``low_privacy_branch`` overrides the paper's rule (low-privacy branch iff ε > 1);
    ``isotonic_large`` fits the noisy large counts isotonically in the low-privacy branch
    (:func:`noisy_large_counts`). Both defaults are the paper's algorithm.
    """
    eps1, eps2, eps3 = split
    n = total_of(counts, prevalences)
    n_est = max(n + int(noise.geometric(eps1, 1)[0]), 0)  # step 1
    if n_est == 0:
        return Outcome(np.zeros(0, np.int64), np.zeros(0, np.int64), 0, "empty", {})
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
        return Outcome(c, p, n_est, "low-privacy", params)
    # step 6: high privacy (H^{cs} is not used there, so step 3 is skipped)
    s = boundaries(n_est, t, eps3, noisy_large[0], t_prime_reading)
    hc, hp = cap_counts(counts, prevalences, 2 * n_est)  # H1
    y, _ = smoothed_scaled_cumulative(hc, hp, s)  # H3 (integer form)
    noisy = y + noise.geometric(eps3, s.size)  # H4 (discrete; see release docstring)
    c, p = high_privacy(noisy, s)
    q = grid_q(n_est, eps3)
    params.update({"boundaries": int(s.size), "T_prime": t_prime(n_est, eps3, t_prime_reading),
                   "q": q, "t_prime_reading": t_prime_reading})
    return Outcome(c, p, n_est, "high-privacy", params)


