"""Statistical tests of dpfreq.longitudinal (α ≤ 1e-6 per assertion, never retried)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpfreq.longitudinal import simulate_longitudinal
from dpfreq.longitudinal.laws import distance_law
from dpfreq.longitudinal.simulate import synthetic_changes

ALPHA = 1e-6
pytestmark = pytest.mark.statistical


@pytest.mark.parametrize("mode", ["rr", "futurerand", "calibrated", "threshold"])
@pytest.mark.parametrize("k", [8, 40])
def test_sampler_matches_exact_distance_law(mode: str, k: int, rng: np.random.Generator) -> None:
    """Chi-square of sampled distances vs the exact law; and uniformity of the flipped subset.

    Power: N = 200 000 draws. A sampler off by total variation 0.01 has non-centrality
    λ = N·Σδ²/p ≥ N·(2·TV)² = 80 (Cauchy–Schwarz); at ≤ 40 df the α = 1e-6 critical value is
    ≈ 98 and the power is ≈ 0.87.
    """
    law = distance_law(mode, k, 1.0)
    n = 200_000
    v = law.sample(n, rng=rng)
    ell = (v == -1).sum(axis=1)
    pmf = law.distance_pmf
    obs = np.bincount(ell, minlength=k + 1)
    keep = pmf * n >= 5  # pool cells with tiny expectation
    o = np.append(obs[keep], obs[~keep].sum())
    e = np.append(pmf[keep] * n, pmf[~keep].sum() * n)
    o, e = o[e > 0], e[e > 0]
    chi2 = float(((o - e) ** 2 / e).sum())
    assert stats.chi2.sf(chi2, len(o) - 1) > ALPHA
    # every coordinate flipped equally often (uniform subset given the distance)
    flips = (v == -1).sum(axis=0)
    chi2c = float(((flips - flips.mean()) ** 2 / flips.mean()).sum())
    # flips of one vector are negatively correlated, so this statistic is conservative
    assert stats.chi2.sf(chi2c, k - 1) > ALPHA


@pytest.mark.parametrize(
    "mode", ["rr", "futurerand", "calibrated", "threshold", "erlingsson", "threshold-per-order"]
)
def test_unbiased_and_exact_variance(mode: str, seed: int) -> None:
    """Mean error ≈ 0 and Var(f̂_t) = n(log d+1)popcount(t)/c_gap² − f_t.

    R = 400 replications on fixed data (n = 2000, d = 16, k = 3). f̂_t is a sum of 2000
    independent bounded terms, so it is close to normal; the mean test (Bonferroni over 16
    periods, z = 6.1) detects a bias of 0.31 sd, and the variance test (chi-square on R − 1
    df, Bonferroni over 16 periods) detects a variance ratio outside ≈ [0.68, 1.4].
    """
    reps, d = 400, 16
    data = synthetic_changes(2000, d, 3, rng=seed)
    errs = np.empty((reps, d))
    outside = np.zeros((reps, d), dtype=bool)
    band_miss = np.zeros(reps, dtype=bool)
    ss = np.random.SeedSequence(seed)
    for i, child in enumerate(ss.spawn(reps)):
        rel = simulate_longitudinal(
            horizon=d,
            max_changes=3,
            epsilon=1.0,
            method=mode.removesuffix("-per-order"),
            per_order_sparsity=mode.endswith("-per-order"),
            data=data,
            rng=np.random.default_rng(child),
        )
        errs[i] = rel.unclamped - rel.truth  # the unclamped estimate is unbiased
        outside[i] = (rel.truth < rel.error.lower) | (rel.truth > rel.error.upper)
        band_miss[i] = np.any((rel.truth < rel.error.band_lower)
                              | (rel.truth > rel.error.band_upper))
    var = rel.exact_sd**2
    if mode.endswith("-per-order"):  # orders 3, 4 have L = 2, 1 < k = 3: larger gaps there
        gaps = rel.mechanism_params["c_gap_per_order"]
        assert gaps[3] > gaps[0]
        assert gaps[4] > gaps[3]
    a = ALPHA / d
    z = errs.mean(axis=0) / np.sqrt(var / reps)
    assert np.all(np.abs(z) < stats.norm.isf(a / 2))
    # the band fails in at most a β fraction of runs, each period's interval too; failures are
    # stochastically below Binomial(R, β) (one-sided test at α, Bonferroni over d + 1 tests)
    beta = 1 - float(rel.error.confidence)
    assert beta == pytest.approx(0.05)
    assert int(band_miss.sum()) <= stats.binom.isf(ALPHA / (d + 1), reps, beta)
    assert np.all(outside.sum(axis=0) <= stats.binom.isf(ALPHA / (d + 1), reps, beta))
    chi = (reps - 1) * errs.var(axis=0, ddof=1) / var
    assert np.all(chi > stats.chi2.ppf(a / 2, reps - 1))
    assert np.all(chi < stats.chi2.isf(a / 2, reps - 1))


def test_fair_coin_sums_exact_binomial(rng: np.random.Generator) -> None:
    """fair_coin_sums(m) = 2·Binomial(m, 1/2) − m: chi-square against the exact pmf per m.

    Power: 20 000 draws per m; a coin of bias 1/2 + 0.01 shifts the mean of 2B − m by 0.02·m,
    i.e. 0.02·√m sd, detected with N = 20 000 at α = 1e-6 for every m ≥ 64 tested here.
    """
    from dpfreq.longitudinal.simulate import fair_coin_sums

    for m in (1, 63, 64, 65, 200):
        reps = 20_000
        draws = fair_coin_sums(np.full(reps, m), rng)
        assert np.all((draws + m) % 2 == 0)
        heads = (draws + m) // 2
        pmf = stats.binom.pmf(np.arange(m + 1), m, 0.5)
        obs = np.bincount(heads, minlength=m + 1)
        keep = pmf * reps >= 5
        o = np.append(obs[keep], obs[~keep].sum())
        e = np.append(pmf[keep] * reps, pmf[~keep].sum() * reps)
        o, e = o[e > 0], e[e > 0]
        chi2 = float(((o - e) ** 2 / e).sum())
        assert stats.chi2.sf(chi2, len(o) - 1) > ALPHA
    assert fair_coin_sums(np.zeros(3, dtype=np.int64), rng).tolist() == [0, 0, 0]


@pytest.mark.parametrize("mode", ["threshold", "erlingsson", "futurerand-per-order"])
def test_client_server_pipeline_unbiased(mode: str, rng: np.random.Generator) -> None:
    """Devices (LongitudinalClient) → LongitudinalAggregator: f̂_t − f_t within z = 6.1 exact sd
    for every t (Bonferroni over 8 periods, α = 1e-6), including users with > k changes frozen
    (their truth is the frozen sequence here)."""
    from dpfreq.longitudinal import LongitudinalAggregator, LongitudinalClient, make_params
    from dpfreq.longitudinal.simulate import freeze_after_k_changes

    n, d, k = 4000, 8, 3
    p = make_params(horizon=d, max_changes=k, epsilon=1.0,
                    method=mode.removesuffix("-per-order"),
                    per_order_sparsity=mode.endswith("-per-order"))
    x = rng.integers(0, 2, size=(n, d)).astype(np.int8)
    truth = freeze_after_k_changes(x, k).sum(axis=0)
    agg = LongitudinalAggregator(p)
    rows = []
    for u in range(n):
        c = LongitudinalClient(p, rng=rng)
        agg.enrol([u], [c.order], param_id=p.param_id, protocol_version=c.params.version)
        for xt in x[u]:
            for r in c.step(int(xt)):
                rows.append((u, r["order"], r["interval"], r["bit"]))
    arr = np.array(rows)
    agg.ingest(arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3], param_id=p.param_id)
    est = agg.estimate(confidence=0.95)
    lg1 = p.orders
    t = np.arange(1, d + 1)
    inv2 = sum(((t >> h) & 1) / c**2 for h, c in enumerate(p.c_gaps))
    exact_sd = np.sqrt(n * lg1 * inv2 - truth)
    z = (est.unclamped - truth) / exact_sd
    assert np.all(np.abs(z) < stats.norm.isf(ALPHA / d / 2))
    assert np.all(est.sd >= exact_sd)


def _exact_transcript_law(p, mode: str) -> dict[tuple[int, ...], float]:
    """Exact law of an order-0 device's four reports for X = (1, 1, 0, 0), k = 2: partial sums
    (+1, 0, −1, 0). Distance laws: y = (v1, coin, −v2, coin) with Pr[v] = w(ℓ(v))/N. Erlingsson
    et al.: the kept change r ∈ {1, 2} is uniform and goes through randomized response (keep
    with probability 1/(1 + e^{−γ})), every other report is a coin."""
    import itertools
    import math

    from dpfreq.noise import epsilon_to_fraction

    law: dict[tuple[int, ...], float] = {}
    for y in itertools.product((-1, 1), repeat=4):
        if mode == "erlingsson":
            keep = 1 / (1 + math.exp(-float(epsilon_to_fraction(p.epsilon))))
            first = keep if y[0] == 1 else 1 - keep
            second = keep if y[2] == -1 else 1 - keep
            law[y] = 0.5 * first / 8 + 0.5 * second / 8
        else:
            dl = distance_law(p.method, 2, p.epsilon)
            ell = (y[0] == -1) + (-y[2] == -1)
            law[y] = float(dl.sampled_pmf[ell]) / math.comb(2, ell) / 4
    return law


@pytest.mark.parametrize("mode", ["threshold", "rr", "erlingsson"])
def test_keyed_client_transcript_has_the_exact_law(mode: str, rng: np.random.Generator) -> None:
    """End to end through LongitudinalClient (keyed draws, one secret per device): the joint law
    of an order-0 device's whole transcript, over 24 000 devices (about 8 000 of order 0),
    against its exact law (chi-square, 16 cells), and the order uniform on 0..2."""
    from dpfreq.longitudinal import LongitudinalClient, make_params

    p = make_params(horizon=4, max_changes=2, epsilon=1.0, method=mode)
    law = _exact_transcript_law(p, mode)
    counts = dict.fromkeys(law, 0)
    orders = np.zeros(p.orders, dtype=np.int64)
    for _ in range(24_000):
        c = LongitudinalClient(p, rng=rng)
        orders[c.order] += 1
        if c.order:
            continue
        y = tuple(2 * r["bit"] - 1 for x in (1, 1, 0, 0) for r in c.step(x))
        counts[y] += 1
    n = int(orders[0])
    obs = np.array([counts[y] for y in law], dtype=np.float64)
    exp = np.array([law[y] * n for y in law])
    assert abs(sum(law.values()) - 1) < 1e-12
    assert stats.chi2.sf(float(((obs - exp) ** 2 / exp).sum()), len(law) - 1) > ALPHA
    e = orders.sum() / p.orders
    assert stats.chi2.sf(float(((orders - e) ** 2 / e).sum()), p.orders - 1) > ALPHA
