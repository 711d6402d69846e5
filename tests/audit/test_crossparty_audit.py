"""Privacy audit of a party's cross-party sketch: tell a log from its neighbour by the output.

Neighbouring logs differ by one user with all their impressions (``K`` of them, alone in their
register). Each trial builds the sketch of one of the two logs through the public
:func:`build_sketch` (memory engine, real keyed hash, exact noise), seeded. The distinguisher
looks at the published sketch only: the event "the user's register shows bit 1 and a count of at
least ``K``". Its exact probabilities are ``q/(1+α)`` and ``(1−q) α^K/(1+α)``, a ratio of
exactly ``e^{γ_r + K γ_f}`` — the whole ε, the calibration is tight — so a Clopper–Pearson lower
bound on the privacy loss (α = 1e-6) must stay at or below ε, and each frequency must match its
exact law (two-sided binomial tests at α = 1e-6), which shows the audit sees what it should.

Power: with 3000 trials per log, the lower bound is about 1.35 for a true loss of 1.70; a
mechanism with half the noise (loss 3.4) gives a lower bound near 3, far above ε.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import beta, binomtest

from dpfreq.crossparty import CrossPartyParams, build_sketch, key_fingerprint
from dpfreq.crossparty.local_noise import calibrate
from dpfreq.crossparty.vid import vid_hash

ALPHA = 1e-6
KEY = bytes(range(32))
K = 3
TRIALS = 3000
PARAMS = CrossPartyParams(measurement="audit", registers=16, sampling_start=0,
                          sampling_width=1, max_frequency=K, epsilon_reach=math.log(3),
                          epsilon_frequency=0.6, hash="sha256-prefix/v1",
                          key_id=key_fingerprint(KEY))


def _logs() -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], int]:
    """A log with a user alone in its register, the log without them, and that register."""
    _, regs = vid_hash(KEY, PARAMS).locate(range(40))
    target = 0
    others = [u for u in range(1, 40) if regs[u] != regs[target]][:12]
    base = np.repeat(np.array(others), 2)
    with_user = np.concatenate([base, np.full(K, target)])
    return {"user": with_user}, {"user": base}, int(regs[target])


def _hits(log: dict[str, np.ndarray], register: int, gen: np.random.Generator) -> int:
    hits = 0
    for _ in range(TRIALS):
        s = build_sketch(log, user="user", party="p", params=PARAMS, key=KEY, rng=gen)
        hits += int(s.reach_bits[register] == 1 and s.frequency[register] >= K)  # type: ignore[index]
    return hits


@pytest.mark.statistical
def test_the_sketch_cannot_tell_a_user_apart_beyond_epsilon(rng: np.random.Generator) -> None:
    with_user, without, register = _logs()
    a, b = _hits(with_user, register, rng), _hits(without, register, rng)
    noise = calibrate(PARAMS)
    q, alpha = noise.keep_probability, float(noise.frequency_alpha)  # type: ignore[arg-type]
    assert binomtest(a, TRIALS, q / (1 + alpha)).pvalue > ALPHA
    assert binomtest(b, TRIALS, (1 - q) * alpha**K / (1 + alpha)).pvalue > ALPHA
    p_lo = beta.ppf(ALPHA / 2, a, TRIALS - a + 1)
    q_hi = beta.ppf(1 - ALPHA / 2, b + 1, TRIALS - b)
    assert math.log(p_lo / q_hi) <= PARAMS.epsilon
