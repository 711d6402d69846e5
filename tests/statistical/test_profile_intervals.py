"""Coverage of the direct profile's intervals and the plan's predictions, against exact laws.

Every assertion holds with probability at least 1 − 1e-6 when the code is right (α = 1e-6 per
assertion; no retries, seeded generators).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import scipy.optimize
import scipy.stats

from dpfreq.noise import discrete_laplace_pmf, discrete_laplace_tail
from dpfreq.profile import plan_profile, release_profile
from dpfreq.profile.direct import direct_gamma
from dpfreq.profile.intervals import direct_half_widths, direct_widths, sum_half_width

pytestmark = pytest.mark.statistical

ALPHA = 1e-6
N = 20
D = 100_000
CONF = 0.9
TRIALS = 2000


def _data(seed: int) -> np.ndarray:
    """Counts of 40,000 active items (Zipf(2), clamped at 2N) in a domain of 10^5."""
    rng = np.random.Generator(np.random.PCG64(seed))
    return np.minimum(rng.zipf(2.0, 40_000), 2 * N)


def _truth(counts: np.ndarray) -> np.ndarray:
    c = np.bincount(np.minimum(counts, N), minlength=N + 1)
    c[0] += D - counts.size
    return c


def _two_sided(observed: int, trials: int, p: float) -> bool:
    """observed lies in the central 1 − α region of Binomial(trials, p)."""
    lo = scipy.stats.binom.ppf(ALPHA / 2, trials, p)
    hi = scipy.stats.binom.isf(ALPHA / 2, trials, p)
    return bool(lo <= observed <= hi)


@pytest.fixture(scope="module")
def runs() -> dict[str, np.ndarray]:
    """TRIALS direct releases of one data set (ε = 0.5, unit = item_replace: all classes noised
    at sensitivity 2): estimates, noisy counts and interval ends, all in items."""
    return _runs("item_replace")


@pytest.fixture(scope="module")
def derived() -> dict[str, np.ndarray]:
    """The same at unit = item (classes t >= 1 noised at sensitivity 1, class 0 derived)."""
    return _runs("item")


def _runs(unit: str) -> dict[str, np.ndarray]:
    counts = _data(20240611)
    est, noisy, lower, upper, blow, bup = [], [], [], [], [], []
    for k in range(TRIALS):
        rel = release_profile(counts, domain_size=D, max_count=N, epsilon=0.5, unit=unit,
                              confidence=CONF, rng=k)
        est.append(np.asarray(rel.value) * D)
        noisy.append(rel.mechanism_params["noisy_count_of_counts"])
        lower.append(rel.error.lower * D)
        upper.append(rel.error.upper * D)
        blow.append(rel.error.band_lower * D)
        bup.append(rel.error.band_upper * D)
    return {"truth": _truth(counts), "est": np.array(est), "noisy": np.array(noisy),
            "lower": np.array(lower), "upper": np.array(upper), "band_lower": np.array(blow),
            "band_upper": np.array(bup)}


def test_noisy_interval_misses_have_the_exact_law(runs: dict[str, np.ndarray]) -> None:
    """``|y_t − c_t| > q`` happens with probability exactly ``Pr[|Z| > q]`` in every class.

    Power: with 2000 trials and p ≈ 0.08 the 1e-6 acceptance region is about ±0.03 wide, so a
    noise scale off by 20 % (which moves p by more than 0.03) is detected.
    """
    gamma = direct_gamma(0.5)
    q, _ = direct_half_widths(gamma, N + 1, CONF)
    p = float(discrete_laplace_tail(q, gamma))
    assert p <= 1 - CONF
    misses = (np.abs(runs["noisy"] - runs["truth"]) > q).sum(axis=0)
    for t in range(N + 1):
        assert _two_sided(int(misses[t]), TRIALS, p), t


def test_released_intervals_cover_each_class(runs: dict[str, np.ndarray]) -> None:
    """The released (hull) intervals miss at most as often as ``Pr[|Z| > q] <= 1 − conf``."""
    gamma = direct_gamma(0.5)
    q, _ = direct_half_widths(gamma, N + 1, CONF)
    p = float(discrete_laplace_tail(q, gamma))
    tol = 1e-6
    inside = (runs["lower"] <= runs["truth"] + tol) & (runs["truth"] <= runs["upper"] + tol)
    upper_limit = scipy.stats.binom.isf(ALPHA, TRIALS, p)
    for t in range(N + 1):
        assert (~inside[:, t]).sum() <= upper_limit, t
    assert np.all(runs["lower"] <= runs["est"] + tol)
    assert np.all(runs["est"] <= runs["upper"] + tol)


def test_band_covers_all_classes_at_once(runs: dict[str, np.ndarray]) -> None:
    gamma = direct_gamma(0.5)
    _, q_band = direct_half_widths(gamma, N + 1, CONF)
    p_miss = 1 - (1 - float(discrete_laplace_tail(q_band, gamma))) ** (N + 1)
    assert p_miss <= 1 - CONF
    noisy_miss = (np.abs(runs["noisy"] - runs["truth"]) > q_band).any(axis=1).sum()
    assert _two_sided(int(noisy_miss), TRIALS, p_miss)
    tol = 1e-6
    band = ((runs["band_lower"] <= runs["truth"] + tol)
            & (runs["truth"] <= runs["band_upper"] + tol)).all(axis=1)
    assert (~band).sum() <= scipy.stats.binom.isf(ALPHA, TRIALS, p_miss)


def _chernoff_slack(gamma: float, samples: int) -> float:
    """δ with ``Pr[|mean of |Z|| − E|Z|| > δ] <= α`` over ``samples`` i.i.d. draws (exact MGF).

    ``E e^{λ|Z|} = (1−a)/(1+a) · (1 + 2 a e^λ / (1 − a e^λ))`` for ``a e^λ < 1``; the Chernoff
    bound ``exp(−samples · sup_λ (λ(μ ± δ) − ln M(λ)))`` is solved for ``α/2`` on each side.
    """
    a = math.exp(-gamma)
    mu = 2 * a / (1 - a * a)

    def log_m(lam: float) -> float:
        return math.log((1 - a) / (1 + a) * (1 + 2 * a * math.exp(lam) / (1 - a * math.exp(lam))))

    def rate(x: float, sign: int) -> float:
        top = -math.log(a) - 1e-9 if sign > 0 else 50.0
        res = scipy.optimize.minimize_scalar(lambda s: -(sign * s * x - log_m(sign * s)),
                                             bounds=(0.0, top), method="bounded")
        return float(-res.fun)

    target = math.log(2 / ALPHA) / samples
    up = scipy.optimize.brentq(lambda dlt: rate(mu + dlt, 1) - target, 1e-12, 100 * mu)
    down = scipy.optimize.brentq(lambda dlt: rate(mu - dlt, -1) - target, 1e-12, mu - 1e-12)
    return max(up, down)


def test_plan_predictions_match_the_simulation(runs: dict[str, np.ndarray]) -> None:
    """The plan's expected ℓ1 (before projection), its half-widths and its ℓ1 bound."""
    plan = plan_profile(domain_size=D, max_count=N, epsilon=0.5, unit="item_replace",
                        confidence=CONF)
    gamma = direct_gamma(0.5)
    q, q_band = direct_half_widths(gamma, N + 1, CONF)
    assert (plan.half_width, plan.band_half_width) == (q, q_band)
    pre = np.abs(runs["noisy"] - runs["truth"]).sum(axis=1)  # ℓ1 of y − c per trial, items
    samples = TRIALS * (N + 1)
    slack = _chernoff_slack(float(gamma), samples)
    per_class = pre.mean() / (N + 1)
    assert abs(per_class - plan.l1_error * D / (N + 1)) <= slack
    post = np.abs(runs["est"] - runs["truth"]).sum(axis=1)
    assert np.all(post <= 2 * pre + 1e-6)  # projection at most doubles the ℓ1 error
    over = int((post / D > plan.l1_bound).sum())
    assert over <= scipy.stats.binom.isf(ALPHA, TRIALS, 1 - CONF)


def test_epsilon_for_inverts_the_plan() -> None:
    plan = plan_profile(domain_size=2_000_000, max_count=50, epsilon=1.0, unit="item")
    eps = plan.epsilon_for(3, measure="half_width")
    at = plan_profile(domain_size=2_000_000, max_count=50, epsilon=eps, unit="item")
    below = plan_profile(domain_size=2_000_000, max_count=50, epsilon=eps * 0.99, unit="item")
    assert at.half_width is not None
    assert at.half_width <= 3
    assert below.half_width is not None
    assert below.half_width > 3
    eps_l1 = plan.epsilon_for(1e-4, measure="l1_bound")
    assert plan_profile(domain_size=2_000_000, max_count=50, epsilon=eps_l1,
                        unit="item").l1_bound <= 1e-4


def test_group_sum_intervals_cover_at_the_exact_rate(runs: dict[str, np.ndarray]) -> None:
    """Sum over t = 3..12 of the noisy classes: misses ``|Σ Z| > q`` have the exact law of the
    10-fold convolution (computed here by repeated ``np.convolve``)."""
    gamma = direct_gamma(0.5)
    k, lo, hi = 10, 3, 12
    q = sum_half_width(gamma, k, CONF)
    assert q is not None
    support = np.arange(-300, 301)
    one = discrete_laplace_pmf(support, gamma)
    law = one
    for _ in range(k - 1):
        law = np.convolve(law, one)
    centre = law.size // 2
    p_miss = 1.0 - float(law[centre - q : centre + q + 1].sum())
    assert p_miss <= 1 - CONF
    noisy_sum = runs["noisy"][:, lo : hi + 1].sum(axis=1)
    true_sum = runs["truth"][lo : hi + 1].sum()
    misses = int((np.abs(noisy_sum - true_sum) > q).sum())
    assert _two_sided(misses, TRIALS, p_miss)


def _sum_law(gamma: Fraction, k: int) -> np.ndarray:
    """The exact law of ``Z_1 + … + Z_k`` on ``−300k..300k`` (repeated ``np.convolve``)."""
    one = discrete_laplace_pmf(np.arange(-300, 301), gamma)
    law = one
    for _ in range(k - 1):
        law = np.convolve(law, one)
    return law


def _outside(law: np.ndarray, q: int) -> float:
    centre = law.size // 2
    return 1.0 - float(law[centre - q : centre + q + 1].sum())


def test_derived_layout_misses_have_the_exact_law(derived: dict[str, np.ndarray]) -> None:
    """At unit = item: classes t >= 1 miss ``±q`` at the rate of one ``DLap(e^{−ε})`` draw,
    class 0 (``d − Σ``) misses its width at the rate of the sum of ``N`` draws; the released
    intervals and the band cover at least as often as stated."""
    gamma = direct_gamma(0.5, sensitivity=1)
    q, _ = direct_widths(gamma, N, CONF, derive_zero=True)
    p = float(discrete_laplace_tail(int(q[1]), gamma))
    p0 = _outside(_sum_law(gamma, N), int(q[0]))
    assert max(p, p0) <= 1 - CONF
    err = np.abs(derived["noisy"] - derived["truth"])
    misses = (err > q).sum(axis=0)
    assert _two_sided(int(misses[0]), TRIALS, p0)
    for t in range(1, N + 1):
        assert _two_sided(int(misses[t]), TRIALS, p), t
    tol = 1e-6
    inside = (derived["lower"] <= derived["truth"] + tol) & (
        derived["truth"] <= derived["upper"] + tol)
    assert (~inside[:, 0]).sum() <= scipy.stats.binom.isf(ALPHA, TRIALS, p0)
    assert (~inside[:, 1:]).sum(axis=0).max() <= scipy.stats.binom.isf(ALPHA, TRIALS, p)
    band = ((derived["band_lower"] <= derived["truth"] + tol)
            & (derived["truth"] <= derived["band_upper"] + tol)).all(axis=1)
    assert (~band).sum() <= scipy.stats.binom.isf(ALPHA, TRIALS, 1 - CONF)


def test_derived_plan_matches_the_simulation(derived: dict[str, np.ndarray]) -> None:
    """The plan's expected ℓ1 at unit = item (``N E|Z| + E|ΣZ|``) and its ℓ1 bound."""
    plan = plan_profile(domain_size=D, max_count=N, epsilon=0.5, unit="item", confidence=CONF)
    gamma = direct_gamma(0.5, sensitivity=1)
    assert plan.layout == "class 0 derived"
    law = _sum_law(gamma, N)
    support = np.abs(np.arange(law.size) - law.size // 2)
    expected = N * 2 * math.exp(-0.5) / (1 - math.exp(-1.0)) + float(support @ law)
    assert plan.l1_error * D == pytest.approx(expected, rel=1e-6)
    pre = np.abs(derived["noisy"] - derived["truth"]).sum(axis=1)
    sd = float(np.std(pre))
    # N(0, sd²/TRIALS) tail at 1e-6 with a 20 % margin on the sample sd
    assert abs(pre.mean() - expected) <= 5.0 * 1.2 * sd / math.sqrt(TRIALS)
    post = np.abs(derived["est"] - derived["truth"]).sum(axis=1)
    assert np.all(post <= 2 * pre + 1e-6)
    over = int((post / D > plan.l1_bound).sum())
    assert over <= scipy.stats.binom.isf(ALPHA, TRIALS, 1 - CONF)
    replace = plan_profile(domain_size=D, max_count=N, epsilon=0.5, unit="item_replace",
                           confidence=CONF)
    assert plan.l1_error < 0.6 * replace.l1_error
