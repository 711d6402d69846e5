"""Privacy audit of the anonymized-histogram mechanisms (PrivHist and Hay et al.).

* Exact: for every pair of neighbouring histograms of total ≤ 4 (one item's count moved by one,
  including a new count-1 item), the exact output law of each noisy step is computed from the
  discrete Laplace pmf and the worst probability ratio is checked ≤ e^γ (γ the fraction the
  sampler uses): the total ``N = max(n + Z, 0)`` (ε1), and Hay et al.'s noisy sorted counts padded
  to a public length (ε2). PrivHist's split-and-noise step (ε2) and its high-privacy step (ε3) are
  checked exactly in ``tests/statistical/test_anonymized_privacy.py``.
* Clopper–Pearson (slow): the whole mechanism, run through the exact sampler on two neighbouring
  histograms; a one-sided lower bound on the privacy loss of an output event, at α = 1e-6, must
  not exceed the claimed ε.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import beta

from dpfreq.anonymized.accuracy import run_plan
from dpfreq.anonymized.auto import plan_for
from dpfreq.anonymized.hay import sorted_padded
from dpfreq.anonymized.histogram_input import as_prevalences, total_of
from dpfreq.anonymized.steps import ExactNoise
from dpfreq.noise import discrete_laplace_cdf, discrete_laplace_pmf, epsilon_to_fraction
from histogram_cases import histograms_up_to, move_up

ALPHA = 1e-6
RATIO_TOL = 1e-9


def arrays(h: dict[int, int]) -> tuple[np.ndarray, np.ndarray]:
    if not h:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return as_prevalences(h)


def neighbour_pairs(n_max: int):
    for h in histograms_up_to(n_max):
        for r in [0, *h]:
            yield h, move_up(h, r)


def total_law(n: int, gamma, outputs: np.ndarray) -> np.ndarray:
    """Exact Pr[max(n + Z, 0) = o] for o in outputs (o >= 0)."""
    pmf = discrete_laplace_pmf(outputs - n, gamma)
    at_zero = float(discrete_laplace_cdf(np.array([-n]), gamma)[0])
    return np.where(outputs == 0, at_zero, pmf)


@pytest.mark.parametrize("epsilon1", [0.05, 0.5, 1.0, 3.0])
def test_total_is_eps1_dp_exactly(epsilon1: float) -> None:
    gamma = epsilon_to_fraction(epsilon1)
    outputs = np.arange(0, 40)
    worst = 0.0
    for h, h2 in neighbour_pairs(4):
        a = total_law(total_of(*arrays(h)), gamma, outputs)
        b = total_law(total_of(*arrays(h2)), gamma, outputs)
        worst = max(worst, float(np.max(np.abs(np.log(a) - np.log(b)))))
    assert worst <= float(gamma) + RATIO_TOL
    assert worst >= float(gamma) - RATIO_TOL  # attained: the check is tight


@pytest.mark.parametrize("epsilon2", [0.3, math.log(2.0)])
def test_hay_sorted_counts_are_eps2_dp_exactly(epsilon2: float) -> None:
    # Given the public length L, the noisy sorted counts have sensitivity 1: the law of the
    # output vector is a product of discrete Laplace pmfs centred on the padded sorted counts.
    gamma = epsilon_to_fraction(epsilon2)
    for length in (3, 4):
        grid = np.array(list(itertools.product(range(-1, 6), repeat=length)), dtype=np.int64)
        worst = 0.0
        for h, h2 in neighbour_pairs(4):
            va = sorted_padded(*arrays(h), length) if h else np.zeros(length, np.int64)
            vb = sorted_padded(*arrays(h2), length)
            la = np.sum(np.log(discrete_laplace_pmf(grid - va, gamma)), axis=1)
            lb = np.sum(np.log(discrete_laplace_pmf(grid - vb, gamma)), axis=1)
            worst = max(worst, float(np.max(np.abs(la - lb))))
        assert worst <= float(gamma) + RATIO_TOL


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    """One-sided (1 − α/4) Clopper–Pearson lower and upper bounds of a binomial proportion.

    The audit below uses four such bounds (both ends of both proportions), so by the union
    bound all of them hold, and its assertion's false-alarm rate is at most α = 1e-6."""
    lower = 0.0 if k == 0 else float(beta.ppf(ALPHA / 4, k, n - k + 1))
    upper = 1.0 if k == n else float(beta.ppf(1 - ALPHA / 4, k + 1, n - k))
    return lower, upper


@pytest.mark.slow
@pytest.mark.parametrize(("method", "epsilon"), [("privhist", 1.5), ("auto", 1.0)])
def test_clopper_pearson_lower_bound_does_not_exceed_epsilon(method: str, epsilon: float
                                                             ) -> None:
    # Neighbours: one more occurrence of the most frequent item. Event: the released largest
    # count exceeds the true one of the first histogram (it moves with the data, so the event
    # probabilities differ as much as the mechanism allows). 6000 runs each: a few seconds.
    h1, h2 = {1: 2, 3: 1}, {1: 2, 4: 1}
    plan = plan_for(method, epsilon)
    runs = 6_000

    def hits(h: dict[int, int], seed: int) -> int:
        counts, prev = arrays(h)
        noise = ExactNoise(np.random.Generator(np.random.PCG64(seed)))
        k = 0
        for _ in range(runs):
            out = run_plan(plan, counts, prev, epsilon=epsilon, noise=noise)
            k += bool(out.counts.size) and int(out.counts[-1]) >= 4
        return k

    k1, k2 = hits(h1, 11), hits(h2, 12)
    lo2, _ = clopper_pearson(k2, runs)
    _, hi1 = clopper_pearson(k1, runs)
    lo1, _ = clopper_pearson(k1, runs)
    _, hi2 = clopper_pearson(k2, runs)
    bound = max(math.log(lo2 / hi1) if lo2 > 0 else -math.inf,
                math.log(lo1 / hi2) if lo1 > 0 else -math.inf,
                math.log((1 - hi1) / (1 - lo2)) if lo2 < 1 and hi1 < 1 else -math.inf)
    assert bound <= epsilon
    assert k2 > k1  # the event does tell the neighbours apart (the audit is not idle)
