"""Hay et al. (ICDM 2009 / VLDB 2010) sorted-count baseline for anonymized histograms.

Spend ε1 on a private total ``N`` (as PRIVHIST step 1) and use
``L = N`` as the public length (the number of labels is at most ``n``); take the descending
sorted counts truncated / zero-padded to length ``L``, add i.i.d. two-sided geometric noise
``G(e^{-ε'})``, fit a non-increasing sequence (PAVA), clamp at 0, round, drop zeros.

This is ``O(L) = O(n)`` time and memory — the reason PRIVHIST's ``Õ(sqrt n)`` matters — but
with small constants: the fit's blocks are rounded and merged as runs (``O(L)`` passes, no sort
of the ``L`` fitted values), so one run on ``L = 10^7`` takes about a second. The
baseline refuses (:class:`~dpfreq.errors.ParameterError`) when ``N > HAY_MAX_LENGTH``
(``5·10^7``; measured: N = 4.9·10^7 took 5.8 s and 2.7 GB peak memory, ≈ 56 bytes per entry;
PrivHist ran the same input in 7 ms) instead of exhausting memory. The refusal depends on the
ε1-DP ``N`` only, so it is itself private.
"""

from __future__ import annotations

import numpy as np

from dpfreq._validate import message
from dpfreq.anonymized.histogram_input import total_of
from dpfreq.anonymized.steps import I64, NoiseSource, Outcome, fit_blocks, round_half_up
from dpfreq.errors import ParameterError

__all__ = ["HAY_MAX_LENGTH", "hay"]

#: Largest padded length ``L = N`` the baseline runs on (``O(L)`` memory, ≈ 56 bytes per entry).
HAY_MAX_LENGTH = 50_000_000


def sorted_padded(counts: I64, prevalences: I64, length: int) -> I64:
    """Descending sorted counts truncated / zero-padded to ``length`` (``O(length)``)."""
    c = counts[::-1]
    p = prevalences[::-1]
    ends = np.cumsum(p)
    k = int(np.searchsorted(ends, length, side="left"))
    reps = p[:k + 1].copy()
    if k < reps.size:
        reps[-1] = length - (int(ends[k - 1]) if k > 0 else 0)
    head = np.repeat(c[:k + 1], reps) if reps.size else np.zeros(0, np.int64)
    out = np.zeros(length, dtype=np.int64)
    out[:head.size] = head[:length]
    return out


def hay(counts: I64, prevalences: I64, *, split: tuple[float, float, float],
        noise: NoiseSource) -> Outcome:
    """The Hay et al. baseline on a validated prevalence form."""
    eps1, eps2, _ = split
    n = total_of(counts, prevalences)
    n_est = max(n + int(noise.geometric(eps1, 1)[0]), 0)
    if n_est == 0:
        return Outcome(np.zeros(0, np.int64), np.zeros(0, np.int64), 0, "empty", {})
    if n_est > HAY_MAX_LENGTH:
        raise ParameterError(message(
            "source", f"a histogram whose private total N is at most {HAY_MAX_LENGTH} for "
            "method='hay' (O(N) memory; use method='privhist' or 'auto', which run in "
            "O(sqrt N))", f"N = {n_est}"))
    vec = sorted_padded(counts, prevalences, n_est)
    vec += noise.geometric(eps2, n_est)
    c, p = rounded_fit_runs(vec)
    return Outcome(c, p, n_est, "sorted-counts", {"L": n_est})


def rounded_fit_runs(vec: I64) -> tuple[I64, I64]:
    """The positive values of the rounded non-increasing fit of ``vec`` as a prevalence form.

    Equal to ``merge_prevalences(rounded_isotonic(vec), ones)`` without zeros, computed on the
    fit's blocks: each block's mean is rounded exactly (:func:`round_half_up`), adjacent blocks
    that round to the same value are merged (the rounded fit is non-increasing, so equal values
    are adjacent), and the ``L`` fitted values are never expanded or sorted.
    """
    starts = fit_blocks(vec)
    sums = np.add.reduceat(vec, starts[:-1])
    lengths = np.diff(starts)
    values = np.asarray(round_half_up(sums, lengths), dtype=np.int64)
    keep = values > 0
    values, lengths = values[keep], lengths[keep]
    if values.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    firsts = np.flatnonzero(np.concatenate(([True], values[1:] != values[:-1])))
    merged = np.add.reduceat(lengths, firsts)
    return values[firsts][::-1].copy(), merged[::-1].astype(np.int64)
