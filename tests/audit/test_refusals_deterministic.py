"""Whether a release is refused depends on the data and the parameters, never on a draw, and
a refused call spends nothing (nothing random runs before the budget is charged).

Each refused call is made under many seeds and with the secure source: it must refuse every
time with the same message and leave the accountant untouched; each admissible call near the
refusal's edge must succeed under every seed.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpfreq.budget import Accountant, PrivacyBudget
from dpfreq.errors import DPFreqError
from dpfreq.profile import ProfileSketch

SEEDS = [None, *range(40)]


def _refusals(call) -> set[str]:
    """The messages of ``call(rng, accountant)`` under every seed; asserts nothing was spent."""
    out = set()
    for seed in SEEDS:
        acct = Accountant(PrivacyBudget(10.0))
        with pytest.raises(DPFreqError) as info:
            call(seed, acct)
        assert acct.spent == (0.0, 0.0)
        out.add(str(info.value))
    return out


def test_sketch_sampling_refusal_is_decided_before_any_draw():
    # ρ·d < 1: refused from the public parameters alone, under every seed, one message
    msgs = _refusals(lambda seed, acct: ProfileSketch(
        3, max_count=4, epsilon=1.0, sample_rate=0.2, rng=seed, accountant=acct))
    assert len(msgs) == 1
    assert "sample_rate" in msgs.pop()


def test_sketch_with_a_drawn_sampling_key_never_refuses():
    """ρ·d = 1: a drawn key keeps no item with probability (1 − ρ)^d = 1/4; the key is drawn
    after the spend and drawn again, so no seed is refused and each spends once."""
    for seed in SEEDS:
        acct = Accountant(PrivacyBudget(10.0))
        sk = ProfileSketch(2, max_count=4, epsilon=1.0, sample_rate=0.5, rng=seed,
                           accountant=acct)
        assert sk.sampled_domain_size >= 1
        assert acct.spent == (1.0, 0.0)


def test_sketch_with_a_given_key_that_keeps_nothing_is_refused_before_the_spend():
    key = next(k.to_bytes(8, "little") for k in range(1000)
               if _sample_size(2, 0.5, k.to_bytes(8, "little")) == 0)
    msgs = _refusals(lambda seed, acct: ProfileSketch(
        2, max_count=4, epsilon=1.0, sample_rate=0.5, sample_key=key, rng=seed,
        accountant=acct))
    assert len(msgs) == 1
    assert "sample_key" in msgs.pop()


def _sample_size(d: int, rate: float, key: bytes) -> int:
    from dpfreq.profile.domain_sampling import sample_domain

    return int(np.size(sample_domain(d, rate=rate, key=key)))
