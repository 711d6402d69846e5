"""Privacy audit of the longitudinal randomizers: the law each device samples, exactly.

* Exact enumeration of every sampled distance law (modes rr, futurerand, calibrated, threshold,
  auto; k up to 256; ε ∈ {0.1, 0.5, 1, 2, 5}) from the exposed ``sampled_pmf``: the realised
  privacy loss equals the certificate and is ≤ ε (checked in rational arithmetic and with
  50-digit logs), and no distance of positive ideal probability has probability 0.
* The counterexample of the float-cdf sampler (k = 64, ε = 1: distances 1 and 63 had
  probability 0, an infinite privacy loss) as a regression test.
* A chi-square test of the sampler against ``sampled_pmf`` (α = 1e-6), for the simulation's
  sampler and for the device's keyed sampler (:mod:`dpfreq.longitudinal.keyed`: the vector,
  the order, the coins and the kept change's randomized-response bit, each over many device
  secrets, against its exact law).
* Seeded Clopper–Pearson lower-bound audits (slow) per randomizer mode, on the simulation's
  sampler and on the device's keyed one: the lower bound on the privacy loss of a powerful
  output event never exceeds the claimed ε (α = 1e-6).
* Tampered or out-of-range saved state and extreme parameters give one dpfreq error.
"""

from __future__ import annotations

import decimal
import json
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpfreq.artifacts import seal_json
from dpfreq.errors import DataError, ParameterError
from dpfreq.longitudinal import LongitudinalClient, ProtocolParams, make_params
from dpfreq.longitudinal.keyed import DeviceKey
from dpfreq.longitudinal.laws import distance_law
from dpfreq.noise import epsilon_to_fraction, randomized_response

ALPHA = 1e-6
DISTANCE_MODES = ("rr", "futurerand", "calibrated", "threshold", "auto")
EPSILONS = (0.1, 0.5, 1.0, 2.0, 5.0)
KS = (1, 2, 3, 8, 23, 26, 40, 50, 64, 128, 256)


def _ln(x: Fraction) -> decimal.Decimal:
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        return decimal.Decimal(x.numerator).ln() - decimal.Decimal(x.denominator).ln()


def _vector_probs(law) -> list[Fraction]:
    """Pr[v = y] for one vector y at each distance ℓ, from the exposed distance pmf."""
    return [p / math.comb(law.k, ell) for ell, p in enumerate(law.sampled_pmf)]


@pytest.mark.parametrize("mode", DISTANCE_MODES)
@pytest.mark.parametrize("eps", EPSILONS)
def test_sampled_law_exact_certificate(mode: str, eps: float) -> None:
    for k in KS:
        law = distance_law(mode, k, eps)
        pmf = law.sampled_pmf
        assert sum(pmf) == 1
        assert all(p > 0 for p in pmf)  # every distance (all are ideal-positive) is possible
        q = _vector_probs(law)
        ratio = max(q) / min(q)
        assert ratio == law.certificate_ratio
        loss = _ln(ratio)
        assert loss <= decimal.Decimal(eps), (mode, k, eps)
        assert law.certificate == pytest.approx(float(loss), abs=1e-15)
        assert law.certificate <= eps
        # the sampled law is the ideal one up to rounding (62-bit weights)
        ideal = np.exp(law.log_q - law.log_q.max())
        got = np.array([float(x / max(q)) for x in q])
        assert np.allclose(got, ideal, rtol=1e-12, atol=0)


@pytest.mark.parametrize("mode", DISTANCE_MODES)
@pytest.mark.parametrize("k", [1, 2, 5, 16, 64])
def test_realised_loss_over_every_support_equals_certificate(mode: str, k: int) -> None:
    """Pr[R(x) = y] over inputs of support s ≤ k with ℓ_s disagreeing non-zeros is
    ``2^{−(L−s)}·Σ_a C(k−s, a)·q(ℓ_s + a)`` (a marginal of v); the largest ratio over every
    (s, ℓ_s) and every L ≥ k (the 2^{−(L−s)} factors cancel against the same L) is the
    certificate."""
    law = distance_law(mode, k, 1.0)
    q = _vector_probs(law)
    cells = []
    for s in range(k + 1):
        for ell_s in range(s + 1):
            marginal = sum(math.comb(k - s, a) * q[ell_s + a] for a in range(k - s + 1))
            cells.append(marginal * Fraction(2) ** s)  # common factor 2^{−L} dropped
    assert max(cells) / min(cells) == law.certificate_ratio


def test_erlingsson_certificate_is_exact() -> None:
    """Erlingsson et al.: the kept change goes through exact randomized response with γ ≤ ε;
    the output ratio is exactly e^γ."""
    for eps in EPSILONS:
        gamma = epsilon_to_fraction(eps)
        assert gamma <= Fraction(eps)
        p = make_params(horizon=16, max_changes=4, epsilon=eps, method="erlingsson")
        assert p.certificate == float(gamma) <= eps


def test_counterexample_k64_eps1_regression() -> None:
    """The float-cdf sampler gave distances 1 and 63 probability 0 at k = 64, ε = 1 (infinite
    loss) and distance 0 about 1200 times its probability; the sampled law now has them at
    their ideal probability (relative error below 1e-12)."""
    for mode in DISTANCE_MODES:
        law = distance_law(mode, 64, 1.0)
        pmf = law.sampled_pmf
        assert pmf[1] > 0
        assert pmf[63] > 0
        assert pmf[0] > 0
        ideal = np.exp(law.log_q + np.array([math.lgamma(65) - math.lgamma(i + 1)
                                             - math.lgamma(65 - i) for i in range(65)]))
        for ell in (0, 1, 63, 64):
            assert float(pmf[ell]) == pytest.approx(ideal[ell], rel=1e-12)
        assert law.certificate <= 1.0


@pytest.mark.statistical
def test_sampler_matches_sampled_pmf(rng: np.random.Generator) -> None:
    """Chi-square of 200 000 sampled distances against ``sampled_pmf`` (cells with expectation
    below 5 pooled; α = 1e-6), and each coordinate flipped equally often. Power: a cell of
    expectation 1000 off by 20 % gives a statistic of 40 on its own, far beyond the critical
    value of a ~30-cell test at α = 1e-6 (≈ 85) when several cells move."""
    for mode, k, eps in (("auto", 64, 1.0), ("futurerand", 40, 1.0), ("rr", 8, 0.5)):
        law = distance_law(mode, k, eps)
        n = 200_000
        v = law.sample(n, rng=rng)
        assert set(np.unique(v)) <= {-1, 1}
        ell = (v == -1).sum(axis=1)
        pmf = law.distance_pmf
        obs = np.bincount(ell, minlength=k + 1)
        keep = pmf * n >= 5
        o = np.append(obs[keep], obs[~keep].sum())
        e = np.append(pmf[keep] * n, pmf[~keep].sum() * n)
        o, e = o[e > 0], e[e > 0]
        assert stats.chi2.sf(float(((o - e) ** 2 / e).sum()), len(o) - 1) > ALPHA
        flips = (v == -1).sum(axis=0)
        chi2c = float(((flips - flips.mean()) ** 2 / flips.mean()).sum())
        assert stats.chi2.sf(chi2c, k - 1) > ALPHA  # conservative: flips negatively correlated


def _keys(n: int, rng: np.random.Generator) -> list[DeviceKey]:
    """n device keys with seeded secrets (one per simulated device)."""
    return [DeviceKey(bytes(rng.bytes(32)), "audit", seeded=True) for _ in range(n)]


def _keyed_vectors(law, n: int, rng: np.random.Generator) -> np.ndarray:
    """The vector v of n devices, each from its own secret (purpose "vector")."""
    return np.array([k.stream("vector").distance_vector(law.cumulative, law.k)
                     for k in _keys(n, rng)], dtype=np.int8)


def _chi2_p(obs: np.ndarray, pmf: np.ndarray, n: int) -> float:
    keep = pmf * n >= 5
    o = np.append(obs[keep], obs[~keep].sum())
    e = np.append(pmf[keep] * n, pmf[~keep].sum() * n)
    o, e = o[e > 0], e[e > 0]
    return float(stats.chi2.sf(float(((o - e) ** 2 / e).sum()), len(o) - 1))


@pytest.mark.statistical
def test_keyed_vector_matches_sampled_pmf(rng: np.random.Generator) -> None:
    """The device's keyed vector over 20 000 secrets: distance chi-square against the exact
    ``sampled_pmf`` and every coordinate equally often −1 (α = 1e-6 each)."""
    for mode, k, eps in (("auto", 16, 1.0), ("futurerand", 8, 1.0), ("rr", 4, 0.5)):
        law = distance_law(mode, k, eps)
        n = 20_000
        v = _keyed_vectors(law, n, rng)
        ell = (v == -1).sum(axis=1)
        assert _chi2_p(np.bincount(ell, minlength=k + 1), law.distance_pmf, n) > ALPHA
        flips = (v == -1).sum(axis=0)
        if flips.sum():
            chi2c = float(((flips - flips.mean()) ** 2 / flips.mean()).sum())
            assert stats.chi2.sf(chi2c, k - 1) > ALPHA


@pytest.mark.statistical
def test_keyed_order_coins_and_keep_bits_exact(rng: np.random.Generator) -> None:
    """Order uniform on 0..log d (chi-square), interval coins fair and the kept change's
    bit kept with probability exactly 1/(1 + e^{−γ}) (two-sided binomial tests), α = 1e-6."""
    n = 20_000
    keys = _keys(n, rng)
    orders = np.array([k.stream("order").uniform_below(7) for k in keys])
    assert _chi2_p(np.bincount(orders, minlength=7), np.full(7, 1 / 7), n) > ALPHA
    heads = sum(k.stream("coin", 3).coin() == 1 for k in keys)
    assert stats.binomtest(int(heads), n, 0.5).pvalue > ALPHA
    for eps in (0.1, 1.0, 3.0):
        gamma = epsilon_to_fraction(eps)
        kept = sum(k.stream("keep", 5).keep(gamma) for k in keys)
        p = 1 / (1 + math.exp(-float(gamma)))
        assert stats.binomtest(int(kept), n, p).pvalue > ALPHA


def _cp_loss_lower_bound(x0: int, x1: int, n: int) -> float:
    """ln(p0_lower / p1_upper) from Clopper–Pearson bounds at α/2 each."""
    if x0 == 0:
        return -math.inf
    p0 = stats.beta.ppf(ALPHA / 2, x0, n - x0 + 1)
    p1 = stats.beta.ppf(1 - ALPHA / 2, x1 + 1, n - x1) if x1 < n else 1.0
    return math.log(p0 / p1)


def _best_event(law) -> int:
    """j maximising Pr[ℓ ≤ j] / Pr[ℓ ≥ k − j] with Pr[ℓ ≤ j] ≥ 0.05 (from the exact law)."""
    pmf = [float(p) for p in law.sampled_pmf]
    k = law.k
    best, arg = -1.0, 0
    for j in range(k + 1):
        a, b = sum(pmf[: j + 1]), sum(pmf[k - j:])
        if a >= 0.05 and a / b > best:
            best, arg = a / b, j
    return arg


@pytest.mark.slow
@pytest.mark.parametrize("mode", DISTANCE_MODES)
def test_clopper_pearson_audit_distance_modes(mode: str, rng: np.random.Generator) -> None:
    """Neighbouring inputs x0 = (+1)^k and x1 = (−1)^k (each k changes); the output event
    "y has at most j entries −1" has probability Pr[ℓ(v) ≤ j] under x0 and Pr[ℓ(v) ≥ k − j]
    under x1. 400 000 runs of the device's sampler per input; the lower bound on the loss must
    not exceed ε (α = 1e-6)."""
    k, eps, n = 8, 1.0, 400_000
    law = distance_law(mode, k, eps)
    j = _best_event(law)
    y0 = law.sample(n, rng=rng)  # y = v ⊙ x0 = v
    y1 = -law.sample(n, rng=rng)  # y = v ⊙ x1 = −v
    x0 = int(((y0 == -1).sum(axis=1) <= j).sum())
    x1 = int(((y1 == -1).sum(axis=1) <= j).sum())
    assert _cp_loss_lower_bound(x0, x1, n) <= eps


#: The modes of distinct laws at k = 8, ε = 1 ("auto" picks one of the others, so auditing it
#: again would repeat that mode's audit: same law, same keyed sampler).
KEYED_MODES = [m for i, m in enumerate(DISTANCE_MODES) if all(
    distance_law(m, 8, 1.0).sampled_pmf != distance_law(o, 8, 1.0).sampled_pmf
    for o in DISTANCE_MODES[:i])]


def test_keyed_audit_covers_every_mode() -> None:
    audited = [distance_law(m, 8, 1.0).sampled_pmf for m in KEYED_MODES]
    assert all(distance_law(m, 8, 1.0).sampled_pmf in audited for m in DISTANCE_MODES)


@pytest.mark.slow
@pytest.mark.parametrize("mode", KEYED_MODES)
def test_clopper_pearson_audit_keyed_device(mode: str, rng: np.random.Generator) -> None:
    """As above on the device's keyed sampler: 100 000 device secrets per input (k = 8).

    Power: for the modes whose event attains ε (threshold), an implementation whose event loss
    is ε + 0.125 fails with probability > 0.999 (ε + 0.1: 0.95; 4 000 simulated audits)."""
    k, eps, n = 8, 1.0, 100_000
    law = distance_law(mode, k, eps)
    j = _best_event(law)
    y0 = _keyed_vectors(law, n, rng)
    y1 = -_keyed_vectors(law, n, rng)
    x0 = int(((y0 == -1).sum(axis=1) <= j).sum())
    x1 = int(((y1 == -1).sum(axis=1) <= j).sum())
    assert _cp_loss_lower_bound(x0, x1, n) <= eps


@pytest.mark.slow
def test_clopper_pearson_audit_keyed_erlingsson(rng: np.random.Generator) -> None:
    """The kept change's keyed randomized-response bit: input +1 vs −1, event "output +1",
    100 000 device secrets per input. Power: the event attains ε; a bit whose loss is ε + 0.05
    fails with probability 0.996 (4 000 simulated audits)."""
    eps, n = 1.0, 100_000
    gamma = epsilon_to_fraction(eps)
    ones = sum(k.stream("keep", 1).keep(gamma) for k in _keys(n, rng))
    zeros = sum(not k.stream("keep", 1).keep(gamma) for k in _keys(n, rng))
    assert _cp_loss_lower_bound(int(ones), int(zeros), n) <= eps


@pytest.mark.slow
def test_clopper_pearson_audit_erlingsson(rng: np.random.Generator) -> None:
    """The kept change through exact randomized response: input bit 1 vs 0, event "output 1"."""
    eps, n = 1.0, 2_000_000
    ones = randomized_response(np.ones(n, dtype=np.int8), eps, rng=rng)
    zeros = randomized_response(np.zeros(n, dtype=np.int8), eps, rng=rng)
    assert _cp_loss_lower_bound(int(ones.sum()), int(zeros.sum()), n) <= eps


def _sealed_client(edit) -> str:
    p = make_params(horizon=8, max_changes=3, epsilon=1.0, method="futurerand")
    c = LongitudinalClient(p, rng=1)
    c.step(1)
    outer = json.loads(c.to_json())
    payload = outer["payload"]
    edit(payload["state"])
    return seal_json(payload, kind=outer["kind"], version=outer["version"])  # valid checksum


@pytest.mark.parametrize("edit", [
    lambda st: st.__setitem__("secret", "00" * 31),
    lambda st: st.__setitem__("secret", 5),
    lambda st: st.pop("secret"),
    lambda st: st.__setitem__("seeded", "no"),
    lambda st: st.__setitem__("order", (st["order"] + 1) % 4),  # not the secret's order
    lambda st: st["randomizer"].__setitem__("used", -1),
    lambda st: st.__setitem__("order", 9),
    lambda st: st.__setitem__("t", -1),
    lambda st: st.__setitem__("last_x", 2),
    lambda st: st.__setitem__("kept", [1, 1]),
    lambda st: st.pop("frozen"),
])
def test_tampered_client_state_is_one_data_error(edit) -> None:
    with pytest.raises(DataError) as info:
        LongitudinalClient.from_json(_sealed_client(edit))
    assert "\n" not in str(info.value)


def test_edited_or_corrupt_params_are_one_data_error() -> None:
    p = make_params(horizon=8, max_changes=3, epsilon=1.0, method="threshold")
    outer = json.loads(p.to_json())
    outer["payload"]["epsilon"] = 1000.0
    for text in (json.dumps(outer), p.to_json()[:40], "", "[]"):
        with pytest.raises(DataError):
            ProtocolParams.from_json(text)
    payload = dict(json.loads(p.to_json())["payload"], c_gap=2.0)
    with pytest.raises(DataError):  # resealed with a valid checksum: fields still checked
        ProtocolParams.from_json(seal_json(payload, kind=outer["kind"], version=outer["version"]))


@pytest.mark.parametrize("kwargs", [
    {"epsilon": 1e-9}, {"epsilon": 1e19}, {"epsilon": float("nan")},
    {"horizon": 2**40}, {"horizon": 0}, {"max_changes": 10**6}, {"max_changes": 0},
    {"method": "nope"}, {"start": "2026-13-01", "period": "1d"},
    {"start": "2026-01-01", "period": "1 fortnight"}, {"start": "2026-01-01"},
])
def test_extreme_parameters_one_parameter_error(kwargs: dict) -> None:
    args = {"horizon": 16, "max_changes": 3, "epsilon": 1.0, "method": "threshold",
            **kwargs}
    with pytest.raises(ParameterError) as info:
        make_params(**args)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("mode", ["threshold", "rr", "futurerand", "calibrated", "auto",
                                  "erlingsson"])
def test_large_epsilon_is_certified_not_overflowing(mode: str) -> None:
    """ε = 800 (beyond float exp) builds a certified law, with no overflow."""
    p = make_params(horizon=16, max_changes=3, epsilon=800.0, method=mode)
    assert p.certificate <= 800.0
    assert 0 < p.c_gap <= 1
