"""Daily reach at δ > 0: per-window discrete Gaussian noise calibrated to (ε, δ) by its exact
privacy loss distribution (``per_query_gaussian``, issue 47).

* ``auto`` picks it for daily reach over a month at item level (ε = 1, δ = 1e-6) and says why;
* the calibration holds at the σ² found and fails at σ² − 1, both by the library's certified
  PLD and by an independent direct convolution with its own error bounds;
* an exact privacy check on a small enumerable case: three days, every output vector of a box
  holding all but 1e-30 of the mass, every neighbouring shift;
* releases where it is not chosen are the same bytes as without it.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest

from dpfreq.accounting.pld import unit_shifts_delta, unit_shifts_sigma2
from dpfreq.errors import ParameterError
from dpfreq.windows import WindowCountsRelease, plan_window_counts, release_window_counts
from dpfreq.windows.structures import base
from dpfreq.windows.structures.base import build_structure

U = 2.0**-53


def _log(seed: int, horizon: int, items: int = 400, rows: int = 4000):
    gen = np.random.default_rng(seed)
    return gen.integers(0, items, rows), gen.integers(1, horizon + 1, rows)


def _daily(horizon: int = 30, **kw):
    args = {"horizon": horizon, "epsilon": 1.0, "delta": 1e-6, "unit": "item",
            "k_values": [1], "windows": [1], "rng": 3, **kw}
    return release_window_counts(_log(1, horizon), **args)


def test_auto_picks_the_gaussian_for_daily_reach_over_a_month_and_says_why():
    rel = _daily()
    rec = rel.mechanism_params["methods"]["rolling(W=1), k=1"]
    assert rec["method"] == "per_query_gaussian"
    assert rec["noise"] == "gaussian"
    preds = rec["predicted_rmse"]
    assert preds["per_query_gaussian"] == min(preds.values())
    assert preds["per_query_gaussian"] < preds["per_query"]  # the Laplace at ℓ1 = T
    assert rec["why"].startswith("per_query_gaussian: predicted RMSE")
    # against the zCDP route it replaces: the per-window Gaussian calibrated through ρ
    assert "under zCDP accounting (ρ from (ε, δ)) the best would be per_query/gaussian" in \
        rec["why"]
    zcdp = float(rec["why"].rsplit(" at ", 1)[1])
    assert preds["per_query_gaussian"] < 0.85 * zcdp
    detail = rec["detail"]
    # the least certified σ², drawn as it is (the keyed source draws any integer σ²)
    assert detail["sigma2"] == unit_shifts_sigma2(Fraction(1), 1e-6, 30) == 536
    s = rel._state.structures[("rolling(W=1)", 1)]
    assert s.law.sigma2 == s.noise_source(bytes(32), ("rolling(W=1)", 1, 0)).sigma2 == 536
    assert detail["l1_sensitivity"] == 30
    assert "exact privacy loss distribution" in rel.mechanism_params["accounting"]
    plan = plan_window_counts(horizon=30, epsilon=1.0, delta=1e-6, unit="item",
                              k_values=[1], windows=[1])
    assert plan.to_dict()["methods"] == {"rolling(W=1), k=1": "per_query_gaussian"}


def test_not_offered_without_delta_or_where_the_laplace_is_better():
    rel = _daily(delta=0.0)
    assert rel.mechanism_params["methods"]["rolling(W=1), k=1"]["method"] == "per_query"
    with pytest.raises(ParameterError, match="per_query_gaussian needs delta > 0"):
        _daily(delta=0.0, method={1: "per_query_gaussian"})
    event = _daily(unit="event")  # one event moves one day: ℓ2 = ℓ1, the Laplace is better
    preds = event.mechanism_params["methods"]["rolling(W=1), k=1"]["predicted_rmse"]
    assert "per_query_gaussian" not in preds
    week = _daily(unit="event", windows=[7])  # 7 moved windows: the Laplace still wins
    assert "per_query_gaussian" not in week.mechanism_params["methods"][
        "rolling(W=7), k=1"]["predicted_rmse"]
    forced = _daily(unit="event", windows=[7], method={7: "per_query_gaussian"})
    assert forced.mechanism_params["methods"]["rolling(W=7), k=1"]["method"] == \
        "per_query_gaussian"


@pytest.mark.parametrize(("epsilon", "delta", "shifts"),
                         [(Fraction(1), 1e-6, 30), (Fraction(1, 2), 1e-7, 7),
                          (Fraction(2), 1e-5, 365)])
def test_the_calibration_holds_at_sigma2_and_fails_just_below(epsilon, delta, shifts):
    s2 = unit_shifts_sigma2(epsilon, delta, shifts)
    assert s2 > 1
    assert unit_shifts_delta(s2, shifts, epsilon) <= delta
    assert unit_shifts_delta(s2 - 1, shifts, epsilon) > delta


def test_a_budget_too_small_for_the_exact_pld_is_not_calibrated():
    """A σ² whose PLD has too many points to build (small ε, many shifts) is no calibration
    (0: the structure is never chosen, see ``base.Structure.usable``) instead of a memory or
    recursion error (which the search of ``epsilon_for`` over small ε ran into)."""
    assert unit_shifts_sigma2(Fraction(1, 10**4), 1e-9, 365) == 0


def _delta_bounds(sigma2: int, shifts: int, epsilon: float) -> tuple[float, float]:
    """Lower and upper bounds on the exact ``δ(ε)`` of ``shifts`` unit shifts of independent
    discrete Gaussians, by a direct convolution independent of :mod:`dpfreq.accounting.pld`.

    The loss of the vector ``z`` is ``(n − 2S)/(2σ²)`` with ``S = Σ z_i`` (exact on integers),
    so ``δ(ε) = Σ_s Pr[S = s]·(1 − e^{ε − L(s)})_+``. ``Pr[S = s]`` is the ``n``-fold
    convolution of the pmf kept on ``|z| <= R`` (``R = 14σ + 2``); every computed mass is a sum
    of products of non-negative floats, within a relative ``(n·(2R + 1) + 8)·2^-53`` of the
    exact sum of the kept terms. Lower bound: masses normalised by the full normaliser
    (kept sum plus the tail bound), the dropped vectors counted as 0. Upper bound: normalised
    by the kept sum alone, plus the mass of the dropped vectors (at most ``n`` times the
    one-coordinate tail) counted fully."""
    r = int(14 * math.sqrt(sigma2)) + 2
    z = np.arange(-r, r + 1, dtype=np.float64)
    terms = np.exp(-z * z / (2 * sigma2))
    # Σ_{|z| > R} e^{−z²/(2σ²)} <= 2 e^{−(R+1)²/(2σ²)} / (1 − e^{−(R+1)/σ²})
    tail = 2 * math.exp(-((r + 1) ** 2) / (2 * sigma2)) / -math.expm1(-(r + 1) / sigma2)
    kept = float(np.sum(terms))
    pmf = np.ones(1)
    for _ in range(shifts):
        pmf = np.convolve(pmf, terms)
    s = np.arange(pmf.size, dtype=np.float64) - shifts * r  # the values of S
    loss = (shifts - 2 * s) / (2 * sigma2)
    weight = np.where(loss > epsilon, -np.expm1(-(loss - epsilon)), 0.0)
    raw = float(np.sum(pmf * weight))
    # each exp within 2u, n factors; each convolution output a sum of at most 2R + 1
    # products; then the weights, the normalisation and the final sum
    rel = (shifts * (2 * r + 3) + 16 + 2 * int(math.log2(pmf.size) + 1)) * U
    # a weight (1 − e^{ε−L}) is off by at most 4u(|L| + ε + 1) in absolute terms, for every
    # mass (the loss itself and the comparison with ε are within u|L| of the exact ones)
    absolute = 4 * U * (float(np.max(np.abs(loss))) + epsilon + 1)
    lower = (raw * (1 - rel) / (kept + tail) ** shifts * (1 - 4 * shifts * U)) - absolute
    upper = (raw * (1 + rel) / kept ** shifts * (1 + 4 * shifts * U) + absolute
             + shifts * tail / kept)
    return lower, upper


def test_an_independent_convolution_agrees_at_the_boundary():
    """ε = 1, δ = 1e-6, 30 days: the exact δ(ε) at σ² = 536 is at most 1e-6 and at σ² = 535
    above it, each bracketed by bounds computed without the PLD module."""
    s2 = unit_shifts_sigma2(Fraction(1), 1e-6, 30)
    _, upper = _delta_bounds(s2, 30, 1.0)
    lower, _ = _delta_bounds(s2 - 1, 30, 1.0)
    assert upper <= 1e-6 < lower


def test_exact_privacy_of_three_days_over_every_output_and_every_shift():
    """Daily reach over T = 3 days at item level, ε = 1, δ = 1e-3: the release's structure adds
    independent discrete Gaussian noise of the σ² it states to each day. Neighbours (one item
    added or removed, or replaced) move each day by at most one: every shift ``v ∈ {−1, 0,
    1}³``. For each, ``δ_v = Σ_o (P(o) − e^ε P(o − v))_+`` is summed over every output ``o`` of
    the box ``[−R, R]³`` (``P`` the product pmf, ``R = 14σ + 2``) plus the mass outside it,
    with the floats' error bounded and added (upper) or taken off (lower): at the stated σ²
    every δ_v is at most δ, at σ² − 1 the largest exceeds it (the calibration is tight on
    this case too)."""
    rel = _daily(horizon=3, delta=1e-3, method={1: "per_query_gaussian"})
    s = rel._state.structures[("rolling(W=1)", 1)]
    assert s.method == "per_query_gaussian"
    assert s.calibration.l1_sensitivity == 3
    eps, delta = float(s.eps), float(s.delta)
    assert (eps, delta) == (1.0, 1e-3)
    shifts = [np.array(v) for v in np.ndindex(3, 3, 3) if v != (1, 1, 1)]

    def bounds(sigma2: int) -> tuple[float, float]:
        """(lower, upper) bounds on the largest ``δ_v`` over the shifts."""
        r = int(14 * math.sqrt(sigma2)) + 2
        z = np.arange(-r - 1, r + 2, dtype=np.float64)  # one more each side for o − v
        terms = np.exp(-z * z / (2 * sigma2))
        tail = 2 * math.exp(-((r + 1) ** 2) / (2 * sigma2)) / -math.expm1(-(r + 1) / sigma2)
        kept = float(np.sum(terms[1:-1]))
        # normalised by the box's sum: every P and Q scaled by one c in [1, (1 + tail/kept)³],
        # so the computed sum is c times the box's exact one
        p1 = terms / kept
        box = p1[1:-1]
        big_p = box[:, None, None] * box[None, :, None] * box[None, None, :]
        out = 0.0
        for v in shifts:
            d = v - 1  # in {-1, 0, 1}: the shift
            q = [p1[1 - d[i]:p1.size - 1 - d[i]] for i in range(3)]
            big_q = q[0][:, None, None] * q[1][None, :, None] * q[2][None, None, :]
            out = max(out, float(np.sum(np.maximum(big_p - math.e**eps * big_q, 0.0))))
        # each P(o), Q(o): 3 exps (2u each), the normaliser (2R + 3)u, 3 products and
        # divisions; the pairwise sum of at most 2^18 terms adds 18u of the total (<= 1)
        rho = (3 * (2 * r + 3) + 6 * 3 + 8) * U
        err = rho * (1 + math.e**eps) + 18 * U
        c_max = (1 + tail / kept) ** 3 * (1 + 4 * U)
        return (out - err) / c_max, out + err + 3 * tail / kept

    assert s.sigma2 == unit_shifts_sigma2(s.eps, s.delta, 3)
    assert bounds(s.sigma2)[1] <= delta
    assert bounds(s.sigma2 - 1)[0] > delta


def test_releases_where_it_is_not_chosen_are_the_same_bytes_without_it(monkeypatch):
    """δ = 0, cumulative curves, one moved window, several structures (where the zCDP plan
    wins): the release's JSON is byte-identical with the method unregistered."""
    cases = [{"windows": [1], "delta": 0.0}, {"windows": ["cumulative"], "delta": 1e-6},
             {"windows": [1], "delta": 1e-6, "unit": "event"},
             {"windows": [7, "cumulative"], "delta": 1e-6, "unit": "event"},
             {"windows": ["total"], "delta": 1e-6}, {"windows": [1], "delta": 1e-6,
                                                     "k_values": [1, 2]}]
    with_it = [_daily(**c).to_json() for c in cases]
    monkeypatch.delitem(base._REGISTRY, "per_query_gaussian")
    without = [_daily(**c).to_json() for c in cases]
    assert with_it == without


def test_a_saved_release_loads_and_answers_the_same(tmp_path):
    rel = _daily()
    back = WindowCountsRelease.load(rel.save(tmp_path / "daily.dpfreq"))
    assert json.loads(back.to_json()) == json.loads(rel.to_json())
    s = back._state.structures[("rolling(W=1)", 1)]
    assert (s.method, s.sigma2) == ("per_query_gaussian", 536)


def test_built_from_public_parameters_alone():
    s = build_structure("rolling", "per_query_gaussian", 1, 30, "item", Fraction(1), 1e-6, 1,
                        noise_kind="gaussian")
    assert s.sigma2 == 536
    assert s.usable
    replace = build_structure("rolling", "per_query_gaussian", 1, 30, "item_replace",
                              Fraction(1), 1e-6, 1)
    assert replace.calibration.l1_sensitivity == 30  # each day still moves by at most one
    assert not build_structure("rolling", "per_query_gaussian", 1, 30, "item", Fraction(1),
                               0.0, 1).usable
