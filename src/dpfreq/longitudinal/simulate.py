"""Dyadic decomposition, server estimator and vectorized simulation (futurerand.md §2, §3, §7.4).

Sums are kept flat: order ``h`` occupies ``offset(h) .. offset(h) + d/2^h − 1`` with
``offset(h) = Σ_{g<h} d/2^g`` (``2d − 1`` counters in all, §7.3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq import _validate
from dpfreq.errors import DataError
from dpfreq.noise import randomized_response
from dpfreq.release import ErrorStatement, Release
from dpfreq.rng import resolve_rng

from .laws import distance_law, erlingsson_c_gap

__all__ = [
    "LongitudinalEstimate",
    "estimate_from_sums",
    "offsets",
    "partial_sums",
    "prefix_decomposition",
    "simulate_longitudinal",
    "synthetic_change_times",
    "synthetic_changes",
]


def offsets(d: int) -> NDArray[np.int64]:
    """Flat offset of each order ``h = 0..log d`` (length ``log d + 2``; last = 2d − 1)."""
    lg = d.bit_length() - 1
    sizes = [d >> h for h in range(lg + 1)]
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def prefix_decomposition(t: int) -> list[tuple[int, int]]:
    """``C(t)`` as (h, j) pairs, one per set bit h of t, ``j = ⌊t/2^h⌋`` (Fact 3.8)."""
    return [(h, t >> h) for h in range(t.bit_length()) if (t >> h) & 1]


def partial_sums(x: NDArray[Any], h: int) -> NDArray[np.int8]:
    """``S[h, j] = X[j·2^h] − X[(j−1)·2^h]`` for rows of a 0/1 matrix ``x`` (n, d)."""
    x = np.asarray(x, dtype=np.int8)
    ends = x[:, (1 << h) - 1 :: 1 << h]
    starts = np.concatenate([np.zeros((x.shape[0], 1), np.int8), ends[:, :-1]], axis=1)
    return (ends - starts).astype(np.int8)


def _padded_d(d: int) -> int:
    return 1 << max(0, (d - 1).bit_length())


@dataclass(frozen=True, kw_only=True)
class LongitudinalEstimate(Release):
    """Per-period estimates ``f̂_t`` (``value``) with ``sd`` (§7.4 per-time std, the
    data-independent ``√(n(log d+1)popcount(t))/c_gap``) and ``error`` the simultaneous bound.

    ``truth`` / ``exact_sd`` are filled only by :func:`simulate_longitudinal` (the exact sd
    ``√(n(log d+1)popcount(t)/c_gap² − f_t)`` needs the truth). Estimates are not clamped.
    """

    sd: NDArray[np.float64]
    n_users: int
    periods: int
    truth: NDArray[np.int64] | None = None
    exact_sd: NDArray[np.float64] | None = None

    @property
    def errors(self) -> NDArray[np.float64] | None:
        """``f̂ − f`` when the truth is known."""
        return None if self.truth is None else np.asarray(self.value) - self.truth

    def plot(self, ax: Any = None) -> Any:  # pragma: no cover - display helper
        """Estimates with ±2 sd band (and the truth when known)."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots()
        t = np.arange(1, self.periods + 1)
        v = np.asarray(self.value)
        ax.plot(t, v, label="estimate")
        ax.fill_between(t, v - 2 * self.sd, v + 2 * self.sd, alpha=0.3, label="±2 sd")
        if self.truth is not None:
            ax.plot(t, self.truth, label="truth")
        ax.set_xlabel("period")
        ax.set_ylabel("count")
        ax.legend()
        return ax


def estimate_from_sums(
    sums: NDArray[Any], d: int, scale: float | NDArray[Any]
) -> NDArray[np.float64]:
    """``f̂_t = Σ_{(h,j) ∈ C(t)} scale_h · sums[h, j]`` for t = 1..d (Algorithm 2).

    ``scale`` is ``(log d + 1)/c_gap`` (scalar) or one value per order.
    """
    lg = d.bit_length() - 1
    off = offsets(d)
    sc = np.broadcast_to(np.asarray(scale, dtype=np.float64), (lg + 1,))
    t = np.arange(1, d + 1)
    out = np.zeros(d)
    sums = np.asarray(sums, dtype=np.float64)
    for h in range(lg + 1):
        bit = ((t >> h) & 1).astype(bool)
        j = t[bit] >> h
        out[bit] += sc[h] * sums[off[h] + j - 1]
    return out


def _popcount(t: NDArray[np.int64]) -> NDArray[np.int64]:
    return np.array([bin(int(v)).count("1") for v in t], dtype=np.int64)


def make_release(
    sums: NDArray[Any],
    d: int,
    n: int,
    c_gap: float,
    epsilon: float,
    beta: float,
    mechanism: str,
    params: dict,
    seeded: bool,
    truth: NDArray[Any] | None = None,
) -> LongitudinalEstimate:
    """Wrap per-(h, j) sums into a :class:`LongitudinalEstimate` (§3.2, §7.4)."""
    lg1 = (d.bit_length() - 1) + 1
    est = estimate_from_sums(sums, d, lg1 / c_gap)
    pc = _popcount(np.arange(1, d + 1))
    sd = np.sqrt(n * lg1 * pc) / c_gap
    bound = (lg1 / c_gap) * math.sqrt(2 * n * math.log(2 * d / beta))
    exact_sd = None
    if truth is not None:
        exact_sd = np.sqrt(np.maximum(n * lg1 * pc / c_gap**2 - truth, 0.0))
    return LongitudinalEstimate(
        value=est,
        epsilon=epsilon,
        mechanism=mechanism,
        mechanism_params={**params, "c_gap": c_gap, "periods": d, "beta": beta},
        seeded=seeded,
        error=ErrorStatement(
            kind="bound",
            confidence=1 - beta,
            value=bound,
            description=(
                "Simultaneous bound on max_t |f̂_t − f_t| over all periods (Hoeffding over users "
                "plus a union bound over d periods, futurerand.md §3.3/§7.4)."
            ),
        ),
        sd=sd,
        n_users=n,
        periods=d,
        truth=None if truth is None else np.asarray(truth, dtype=np.int64),
        exact_sd=exact_sd,
    )


def synthetic_changes(n: int, d: int, k: int, *, rng: Any = None) -> NDArray[np.int8]:
    """A 0/1 matrix (n, d) whose rows have at most k changes (``X[0] = 0`` counts, pitfall 3):
    k change times drawn uniformly with replacement; coinciding times are merged (so a row may
    have fewer than k changes)."""
    gen = resolve_rng(rng, "synthetic_changes").generator
    times = gen.integers(0, d, size=(n, k))
    delta = np.zeros((n, d + 1), dtype=np.int8)
    np.add.at(delta, (np.repeat(np.arange(n), k), times.ravel()), 1)
    return (np.cumsum(delta[:, :d] & 1, axis=1, dtype=np.int32) & 1).astype(np.int8)


def _order_sums_distance(
    s: NDArray[np.int8], v_law, k: int, gen: np.random.Generator
) -> NDArray[np.int64]:
    """Sum over the rows of the reports ``y`` (±1) for one order, distance-based randomizer.

    Rows are users, columns reports. The c-th non-zero partial sum of a row uses ``v[c]``;
    non-zeros beyond k are treated as 0 (frozen, pitfall 4). Zero inputs give fair coins,
    whose per-column sum is drawn exactly as ``2·Binomial(m, 1/2) − m``.
    """
    m = s.shape[0]
    nz = s != 0
    c = np.cumsum(nz, axis=1)
    active = nz & (c <= k)
    total = np.zeros(s.shape[1], dtype=np.int64)
    if m and active.any():
        rows, cols = np.nonzero(active)
        v = v_law.sample(m, rng=gen)
        y = v[rows, c[rows, cols] - 1].astype(np.int64) * s[rows, cols]
        total += np.bincount(cols, weights=y, minlength=s.shape[1]).astype(np.int64)
    zeros = m - active.sum(axis=0)
    total += 2 * gen.binomial(zeros, 0.5) - zeros
    return total


def synthetic_change_times(n: int, d: int, k: int, *, rng: Any = None) -> NDArray[np.int64]:
    """Sorted change times (n, k) in 1..d, drawn uniformly with replacement: ``X[t]`` is the
    parity of the number of times ≤ t, so coinciding times cancel (at most k changes)."""
    gen = resolve_rng(rng, "synthetic_change_times").generator
    return np.sort(gen.integers(1, d + 1, size=(n, k)), axis=1)


def _sparse_events(times: NDArray[np.int64], h: int):
    """Non-zero partial sums of order h from sorted change times (rows = users).

    Returns ``(rows, j, s, rank)``: user row, interval index j (1-based), value ±1 and the
    1-based rank of this non-zero among the row's non-zeros of order h (row-major order).
    A group of changes inside one interval ``I_{h,j}`` (indices a..b) gives
    ``S = X_end − X_start = ((b+1) mod 2) − (a mod 2)``.
    """
    m, k = times.shape
    jj = ((times - 1) >> h) + 1
    idx = np.broadcast_to(np.arange(k), (m, k))
    last = np.ones((m, k), dtype=bool)
    last[:, :-1] = jj[:, 1:] != jj[:, :-1]
    first = np.ones((m, k), dtype=bool)
    first[:, 1:] = jj[:, 1:] != jj[:, :-1]
    a = np.maximum.accumulate(np.where(first, idx, 0), axis=1)
    sval = ((idx + 1) & 1) - (a & 1)
    nz = last & (sval != 0)
    rank = np.cumsum(nz, axis=1)
    rows, cols = np.nonzero(nz)
    return rows, jj[rows, cols], sval[rows, cols].astype(np.int64), rank[rows, cols]


def _truth_from_times(times: NDArray[np.int64], d: int) -> NDArray[np.int64]:
    _, j, s, _ = _sparse_events(times, 0)
    return np.cumsum(np.bincount(j - 1, weights=s, minlength=d)).astype(np.int64)[:d]


def _order_sums_sparse(times, h: int, d: int, law, k: int, gen: np.random.Generator):
    """As :func:`_order_sums_distance`, from change times (at most k non-zeros per row)."""
    m = times.shape[0]
    size = d >> h
    rows, j, sv, rank = _sparse_events(times, h)
    total = np.zeros(size, dtype=np.int64)
    if rows.size:
        v = law.sample(m, rng=gen)
        y = v[rows, rank - 1].astype(np.int64) * sv
        total += np.bincount(j - 1, weights=y, minlength=size).astype(np.int64)
    zeros = m - np.bincount(j - 1, minlength=size)
    total += 2 * gen.binomial(zeros, 0.5) - zeros
    return total


def simulate_longitudinal(
    *,
    users: int | None = None,
    periods: int,
    changes: int,
    epsilon: float,
    randomizer: str = "auto",
    data: NDArray[Any] | None = None,
    beta: float = 0.05,
    rng: Any = None,
) -> LongitudinalEstimate:
    """Simulate the FutureRand protocol (§3) for n users × d periods and estimate every ``f_t``.

    Users draw the order h uniformly from {0..log d}; the users of one order are processed as a
    block (no per-user Python loop). ``data`` is a user-supplied 0/1 matrix (n, d); otherwise
    :func:`synthetic_changes` generates rows with at most ``changes`` changes. A ``d`` that is not
    a power of two is padded with the last value (pitfall 6).

    Privacy
    -------
    Unit: one user's whole sequence; neighbouring: any two sequences with at most k changes;
    each user's transcript (h, reports) is ε-local-DP (Theorem 4.5) for every randomizer mode
    (certificates checked at construction). The simulator itself spends no central budget.
    """
    func = "simulate_longitudinal"
    d0 = _validate.check_int(periods, "periods", func, minimum=1)
    k = _validate.check_int(changes, "changes", func, minimum=1)
    epsilon = _validate.check_epsilon(epsilon, "epsilon", func)
    beta = _validate.check_open_unit(beta, "beta", func)
    randomizer = _validate.check_choice(
        randomizer,
        "randomizer",
        func,
        ("auto", "calibrated", "erlingsson", "futurerand", "rr", "threshold"),
    )
    res = resolve_rng(rng, func)
    gen = res.generator
    times = None
    if data is None:
        n = _validate.check_int(users, "users", func, minimum=1)
        times = synthetic_change_times(n, d0, k, rng=gen)
        x = None
    else:
        x = np.asarray(data)
        if x.ndim != 2 or x.shape[1] != d0 or not np.isin(x, (0, 1)).all():
            raise DataError(
                f"data of {func} must be a 0/1 matrix with {d0} columns; got shape {x.shape}."
            )
        x = x.astype(np.int8)
        n = x.shape[0]
    d = _padded_d(d0)
    if x is not None and d != d0:
        x = np.concatenate([x, np.repeat(x[:, -1:], d - d0, axis=1)], axis=1)
    lg = d.bit_length() - 1
    off = offsets(d)
    sums = np.zeros(2 * d - 1, dtype=np.int64)
    order = gen.integers(0, lg + 1, size=n)
    if randomizer == "erlingsson":
        c_gap = erlingsson_c_gap(k, epsilon)
        r = gen.integers(1, k + 1, size=n)  # keep only the r-th change, r ~ U[1..k] (§4.4)
        if times is not None:
            rows0, j0, s0, rank0 = _sparse_events(times, 0)
        else:
            deriv = np.diff(x, axis=1, prepend=0).astype(np.int8)
            nzd = deriv != 0
            rank_m = np.cumsum(nzd, axis=1)
            rows0, cols0 = np.nonzero(nzd)
            j0, s0, rank0 = cols0 + 1, deriv[rows0, cols0].astype(np.int64), rank_m[rows0, cols0]
        sel = rank0 == r[rows0]
        ru, tu, su = rows0[sel], j0[sel], s0[sel]
        # (a user has at most one kept change, and it is not frozen: r <= k)
        for h in range(lg + 1):
            mh = order[ru] == h
            jh = ((tu[mh] - 1) >> h) + 1
            bits = randomized_response((su[mh] > 0).astype(np.int8), epsilon, rng=gen)
            y = 2 * bits.astype(np.int64) - 1
            size = d >> h
            tot = np.bincount(jh - 1, weights=y, minlength=size).astype(np.int64)
            zeros = int((order == h).sum()) - np.bincount(jh - 1, minlength=size)
            tot += 2 * gen.binomial(zeros, 0.5) - zeros
            sums[off[h] : off[h + 1]] = tot
        params: dict = {"randomizer": "erlingsson", "changes": k, "r_sampled_from": "[1..k]"}
    else:
        law = distance_law(randomizer, k, epsilon)
        c_gap = law.c_gap
        for h in range(lg + 1):
            rows = order == h
            if times is not None:
                sums[off[h] : off[h + 1]] = _order_sums_sparse(times[rows], h, d, law, k, gen)
            else:
                s = partial_sums(x[rows], h)
                sums[off[h] : off[h + 1]] = _order_sums_distance(s, law, k, gen)
        params = {"randomizer": law.name, "changes": k, "certificate": law.log_ratio, **law.params}
    if times is not None:
        truth = _truth_from_times(times, d)
    else:
        truth = x[:, :d].sum(axis=0).astype(np.int64)
    return make_release(
        sums, d, n, c_gap, epsilon, beta, "futurerand-longitudinal", params, res.seeded, truth=truth
    )
