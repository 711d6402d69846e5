"""The guarantee of the shuffle's dummy registers, by exact enumeration on small histograms.

What the aggregator learns is the noisy histogram ``H = h + D`` (``D[v]`` i.i.d. of the
shifted, truncated discrete Laplace law per value: one worker's dummies, or both workers').
For small histograms we enumerate every neighbouring pair, every output, and compute the
hockey-stick divergence ``δ(ε) = Σ_o max(0, Pr[o | h] − e^ε Pr[o | h'])`` from the exact pmfs:
it must be at most the stated δ at the stated ε (one worker's dummies alone, and both), equal
to it (the calibration is tight), exceed it just below ε, and exceed the target with one
dummy less per value (the shift is the smallest that works). The neighbouring pairs come from
enumerating tiny data sets — users placed in registers, present at some parties with some
impressions — and removing one user with every impression at every party, so the reduction
"one user moves one register's value" is checked too, not assumed.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from dpfreq.crossparty.shuffle import calibrate_dummies
from dpfreq.crossparty.shuffle.dummies import DummyLaw, dummy_delta_bound


def _law(epsilon: float, delta: float) -> DummyLaw:
    return calibrate_dummies(epsilon, delta)


def _one_bucket(law: DummyLaw, workers: int) -> np.ndarray:
    """pmf of the dummies of one value (offsets 0..2s·workers)."""
    one = law.pmf(np.arange(2 * law.shift + 1))
    out = np.array([1.0])
    for _ in range(workers):
        out = np.convolve(out, one)
    return out


def _hockey_stick(h: np.ndarray, h2: np.ndarray, noise: np.ndarray, epsilon: float) -> float:
    """δ(ε) of the noisy histograms of h and h2, over every output (the joint pmfs are outer
    products of the per-value pmfs on a common grid of outputs)."""
    width = noise.size
    lo = np.minimum(h, h2)
    size = int((np.maximum(h, h2) - lo).max()) + width

    def marginal(count: int, start: int) -> np.ndarray:
        out = np.zeros(size)
        out[count - start:count - start + width] = noise
        return out

    joint = np.ones(())
    joint2 = np.ones(())
    for v in range(h.size):
        joint = np.multiply.outer(joint, marginal(int(h[v]), int(lo[v])))
        joint2 = np.multiply.outer(joint2, marginal(int(h2[v]), int(lo[v])))
    return float(np.maximum(joint - math.exp(epsilon) * joint2, 0.0).sum())


def _neighbours(registers: int, parties: int, K: int) -> set[tuple[tuple[int, ...], ...]]:
    """Pairs (histogram with a user, histogram without them) over tiny data sets: two users
    in ``registers`` registers, each with 0..K impressions at each party (capped at K per
    party and register); the neighbour drops the first user entirely."""
    V = parties * K
    pairs = set()
    for place in itertools.product(range(registers), repeat=2):
        for counts in itertools.product(range(K + 1), repeat=2 * parties):
            per_user = np.array(counts).reshape(2, parties)
            full = np.zeros((parties, registers), dtype=np.int64)
            alone = np.zeros((parties, registers), dtype=np.int64)
            for u in (0, 1):
                full[:, place[u]] += per_user[u]
                if u == 1:
                    alone[:, place[u]] += per_user[u]
            h = np.bincount(np.minimum(full, K).sum(axis=0), minlength=V + 1)
            h2 = np.bincount(np.minimum(alone, K).sum(axis=0), minlength=V + 1)
            pairs.add((tuple(h.tolist()), tuple(h2.tolist())))
    return pairs


def test_tiny_data_sets_differ_by_one_register_move() -> None:
    for h, h2 in _neighbours(registers=2, parties=2, K=1):
        diff = np.array(h) - np.array(h2)
        assert np.abs(diff).sum() in (0, 2)  # one register's value moved (or none)
        assert diff.sum() == 0


@pytest.mark.parametrize(("epsilon", "delta"), [(1.0, 0.05), (math.log(3), 0.01)])
@pytest.mark.parametrize("workers", [1, 2])
def test_guarantee_holds_and_is_tight_by_enumeration(epsilon, delta, workers) -> None:
    law = _law(epsilon, delta)
    assert law.epsilon <= epsilon
    assert law.delta <= delta
    noise = _one_bucket(law, workers)
    pairs = _neighbours(registers=2, parties=2, K=1)  # values 0..2: three buckets
    worst = 0.0
    for h, h2 in pairs:
        for a, b in ((h, h2), (h2, h)):
            worst = max(worst, _hockey_stick(np.array(a), np.array(b), noise, law.epsilon))
    # one worker's dummies alone give the stated δ (tight); both give at most that
    assert worst <= law.delta * (1 + 1e-9)
    if workers == 1:
        assert worst == pytest.approx(law.delta, rel=1e-9)
        h, h2 = np.array([1, 1, 0]), np.array([2, 0, 0])
        below = _hockey_stick(h, h2, noise, 0.99 * law.epsilon)
        assert below > law.delta  # the stated ε is the smallest with this δ


@pytest.mark.parametrize(("epsilon", "delta"), [(1.0, 0.05), (0.5, 1e-3), (math.log(3), 1e-9)])
def test_shift_is_the_smallest_that_meets_delta(epsilon, delta) -> None:
    law = _law(epsilon, delta)
    gamma = law.gamma
    assert float(dummy_delta_bound(gamma, law.shift)) <= delta
    assert float(dummy_delta_bound(gamma, law.shift - 1)) > delta
    # the closed form of δ against the enumerated one-bucket pmf: p0 (2 − p0)
    p0 = float(law.pmf(np.array([0]))[0])
    assert law.delta == pytest.approx(p0 * (2 - p0), rel=1e-9)
    assert gamma == Fraction(gamma.numerator, gamma.denominator)
    assert 2 * gamma <= Fraction(epsilon)


def test_one_register_moving_two_values_at_larger_histograms() -> None:
    """Four values (P·K = 3), every move between them, one worker's dummies."""
    law = _law(1.0, 0.05)
    noise = _one_bucket(law, 1)
    worst = 0.0
    for a, b in itertools.permutations(range(4), 2):
        h = np.array([1, 1, 1, 1])
        h2 = h.copy()
        h2[a] -= 1
        h2[b] += 1
        worst = max(worst, _hockey_stick(h, h2, noise, law.epsilon))
    assert worst == pytest.approx(law.delta, rel=1e-9)


@pytest.mark.parametrize("per_party", [False, True])
@pytest.mark.parametrize(("epsilon", "delta"), [(math.log(3), 1e-10), (0.1, 1e-6)])
def test_the_measurements_loss_fits_its_parameters(epsilon, delta, per_party) -> None:
    """The composed loss of every histogram (dpfreq.accounting) is within (ε, δ) exactly."""
    from dpfreq.accounting import exact_fraction
    from dpfreq.crossparty import Coverage
    from dpfreq.crossparty.shuffle import ShuffleParams
    from dpfreq.crossparty.shuffle.estimate import measurement_loss

    params = ShuffleParams(
        measurement="m", registers=64, sampling_start=0, sampling_width=1, max_frequency=3,
        epsilon=epsilon, delta=delta, parties=["a", "b", "c"], per_party=per_party,
        coverage=Coverage(), deadline="2030-01-01", hash="sha256-prefix/v1", key_id="0" * 32)
    loss = measurement_loss(params)
    assert len(loss.parts) == params.histograms
    assert loss.epsilon_bound() <= exact_fraction(epsilon)
    assert loss.bad_delta() <= exact_fraction(delta)
