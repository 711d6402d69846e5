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
from dpfreq.errors import DataError, ParameterError
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
    """Per-period estimates ``f̂_t`` of a longitudinal local-DP protocol (futurerand.md §3, §7.4).

    Attributes
    ----------
    value : numpy.ndarray
        ``f̂_t`` for t = 1..d (``d`` padded to a power of two), unbiased and **not clamped**:
        clamping to ``[0, n]`` is free post-processing but biases the estimate.
    sd : numpy.ndarray
        Per-time standard deviation ``√(n(log d+1)popcount(t))/c_gap`` (§7.4). The exact sd is
        ``√(n(log d+1)popcount(t)/c_gap² − f_t)``; the reported one is its value at ``f_t = 0``,
        its maximum over ``f_t ∈ [0, n]`` (data-independent).
    error : ErrorStatement
        Simultaneous bound ``((log d+1)/c_gap)·√(2n ln(2d/β))`` on ``max_t |f̂_t − f_t|`` with
        probability ``≥ 1 − β`` (Hoeffding over users plus a union bound over d periods).
    truth, exact_sd : numpy.ndarray or None
        Filled only by :func:`simulate_longitudinal` (the exact sd needs the truth).

    Privacy
    -------
    Unit: one user's whole sequence ``X_u[1..d]``; neighbouring: any two sequences with at most
    ``k`` changes each (user-level, all of a user's ≤ k changes at once). Every user's transcript
    is ε-local-DP with ε = ``epsilon`` (the randomizer's exact certificate is in
    ``mechanism_params``); the estimate is post-processing and spends no further budget.
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


def make_release(
    sums: NDArray[Any],
    d: int,
    n: int,
    c_gap: float | NDArray[Any],
    epsilon: float,
    beta: float,
    mechanism: str,
    params: dict,
    seeded: bool,
    truth: NDArray[Any] | None = None,
) -> LongitudinalEstimate:
    """Wrap per-(h, j) sums into a :class:`LongitudinalEstimate` (§3.2, §7.4).

    ``c_gap`` is one gap for every order or one per order ``h = 0..log d`` (pitfall 5). Per
    time t, ``Var f̂_t = n(log d+1)·Σ_{h ∈ C(t)} c_h^{-2} − f_t`` (a user contributes through its
    single order); with one gap this is ``n(log d+1)popcount(t)/c_gap² − f_t`` (§3.3). The
    simultaneous bound uses the widest per-user range ``2(log d+1)/min_h c_h``.
    """
    lg1 = (d.bit_length() - 1) + 1
    gaps = np.broadcast_to(np.asarray(c_gap, dtype=np.float64), (lg1,)).copy()
    est = estimate_from_sums(sums, d, lg1 / gaps)
    t = np.arange(1, d + 1)
    inv2 = np.zeros(d)
    for h in range(lg1):
        inv2 += ((t >> h) & 1) / gaps[h] ** 2
    var0 = n * lg1 * inv2
    sd = np.sqrt(var0)
    bound = (lg1 / float(gaps.min())) * math.sqrt(2 * n * math.log(2 * d / beta))
    exact_sd = None
    if truth is not None:
        exact_sd = np.sqrt(np.maximum(var0 - truth, 0.0))
    one = bool(np.all(gaps == gaps[0]))
    gap_params: dict[str, Any] = {"c_gap": float(gaps[0])} if one else {
        "c_gap": float(gaps[0]), "c_gap_per_order": gaps.tolist()}
    return LongitudinalEstimate(
        value=est,
        epsilon=epsilon,
        unit="device",
        mechanism=mechanism,
        mechanism_params={**params, **gap_params, "periods": d, "beta": beta},
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


def fair_coin_sums(m: NDArray[Any], gen: np.random.Generator) -> NDArray[np.int64]:
    """``Σ`` of ``m[c]`` independent fair ±1 coins for every entry ``c`` (exact, vectorized).

    Each coin is one bit of a uniform 64-bit word (``Generator.integers``, unbiased), so the sum
    is exactly ``2·Binomial(m, 1/2) − m``; no floating point touches the draw.
    """
    m = np.asarray(m, dtype=np.int64)
    nw = (m + 63) // 64
    total = int(nw.sum())
    if total == 0:
        return np.zeros(m.shape, dtype=np.int64)
    words = gen.integers(0, 2**64, size=total, dtype=np.uint64)
    col = np.repeat(np.arange(m.size), nw.ravel())
    first = np.repeat(np.cumsum(nw.ravel()) - nw.ravel(), nw.ravel())
    nbits = np.minimum(np.repeat(m.ravel(), nw.ravel()) - 64 * (np.arange(total) - first), 64)
    full = np.uint64(0xFFFFFFFFFFFFFFFF)
    mask = np.where(
        nbits >= 64, full, (np.uint64(1) << np.minimum(nbits, 63).astype(np.uint64)) - np.uint64(1)
    )
    heads = np.bincount(col, weights=np.bitwise_count(words & mask), minlength=m.size)
    return (2 * heads.astype(np.int64) - m.ravel()).reshape(m.shape)


def freeze_after_k_changes(x: NDArray[Any], k: int) -> NDArray[np.int8]:
    """Rows of a 0/1 matrix with every change after the k-th ignored (pitfall 4).

    ``X[0] = 0``, so after its k-th change a row holds the value ``k mod 2``; this is what
    :class:`~dpfreq.longitudinal.LongitudinalClient` reports for such a device.
    """
    x = np.asarray(x, dtype=np.int8)
    count = np.cumsum(np.diff(x, axis=1, prepend=0) != 0, axis=1)
    return np.where(count <= k, x, np.int8(k & 1)).astype(np.int8)


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
    total += fair_coin_sums(m - active.sum(axis=0), gen)
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


_CHUNK_ROWS = 1 << 16  # users per block in the sparse path (bounded temporaries)


def _truth_from_times(times: NDArray[np.int64], d: int) -> NDArray[np.int64]:
    deriv = np.zeros(d, dtype=np.int64)
    for a in range(0, times.shape[0], _CHUNK_ROWS):
        _, j, s, _ = _sparse_events(times[a : a + _CHUNK_ROWS], 0)
        deriv += np.bincount(j - 1, weights=s, minlength=d).astype(np.int64)[:d]
    return np.cumsum(deriv)


def _kept_changes(times: NDArray[np.int64], r: NDArray[np.int64]) -> tuple[NDArray[Any], ...]:
    """Erlingsson et al.: (row, time, sign) of each user's r-th change, in row blocks."""
    out = []
    for a in range(0, times.shape[0], _CHUNK_ROWS):
        rows, j, s, rank = _sparse_events(times[a : a + _CHUNK_ROWS], 0)
        sel = rank == r[a + rows]
        out.append((a + rows[sel], j[sel], s[sel]))
    return tuple(np.concatenate([o[i] for o in out]) for i in range(3))


def _order_sums_sparse(times, h: int, d: int, law, k: int, gen: np.random.Generator):
    """As :func:`_order_sums_distance`, from change times (at most k non-zeros per row)."""
    m = times.shape[0]
    size = d >> h
    total = np.zeros(size, dtype=np.int64)
    nonzero = np.zeros(size, dtype=np.int64)
    for a in range(0, m, _CHUNK_ROWS):
        block = times[a : a + _CHUNK_ROWS]
        rows, j, sv, rank = _sparse_events(block, h)
        if rows.size:
            v = law.sample(block.shape[0], rng=gen)
            y = v[rows, rank - 1].astype(np.int64) * sv
            total += np.bincount(j - 1, weights=y, minlength=size).astype(np.int64)
            nonzero += np.bincount(j - 1, minlength=size)
    total += fair_coin_sums(m - nonzero, gen)
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
    per_order_sparsity: bool = False,
    rng: Any = None,
) -> LongitudinalEstimate:
    """Simulate the FutureRand protocol (§3) for n users × d periods and estimate every ``f_t``.

    Runs the client logic of :class:`~dpfreq.longitudinal.LongitudinalClient` vectorized: users
    draw the order h uniformly from {0..log d} and the users of one order are processed as one
    block (numpy over users; the only Python loop is over the ``log d + 1`` orders). Distance-
    based randomizers draw one pre-computed ``v`` per reporting user; zero partial sums become
    exact fair coins (:func:`fair_coin_sums`); Erlingsson et al. keep the ``r``-th change,
    ``r ~ U{1..k}``, through exact randomized response with the full ε.

    Parameters
    ----------
    users : int, keyword-only
        ``n`` for synthetic data (ignored when ``data`` is given).
    periods, changes, epsilon : keyword-only
        Horizon ``d`` (padded to a power of two with the last value, pitfall 6), change budget
        ``k``, local ε. No defaults.
    randomizer : str
        ``"auto"`` (default, recommended), ``"futurerand"`` (paper constants), ``"calibrated"``,
        ``"threshold"``, ``"rr"`` or ``"erlingsson"``.
    data : array-like (n, d) of 0/1, optional
        A user-supplied matrix; rows with more than ``k`` changes are frozen after their k-th
        change, as the client does (pitfall 4; ``truth`` is the unfrozen data, so such rows bias
        the estimate). Without it, :func:`synthetic_change_times` draws ``k`` change times per
        user uniformly (coinciding times cancel), the sparse path that never builds the n × d
        matrix.
    beta : float
        Failure probability of the simultaneous bound.
    per_order_sparsity : bool
        Pitfall 5 (not in the paper): order h has only ``L = d/2^h`` coordinates, so its
        randomizer is built for ``min(k, L)`` non-zeros, with a larger gap ``c_h`` at high
        orders; the estimator uses ``c_h`` per order and stays unbiased. Distance-based
        randomizers only (the resolved name is kept for every order).
    rng : None, int or numpy.random.Generator, keyword-only
        Randomness (seeded runs are marked ``seeded``).

    Returns
    -------
    LongitudinalEstimate
        Estimates, per-time sd, simultaneous bound, ``truth``, ``exact_sd`` and ``errors``.

    Privacy
    -------
    Unit: one user's whole sequence; neighbouring: any two sequences with at most k changes
    (user-level). Each user's transcript (h, reports) is ε-local-DP (Theorem 4.5) for every
    randomizer mode (certificates checked at construction). The simulator itself spends no
    central budget.
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
    if not isinstance(per_order_sparsity, bool):
        raise ParameterError(
            _validate.message("per_order_sparsity", func, "a bool", per_order_sparsity)
        )
    if per_order_sparsity and randomizer == "erlingsson":
        raise ParameterError(
            f"per_order_sparsity of {func} applies to distance-based randomizers only; got "
            "randomizer 'erlingsson'."
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
    truth_x = x
    if x is not None:
        x = freeze_after_k_changes(x, k)  # what the devices report (pitfall 4)
    lg = d.bit_length() - 1
    off = offsets(d)
    sums = np.zeros(2 * d - 1, dtype=np.int64)
    order = gen.integers(0, lg + 1, size=n)
    if randomizer == "erlingsson":
        c_gap: float | NDArray[Any] = erlingsson_c_gap(k, epsilon)
        r = gen.integers(1, k + 1, size=n)  # keep only the r-th change, r ~ U[1..k] (§4.4)
        if x is None:
            assert times is not None  # internal invariant: exactly one of data/times
            ru, tu, su = _kept_changes(times, r)
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
            tot += fair_coin_sums(zeros, gen)
            sums[off[h] : off[h + 1]] = tot
        params: dict = {"randomizer": "erlingsson", "changes": k, "r_sampled_from": "[1..k]"}
    else:
        law = distance_law(randomizer, k, epsilon)
        gaps = np.full(lg + 1, law.c_gap)
        cert = law.certificate
        for h in range(lg + 1):
            kh = min(k, d >> h) if per_order_sparsity else k
            law_h = distance_law(law.name, kh, epsilon) if kh != k else law
            gaps[h] = law_h.c_gap
            cert = max(cert, law_h.certificate)
            rows = order == h
            if times is not None:
                sums[off[h] : off[h + 1]] = _order_sums_sparse(times[rows], h, d, law_h, kh, gen)
            elif x is not None:
                s = partial_sums(x[rows], h)
                sums[off[h] : off[h + 1]] = _order_sums_distance(s, law_h, kh, gen)
        params = {"randomizer": law.name, "changes": k, **law.params, "certificate": cert}
        params["per_order_sparsity"] = per_order_sparsity
        c_gap = gaps if per_order_sparsity else law.c_gap
    if times is not None:
        truth = _truth_from_times(times, d)
    else:
        assert truth_x is not None
        truth = truth_x[:, :d].sum(axis=0).astype(np.int64)
    return make_release(
        sums, d, n, c_gap, epsilon, beta, "futurerand-longitudinal", params, res.seeded, truth=truth
    )
