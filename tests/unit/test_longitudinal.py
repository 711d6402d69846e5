"""Deterministic tests of dpfreq.longitudinal: worked vectors; Properties I–III of Ohrimenko,
Wirth & Wu (2022)."""

from __future__ import annotations

import itertools
import math
import re
from fractions import Fraction

import numpy as np
import pytest

from dpfreq.errors import ParameterError
from dpfreq.longitudinal import laws, simulate_longitudinal
from dpfreq.longitudinal.dyadic import (
    estimate_from_sums,
    offsets,
    partial_sums,
    prefix_decomposition,
)
from dpfreq.longitudinal.laws import (
    _futurerand_ideal,
    _log_binom,
    distance_law,
    futurerand_law,
    rr_law,
    threshold_law,
)
from dpfreq.longitudinal.simulate import synthetic_changes

MODES = ("rr", "futurerand", "calibrated", "threshold", "auto")


# --- dyadic decomposition -----------------------------------------------------------------
def test_partial_sums_worked_example() -> None:
    x = np.array([[0, 1, 1, 0, 0, 0, 1, 1]])
    assert partial_sums(x, 0).tolist() == [[0, 1, 0, -1, 0, 0, 1, 0]]
    assert partial_sums(x, 1).tolist() == [[1, -1, 0, 1]]
    assert partial_sums(x, 2).tolist() == [[0, 1]]
    assert partial_sums(x, 3).tolist() == [[1]]
    s = {h: partial_sums(x, h)[0] for h in range(4)}
    for t in range(1, 9):
        assert sum(s[h][j - 1] for h, j in prefix_decomposition(t)) == x[0, t - 1]
    assert prefix_decomposition(7) == [(0, 7), (1, 3), (2, 1)]


def test_noise_free_identity_protocol() -> None:
    """Identity randomizer, c_gap = 1, every user reports every order: f̂ = f exactly."""
    x = synthetic_changes(300, 32, 5, rng=3)
    off = offsets(32)
    sums = np.zeros(63, dtype=np.int64)
    for h in range(6):
        sums[off[h] : off[h + 1]] = partial_sums(x, h).sum(axis=0)
    est = estimate_from_sums(sums, 32, 1.0)
    assert np.array_equal(est, x.sum(axis=0).astype(float))


# --- CR(1^k) tables ------------------------------------------------------------------------
def test_worked_example_k2() -> None:
    law = futurerand_law(2, 1.0)
    assert law.params["epsilon_prime"] == pytest.approx(0.141421, abs=1e-6)
    assert law.params["LB"] == pytest.approx(-1.899020, abs=1e-6)
    assert law.params["UB"] == pytest.approx(0.964674, abs=1e-6)
    assert np.exp(law.log_q) == pytest.approx([0.286542, 0.237819, 0.237819], abs=1e-6)
    assert law.distance_pmf == pytest.approx([0.286542, 0.475638, 0.237819], abs=1e-6)
    assert law.c_gap == pytest.approx(0.048723, abs=1e-6)
    assert law.certificate == pytest.approx(0.186376, abs=1e-6)


def test_worked_example_k3() -> None:
    law = futurerand_law(3, 1.0)
    assert np.exp(law.log_q) == pytest.approx([0.147898, 0.131769, 0.114199, 0.114199], abs=1e-6)
    assert law.distance_pmf == pytest.approx([0.147898, 0.395307, 0.342596, 0.114199], abs=1e-6)
    assert law.c_gap == pytest.approx(0.051270, abs=1e-6)
    assert law.certificate == pytest.approx(0.258582, abs=1e-6)


@pytest.mark.parametrize(
    ("k", "fr", "rr", "thr"),
    [
        (1, 0.09967, 0.46212, 0.46212),
        (8, 0.02679, 0.06242, 0.14464),
        (64, 0.01010, 0.00781, 0.04986),
        (1024, 0.00259, 0.00049, 0.01242),
    ],
)
def test_probability_table(k: int, fr: float, rr: float, thr: float) -> None:
    assert futurerand_law(k, 1.0).c_gap == pytest.approx(fr, abs=6e-6)
    assert rr_law(k, 1.0).c_gap == pytest.approx(rr, abs=6e-6)
    assert threshold_law(k, 1.0).c_gap == pytest.approx(thr, abs=6e-6)


# --- exact enumeration of the online randomizer ---------------------------------------------
def _online_prob(law, x: tuple[int, ...], y: tuple[int, ...]) -> float:
    """Pr[R(x) = y] of the online randomizer: zeros are coins, non-zero c uses v[c]."""
    k = law.k
    nz = [i for i, xi in enumerate(x) if xi != 0]
    s = len(nz)
    pattern = [y[i] * x[i] for i in nz]  # required v[1..s]
    ell_s = sum(1 for p in pattern if p == -1)
    # marginal of v[1..s]: sum over the remaining k − s coordinates
    q = [Fraction(w, law.total) for w in law.weights]  # the law that is sampled
    marg = sum(math.comb(k - s, a) * q[ell_s + a] for a in range(k - s + 1))
    return float(Fraction(1, 2 ** (len(x) - s)) * marg)


def _enumerate(law, length: int):
    probs = []
    inputs = [
        x for x in itertools.product((-1, 0, 1), repeat=length) if sum(v != 0 for v in x) <= law.k
    ]
    outputs = list(itertools.product((-1, 1), repeat=length))
    for x in inputs:
        p = np.array([_online_prob(law, x, y) for y in outputs])
        assert p.sum() == pytest.approx(1.0, abs=1e-12)
        for i in range(length):
            plus = sum(pi for pi, y in zip(p, outputs, strict=False) if y[i] == 1)
            if x[i] == 0:
                assert plus == pytest.approx(0.5, abs=1e-12)  # Property III
            else:
                agree = plus if x[i] == 1 else 1 - plus
                assert 2 * agree - 1 == pytest.approx(law.c_gap, abs=1e-12)  # Property II
        probs.append(p)
    allp = np.concatenate(probs)
    return allp.min(), allp.max()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("length", "k"), [(4, 3), (5, 2), (3, 3), (6, 1)])
def test_properties_by_enumeration(mode: str, length: int, k: int) -> None:
    law = distance_law(mode, k, 1.0)
    pmin, pmax = _enumerate(law, length)
    assert math.log(pmax / pmin) <= 1.0 + 1e-12  # Property I
    assert math.log(pmax / pmin) == pytest.approx(law.certificate, abs=1e-9)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("k", [1, 2, 5, 8, 12])
@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_certificate_le_eps(mode: str, k: int, eps: float) -> None:
    """ln(p_max/p_min) of the whole randomizer equals the law's and is ≤ ε."""
    law = distance_law(mode, k, eps)
    assert law.certificate <= eps * (1 + 1e-12)
    assert np.exp(_log_binom(k) + law.log_q).sum() == pytest.approx(1.0, abs=1e-12)
    assert law.c_gap > 0


def test_full_online_vectors() -> None:
    law = futurerand_law(3, 1.0)
    x = (1, -1, 0, 1)
    p = {y: _online_prob(law, x, y) for y in itertools.product((-1, 1), repeat=4)}
    assert p[(1, -1, 1, 1)] == pytest.approx(0.073949, abs=1e-6)
    assert p[(-1, -1, 1, 1)] == pytest.approx(0.065885, abs=1e-6)
    assert p[(-1, 1, -1, -1)] == pytest.approx(0.057099, abs=1e-6)
    pmin, pmax = _enumerate(law, 4)
    assert pmin == pytest.approx(0.05709934, abs=1e-8)
    assert pmax == pytest.approx(0.07394891, abs=1e-8)
    assert pmax / pmin == pytest.approx(1.295092, abs=1e-6)


def test_independent_rr_vectors() -> None:
    law = rr_law(3, 1.0)
    x = (1, -1, 0, 1)
    p = [_online_prob(law, x, y) for y in itertools.product((-1, 1), repeat=4)]
    assert min(p) == pytest.approx(0.036369, abs=1e-6)
    # from the rounded keep probability 0.58257 one gets 0.098860; exact is 0.0988587
    keep = math.exp(1 / 3) / (1 + math.exp(1 / 3))
    assert max(p) == pytest.approx(0.5 * keep**3, rel=1e-12)
    assert max(p) == pytest.approx(0.098860, abs=2e-6)
    assert max(p) / min(p) == pytest.approx(math.e, rel=1e-12)
    assert law.c_gap == pytest.approx(0.165140, abs=1e-6)


def test_resampling_inside_annulus_fails_property_one() -> None:
    """Pitfall 1: resampling inside the annulus leaves far outputs at zero (infinite loss)."""
    k, eps = 40, 1.0
    good_log_q, params = _futurerand_ideal(k, eps, 5.0)
    good = futurerand_law(k, eps)
    lb, ub = params["LB"], params["UB"]
    ell = np.arange(k + 1)
    inside = (ell >= lb) & (ell <= ub)
    assert not inside.all()
    # wrong version: the mass is kept only inside the annulus
    log_w = np.where(inside, good_log_q, -np.inf)
    with pytest.raises(ParameterError, match="exceeds epsilon"):
        laws._build("bad", k, eps, log_w, {})
    assert good.certificate <= eps


def test_refuses_bad_parameters() -> None:
    with pytest.raises(ParameterError):
        futurerand_law(0, 1.0)
    with pytest.raises(ParameterError):
        distance_law("nope", 3, 1.0)
    with pytest.raises(ParameterError):
        simulate_longitudinal(devices=10, horizon=8, max_changes=2, epsilon=-1.0,
                              method="auto")
    # 3e6 devices' change times fit (about 0.6 GB) but order 0's fair coins over 2^24 periods
    # need terabytes: one line before anything is drawn, not a MemoryError
    with pytest.raises(ParameterError, match=r"^devices of simulate_longitudinal must be small "
                       r"enough for the simulated devices' change times and reports to fit"):
        simulate_longitudinal(devices=3_000_000, horizon=1 << 24, max_changes=2, epsilon=1.0,
                              method="rr", rng=0)


def test_simulation_shapes_and_padding() -> None:
    rel = simulate_longitudinal(
        devices=200, horizon=12, max_changes=3, epsilon=1.0, method="threshold", rng=1,
        start="2026-03-01", period="1d",
    )
    assert rel.horizon == 12
    assert rel.mechanism_params["padded_horizon"] == 16
    assert rel.value.shape == (12,)
    assert rel.unit == "device"
    assert np.all((rel.value >= 0) & (rel.value <= 200))
    table = rel.table()
    assert str(table["date"][0]) == "2026-03-01"
    assert str(table["date"][11]) == "2026-03-12"
    assert rel.to_pandas().shape[0] == 12
    assert rel.truth is not None
    assert rel.mechanism_params["method"] == "threshold"
    assert rel.to_json()
    lg1 = 5
    assert rel.sd[0] == pytest.approx(math.sqrt(200 * lg1 * 1) / rel.mechanism_params["c_gap"])


def test_sparse_change_times_match_dense_partial_sums() -> None:
    from dpfreq.longitudinal.simulate import (
        _sparse_events,
        _truth_from_times,
        synthetic_change_times,
    )

    times = synthetic_change_times(300, 32, 6, rng=2)
    x = np.zeros((300, 33), dtype=np.int64)
    for u in range(300):  # reference: X[t] = parity of the number of change times <= t
        for t in times[u]:
            x[u, t] ^= 1
    x = np.cumsum(x[:, 1:], axis=1) & 1
    assert np.array_equal(_truth_from_times(times, 32), x.sum(axis=0))
    for h in range(6):
        rows, j, s, rank = _sparse_events(times, h)
        dense = np.zeros((300, 32 >> h), dtype=np.int64)
        dense[rows, j - 1] = s
        assert np.array_equal(dense, partial_sums(x, h))
        assert np.array_equal(rank, np.cumsum(dense != 0, axis=1)[rows, j - 1])


def test_matrix_with_too_many_changes_is_frozen() -> None:
    """Pitfall 4: rows with > k changes are frozen after their k-th change (as the client does);
    ``truth`` stays the real data."""
    from dpfreq.longitudinal.simulate import freeze_after_k_changes

    x = np.tile(np.array([0, 1] * 8), (50, 1))  # 15 changes, k = 2
    frozen = freeze_after_k_changes(x, 2)
    assert frozen[0].tolist() == [0, 1, 0] + [0] * 13
    assert freeze_after_k_changes(x, 3)[0].tolist() == [0, 1, 0, 1] + [1] * 12
    assert np.array_equal(freeze_after_k_changes(x, 15), x)
    rel = simulate_longitudinal(horizon=16, max_changes=2, epsilon=1.0, method="rr", data=x,
                                rng=1)
    assert np.isfinite(rel.value).all()
    assert np.array_equal(rel.truth, x.sum(axis=0))


@pytest.mark.parametrize("mode", MODES)
def test_property_one_all_lengths_by_reduction(mode: str) -> None:
    """Exact Property I/II for every k ≤ 12 and L ≤ 10 (no sampling).

    Pr[R(x) = y] depends only on the support size s of x and the number ℓ_s of disagreeing
    non-zero coordinates: ``2^{−(L−s)}·Σ_a C(k−s, a) q(ℓ_s + a)`` (the brute force above checks
    this formula against full enumeration for small (L, k)). Every (s, ℓ_s) with s ≤ min(k, L)
    occurs, so the extremes over these cells are the global p_min, p_max.
    """
    for k in range(1, 13):
        law = distance_law(mode, k, 1.0)
        q = np.exp(law.log_q)
        for length in range(1, 11):
            vals = []
            for s in range(min(k, length) + 1):
                for ell in range(s + 1):
                    marg = sum(math.comb(k - s, a) * q[ell + a] for a in range(k - s + 1))
                    vals.append(0.5 ** (length - s) * marg)
            assert math.log(max(vals) / min(vals)) <= 1.0 + 1e-12
        m1 = sum(math.comb(k - 1, a) * q[a] for a in range(k))  # Pr[v_1 = +1]
        assert 2 * m1 - 1 == pytest.approx(law.c_gap, abs=1e-12)


@pytest.mark.parametrize(("d", "k"), [(4, 1), (4, 2), (8, 3)])
def test_erlingsson_full_epsilon_is_private_by_enumeration(d: int, k: int) -> None:
    """Full ε for the RR is ε-LDP over whole transcripts (h, y), exactly."""
    eps = 1.0
    keep = math.exp(eps) / (1 + math.exp(eps))
    lg1 = d.bit_length()
    seqs = [
        x
        for x in itertools.product((0, 1), repeat=d)
        if sum(a != b for a, b in zip((0, *x[:-1]), x, strict=True)) <= k
    ]
    table = []
    for x in seqs:
        deriv = np.diff(np.array((0, *x)))
        probs = []
        for h in range(lg1):
            length = d >> h
            for y in itertools.product((-1, 1), repeat=length):
                p = 0.0
                for r in range(1, k + 1):
                    nz = np.flatnonzero(deriv)
                    xpp = np.zeros(d, dtype=int)
                    if len(nz) >= r:
                        xpp[nz[r - 1]] = deriv[nz[r - 1]]
                    s = partial_sums(np.cumsum(xpp)[None, :], h)[0]
                    pr = 1.0
                    for si, yi in zip(s, y, strict=True):
                        pr *= 0.5 if si == 0 else (keep if si == yi else 1 - keep)
                    p += pr / k
                probs.append(p / lg1)
        table.append(probs)
    t = np.array(table)
    loss = np.log(t.max(axis=0) / t.min(axis=0)).max()
    assert loss <= eps + 1e-12
    assert loss > 0.5 * eps  # the budget is actually used (not the ε/2 of one public version)


def test_a_vacuous_estimate_suggests_the_smallest_epsilon_of_its_plan() -> None:
    """The ε a vacuous estimate suggests is found on the statement it makes (plan_longitudinal:
    Hoeffding or Bernstein, the exact gaps): at it the plan is not vacuous (some period's
    interval is narrower than [0, devices] whatever the data), one 3-digit step below it is."""
    from dpfreq._epsilon_search import step3
    from dpfreq.longitudinal import plan_longitudinal

    n, d, k = 1000, 30, 1
    est = simulate_longitudinal(devices=n, horizon=d, max_changes=k, epsilon=0.2,
                                method="auto", rng=1)
    assert est.error.vacuous
    found = re.search(r"epsilon >= ([0-9.]+) would make them narrower at one period at least, "
                      "whatever the data", est.error.description)
    assert found is not None, est.error.description
    eps = float(found.group(1))

    def vacuous(e: float) -> bool:
        return bool(plan_longitudinal(horizon=d, max_changes=k, epsilon=e, method="auto",
                                      devices=n).vacuous)

    assert not vacuous(eps)
    assert vacuous(float(f"{eps - step3(eps * (1 - 1e-9)):.3g}"))  # one 3-digit step below
