"""Statistical checks of the windows noise (the node noise laws of the tree mechanisms).

α = 1e-6 per assertion; sample sizes from the power calculations written in each test.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpfreq.noise import discrete_laplace_pmf
from dpfreq.windows.noise.keyed import KeyedDiscreteLaplace
from dpfreq.windows.structures.base import build_structure

pytestmark = pytest.mark.statistical

ALPHA = 1e-6


@pytest.mark.parametrize("gamma", [
    Fraction(1, 2),
    Fraction(7, 3),  # short table
    # the table holds 4096 thresholds, so Pr[|Z| >= 4096] = 2α^4096/(1+α) ≈ 0.44 here: the
    # tail path (geometric tables on further AES words, several levels deep) carries much mass
    Fraction(1, 5000),
])
def test_lazy_noise_matches_discrete_laplace_pmf(seed, gamma):
    """Chi-square goodness of fit of the keyed sampler against the exact pmf, on 60 bins of
    (nearly) equal exact probability (single values where the pmf is lumpy).

    Power: n = 2·10^5 draws; a change of γ by 5% moves the mass of the outer bins by about 5%
    of their size, a non-centrality λ well above 100, so the test at α = 1e-6 has power ≈ 1.
    """
    key = seed.to_bytes(8, "little") * 4
    n = 200_000
    z = KeyedDiscreteLaplace(key, 1, gamma).noise(np.arange(n))
    half = int(60 / float(gamma)) + 50  # Pr[|Z| > half] < e^-60
    support = np.arange(-half, half + 1)
    cdf = np.cumsum(discrete_laplace_pmf(support, gamma))
    cdf /= cdf[-1]
    # right edges: the first support value where the cdf passes each multiple of 1/60
    edges = np.unique(support[np.searchsorted(cdf, np.arange(1, 60) / 60.0)])
    bins = np.searchsorted(edges, z, side="left")  # bin i holds (edges[i-1], edges[i]]
    obs = np.bincount(bins, minlength=edges.size + 1).astype(np.float64)
    at = np.concatenate(([0.0], cdf[np.searchsorted(support, edges)], [1.0]))
    exp = np.diff(at) * n
    assert exp.min() >= 5
    chi2 = float(np.sum((obs - exp) ** 2 / exp))
    assert stats.chi2.sf(chi2, obs.size - 1) > ALPHA


def exact_moments(weights, gamma):
    """E[S²] and E[S⁴] of S = Σ a_v Z_v, Z_v i.i.d. DLap(γ), from the exact single-node pmf."""
    z = np.arange(-2000, 2001, dtype=np.float64)
    p = discrete_laplace_pmf(z, gamma)
    p = p / p.sum()
    m2 = float(np.sum(p * z**2))
    m4 = float(np.sum(p * z**4))
    a2 = float(np.sum(weights**2))
    a4 = float(np.sum(weights**4))
    return m2 * a2, a4 * (m4 - 3 * m2**2) + 3 * (m2 * a2) ** 2


@pytest.mark.parametrize(
    ("family", "method", "level", "width", "query", "extra"),
    [
        pytest.param("all", "tree2d", "event", None, (5, 13), {}, marks=pytest.mark.slow),
        ("rolling", "blocks", "event", 4, (7, 10), {}),
        ("cumulative", "tree", "event", None, (1, 15), {}),
        ("cumulative", "tree", "item", None, (1, 11), {"branching": 3}),  # least squares
        ("cumulative", "tree", "event", None, (1, 14), {"branching": 4, "top": True}),
        ("cumulative", "tree", "item_replace", None, (1, 1000),
         {"branching": 16, "horizon": 4096}),  # too large for least squares: plain cover
        ("cumulative", "simple", "event", None, (1, 9), {}),
        ("all", "per_start", "item", None, (3, 14), {}),
    ],
)
def test_answer_variance_equals_nodes_times_node_variance(seed, family, method, level, width,
                                                        query, extra):
    """Mean of the squared answer noise over independent keys equals ``#nodes · Var[DLap]``
    (``Var[DLap]·Σa²`` for the consistency-post-processed cumulative tree).

    Test statistic: z = (mean(S²) − E[S²]) / sqrt((E[S⁴] − E[S²]²)/n), exact moments from the
    pmf (E[S⁴] <= 6 E[S²]² for weighted sums of discrete Laplace), two-sided at
    α = 1e-6 (|z| > 4.89). Power: with n = 1500 and E[S⁴] <= 6 E[S²]², a
    variance wrong by a factor 1.5 (the smallest calibration error that matters, e.g. a wrong
    level count) gives a drift of 0.5·sqrt(1500/5) ≈ 8.7 standard errors: power > 0.9999.
    """
    n = 1500
    horizon = extra.get("horizon", 16)
    branching = extra.get("branching", 2)
    top = extra.get("top", False)
    s = build_structure(family, method, 2, horizon, level, Fraction(1), 0.0, width,
                        branching=branching, top=top)
    # raise γ to about 0.4 by scaling ε so that the exact pmf convolution stays small
    scale = Fraction(2, 5) / s.gamma
    s = build_structure(family, method, 2, horizon, level, Fraction(1) * scale, 0.0, width,
                        branching=branching, top=top)
    if family == "cumulative":
        assert s.consistent == (method != "simple" and horizon < 4096)
    t1, t2 = query
    if s.consistent:  # least-squares post-processing: a weighted sum of node noises
        weights = np.asarray(s.weights()[int(s._prefix_index(t1, t2))])
    else:
        weights = np.ones(int(s.nodes(t1, t2)))
    vals = np.empty(n, dtype=np.float64)
    key = seed.to_bytes(8, "little") * 4
    for i in range(n):
        s.attach(key, 10_000 + i)
        vals[i] = float(s.noise(t1, t2))
    e2, e4 = exact_moments(weights, s.gamma)
    assert e2 == pytest.approx(float(s.variance(t1, t2)), rel=1e-9)
    z = (np.mean(vals**2) - e2) / np.sqrt((e4 - e2**2) / n)
    assert abs(z) < stats.norm.isf(ALPHA / 2)


@pytest.mark.parametrize(("target", "drawn"), [(5.5, 6), (7, 7), (536, 536)])
def test_lazy_gaussian_matches_discrete_gaussian_pmf(seed, target, drawn):
    """Chi-square goodness of fit of the keyed discrete Gaussian against its exact pmf: a float
    target rounded to σ² = t·u (5.5 → 6), and integers drawn as given (7 and 536 are not of
    the form t·u with t = ⌊√σ²⌋ + 1: the acceptance exponent is (t|Y| − σ²)²/(2σ²t²)).

    Power: n = 10^5 draws; at σ² = 6 a σ² off by 10% moves the mass at 0 by ≈ 5% of 0.16,
    non-centrality far above 100: power ≈ 1 at α = 1e-6. (At σ² = 536 a 3% change of σ² is
    beyond this test's power; :func:`test_keyed_gaussian_variance_at_an_integer_sigma2` checks
    the variance there.)
    """
    from dpfreq.windows.noise.keyed import KeyedDiscreteGaussian

    key = seed.to_bytes(8, "little") * 4
    src = KeyedDiscreteGaussian(key, 3, target)
    s2 = src.sigma2
    assert s2 == drawn
    z = src.noise(np.arange(100_000))
    reach = int(12 * np.sqrt(s2)) + 1
    support = np.arange(-reach, reach + 1)
    pmf = np.exp(-(support**2) / (2 * s2))
    pmf /= pmf.sum()
    keep = pmf * z.size >= 5
    lo, hi = support[keep][0], support[keep][-1]
    obs = np.array([np.sum(z <= lo)] + [np.sum(z == v) for v in range(lo + 1, hi)]
                   + [np.sum(z >= hi)], dtype=np.float64)
    tail = pmf[support <= lo].sum()
    exp = np.concatenate(([tail], pmf[(support > lo) & (support < hi)], [tail])) * z.size
    chi2 = float(np.sum((obs - exp) ** 2 / exp))
    assert stats.chi2.sf(chi2, obs.size - 1) > ALPHA


def test_keyed_gaussian_variance_at_an_integer_sigma2(seed):
    """σ² = 536 drawn as given (not of the form t·u): the mean of Z² over n = 3·10^5 keyed
    draws against the exact second moment, with the exact fourth moment for its standard
    error (both from the pmf on |z| <= 12σ; the mass beyond is below 1e-30).

    Power: σ² = 552 (what rounding to t·u drew before) has E[Z²] 3% higher; the standard error
    of the mean of Z² is √(2/n)·σ² ≈ 0.26 % of σ², so the shift is ≈ 11.6 standard errors
    against a two-sided threshold of 4.9 at α = 1e-6: power > 0.999.
    """
    from dpfreq.windows.noise.keyed import KeyedDiscreteGaussian

    n, s2 = 300_000, 536
    src = KeyedDiscreteGaussian(seed.to_bytes(8, "little") * 4, ("variance", 1), s2)
    assert src.sigma2 == s2
    z = src.noise(np.arange(n)).astype(np.float64)
    reach = int(12 * np.sqrt(s2)) + 1
    support = np.arange(-reach, reach + 1, dtype=np.float64)
    pmf = np.exp(-(support**2) / (2 * s2))
    pmf /= pmf.sum()
    e2, e4 = float(np.sum(pmf * support**2)), float(np.sum(pmf * support**4))
    stat = (np.mean(z**2) - e2) / np.sqrt((e4 - e2**2) / n)
    assert abs(stat) < stats.norm.isf(ALPHA / 2)


@pytest.mark.slow
def test_gaussian_answer_variance(seed):
    """Same z-test as above for a Gaussian 2d-tree answer: E[S²] = m σ², E[S⁴] = 3 m² σ⁴
    (normal approximation of the fourth moment, exact to far below the test's resolution for
    σ² >= 4). Power as above with n = 1500: drift 0.5·sqrt(1500/2) ≈ 14 standard errors."""
    n = 1500
    s = build_structure("all", "tree2d", 1, 16, "event", Fraction(1), 0.0, rho=2.0,
                        noise_kind="gaussian")
    m = int(s.nodes(5, 13))
    key = seed.to_bytes(8, "little") * 4
    vals = np.empty(n)
    for i in range(n):
        s.attach(key, 20_000 + i)
        vals[i] = float(s.noise(5, 13))
    e2 = m * s.node_variance
    e4 = 3 * e2**2
    z = (np.mean(vals**2) - e2) / np.sqrt((e4 - e2**2) / n)
    assert abs(z) < stats.norm.isf(ALPHA / 2)
