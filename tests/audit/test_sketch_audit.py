"""Privacy audit of the profile sketch (``ProfileSketch``, the Wu & Pagh noisy histogram).

* Exact: the law of one sketch cell is ``h + DLap(e^{−γ})``; for neighbouring histograms (one
  event more for one item) the worst ratio of the exact pmfs is ``e^γ <= e^ε``.
* Clopper–Pearson (slow): the public constructor and ``from_counts`` on neighbouring histograms
  (every cell 0 vs every cell 1; the cells are i.i.d., so each cell is one trial of the same
  mechanism), seeded; a one-sided lower bound on the privacy loss of the event "cell <= 0" at
  α = 1e-6 must not exceed the claimed ε.
* Overflow: updates that would pass int64 are refused and change nothing; parameters whose
  memory or arithmetic cannot work are refused before anything is spent.
* Tampering: a truncated file, a flipped bit or an edited parameter is one DataError naming
  the file.
"""

from __future__ import annotations

import math
import zipfile
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import beta

from dpfreq.artifacts import read_artifact, write_artifact
from dpfreq.budget import Accountant, PrivacyBudget
from dpfreq.errors import DataError, ParameterError
from dpfreq.noise import discrete_laplace_gamma, discrete_laplace_pmf
from dpfreq.profile import ProfileSketch

ALPHA = 1e-6


def _lower_bound_epsilon(hits_a: int, hits_b: int, trials: int) -> float:
    """ln(p_lo / q_hi): Clopper–Pearson bounds, each one-sided at α/2 (jointly α)."""
    p_lo = beta.ppf(ALPHA / 2, hits_a, trials - hits_a + 1) if hits_a else 0.0
    q_hi = beta.ppf(1 - ALPHA / 2, hits_b + 1, trials - hits_b) if hits_b < trials else 1.0
    return math.log(p_lo / q_hi) if p_lo > 0 else 0.0


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 3.0])
def test_cell_ratio_exact(epsilon: float) -> None:
    """Exact pmfs of one cell at h = 0 and h = 1 on a window holding all but 1e-12 of the mass:
    the worst log-ratio is γ (attained on every value), never above ε."""
    gamma = discrete_laplace_gamma(epsilon)
    assert gamma <= Fraction(epsilon)
    width = math.ceil(30 / float(gamma))
    z = np.arange(-width, width + 1)
    worst = float(np.max(np.abs(np.log(discrete_laplace_pmf(z, gamma))
                                - np.log(discrete_laplace_pmf(z - 1, gamma)))))
    assert worst == pytest.approx(float(gamma), rel=1e-9)  # the float pmfs agree with γ ...
    assert gamma <= Fraction(epsilon)  # ... and γ <= ε holds exactly


@pytest.mark.slow
@pytest.mark.statistical
def test_cell_clopper_pearson_lower_bound(seed: int) -> None:
    """N = 10^6 cells per side. Event "cell <= 0": probability 1/(1+α) at h = 0 and α/(1+α) at
    h = 1, ratio exactly e^γ, the largest of any event. Power: with N = 10^6 each bound is
    within about 5.3·sqrt(p(1−p)/N) ≈ 0.0024 of its probability, so the lower bound lands
    within 0.02 of γ = 1 (asserted below): the audit would see a sampler leaking more."""
    epsilon, trials = 1.0, 1_000_000
    at_zero = ProfileSketch(trials, max_count=1, epsilon=epsilon, rng=seed).noisy_counts()
    at_one = ProfileSketch.from_counts(np.ones(trials, dtype=np.int64), domain_size=trials,
                                       max_count=1, epsilon=epsilon,
                                       rng=seed + 1).noisy_counts()
    hits_a = int(np.count_nonzero(at_zero <= 0))
    hits_b = int(np.count_nonzero(at_one <= 0))
    bound = _lower_bound_epsilon(hits_a, hits_b, trials)
    assert bound <= epsilon
    assert bound > float(discrete_laplace_gamma(epsilon)) - 0.02  # power check
    # the reverse event bounds the loss in the other direction as well
    assert _lower_bound_epsilon(trials - hits_b, trials - hits_a, trials) <= epsilon


# ---------------------------------------------------------------------------------- overflow


def test_counter_never_wraps(seed: int) -> None:
    s = ProfileSketch(4, max_count=3, epsilon=1.0, rng=seed)
    s.update(np.zeros(2047, dtype=np.int64), 2**52 - 1)
    before = s.noisy_counts().copy()
    with pytest.raises(DataError, match="int64 range"):
        s.update(np.zeros(3, dtype=np.int64), 2**52 - 1)
    np.testing.assert_array_equal(s.noisy_counts(), before)
    assert int(s.noisy_counts().min()) > -(2**62)  # nothing wrapped to a negative counter
    rel = s.reconstruct()  # the one huge counter is simply outside the window
    assert rel.value.sum() == pytest.approx(1.0)


@pytest.mark.parametrize(("kwargs", "param"), [
    ({"domain_size": 10**11}, "domain_size"),
    ({"domain_size": 2**63 + 500}, "domain_size"),
    ({"domain_size": 10, "max_count": 10**9}, "max_count"),
    ({"domain_size": 10, "epsilon": 1e-9}, "epsilon"),
    ({"domain_size": 10, "epsilon": 9e18}, "epsilon"),
])
def test_extremes_refused_before_spending(kwargs: dict, param: str) -> None:
    acc = Accountant(PrivacyBudget(10.0))
    with pytest.raises(ParameterError, match=f"^{param} of ProfileSketch") as info:
        ProfileSketch(**{"max_count": 3, "epsilon": 1.0, **kwargs}, accountant=acc)
    assert "epsilon_to_fraction" not in str(info.value)
    assert "\n" not in str(info.value)
    assert (acc.spent.epsilon, acc.spent.delta) == (0.0, 0.0)


# ---------------------------------------------------------------------------------- tampering


@pytest.fixture
def saved(tmp_path: Path, seed: int) -> tuple[Path, ProfileSketch]:
    s = ProfileSketch.from_counts(np.arange(300) % 5, domain_size=300, max_count=4,
                                  epsilon=1.0, rng=seed)
    path = tmp_path / "audit.sketch"
    s.save(path)
    return path, s


def test_truncated_file(saved: tuple[Path, ProfileSketch]) -> None:
    path, _ = saved
    raw = path.read_bytes()
    for cut in (0, 1, 22, len(raw) // 3, len(raw) - 1):
        path.write_bytes(raw[:cut])
        with pytest.raises(DataError, match=r"audit\.sketch"):
            ProfileSketch.load(path)


def test_flipped_bit_in_the_counters(saved: tuple[Path, ProfileSketch]) -> None:
    path, _ = saved
    with zipfile.ZipFile(path) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    counters = bytearray(members["noisy.npy"])
    counters[-5] ^= 0x01
    members["noisy.npy"] = bytes(counters)
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    with pytest.raises(DataError, match=r"audit\.sketch .*checksum does not match"):
        ProfileSketch.load(path)


@pytest.mark.parametrize(("field", "value"), [
    ("epsilon", 1000.0), ("epsilon", 0.5), ("max_count", 10), ("seeded", False),
    ("domain_size", 301)])
def test_edited_parameter(saved: tuple[Path, ProfileSketch], field: str, value: object) -> None:
    """Edited with the checksum recomputed (the strongest casual edit): each field is still
    validated (γ must be the noise fraction of ε; sizes must agree), or the edit is one anyone
    could make by calling dpfreq — never a silent change of the stated ε."""
    path, s = saved
    version, meta, arrays = read_artifact(path, kind="ProfileSketch", versions=(1,))
    write_artifact(path, kind="ProfileSketch", version=version, meta={**meta, field: value},
                   arrays=arrays)
    if field in ("epsilon", "domain_size"):
        with pytest.raises(DataError, match=r"audit\.sketch is not a valid dpfreq ProfileSketch"):
            ProfileSketch.load(path)
    else:  # a well-formed sketch with another public cap or flag: loads as exactly that
        loaded = ProfileSketch.load(path)
        assert getattr(loaded, field) == value
        assert loaded.epsilon == s.epsilon
