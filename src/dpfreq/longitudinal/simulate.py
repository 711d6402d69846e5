"""Vectorized simulation of the longitudinal protocol for many devices."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq import _validate
from dpfreq.errors import DataError, ParameterError, public_caller, public_errors
from dpfreq.noise import randomized_response
from dpfreq.resources import check_memory
from dpfreq.rng import resolve_rng

from .dyadic import offsets, partial_sums
from .estimate import make_estimate
from .laws import distance_law
from .params import make_params
from .result import LongitudinalEstimate

__all__ = [
    "fair_coin_sums",
    "freeze_after_k_changes",
    "simulate_longitudinal",
    "synthetic_change_times",
    "synthetic_changes",
]


@public_errors("synthetic_changes")
def synthetic_changes(n: int, d: int, k: int, *, rng: Any = None) -> NDArray[np.int8]:
    """A 0/1 matrix (n, d) whose rows have at most k changes (``X[0] = 0`` counts):
    k change times drawn uniformly with replacement; coinciding times are merged (so a row may
    have fewer than k changes)."""
    gen = resolve_rng(rng).generator
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
    """Rows of a 0/1 matrix with every change after the k-th ignored.

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
    non-zeros beyond k are treated as 0 (frozen). Zero inputs give fair coins,
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


@public_errors("synthetic_change_times")
def synthetic_change_times(n: int, d: int, k: int, *, rng: Any = None) -> NDArray[np.int64]:
    """Sorted change times (n, k) in 1..d, drawn uniformly with replacement: ``X[t]`` is the
    parity of the number of times ≤ t, so coinciding times cancel (at most k changes)."""
    gen = resolve_rng(rng).generator
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


@public_errors("simulate_longitudinal")
def simulate_longitudinal(
    *,
    devices: int | None = None,
    horizon: int,
    max_changes: int,
    epsilon: float,
    method: str,
    confidence: float = 0.95,
    data: NDArray[Any] | None = None,
    per_order_sparsity: bool = False,
    start: Any = None,
    period: str | None = None,
    rng: Any = None,
) -> LongitudinalEstimate:
    """Simulate the protocol for n devices × d periods and estimate every period's count.

    Runs the client logic of :class:`~dpfreq.longitudinal.LongitudinalClient` vectorized:
    devices draw their order h uniformly from {0..log d} and the devices of one order are
    processed as one block (numpy over devices; the only Python loop is over the ``log d + 1``
    orders). Distance-based randomizers draw one pre-computed ``v`` per reporting device from
    the exact sampled law; zero partial sums become exact fair coins (:func:`fair_coin_sums`);
    Erlingsson et al. keep the ``r``-th change, ``r ~ U{1..k}``, through exact randomized
    response with the full ε.

    Parameters
    ----------
    devices : int, keyword-only
        ``n`` for synthetic data (required without ``data``; must match its rows with it).
    horizon, max_changes, epsilon : keyword-only
        Number of periods ``d``, change budget ``k``, local ε. No defaults.
    method : str, keyword-only
        The randomizer: ``"auto"`` (recommended), ``"futurerand"`` (paper constants),
        ``"calibrated"``, ``"threshold"``, ``"rr"`` or ``"erlingsson"``.
    confidence : float, keyword-only
        Confidence of the intervals and of the simultaneous band (default 0.95).
    data : array-like (n, d) of 0/1, optional
        A user-supplied matrix; rows with more than ``k`` changes are frozen after their k-th
        change, as the client does (``truth`` is the unfrozen data, so such rows bias the
        estimate). Without it, :func:`synthetic_change_times` draws ``k`` change times per
        device uniformly (coinciding times cancel), a path that never builds the n × d matrix.
    per_order_sparsity : bool, keyword-only
        Order h's randomizer is built for ``min(k, d/2^h)`` non-zeros, with a larger gap at
        high orders; the estimator uses each order's gap. Distance-based randomizers only.
    start, period : keyword-only, optional
        Time axis of the result (see :func:`~dpfreq.longitudinal.make_params`).
    rng : None, int or numpy.random.Generator, keyword-only
        Randomness (seeded runs are marked ``seeded``).

    Returns
    -------
    LongitudinalEstimate
        Clamped estimates, intervals, ``truth``, ``exact_sd`` and ``errors``.

    Raises
    ------
    ParameterError
        If a parameter is invalid, or ``devices`` is missing without ``data`` (or disagrees
        with its number of rows).
    DataError
        If ``data`` is not a 0/1 matrix with ``horizon`` columns.

    Privacy
    -------
    Unit: one device's whole sequence; neighbouring: any two sequences with at most k changes
    (device level). Each device's transcript (order, reports) is ε-local-DP for every
    randomizer mode (certificates checked on the sampled laws). The simulator itself spends no
    central budget.

    Examples
    --------
    >>> rel = simulate_longitudinal(devices=2000, horizon=10, max_changes=2, epsilon=2.0,
    ...                             method="auto", rng=1)
    >>> rel.value.shape, rel.unit
    ((10,), 'device')
    >>> bool(((rel.error.band_lower <= rel.truth) & (rel.truth <= rel.error.band_upper)).all())
    True
    """
    func = public_caller()
    params = make_params(horizon=horizon, max_changes=max_changes, epsilon=epsilon,
                         method=method, per_order_sparsity=per_order_sparsity,
                         start=start, period=period)
    confidence = _validate.check_confidence(confidence, "confidence")
    d0, k, d = params.horizon, params.max_changes, params.padded_horizon
    gen_res = resolve_rng(rng)
    gen = gen_res.generator
    times, x, truth_x = None, None, None
    if data is None:
        if devices is None:
            raise ParameterError(_validate.message("devices",
                                                   "an integer >= 1 without data", devices))
        n = _validate.check_int(devices, "devices", minimum=1)
        # the (n, k) change times, their sort and the per-order work (int64, a few copies);
        # then order 0's fair coins: ⌈n_0/64⌉ words for each of its d intervals in six int64
        # arrays (fair_coin_sums), n_0 ≈ n/(log d + 1), taken twice for the draw's spread
        coins = d * (2.0 * n / params.orders / 64 + 1) * 8 * 6
        check_memory(max(float(n) * (k + 4) * 8 * 4, coins), param="devices", value=n,
                     what="the simulated devices' change times and reports")
        times = synthetic_change_times(n, d0, k, rng=gen)
    else:
        x = np.asarray(data)
        if x.ndim != 2 or x.shape[1] != d0 or not np.isin(x, (0, 1)).all():
            raise DataError(f"data of {func} must be a 0/1 matrix with horizon = {d0} columns.")
        n = x.shape[0]
        if devices is not None and devices != n:
            raise ParameterError(_validate.message("devices",
                                                   "None or the number of rows of data", devices))
        x = x.astype(np.int8)
        if d != d0:
            x = np.concatenate([x, np.repeat(x[:, -1:], d - d0, axis=1)], axis=1)
        truth_x = x
        x = freeze_after_k_changes(x, k)  # what the devices report
    order = gen.integers(0, params.orders, size=n)
    if params.method == "erlingsson":
        sums = _erlingsson_sums(times, x, order, params, gen)
        mech: dict[str, Any] = {"method": "erlingsson", "r_sampled_from": "[1..k]"}
    else:
        sums = _distance_sums(times, x, order, params, gen)
        mech = {"method": params.method,
                **distance_law(params.method, k, params.epsilon).params}
    if times is not None:
        truth = _truth_from_times(times, d)
    else:
        assert truth_x is not None  # internal invariant: exactly one of data/times
        truth = truth_x[:, :d].sum(axis=0).astype(np.int64)
    mech.update(max_changes=k, certificate=params.certificate,
                per_order_sparsity=params.per_order_sparsity, param_id=params.param_id)
    return make_estimate(
        sums, padded_horizon=d, horizon=d0, devices=n, c_gaps=np.asarray(params.c_gaps),
        epsilon=params.epsilon, confidence=confidence, mechanism="futurerand-longitudinal",
        mechanism_params=mech, seeded=gen_res.seeded, max_changes=k,
        method=params.method, start=params.start, period=params.period, truth=truth)


def _erlingsson_sums(times: Any, x: Any, order: NDArray[np.int64], params: Any,
                     gen: np.random.Generator) -> NDArray[np.int64]:
    """Per-(h, j) sums of Erlingsson et al.: each device keeps its r-th change, r ~ U{1..k}."""
    d, k = params.padded_horizon, params.max_changes
    off = offsets(d)
    sums = np.zeros(2 * d - 1, dtype=np.int64)
    r = gen.integers(1, k + 1, size=order.size)
    if times is not None:
        ru, tu, su = _kept_changes(times, r)
    else:
        deriv = np.diff(x, axis=1, prepend=0).astype(np.int8)
        nzd = deriv != 0
        rank_m = np.cumsum(nzd, axis=1)
        rows0, cols0 = np.nonzero(nzd)
        j0, s0, rank0 = cols0 + 1, deriv[rows0, cols0].astype(np.int64), rank_m[rows0, cols0]
        sel = rank0 == r[rows0]
        ru, tu, su = rows0[sel], j0[sel], s0[sel]
    # (a device has at most one kept change, and it is not frozen: r <= k)
    for h in range(params.orders):
        mh = order[ru] == h
        jh = ((tu[mh] - 1) >> h) + 1
        bits = randomized_response((su[mh] > 0).astype(np.int8), params.epsilon, rng=gen)
        y = 2 * bits.astype(np.int64) - 1
        size = d >> h
        tot = np.bincount(jh - 1, weights=y, minlength=size).astype(np.int64)
        zeros = int((order == h).sum()) - np.bincount(jh - 1, minlength=size)
        tot += fair_coin_sums(zeros, gen)
        sums[off[h] : off[h + 1]] = tot
    return sums


def _distance_sums(times: Any, x: Any, order: NDArray[np.int64], params: Any,
                   gen: np.random.Generator) -> NDArray[np.int64]:
    """Per-(h, j) sums of a distance-based randomizer (one law per order's change budget)."""
    d = params.padded_horizon
    off = offsets(d)
    sums = np.zeros(2 * d - 1, dtype=np.int64)
    for h in range(params.orders):
        kh = params.changes_at_order(h)
        law_h = distance_law(params.method, kh, params.epsilon)
        rows = order == h
        if times is not None:
            sums[off[h] : off[h + 1]] = _order_sums_sparse(times[rows], h, d, law_h, kh, gen)
        else:
            s = partial_sums(x[rows], h)
            sums[off[h] : off[h + 1]] = _order_sums_distance(s, law_h, kh, gen)
    return sums
