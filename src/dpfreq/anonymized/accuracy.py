"""Error statements of anonymized-histogram releases, and the working-memory estimate.

Two statements accompany every release, both post-processing (no budget):

* **the total** ``n``: an exact interval from the discrete Laplace law of ``N − n``
  (:func:`total_interval`);
* **the histogram**: a bound on the sorted ℓ1 distance between the released and the true
  histogram, computed by pushing simulated noise of the known law through the same mechanism
  and post-processing around the released histogram (:func:`simulated_l1_bound`). Theorem 1 of
  Suresh (2019) bounds the expected error with unstated constants, so it cannot give a number.

The simulation is a parametric bootstrap: the released histogram stands in for the unknown true
one. Its coverage is measured, not proved (``benchmarks/bench_anonymized.py --coverage``).
Its randomness comes from a generator keyed by a digest of the release, so the statement is a
deterministic function of the release.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpfreq.anonymized.auto import Plan
from dpfreq.anonymized.distance import cumulative_sup_between, l1_between
from dpfreq.anonymized.hay import hay
from dpfreq.anonymized.privhist import fake_count_m, privhist, threshold_t
from dpfreq.anonymized.steps import I64, NoiseSource, Outcome, SimulationNoise
from dpfreq.noise import discrete_laplace_tail_bound
from dpfreq.rng import keyed_generator

__all__ = [
    "MAX_TOTAL",
    "MAX_WORKING_BYTES",
    "MIN_SIMULATIONS",
    "SIMULATION_WORK",
    "L1Bound",
    "run_plan",
    "simulated_l1_bound",
    "simulation_count",
    "total_interval",
    "working_bytes",
]

#: Largest total count ``n`` accepted: every step (float64 isotonic fits, int64 sums) is exact.
MAX_TOTAL = 2**52
#: Working memory a release may use (bytes); a release that would need more is refused.
MAX_WORKING_BYTES = 4 * 2**30
#: Total number of working elements all simulations of one error statement may touch.
SIMULATION_WORK = 2 * 10**7
#: Fewest simulated runs of an error statement (more when the histogram is small).
MIN_SIMULATIONS = 19
_MAX_SIMULATIONS = 199
_BYTES_PER_ELEMENT = 64  # several int64/float64 arrays per working element, plus temporaries


def run_plan(plan: Plan, counts: I64, prevalences: I64, *, epsilon: float,
             noise: NoiseSource) -> Outcome:
    """Run the planned mechanism (PrivHist or Hay et al.) on a validated prevalence form."""
    if plan.method == "hay":
        return hay(counts, prevalences, split=plan.split, noise=noise)
    return privhist(counts, prevalences, epsilon=epsilon, split=plan.split, noise=noise,
                    low_privacy_branch=plan.low_privacy_branch,
                    isotonic_large=plan.isotonic_large)


def total_interval(n_estimate: int, gamma1: Fraction, confidence: float) -> tuple[int, int]:
    """Interval ``[max(N − q, 0), N + q]`` holding the true total ``n`` with the confidence.

    ``N = max(n + Z, 0)`` with ``Z`` discrete Laplace ``DLap(e^{−γ1})``, and ``q`` is the
    smallest integer with ``Pr[|Z| > q] <= 1 − confidence``. If ``|Z| <= q`` then ``n`` lies in
    the interval: for ``N > 0`` because ``n = N − Z``, for ``N = 0`` because ``n <= −Z <= q``.
    So the coverage is at least ``confidence`` exactly, for every ``n``.
    """
    q = discrete_laplace_tail_bound(1.0 - confidence, gamma1)
    return max(n_estimate - q, 0), n_estimate + q


def working_elements(n_total: int, epsilon: float, plan: Plan) -> int:
    """Upper estimate of the working elements of one run on a histogram of total ``n_total``.

    PrivHist: the ``T`` small cumulative prevalences plus at most ``n/(T+1) + 2M`` large
    counts (the high-privacy grid is smaller). Hay et al.: the padded length ``L = N``.
    """
    n = max(n_total, 1)
    if plan.method == "hay":
        return n + 64
    t = threshold_t(n, epsilon)
    m = fake_count_m(max(n, 2), plan.split[1])
    return t + min(n, n // (t + 1)) + 2 * m + 64


def working_bytes(n_total: int, epsilon: float, plan: Plan) -> int:
    """Estimated peak working memory (bytes) of one run (see :func:`working_elements`)."""
    return _BYTES_PER_ELEMENT * working_elements(n_total, epsilon, plan)


def simulation_count(elements: int, confidence: float, plan: Plan) -> int:
    """Number of simulated runs: as many as :data:`SIMULATION_WORK` allows, within
    ``[MIN_SIMULATIONS, 199]``, and at least enough for the ``confidence`` order statistic.

    An element of the high-privacy branch costs about eight of the others (its weighted fit
    sums exact Python integers).
    """
    need = math.ceil(1.0 / (1.0 - confidence))
    cost = elements * (8 if plan.low_privacy_branch is False else 1)
    budget = SIMULATION_WORK // max(cost, 1)
    return max(need, MIN_SIMULATIONS, min(_MAX_SIMULATIONS, budget))


@dataclass(frozen=True)
class L1Bound:
    """A simulated sorted-ℓ1 bound (``value``), the number of runs and the order statistic, and
    from the same runs a simultaneous band half-width for the cumulative prevalences
    (``band``: ``max_r |φ_{r+}(true) − φ_{r+}(released)|``, the items with count ``>= r``) and
    the confidence the band achieves (``band_confidence``).

    The band's deviations are whole numbers of items, so where they are a few items the chosen
    order statistic is tied with many runs and holds in more than ``confidence`` of them (a band
    of 2 items can hold in every run where 1 item holds in 0.87 of them). ``band_confidence`` is
    the share ``c / (B + 1)`` of the ``c`` runs within the band, the level the band actually
    holds at (never below the requested one), so that the statement says what it is.
    """

    value: float
    simulations: int
    rank: int
    band: float
    band_confidence: float


def release_digest(counts: I64, prevalences: I64, n_estimate: int, plan: Plan,
                   epsilon: float) -> bytes:
    """SHA-256 of everything the simulation depends on (keys its generator)."""
    h = hashlib.sha256()
    for arr in (counts, prevalences):
        h.update(np.ascontiguousarray(arr, dtype="<i8").tobytes())
        h.update(b"|")
    h.update(repr((n_estimate, plan.method, plan.split, plan.low_privacy_branch,
                   plan.isotonic_large, float(epsilon))).encode())
    return h.digest()


def simulated_l1_bound(counts: I64, prevalences: I64, n_estimate: int, *, plan: Plan,
                       epsilon: float, confidence: float, simulations: int) -> L1Bound:
    """The ``confidence`` upper quantile of the simulated sorted-ℓ1 error around a release.

    Runs the planned mechanism ``simulations`` times on the released histogram with noise of the
    known law (:class:`~dpfreq.anonymized.steps.SimulationNoise`), and returns the
    ``⌈confidence·(B+1)⌉``-th smallest sorted-ℓ1 distance between a run and the released
    histogram (the usual conservative order statistic of ``B`` draws).
    """
    key = release_digest(counts, prevalences, n_estimate, plan, epsilon)
    noise = SimulationNoise(keyed_generator(key, "anonymized", "l1-bound"))
    distances = np.empty(simulations, dtype=np.float64)
    sups = np.empty(simulations, dtype=np.float64)
    for b in range(simulations):
        out = run_plan(plan, counts, prevalences, epsilon=epsilon, noise=noise)
        distances[b] = l1_between(out.counts, out.prevalences, counts, prevalences)
        sups[b] = cumulative_sup_between(out.counts, out.prevalences, counts, prevalences)
    rank = math.ceil(confidence * (simulations + 1))
    if rank > simulations:
        return L1Bound(value=math.inf, simulations=simulations, rank=rank, band=math.inf,
                       band_confidence=1.0)
    band = float(np.sort(sups)[rank - 1])
    return L1Bound(value=float(np.sort(distances)[rank - 1]), simulations=simulations,
                   rank=rank, band=band,
                   band_confidence=int(np.count_nonzero(sups <= band)) / (simulations + 1))
