"""The public entry point :func:`release_anonymized_histogram` (PrivHist, Hay et al., ``auto``).

Order of work (:mod:`dpfreq.pipeline`): validate every parameter and plan the method, check the
accountant, read the source into prevalence form (one pass through the engine), check the data
against the exactness and memory limits, charge the accountant, then draw the noise and build
the release. A refused call spends nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dpfreq._validate import message
from dpfreq.anonymized import auto
from dpfreq.anonymized.core import (
    FUNC,
    METHODS,
    build_prevalences,
    check_common,
    check_feasible,
    draw_prevalences,
    plan_method,
)
from dpfreq.anonymized.grouped import release_grouped_anonymized_histogram
from dpfreq.anonymized.histogram_input import as_prevalences, read_weighted
from dpfreq.anonymized.result import AnonymizedHistogramRelease
from dpfreq.anonymized.steps import I64, Outcome
from dpfreq.budget import BudgetAccountant
from dpfreq.errors import DataError, ParameterError, public_errors
from dpfreq.grouped.checks import check_ungrouped
from dpfreq.grouped.dropped import check_capping_epsilon
from dpfreq.pipeline import Charge, Reading, run_release
from dpfreq.rng import ResolvedRNG, RNGLike

__all__ = ["METHODS", "release_anonymized_histogram"]


def read_source(source: Any, item: str | None, count: str | None,
                engine: Any) -> tuple[I64, I64, str | None]:
    """The histogram's prevalence form and the engine's name (``None`` for in-memory forms)."""
    if item is None:
        if engine is not None or count is not None:
            what = "engine" if engine is not None else "count"
            raise ParameterError(message("item", f"a column name when {what} is given",
                                         None))
        if isinstance(source, str | bytes) or type(source).__module__.startswith(
                ("pyspark", "duckdb", "pathlib", "pandas", "polars", "pyarrow")):
            raise ParameterError(message(
                "item", "the item column's name when source is a file, SQL, a table or "
                "a Spark DataFrame", None))
        counts, prev = as_prevalences(source)
        return counts, prev, None
    if not isinstance(item, str) or not item:
        raise ParameterError(message("item", "a non-empty column name", item))
    if count is not None and (not isinstance(count, str) or not count or count == item):
        raise ParameterError(message("count", "a non-empty column name other than item",
                                     count))
    from dpfreq.engines import get_engine

    eng = get_engine(engine, source)
    if count is None:
        agg = eng.count_of_counts(source, item=item)
        counts, prev = as_prevalences(agg)
    else:
        counts, prev = read_weighted(eng, source, item=item, count=count)
    return counts, prev, eng.name


@dataclass(frozen=True)
class AnonymizedParams:
    """The checked public parameters of an ungrouped anonymized release (nothing from data)."""

    epsilon: float
    method: str
    confidence: float
    plan: auto.Plan
    domain_size: int | None


def check_anonymized_parameters(epsilon: Any, unit: Any, method: Any, split: Any,
                                confidence: Any, domain_size: Any) -> AnonymizedParams:
    """Check the public parameters of :func:`release_anonymized_histogram` and plan the
    mechanism (the method and its budget split)."""
    epsilon, confidence = check_common(epsilon, unit, method, confidence)
    plan, domain_size = plan_method(method, split, epsilon, domain_size)
    return AnonymizedParams(epsilon=epsilon, method=method, confidence=confidence, plan=plan,
                            domain_size=domain_size)


@dataclass(frozen=True)
class _Histogram:
    """The checked histogram of the source (prevalence form) and the engine that read it."""

    counts: I64
    prevalences: I64
    engine: str | None


@dataclass(frozen=True)
class _Noisy:
    outcome: Outcome
    engine: str | None
    seeded: bool


@dataclass(frozen=True)
class _AnonymizedSteps:
    """The pipeline steps (:mod:`dpfreq.pipeline`) of one ungrouped anonymized release."""

    par: AnonymizedParams
    source: Any
    item: str | None
    count: str | None
    engine: Any

    def plan(self) -> auto.Plan:
        return self.par.plan

    def charge(self, plan: auto.Plan) -> Charge:
        return Charge(self.par.epsilon, 0.0, "event", FUNC)

    def read(self, plan: auto.Plan) -> Reading[_Histogram]:
        counts, prev, engine_name = read_source(self.source, self.item, self.count, self.engine)
        check_feasible(counts, prev, self.par.epsilon, plan)
        d = self.par.domain_size
        if d is not None and int(prev.sum()) > d:
            raise DataError(message("domain_size", "at least the number of distinct "
                                    "items in the source", d))
        return Reading(_Histogram(counts, prev, engine_name))

    def draw(self, plan: auto.Plan, data: _Histogram, rng: ResolvedRNG) -> _Noisy:
        out = draw_prevalences(data.counts, data.prevalences, plan=plan,
                               epsilon=self.par.epsilon, generator=rng.generator)
        return _Noisy(out, data.engine, rng.seeded)

    def build(self, plan: auto.Plan, noisy: _Noisy) -> AnonymizedHistogramRelease:
        par = self.par
        return build_prevalences(noisy.outcome, plan=plan, epsilon=par.epsilon,
                                 method=par.method, confidence=par.confidence,
                                 seeded=noisy.seeded, engine_name=noisy.engine,
                                 domain_size=par.domain_size)


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
    accountant: BudgetAccountant | None = None,
    group: str | None = None,
    groups: Any = None,
    max_groups_per_item: int | None = None,
    delta: float | None = None,
    selection_epsilon: float | str = "auto",
    capping_epsilon: float | None = None,
) -> Any:
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
        Checked for ``epsilon`` before the source is read (an unaffordable call reads
        nothing), charged after every check has passed and before any noise is drawn.
    group, groups, delta : optional
        A grouped release of a table source
        (:func:`dpfreq.anonymized.grouped.release_grouped_anonymized_histogram`): the group
        column, and either the public list of groups (a list or a file of one name per line)
        or δ in (0, 1e-3] of the private partition selection of the data's groups (half of ε
        selects, half releases). Every group gets the whole ε (or its release half) by parallel
        composition: at ``unit="event"`` each row lies in one group.
    max_groups_per_item : None
        Refused at ``unit="event"`` (the only unit here), where no bound is needed.
    selection_epsilon : float or "auto", default "auto"
        A grouped release without ``groups``: the ε of the private partition selection, in
        (0, ``epsilon``); ``"auto"`` is half of ε.
    capping_epsilon : None
        The share of ε measuring the pairs a cap on groups per item dropped
        (:mod:`dpfreq.grouped.dropped`): refused at ``unit="event"`` (the only unit here),
        where nothing is capped (each row lies in one group).

    Returns
    -------
    AnonymizedHistogramRelease or GroupedRelease
        The released histogram (prevalence form), ``N``, an exact interval for the true total,
        and a sorted-ℓ1 error bound with its confidence; with ``group``, a
        :class:`~dpfreq.grouped.GroupedRelease` of them.

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
    check_capping_epsilon(capping_epsilon, epsilon, None)  # nothing is capped
    if any(x is not None for x in (group, groups, max_groups_per_item, delta)):
        if group is None:
            raise ParameterError(message("group", "the group column when groups, "
                                         "max_groups_per_item or delta is given", group))
        return release_grouped_anonymized_histogram(
            source, epsilon=epsilon, unit=unit, item=item, count=count, method=method,
            split=split, confidence=confidence, domain_size=domain_size, engine=engine,
            rng=rng, accountant=accountant, group=group, groups=groups,
            max_groups_per_item=max_groups_per_item, delta=delta,
            selection_epsilon=selection_epsilon)
    check_ungrouped(selection_epsilon=selection_epsilon)
    par = check_anonymized_parameters(epsilon, unit, method, split, confidence, domain_size)
    steps = _AnonymizedSteps(par=par, source=source, item=item, count=count, engine=engine)
    return run_release(steps, accountant=accountant, rng=rng)
