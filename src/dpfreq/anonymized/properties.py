"""Symmetric properties of an anonymized histogram: plug-ins ``Σ f(r, N) φ_r``.

Every estimator here is a function of the anonymized histogram only (the multiset of counts).
Given an :class:`~dpfreq.anonymized.AnonymizedHistogramRelease` ``(H, N)`` it evaluates
``f̂^{dp} = Σ_{r≥1} f(r, N) · φ_r(H)`` (+ a constant), which is ε-DP by post-processing: it spends
no further budget, and any number of properties may be computed from one release. Given an exact
histogram (a mapping ``{r: φ_r}``, an array of per-label counts or a
:class:`~dpfreq.engines.base.Prevalences`) it evaluates the same formula with ``n = Σ r φ_r``:
the **non-private** reference, marked ``private=False`` and ``epsilon=inf``.

Lipschitz constants
-------------------
For a linear estimator at a fixed sample size ``n`` and histograms whose counts are at most
``R``, write ``f(0, n) = 0``; by the layer-cake identity
``f̂(h) = Σ_{r≥1} (f(r, n) − f(r−1, n)) φ_{r+}(h)``, hence

    ``|f̂(h1) − f̂(h2)| ≤ L · ℓ1(h1, h2)``,  ``L = max_{1≤r≤R} |f(r, n) − f(r−1, n)|``

with ``ℓ1`` the sorted-ℓ1 distance (:func:`~dpfreq.anonymized.distance.sorted_l1_distance`).
This is the paper's Lipschitz constant with the range of ``r`` made explicit.
:func:`lipschitz_constant` computes ``L`` exactly (closed forms below; a finite scan where
the coefficients vanish).
Each result carries it; its error statement is ``L ×`` the release's ℓ1 error statement (the
entropy's adds the cost of ``N`` for the true total), cut to the property's range
(:mod:`dpfreq.anonymized.property_range`).

| property | ``f(r, n)`` | ``L`` (counts ≤ R, ``R ≤ n`` typical) |
| --- | --- | --- |
| entropy (nats) | ``(r/n) ln(n/r)`` | ``max(ln(n)/n, −Δf(R))`` = ``ln(n)/n`` unless ``R ≳ n²/e`` |
| Miller–Madow | ``(r/n) ln(n/r) + 1/(2n)`` − ``1/(2n)`` | ``max((ln n + 1/2)/n, −Δf(R))`` |
| support size | ``1`` (``1/k`` normalized) | ``1`` (``1/k``) |
| unseen species (SGT) | ``−(−t)^r Pr[Poisson(λ) ≥ r]`` | finite scan (``t(1+t)`` for ``t ≤ 1``) |
| support coverage | ``1 − (−t)^r Pr[Poisson(λ) ≥ r]`` (``/(n(1+t))`` normalized) | finite scan |
| distance to uniformity | ``|r/n − 1/k| − 1/k``, constant ``1`` | ``1/n`` (``R ≥ 3``) |
| power sum ``P_a`` | ``r^{(a)}/n^{(a)}`` (falling) | ``a (R−1)^{(a−1)}/n^{(a)}`` (a/n at R=n) |

Rényi entropy ``ln(P̂_a)/(1−a)`` and Chao1 are non-linear wrappers: still ε-DP by
post-processing; Rényi's error statement follows from the power sum's, Chao1 has none.

From a release with ``N = 0`` (the empty histogram is released) there is no sample size to
scale by; the statement is then the property's range over every histogram of total at most
``B``, the upper end of the release's exact interval for the true total, at the release's
confidence (``ln B`` for the entropy, ``B`` for the support size, ``t·B`` unseen species...).
The power sum and Rényi entropy have no value below their order, hence no statement.

References
----------
A. T. Suresh, "Differentially private anonymized histograms", NeurIPS 2019, §5 (Corollary 1).
A. Orlitsky, A. T. Suresh, Y. Wu, "Optimal prediction of the number of unseen species",
PNAS 113(47), 2016 (smoothed Good–Toulmin).
"""

from __future__ import annotations

import math
from typing import Any

from dpfreq._validate import check_choice, check_int, check_positive_float, message
from dpfreq.anonymized.coefficients import (
    PROPERTY_NAMES,
    entropy_coef,
    entropy_lipschitz,
    falling_ratio,
    lipschitz_constant,
    lipschitz_for,
    sgt_poisson_parameter,
    sgt_unseen_coef,
    uniformity_coef,
)
from dpfreq.anonymized.property_estimate import (
    PropertyEstimate,
    no_statement,
    with_total,
)
from dpfreq.anonymized.property_eval import (
    build_estimate,
    linear_plugin,
    max_count_of,
    private_error,
    read_histogram,
)
from dpfreq.anonymized.property_range import coverage_range, entropy_range, support_range
from dpfreq.errors import DataError, public_errors
from dpfreq.release import ErrorStatement

__all__ = [
    "PROPERTY_NAMES",
    "PropertyEstimate",
    "estimate_distance_to_uniformity",
    "estimate_entropy",
    "estimate_power_sum",
    "estimate_properties",
    "estimate_renyi_entropy",
    "estimate_support_coverage",
    "estimate_support_size",
    "estimate_unseen_species",
    "lipschitz_constant",
    "sgt_poisson_parameter",
]


@public_errors("estimate_entropy")
def estimate_entropy(histogram: Any, *, miller_madow: bool = False) -> PropertyEstimate:
    """Plug-in (empirical) Shannon entropy in nats, optionally Miller–Madow corrected.

    ``Ĥ = Σ_r φ_r (r/n) ln(n/r)``; Miller–Madow adds ``(Σ_r φ_r − 1) / (2n)``.

    Parameters
    ----------
    histogram : AnonymizedHistogramRelease, mapping, array of counts or Prevalences
        A release ``(H, N)`` (the estimate is ε-DP by post-processing and uses ``N``), or an
        exact histogram (the non-private reference, ``n = Σ r φ_r``).
    miller_madow : bool
        Add the Miller–Madow bias correction.

    Returns
    -------
    PropertyEstimate
        ``value`` in nats; 0 for an empty histogram or ``N = 0``.

    Notes
    -----
    **Privacy**: a function of the release only, so it has the release's guarantee (ε-DP for
    the anonymized histogram under the ±1-count neighbouring relation) and costs no budget.
    **Lipschitz constant** w.r.t. sorted ℓ1: ``ln(n)/n`` (``(ln n + 1/2)/n`` for Miller–Madow)
    whenever the counts are at most ``≈ n²/e`` (exactly ``max(f(1), |f(R) − f(R−1)|)``).
    **Range**: from a release, cut to ``[0, ln min(B, d)]`` (Miller–Madow ``+ (B − 1)/(2B)``):
    ``B`` the top of the total's interval, ``d`` the release's ``domain_size`` if given.

    Examples
    --------
    >>> round(estimate_entropy({1: 4, 8: 1, 9: 1}).value, 6)  # exact, n = 21
    1.310687
    """
    inp = read_histogram(histogram)
    name = "miller-madow-entropy" if miller_madow else "entropy"
    big_r = max_count_of(inp)
    n = inp.sample_size
    span = entropy_range(inp.release, miller_madow)
    interval = getattr(inp.release, "total_interval", None)
    if n == 0:
        return build_estimate(inp, name, 0.0, 0.0, big_r, {}, value_range=span.value_range,
                              total_bound=span.total_bound, range_why=span.why)
    value = linear_plugin(inp, lambda r: entropy_coef(r, float(n)))
    if miller_madow and inp.counts.size:
        value += (float(inp.prevalences.sum()) - 1.0) / (2.0 * n)
    lip = entropy_lipschitz(float(n), big_r, miller_madow)
    width = math.log(max(n, 2))
    error = None
    if inp.release is not None and interval is not None:
        error = with_total(private_error(inp, lip, width, total_included=True), n, interval,
                           miller_madow)
    return build_estimate(inp, name, value, lip, big_r, {}, width=width, error=error,
                          value_range=span.value_range, range_why=span.why)


@public_errors("estimate_support_size")
def estimate_support_size(histogram: Any, *, domain_size: int | None = None,
                          method: str = "observed") -> PropertyEstimate:
    """Number of distinct labels ``Σ_r φ_r``, or the Chao1 lower-bound estimate.

    Parameters
    ----------
    histogram : AnonymizedHistogramRelease, mapping, array of counts or Prevalences
        A release (ε-DP by post-processing) or an exact histogram (non-private reference).
    domain_size : int, optional
        Public ``k``: report the support size divided by ``k`` (``f ≡ 1/k``).
    method : {"observed", "chao1"}
        ``"observed"``: the linear ``Σ_r φ_r`` (Lipschitz constant 1, or ``1/k``). ``"chao1"``:
        ``S + φ_1²/(2φ_2)`` (``S + φ_1(φ_1−1)/2`` when ``φ_2 = 0``), a non-linear estimate of the
        support of the distribution; still DP by post-processing, but with no error guarantee.

    Returns
    -------
    PropertyEstimate

    Notes
    -----
    **Privacy**: post-processing of the release. Note that the observed support size has
    Lipschitz constant 1, which Corollary 1 of the paper does not cover: its error is of the order
    of the release's whole ℓ1 error.
    From a release made with ``domain_size`` ``d`` (checked against the data), cut to ``[0, d]``.

    Examples
    --------
    >>> estimate_support_size({1: 4, 8: 1, 9: 1}).value
    6.0
    """
    method = check_choice(method, "method", ("observed", "chao1"))
    inp = read_histogram(histogram)
    params: dict[str, Any] = {"method": method}
    scale = 1.0
    if domain_size is not None:
        scale = float(check_int(domain_size, "domain_size", minimum=1))
        params["domain_size"] = int(scale)
    big_r = max_count_of(inp)
    observed = float(inp.prevalences.sum())
    if method == "observed":  # at most the total many items, and at most d
        span = support_range(inp.release, scale)
        return build_estimate(inp, "support-size", observed / scale, 1.0 / scale, big_r, params,
                              width=max(inp.sample_size, 1) / scale, value_range=span.value_range,
                              total_bound=span.total_bound, range_why=span.why)
    phi = dict(zip(inp.counts.tolist(), inp.prevalences.tolist(), strict=True))
    f1, f2 = float(phi.get(1, 0)), float(phi.get(2, 0))
    extra = f1 * f1 / (2.0 * f2) if f2 > 0 else f1 * (f1 - 1.0) / 2.0
    error = None
    if inp.release is not None:
        error = no_statement("Chao1 is non-linear: no error statement is available")
    return build_estimate(inp, "support-size", (observed + extra) / scale, math.nan, big_r, params,
                   error=error)


def _sgt(histogram: Any, name: str, extrapolation_ratio: float,
         normalized: bool) -> PropertyEstimate:
    t = check_positive_float(extrapolation_ratio, "extrapolation_ratio")
    inp = read_histogram(histogram)
    big_r = max_count_of(inp)
    n = inp.sample_size
    lam = sgt_poisson_parameter(float(max(n, 1)), t)
    params: dict[str, Any] = {"extrapolation_ratio": t, "poisson_parameter": lam}
    if name == "support-coverage":
        params["normalized"] = normalized
    observed = float(inp.prevalences.sum())
    if n == 0:  # on a total <= b: unseen in [0, t·b], coverage in [0, (1+t)·b] (share: [0, 1])
        top = (lambda b: t * b) if name == "unseen-species" else (
            (lambda b: 1.0) if normalized else (lambda b: (1.0 + t) * b))
        return build_estimate(inp, name, 0.0, 0.0, big_r, params,
                              value_range=(0.0, 1.0 if normalized else math.inf),
                              total_bound=top)
    scale = n * (1.0 + t) if normalized else 1.0
    extra = 1.0 if name == "support-coverage" else 0.0
    value = linear_plugin(inp, lambda r: (extra + sgt_unseen_coef(r, float(n), t)) / scale)
    lip = lipschitz_for(name, n, big_r, extrapolation_ratio=t, normalized=normalized)
    if name == "unseen-species":  # between 0 and the t·n new samples
        return build_estimate(inp, name, value, lip, big_r, params, value_range=(0.0, t * n),
                              width=t * n / scale)
    cover = coverage_range(inp.release, observed, t * n, scale)
    return build_estimate(inp, name, value, lip, big_r, params, width=t * n / scale,
                          value_range=cover.value_range, clamp_range=cover.clamp_range,
                          range_why=cover.why)


@public_errors("estimate_unseen_species")
def estimate_unseen_species(histogram: Any, *, extrapolation_ratio: float) -> PropertyEstimate:
    """Smoothed Good–Toulmin estimate of the number of new labels in ``t·n`` further samples.

    ``U = −Σ_{r≥1} (−t)^r Pr[L ≥ r] φ_r`` with ``L ~ Poisson(λ)``,
    ``λ = ln(n (t+1)²/(t−1)) / (2t)`` for ``t > 1``; plain Good–Toulmin (``Pr[L ≥ r] := 1``) for
    ``t ≤ 1``.

    Parameters
    ----------
    histogram : AnonymizedHistogramRelease, mapping, array of counts or Prevalences
        A release (ε-DP by post-processing, ``n = N``) or an exact histogram (non-private).
    extrapolation_ratio : float
        ``t > 0``: predict for ``t·n`` new samples (OSW's guarantees need ``t ≲ ln n``).

    Returns
    -------
    PropertyEstimate

    Notes
    -----
    **Privacy**: post-processing of the release. **Lipschitz constant**: the largest step
    ``|f(r) − f(r−1)|`` of ``f(r) = −(−t)^r Pr[L ≥ r]``, computed by a scan up to
    ``e² t λ + 64`` (beyond it every step is below ``2 (e t λ / r)^r``, which is included);
    ``t(1+t)`` for ``t ≤ 1``. The value is clamped to ``[0, t·n]`` (``clamped`` says when).

    Examples
    --------
    >>> estimate_unseen_species({1: 4, 8: 1, 9: 1}, extrapolation_ratio=1).value
    4.0
    """
    return _sgt(histogram, "unseen-species", extrapolation_ratio,
                False)


@public_errors("estimate_support_coverage")
def estimate_support_coverage(histogram: Any, *, extrapolation_ratio: float,
                              normalized: bool = False) -> PropertyEstimate:
    """Expected number of distinct labels in ``m = n(1+t)`` samples: ``Σ_r φ_r + U``.

    Parameters
    ----------
    histogram : AnonymizedHistogramRelease, mapping, array of counts or Prevalences
        A release (ε-DP by post-processing, ``n = N``) or an exact histogram (non-private).
    extrapolation_ratio : float
        ``t > 0``, see :func:`estimate_unseen_species`.
    normalized : bool
        Divide by ``m = n(1+t)`` (the normalized support coverage of the paper's Corollary 1).

    Returns
    -------
    PropertyEstimate

    Notes
    -----
    **Privacy**: post-processing of the release. **Lipschitz constant**: as for
    :func:`estimate_unseen_species` with ``f(r) = 1 − (−t)^r Pr[L ≥ r]`` (divided by
    ``n(1+t)`` when normalized).

    Examples
    --------
    >>> round(estimate_support_coverage({1: 4, 8: 1, 9: 1}, extrapolation_ratio=2).value, 4)
    11.83
    """
    return _sgt(histogram, "support-coverage", extrapolation_ratio,
                normalized)


@public_errors("estimate_distance_to_uniformity")
def estimate_distance_to_uniformity(histogram: Any, *, domain_size: int) -> PropertyEstimate:
    """Plug-in ℓ1 distance to the uniform distribution on a public domain of ``k`` labels.

    ``Σ_x |p̂_x − 1/k| = 1 + Σ_r φ_r (|r/n − 1/k| − 1/k)`` (unseen labels contribute ``1/k``
    each), clipped to ``[0, 2]``.

    Parameters
    ----------
    histogram : AnonymizedHistogramRelease, mapping, array of counts or Prevalences
        A release (ε-DP by post-processing, ``n = N``) or an exact histogram (non-private).
    domain_size : int
        Public ``k >= 1``; never taken from the data.

    Returns
    -------
    PropertyEstimate

    Raises
    ------
    DataError
        If an *exact* histogram has more than ``domain_size`` labels. A release may (noise);
        the clip to ``[0, 2]`` (where the exact value lies) keeps the error statement valid.

    Notes
    -----
    **Privacy**: post-processing of the release. **Lipschitz constant**: ``1/n`` (exactly
    ``max_{r ≤ min(R, 3)} |f(r) − f(r−1)|``; the clip is 1-Lipschitz).

    Examples
    --------
    >>> round(estimate_distance_to_uniformity({1: 4, 8: 1, 9: 1}, domain_size=10).value, 6)
    1.219048
    """
    k = check_int(domain_size, "domain_size", minimum=1)
    inp = read_histogram(histogram)
    support = int(inp.prevalences.sum())
    if inp.release is None and support > k:
        raise DataError(message("domain_size", "at least the number of items in the "
                                "histogram", k))
    big_r = max_count_of(inp)
    n = inp.sample_size
    params = {"domain_size": k}
    if n == 0:  # the distance lies in [0, 2]
        return build_estimate(inp, "distance-to-uniformity", 1.0, 0.0, big_r, params,
                       value_range=(0.0, 2.0), total_bound=lambda b: 1.0)
    raw = 1.0 + linear_plugin(inp, lambda r: uniformity_coef(r, float(n), k))
    lip = lipschitz_for("distance-to-uniformity", n, big_r, domain_size=k)
    return build_estimate(inp, "distance-to-uniformity", raw, lip, big_r, params,
                   value_range=(0.0, 2.0), width=2.0)


@public_errors("estimate_power_sum")
def estimate_power_sum(histogram: Any, *, order: int) -> PropertyEstimate:
    """Unbiased power sum ``P̂_a = Σ_r φ_r r^{(a)} / n^{(a)}`` estimating ``Σ_x p_x^a``.

    Parameters
    ----------
    histogram : AnonymizedHistogramRelease, mapping, array of counts or Prevalences
        A release (ε-DP by post-processing, ``n = N``) or an exact histogram (non-private).
    order : int
        ``a >= 2`` (``P̂_2`` is the collision probability).

    Returns
    -------
    PropertyEstimate
        ``value`` is ``nan`` when ``n < a`` (no unbiased estimator exists).

    Notes
    -----
    **Privacy**: post-processing of the release. **Lipschitz constant**:
    ``a (R−1)^{(a−1)} / n^{(a)}`` for counts ``≤ R`` (steps increase with ``r``); ``a/n`` when
    ``R = n``.

    Examples
    --------
    >>> round(estimate_power_sum({1: 4, 8: 1, 9: 1}, order=2).value, 6)  # (56 + 72) / (21·20)
    0.304762
    """
    a = check_int(order, "order", minimum=2)
    inp = read_histogram(histogram)
    big_r = max_count_of(inp)
    n = inp.sample_size
    if n < a:
        return build_estimate(inp, "power-sum", math.nan, math.inf, big_r, {"order": a},
                       value_range=(0.0, 1.0), error=no_statement(
                           "N is below the order: no unbiased estimate and no error statement"))
    value = linear_plugin(inp, lambda r: falling_ratio(r, float(n), a))
    lip = lipschitz_for("power-sum", n, big_r, order=a)
    return build_estimate(inp, "power-sum", value, lip, big_r, {"order": a}, value_range=(0.0, 1.0),
                   width=1.0)


@public_errors("estimate_renyi_entropy")
def estimate_renyi_entropy(histogram: Any, *, order: int) -> PropertyEstimate:
    """Rényi entropy of integer order ``a >= 2`` in nats: ``ln(P̂_a) / (1 − a)``.

    Parameters
    ----------
    histogram : AnonymizedHistogramRelease, mapping, array of counts or Prevalences
        A release (ε-DP by post-processing, ``n = N``) or an exact histogram (non-private).
    order : int
        ``a >= 2``.

    Returns
    -------
    PropertyEstimate
        ``value`` is ``nan`` when ``P̂_a <= 0`` or ``n < a`` (and then, from a release, there
        is no error statement).

    Notes
    -----
    **Privacy**: post-processing of the release. Non-linear, so no global Lipschitz constant
    (``lipschitz_constant`` is ``nan``). The error statement follows from the power sum's
    bound ``D = L_P · ℓ1``: ``|Δ| ≤ ln(P̂/(P̂ − D)) / (a − 1)`` when ``P̂ > D`` (``ln`` is
    concave), else ``inf``.

    Examples
    --------
    >>> round(estimate_renyi_entropy({1: 4, 8: 1, 9: 1}, order=2).value, 6)
    1.188224
    """
    power = estimate_power_sum(histogram, order=order)
    a = int(power.parameters["order"])
    p = float(power.value)
    value = math.log(p) / (1 - a) + 0.0 if p > 0 else math.nan  # + 0.0: never -0.0
    inp = read_histogram(histogram)
    error = None
    if inp.release is not None and power.error.kind != "bound":
        error = no_statement(f"no error statement: the power sum has none. "
                             f"{power.error.description}")
    elif inp.release is not None and math.isnan(value):
        error = no_statement("the power sum's estimate is 0, so the Rényi entropy has no "
                             "finite value and no error statement")
    elif inp.release is not None:
        d = float(power.error.value)
        bound = math.log(p / (p - d)) / (a - 1) if p > d else math.inf
        error = ErrorStatement(
            kind="bound", confidence=power.error.confidence, value=bound,
            vacuous=not math.isfinite(bound), description=(
                f"from the power sum's bound D = {d:.6g}: ln(P/(P−D))/(a−1) (infinite, and so "
                f"vacuous, when P <= D). {power.error.description}"))
    return build_estimate(inp, "renyi-entropy", value, math.nan, power.max_count, {"order": a},
                   value_range=(0.0, math.inf), error=error)


def estimate_properties(histogram: Any, *, domain_size: int | None = None,
                        extrapolation_ratio: float = 2.0) -> dict[str, PropertyEstimate]:
    """All properties of this module at once (what ``dpfreq anonymize`` prints).

    Parameters
    ----------
    histogram : AnonymizedHistogramRelease, mapping, array of counts or Prevalences
        A release (ε-DP by post-processing; one release serves every property at no extra
        cost) or an exact histogram (non-private reference).
    domain_size : int, optional
        Public ``k``: adds the distance to uniformity.
    extrapolation_ratio : float
        ``t`` of the unseen-species and support-coverage estimates (default 2, a statistical
        choice, not a privacy parameter).

    Returns
    -------
    dict
        ``{"entropy", "miller-madow-entropy", "support-size", "unseen-species",
        "support-coverage", "power-sum-2", "renyi-entropy-2"[, "distance-to-uniformity"]}``.

    Examples
    --------
    >>> sorted(estimate_properties({1: 4, 8: 1, 9: 1}))  # doctest: +NORMALIZE_WHITESPACE
    ['entropy', 'miller-madow-entropy', 'power-sum-2', 'renyi-entropy-2', 'support-coverage',
     'support-size', 'unseen-species']
    """
    out = {
        "entropy": estimate_entropy(histogram),
        "miller-madow-entropy": estimate_entropy(histogram, miller_madow=True),
        "support-size": estimate_support_size(histogram),
        "unseen-species": estimate_unseen_species(histogram,
                                                  extrapolation_ratio=extrapolation_ratio),
        "support-coverage": estimate_support_coverage(histogram,
                                                      extrapolation_ratio=extrapolation_ratio),
        "power-sum-2": estimate_power_sum(histogram, order=2),
        "renyi-entropy-2": estimate_renyi_entropy(histogram, order=2),
    }
    if domain_size is not None:
        out["distance-to-uniformity"] = estimate_distance_to_uniformity(
            histogram, domain_size=domain_size)
    return out
