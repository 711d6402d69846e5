"""The public entry point :func:`release_anonymized_histogram` (PrivHist, Hay et al., ``auto``).

Order of work: validate every parameter, read the source into prevalence form (one pass through
the engine), check the data against the exactness and memory limits, charge the accountant, then
draw the noise. A refused call spends nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from dpfreq._validate import (
    check_choice,
    check_confidence,
    check_epsilon,
    check_int,
    check_unit,
    message,
)
from dpfreq.anonymized import auto
from dpfreq.anonymized import hay as hay_module
from dpfreq.anonymized.accuracy import (
    MAX_TOTAL,
    MAX_WORKING_BYTES,
    run_plan,
    simulated_l1_bound,
    simulation_count,
    total_interval,
    working_bytes,
    working_elements,
)
from dpfreq.anonymized.histogram_input import as_prevalences, read_weighted, total_of
from dpfreq.anonymized.plan import epsilon_for_l1
from dpfreq.anonymized.result import AnonymizedHistogramRelease
from dpfreq.anonymized.steps import I64, ExactNoise, Outcome, epsilon_fractions
from dpfreq.budget import check_accountant
from dpfreq.errors import DataError, ParameterError, public_errors
from dpfreq.noise import discrete_laplace_tail_bound
from dpfreq.release import RELATIONS, ErrorStatement
from dpfreq.rng import RNGLike, resolve_rng

__all__ = ["METHODS", "release_anonymized_histogram"]

METHODS = ("auto", "privhist", "privhist-tuned", "hay")
_FUNC = "release_anonymized_histogram"


def check_split(split: Any, epsilon: float, method: str) -> tuple[float, float, float]:
    """A user's budget split ``(ε1, ε2, ε3)`` (``(ε1, ε2)`` for Hay et al.), validated."""
    high = method != "hay" and not auto.plan_for(method, epsilon).low_privacy_branch
    if method == "hay":
        rule = (f"a sequence (ε1, ε2[, 0]) of finite numbers with ε1 > 0, ε2 > 0 and sum <= "
                f"epsilon = {epsilon!r}")
    else:
        rule = ("a sequence (ε1, ε2, ε3) of finite numbers >= 0 with ε1 > 0, ε2 > 0, "
                + ("ε3 > 0 (high-privacy branch), " if high else "")
                + f"and sum <= epsilon = {epsilon!r}")
    if isinstance(split, str | bytes) or not isinstance(split, Sequence):
        raise ParameterError(message("split", _FUNC, rule, split))
    try:
        values = [float(v) for v in split]
    except (TypeError, ValueError):
        raise ParameterError(message("split", _FUNC, rule, split)) from None
    if method == "hay" and len(values) == 2:
        values.append(0.0)
    if len(values) != 3 or any(not math.isfinite(v) or v < 0 for v in values):
        raise ParameterError(message("split", _FUNC, rule, split))
    e1, e2, e3 = values
    if e1 <= 0 or e2 <= 0 or sum(values) > epsilon * (1 + 1e-9):
        raise ParameterError(message("split", _FUNC, rule, split))
    if (method == "hay" and e3 != 0) or (high and e3 <= 0):
        raise ParameterError(message("split", _FUNC, rule, split))
    for part in values:
        if part > 0:
            check_epsilon(part, "split", _FUNC)
    return e1, e2, e3


def read_source(source: Any, item: str | None, count: str | None,
                engine: Any) -> tuple[I64, I64, str | None]:
    """The histogram's prevalence form and the engine's name (``None`` for in-memory forms)."""
    if item is None:
        if engine is not None or count is not None:
            what = "engine" if engine is not None else "count"
            raise ParameterError(message("item", _FUNC, f"a column name when {what} is given",
                                         None))
        if isinstance(source, str | bytes) or type(source).__module__.startswith(
                ("pyspark", "duckdb", "pathlib", "pandas", "polars", "pyarrow")):
            raise ParameterError(message(
                "item", _FUNC, "the item column's name when source is a file, SQL, a table or "
                "a Spark DataFrame", None))
        counts, prev = as_prevalences(source, _FUNC)
        return counts, prev, None
    if not isinstance(item, str) or not item:
        raise ParameterError(message("item", _FUNC, "a non-empty column name", item))
    if count is not None and (not isinstance(count, str) or not count or count == item):
        raise ParameterError(message("count", _FUNC, "a non-empty column name other than item",
                                     count))
    from dpfreq.engines import get_engine

    eng = get_engine(engine, source)
    if count is None:
        agg = eng.count_of_counts(source, item=item)
        counts, prev = as_prevalences(agg, _FUNC)
    else:
        counts, prev = read_weighted(eng, source, item=item, count=count, func=_FUNC)
    return counts, prev, eng.name


def check_feasible(counts: I64, prevalences: I64, epsilon: float, plan: auto.Plan) -> None:
    """Refuse (before any budget is spent) what cannot be computed exactly or in memory.

    The sizes are those at the largest private total ``N`` the noise gives with probability
    ``1 − 10^-9``. The messages state the rule and the public limit, never the data's total
    or a memory need derived from it.
    """
    n = total_of(counts, prevalences)
    if n > MAX_TOTAL:
        raise DataError(message("source", _FUNC, "a histogram whose total count is at most 2**52 "
                                "(larger totals cannot be computed exactly)",
                                "a larger total"))
    n_high = n + discrete_laplace_tail_bound(1e-9, epsilon_fractions(plan.split)[0])
    if plan.method == "hay" and n_high > hay_module.HAY_MAX_LENGTH:
        raise ParameterError(message(
            "method", _FUNC, f"not 'hay' when the private total may exceed "
            f"{hay_module.HAY_MAX_LENGTH} (O(N) memory; a large total or a tiny epsilon; use "
            "'privhist' or 'auto', which run in O(sqrt N))", plan.method))
    need = working_bytes(n_high, epsilon, plan)
    if need > MAX_WORKING_BYTES:
        # no size is named: any number derived from N (even a rounded one) can move with one
        # event at a bucket edge
        raise ParameterError(message(
            "epsilon", _FUNC, f"such that {plan.method} fits in its working-memory limit of "
            f"{MAX_WORKING_BYTES / 2**30:g} GiB, which this source exceeds (about "
            "sqrt(N·min(ε, 1)) + N/T + 4·ln(N)/ε2 elements of 64 bytes: a tiny epsilon or a "
            "huge total)", epsilon))


def histogram_error(out: Outcome, plan: auto.Plan, epsilon: float, confidence: float,
                    interval: tuple[int, int]) -> tuple[ErrorStatement, float, float]:
    """The sorted-ℓ1 error statement of a release, and the half-width of the band on the items
    with count ``>= r`` with the confidence it holds at (simulated; exact for an empty
    release)."""
    if out.regime == "empty":
        return ErrorStatement(kind="bound", confidence=confidence, value=float(interval[1]),
                              description=(
            f"N = 0 and the empty histogram is released; its sorted-ℓ1 distance to the true "
            f"histogram is the true total n, which is at most {interval[1]} with probability "
            f">= {confidence:g} (exact, from the law of the noise on N)")), \
            float(interval[1]), confidence
    elements = working_elements(out.n_estimate, epsilon, plan)
    bound = simulated_l1_bound(out.counts, out.prevalences, out.n_estimate, plan=plan,
                               epsilon=epsilon, confidence=confidence,
                               simulations=simulation_count(elements, confidence, plan))
    vacuous = bound.value >= 2 * max(out.n_estimate, 1)
    tail = ""
    if vacuous:
        useful = epsilon_for_l1(out.n_estimate / 2, out.n_estimate, plan.method, confidence)
        tail = (" This is no better than the trivial bound 2N: the release carries little "
                "information" + (f"; an epsilon of about {useful:.3g} would bring the bound "
                                 "under N/2 (predicted for a Zipf(1)-shaped histogram)."
                                 if useful is not None else "."))
    return ErrorStatement(kind="bound", confidence=confidence, value=bound.value, description=(
        f"sorted-ℓ1 distance between the released and the true histogram <= {bound.value:g} "
        f"with probability about {confidence:g}: the {bound.rank}-th smallest of "
        f"{bound.simulations} simulated errors, obtained by rerunning {plan.method} with noise "
        f"of the known law on the released histogram (post-processing; coverage measured, not "
        f"proved). From the same runs, the number of items with count >= r is within "
        f"±{bound.band:g} of the released one for every r at once, with probability about "
        f"{bound.band_confidence:.3g} (the share of runs within it: the band is a whole number "
        f"of items). The true total n is in [{interval[0]}, {interval[1]}] with probability "
        f">= {confidence:g} (exact).{tail}"),
        vacuous=vacuous), bound.band, bound.band_confidence


_REFUSED_UNITS = dict.fromkeys(
    ("item", "item_replace"),
    "an anonymized histogram has no public count cap, so one item's rows can move the sorted "
    "counts by any amount; for item-level protection release a profile with max_count "
    "(release_profile)")
_REFUSED_UNITS["device"] = "'device' is the longitudinal system's unit"


@public_errors("release_anonymized_histogram")
def release_anonymized_histogram(
    source: Any,
    *,
    epsilon: float,
    unit: str,
    item: str | None = None,
    count: str | None = None,
    method: str = "auto",
    split: Sequence[float] | None = None,
    confidence: float = 0.95,
    domain_size: int | None = None,
    engine: Any = None,
    rng: RNGLike = None,
    accountant: Any = None,
) -> AnonymizedHistogramRelease:
    """Release an anonymized histogram (the multiset of counts) and its total under ε-DP.

    Parameters
    ----------
    source : mapping, array-like, Prevalences or data source
        Without ``item``: the histogram as a mapping ``{count r: number of items with count
        r}`` (the compact form PrivHist runs on, ``O(sqrt n)`` pairs), a 1-d array of per-item
        counts (integers ``>= 1``), or an object with ``counts``/``prevalences`` arrays such as
        :class:`dpfreq.engines.base.Prevalences`. With ``item``: a data source (CSV/Parquet path,
        SQL, DuckDB relation, pandas/Polars/Arrow table, Spark DataFrame, or a mapping of
        columns), aggregated exactly by the engine.
    epsilon : float
        Total privacy budget ε in ``[1e-6, 1000]`` (no default).
    unit : {"event"}
        Unit of privacy, no default: ``"event"`` (add or remove one row). ``"item"`` and
        ``"item_replace"`` are refused with the reason (see **Privacy**).
    item : str, optional
        The item column (passwords, words, node ids, ...) of a data source.
    count : str, optional
        A column of non-negative integer counts: each row stands for that many occurrences of
        its item (a pre-aggregated ``item,count`` table such as a password frequency list;
        rows of one item are added up). Without it every row is one occurrence.
    method : {"auto", "privhist", "privhist-tuned", "hay"}
        ``"privhist"``: PrivHist with the paper's split ε/3 each (or ``split``).
        ``"privhist-tuned"``: PrivHist with the measured split of
        :func:`dpfreq.anonymized.auto.tuned_split`, running the low-privacy branch for every
        ε >= 0.01, with an extra isotonic fit of the noisy large counts (post-processing), and
        the high-privacy branch below. ``"hay"``: the Hay et al. sorted-count baseline
        (``O(n)`` memory, refused above ``HAY_MAX_LENGTH``). ``"auto"``: chosen from ε alone
        (never from the data; the reason is in ``mechanism_params["why"]``).
    split : sequence of float, optional
        ``(ε1, ε2, ε3)`` in absolute units, sum ``<= epsilon``: ε1 for ``N``, ε2 for the split
        and the noisy counts, ε3 for the high-privacy smoothed histogram. For ``"hay"``:
        ``(ε1, ε2)``. Not allowed with ``"auto"``.
    confidence : float
        Confidence of the error statements (default 0.95).
    domain_size : int, optional
        Public number of possible items. Not used by the mechanism; checked against the data
        (refused, before anything is spent, if the source holds more distinct items) and
        recorded in ``mechanism_params`` for the property estimators.
    engine : str, engine instance or SparkSession, optional
        Where a data source is aggregated (default: inferred from the source).
    rng : None, int or numpy.random.Generator
        Random source; ``None`` is the secure default. Seeds are for tests only.
    accountant : Accountant or Ledger, optional
        Charged ``epsilon`` after every check has passed and before any noise is drawn.

    Returns
    -------
    AnonymizedHistogramRelease
        The released histogram (prevalence form), ``N``, an exact interval for the true total,
        and a sorted-ℓ1 error bound with its confidence.

    Raises
    ------
    ParameterError
        Invalid ε, split, method, item, count, confidence, domain_size or engine; a source
        that needs more working memory than the limit at this ε; ``"hay"`` when the private
        total may exceed its limit.
    DataError
        Zero, negative, non-integer or NaN counts or prevalences; repeated counts; a total count
        above ``2**52``; more distinct items than ``domain_size``.
    BudgetExceededError
        The accountant's budget would be exceeded (nothing is spent).

    Notes
    -----
    **Privacy.** Unit of privacy: ``unit="event"`` — add or remove one occurrence of one item
    (one row), the only unit this system supports: ``"item"`` and ``"item_replace"`` are
    refused because the histogram has no public count cap, so one item's rows move the sorted
    counts by an unbounded amount. Two histograms are neighbours when their sorted-ℓ1 distance
    is 1: one item's count moves by ±1, including a new item appearing with count 1 or a
    count-1 item disappearing; equivalently, one row is added to or removed from the raw data (with
    ``count``, one unit of one row's count). The pair ``(H, N)`` is ε-DP (pure, central model)
    by basic composition: ``N`` is ε1-DP (sensitivity 1, two-sided geometric noise); given
    ``N``, the split with ``M`` fake counts at ``T`` and ``T+1`` and the noise ``Z^b`` keeps the
    ℓ1 sensitivity of (noisy small cumulative prevalences, sorted large counts) at 1, so the
    noisy counts are ε2-DP; the high-privacy branch adds ε3-DP noise to the smoothed cumulative
    prevalences (sensitivity ``1/gap`` after scaling). All later steps — and the error
    statements, which rerun the mechanism on the *released* histogram — are post-processing.
    The argument holds for either branch at any ε. Hay et al.: ε1 for ``N`` plus ε2 for the
    sorted counts padded to the public length ``L = N`` (sensitivity 1). Refusals for size or
    memory depend on the data's total only and happen before anything is spent.

    **Noise.** Exact integer two-sided geometric noise from :mod:`dpfreq.noise`, with ε taken
    as a fraction rounded down. In the high-privacy branch the integer ``g_i·φ^v_{s_i+}``
    (sensitivity 1 in one coordinate) gets ``G(e^{−ε3})`` and is divided by ``g_i``: the same
    scale as continuous Laplace ``L(1/(ε3·g_i))`` on ``φ^v_{s_i+}``, exactly ε3-DP.

    **Error statements.** ``error`` bounds the sorted-ℓ1 distance to the true histogram at
    ``confidence``, by simulating the known noise law through the same mechanism around the
    released histogram (:mod:`dpfreq.anonymized.accuracy`); the same runs give
    ``items_at_least_band``, a simultaneous band on the number of items with count ``>= r``;
    ``total_interval`` holds the true total with probability at least ``confidence``, exactly.

    **Cost.** ``Õ(sqrt(n))`` time and memory for the tuned branch, on the prevalence form; the
    histogram is never expanded to ``n`` entries. The error statement reruns the mechanism
    20–199 times (fewer on large inputs).

    References
    ----------
    A. T. Suresh, "Differentially Private Anonymized Histograms", NeurIPS 2019 (PrivHist).
    M. Hay, C. Li, G. Miklau, D. Jensen, "Accurate estimation of the degree distribution of
    private networks", ICDM 2009; M. Hay et al., "Boosting the accuracy of differentially
    private histograms through consistency", VLDB 2010.

    Examples
    --------
    >>> rel = release_anonymized_histogram({1: 2, 2: 1, 5: 1, 9: 1}, epsilon=4.0,
    ...                                    unit="event", method="privhist", rng=0)
    >>> rel.regime, rel.unit
    ('low-privacy', 'event')
    """
    epsilon = check_epsilon(epsilon, "epsilon", _FUNC)
    check_unit(unit, _FUNC, ("event",), refused=_REFUSED_UNITS)
    check_choice(method, "method", _FUNC, METHODS)
    confidence = check_confidence(confidence, "confidence", _FUNC)
    accountant = check_accountant(accountant, _FUNC)
    if method == "auto" and split is not None:
        raise ParameterError(message("split", _FUNC, "None when method='auto' (auto picks "
                                     "its own split)", split))
    checked = None if split is None else check_split(split, epsilon, method)
    plan = auto.plan_for(method, epsilon, checked)
    if domain_size is not None:
        domain_size = check_int(domain_size, "domain_size", _FUNC, minimum=1)
    counts, prev, engine_name = read_source(source, item, count, engine)
    check_feasible(counts, prev, epsilon, plan)
    if domain_size is not None and int(prev.sum()) > domain_size:
        raise DataError(message("domain_size", _FUNC, "at least the number of distinct items "
                                "in the source", domain_size))
    resolved = resolve_rng(rng, _FUNC)
    if accountant is not None:
        accountant.spend(epsilon, 0.0, label=_FUNC, unit="event")
    out = run_plan(plan, counts, prev, epsilon=epsilon, noise=ExactNoise(resolved.generator))
    fractions = epsilon_fractions(plan.split)
    interval = total_interval(out.n_estimate, fractions[0], confidence)
    params: dict[str, Any] = {"requested_method": method, "epsilon_fractions": fractions,
                              "relation": RELATIONS["event"], **out.params}
    if method == "auto":
        params["why"] = auto.why(epsilon)
    if engine_name is not None:
        params["engine"] = engine_name
    if domain_size is not None:
        params["domain_size"] = domain_size
    error, band, band_confidence = histogram_error(out, plan, epsilon, confidence, interval)
    return AnonymizedHistogramRelease(
        value={"counts": out.counts, "prevalences": out.prevalences,
               "n_estimate": out.n_estimate},
        epsilon=epsilon, delta=0.0, unit="event", mechanism=mechanism_name(plan.method),
        mechanism_params=params, seeded=resolved.seeded,
        error=error, total_interval=interval, items_at_least_band=band,
        items_at_least_confidence=band_confidence, split=plan.split,
        regime=out.regime, method=plan.method)


def mechanism_name(method: str) -> str:
    """The release's ``mechanism`` for a method."""
    return "hay-sorted-counts" if method == "hay" else "privhist"

