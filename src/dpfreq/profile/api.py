"""One-call private profile release: data in, :class:`ProfileRelease` out.

:func:`release_profile` computes the exact count-of-counts of a data set through an engine
(:func:`dpfreq.engines.get_engine`) — only ``n + 1`` numbers reach this process — and releases
it either directly (noise on the ``n + 1`` classes, :mod:`dpfreq.profile.direct`) or through the
Wu & Pagh sketch (noise on each of the ``d`` item counts, then reconstruction).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import (
    check_count_array,
    message,
)
from dpfreq.budget import BudgetAccountant
from dpfreq.engines import Engine, get_engine
from dpfreq.errors import DataError, ParameterError, public_caller, public_errors
from dpfreq.grouped.checks import check_ungrouped
from dpfreq.noise import discrete_laplace_gamma
from dpfreq.pipeline import Charge, Reading, run_release
from dpfreq.profile.bounds import default_bound_parameter, minimum_bound_parameter
from dpfreq.profile.checks import check_reconstruction_memory
from dpfreq.profile.direct import DirectLayout, direct_layout
from dpfreq.profile.direct_release import (
    ProfileMechanism,
    draw_direct,
    release_direct,
)
from dpfreq.profile.grouped import release_grouped_profile
from dpfreq.profile.histogram_noise import noisy_profile_counts_from_classes
from dpfreq.profile.plan import ProfileParams, check_profile_parameters
from dpfreq.profile.result import ProfileRelease
from dpfreq.resources import check_memory
from dpfreq.rng import ResolvedRNG, RNGLike

__all__ = ["release_profile"]

_FUNC = "release_profile"
_NOISE_CHUNK = 1 << 23  # items per noise chunk: 64 MiB of int64 temporaries at most
_NORMS = {"1": "1", "2": "2", "inf": "inf", 1: "1", 2: "2"}


def _is_count_vector(source: Any) -> bool:
    """A numpy array, list, tuple or other array-like (not a table, path or relation)."""
    if isinstance(source, np.ndarray | list | tuple):
        return True
    if isinstance(source, str | Path | Mapping | bytes):
        return False
    module = type(source).__module__
    if module.startswith("pandas") and type(source).__name__ == "Series":
        return True
    if module.startswith(("pyspark", "duckdb", "pandas", "polars", "pyarrow")):
        return False
    return hasattr(source, "__array__")


def _classes_from_vector(counts: NDArray[np.int64], max_count: int) -> NDArray[np.int64]:
    """``m[k]`` = number of entries whose clamped count is ``k`` (``k = 0..n``), chunk by chunk."""
    m = np.zeros(max_count + 1, dtype=np.int64)
    for start in range(0, counts.size, _NOISE_CHUNK):
        part = np.minimum(counts[start : start + _NOISE_CHUNK], max_count)
        m += np.bincount(part, minlength=max_count + 1)
    return m


def _classes(source: Any, item: str | None, engine: Any, d: int,
             n: int) -> tuple[NDArray[np.int64], str]:
    """The exact class sizes ``c[0..n]`` (``c[0]`` includes never-seen domain items)."""
    func = public_caller()
    if _is_count_vector(source):
        if item is not None:
            raise ParameterError(message("item", "None when source is a count vector "
                                         "(columns are only named in tabular sources)", item))
        if engine is not None:
            raise ParameterError(message("engine", "None when source is a count vector "
                                         "(engines aggregate tabular sources)", engine))
        counts = check_count_array(source, "source")
        if counts.size > d:
            raise DataError(message("source", "a count vector with at most domain_size "
                                    f"= {d} entries (one per domain item)", "a longer vector"))
        classes = _classes_from_vector(counts, n)
        classes[0] += d - counts.size
        return classes, "none (count vector)"
    if item is None:
        raise ParameterError(message("item", "the name of the item column of the "
                                     "tabular source", item))
    if not isinstance(item, str) or not item:
        raise ParameterError(message("item", "a non-empty column name (str)", item))
    eng = get_engine(engine, source)
    prev = eng.count_of_counts(source, item=item, max_count=n if n >= 1 else None)
    values = np.asarray(prev.counts, dtype=np.int64)
    sizes = np.asarray(prev.prevalences, dtype=np.int64)
    distinct = int(sizes.sum())
    if distinct > d:
        raise DataError(f"source of {func} holds more distinct items in column {item!r} than "
                        f"domain_size = {d}; domain_size must be the public size of a domain "
                        "containing every item.")
    classes = np.zeros(n + 1, dtype=np.int64)
    np.add.at(classes, np.minimum(values, n), sizes)
    classes[0] += d - distinct
    return classes, eng.name


@dataclass(frozen=True)
class _Classes:
    """The exact class sizes ``c[0..n]`` of the source and the engine that counted them."""

    classes: NDArray[np.int64]
    engine: str


@dataclass(frozen=True)
class _Noisy:
    """The noisy values of a profile release: the noisy count-of-counts (direct) or the
    counts of the noisy item counts (sketch)."""

    values: NDArray[np.int64]
    engine: str
    seeded: bool


@dataclass(frozen=True)
class _Plan:
    """The calibration of a profile release: the direct method's noise layout, or the
    sketch's bound parameter ``B``."""

    layout: DirectLayout | None
    B: int = 0


@dataclass(frozen=True)
class _ProfileSteps:
    """The pipeline steps (:mod:`dpfreq.pipeline`) of one ungrouped profile release."""

    par: ProfileParams
    norm: str
    source: Any
    item: str | None
    engine: Any

    def plan(self) -> _Plan:
        d, n, eps = self.par.domain_size, self.par.max_count, self.par.epsilon
        check_memory(64 * (n + 1), param="max_count", value=n,
                     what="the count-of-counts of n + 1 classes")
        if self.par.method == "direct":
            return _Plan(direct_layout(self.par.unit, eps, n))
        B = default_bound_parameter(d, n, eps, (1.0 - self.par.confidence) / 2.0)
        B = max(B, minimum_bound_parameter(float(discrete_laplace_gamma(eps))))
        check_reconstruction_memory(n, B, epsilon=eps)
        return _Plan(None, B)

    def charge(self, plan: _Plan) -> Charge:
        return Charge(self.par.epsilon, 0.0, self.par.unit, _FUNC)

    def read(self, plan: _Plan) -> Reading[_Classes]:
        classes, engine_name = _classes(self.source, self.item, self.engine,
                                        self.par.domain_size, self.par.max_count)
        return Reading(_Classes(classes, engine_name))

    def draw(self, plan: _Plan, data: _Classes, rng: ResolvedRNG) -> _Noisy:
        par, gen = self.par, rng.generator
        if plan.layout is not None:
            y = draw_direct(data.classes, plan.layout, d=par.domain_size, n=par.max_count,
                            gen=gen)
        else:
            y = noisy_profile_counts_from_classes(
                data.classes, max_count=par.max_count, B=plan.B,
                gamma=discrete_laplace_gamma(par.epsilon), generator=gen)
        return _Noisy(y, data.engine, rng.seeded)

    def build(self, plan: _Plan, noisy: _Noisy) -> ProfileRelease:
        par = self.par
        d, n, eps, u, conf = par.domain_size, par.max_count, par.epsilon, par.unit, \
            par.confidence
        params = ProfileMechanism(engine=noisy.engine, why=par.why, method=par.method,
                                  domain_size=d, max_count=n, confidence=conf,
                                  unit=u).to_dict()
        return ProfileRelease.from_measurement(
            noisy.values, method=par.method, domain_size=d, max_count=n, epsilon=eps, unit=u,
            confidence=conf, norm=self.norm, B=plan.B, seeded=noisy.seeded,
            mechanism_params=params)


@public_errors("release_profile")
def release_profile(
    source: Any,
    *,
    item: str | None = None,
    domain_size: int,
    max_count: int,
    epsilon: float,
    unit: str,
    method: str = "auto",
    confidence: float = 0.95,
    norm: int | str = 1,
    engine: str | Engine | None = None,
    rng: RNGLike = None,
    accountant: BudgetAccountant | None = None,
    group: str | None = None,
    max_groups_per_item: int | str | None = None,
    groups: Any = None,
    delta: float | None = None,
    selection_epsilon: float | str = "auto",
    selection: str = "auto",
    capping_epsilon: float | None = None,
) -> Any:
    """Release the ε-DP profile (frequency of frequencies) of a data set.

    The profile ``f[t]`` is the fraction of the ``domain_size`` items of the public domain that
    occur exactly ``t`` times (``t = 0..max_count``); items that never occur count towards
    ``f[0]`` and items occurring more than ``max_count`` times towards ``f[max_count]``.

    Parameters
    ----------
    source : array-like of int, path, SQL, mapping, DataFrame, DuckDB relation or Spark DataFrame
        Either a **count vector** (1-d non-negative integer counts, one per item; entries beyond
        its length up to ``domain_size`` are items with count 0; ``item`` and ``engine`` must
        then be None) or **events** (one row per occurrence of an item) in a CSV/Parquet path, a
        SQL query or table name, a DuckDB relation, a mapping ``{column: array}``, a pandas,
        Polars or Arrow table, or a Spark DataFrame, with ``item`` naming the item column.
    item : str, optional
        The item column of a tabular source.
    domain_size : int
        Public number of items ``d``, ``1 <= d < 2^62`` (the class sizes must be exact in int64
        arithmetic). Never taken from the data; the data must not hold more distinct items.
    max_count : int
        Public count cap ``n >= 1``; counts above ``n`` are **clamped** to ``n`` before the
        noise (``n = 0`` would release a profile of nothing and is refused before anything is
        read or spent).
        A cap whose arrays cannot fit in memory is refused with an estimate of the need.
    epsilon : float
        Privacy parameter ε (pure ε-DP). No default.
    unit : {"event", "item", "item_replace"}
        Unit of privacy, no default: ``"item"`` — add or remove one item with all its rows;
        ``"item_replace"`` — replace one item's rows (both only with
        ``method="direct"``/``"auto"``); ``"event"`` — add or remove one row.
    method : {"auto", "direct", "fft", "mle"}, default "auto"
        ``"direct"``: noise on the ``n + 1`` classes of the count-of-counts, then the nearest
        valid profile. ``"fft"``/``"mle"``: the Wu & Pagh sketch (noise on every one of the
        ``d`` item counts) reconstructed by Algorithms 2+3 or by EM. ``"auto"`` chooses from
        public parameters only (``"direct"`` for this one-shot release) and records why in
        ``mechanism_params["why"]``.
    confidence : float, default 0.95
        Level of the per-class intervals, of the simultaneous band and of ``l1_bound``.
    norm : 1, 2 or "inf", default 1
        Norm optimized by the ``fft`` reconstruction (ignored by ``direct``).
    engine : {"memory", "duckdb", "spark"} or Engine, optional
        Where a tabular source is aggregated (inferred from the source when omitted). Only the
        ``n + 1`` class sizes reach this process.
    rng : None, int or numpy.random.Generator, keyword-only
        ``None``: the secure CSPRNG. A seed or generator makes the release reproducible and marks
        it ``seeded`` (testing only).
    accountant : Accountant or Ledger, optional
        Checked for ε before the source is read (an unaffordable call reads nothing),
        charged after every check (parameters, memory estimate, data) has passed and before
        any noise is drawn; a refused call spends nothing.
    group, max_groups_per_item, groups : optional
        A grouped release (:func:`dpfreq.profile.grouped.release_grouped_profile`): the group
        column, the public bound ``m`` on groups per item (required with ``group``; or
        ``"auto"``: chosen privately in 1..16 to minimise the predicted bias + noise, with
        ``capping_epsilon`` paying for it, :mod:`dpfreq.grouped.bound_choice`) and the
        public list of groups; returns a :class:`~dpfreq.grouped.GroupedRelease`.
    delta : float, optional
        Only for a grouped release: δ in (0, 1e-3]. Without ``groups`` it pays for the private
        partition selection of the data's groups (:mod:`dpfreq.grouped.selection`; half of ε
        selects, half releases); with or without ``groups`` it lets the groups compose in
        zCDP, used when that gives each group a larger ε than ε/m
        (:mod:`dpfreq.grouped.accounting`; ``mechanism_params["accounting"]`` says which and
        why). No default; the ungrouped profile is pure ε-DP and refuses it. A
        :class:`~dpfreq.errors.PrivacyWarning` when ``delta >= 1/domain_size`` (a δ that large
        may publish one of the domain's items outright).
    selection_epsilon : float or "auto", default "auto"
        A grouped release without ``groups``: the ε of the private partition selection, in
        (0, ``epsilon``); ``"auto"`` is half of ε.
    selection : {"auto", "truncated_geometric", "set_union"}, default "auto"
        A grouped release without ``groups``: the selection's mechanism (the truncated
        geometric on each group's item count, or the weighted set union, in which an item with
        ``s`` kept groups gives each a ``1/s`` share); ``"auto"`` chooses from public
        parameters and says why (:func:`dpfreq.grouped.selection.plan_partition_selection`).
    capping_epsilon : float or None, default None
        A grouped release: None (the dropped fraction is not measured), or the share of
        ``epsilon``, in (0, ``epsilon``), that measures the fraction of (item, group) pairs the
        cap ``max_groups_per_item`` dropped (``rel.dropped_fraction``, with its interval;
        :mod:`dpfreq.grouped.dropped`); the release spends the rest (basic composition).
        Required with ``max_groups_per_item="auto"``: it then measures the histogram of
        groups per item that ``m`` and the dropped fraction are computed from
        (``mechanism_params["bound_choice"]`` states ``m``, this ε and why).

    Returns
    -------
    ProfileRelease
        ``value`` is the profile ``r[0..n]``; ``error`` has per-class intervals and a band;
        ``l1_bound`` an ℓ1 bound at ``confidence``; ``unit`` the unit of privacy.

    Raises
    ------
    ParameterError
        Invalid parameters (ε outside [1e-6, 1000], unit missing, or ``"item"``/
        ``"item_replace"`` with a sketch method, ``domain_size >= 2^62``, a ``max_count`` too
        large for memory, ...).
    DataError
        Negative or non-integer counts, a count vector longer than ``domain_size``, more
        distinct items than ``domain_size``, an unknown column, an unreadable file.
    BudgetExceededError
        If the accountant's budget does not cover ε (nothing is charged or drawn).

    Notes
    -----
    **Privacy.** The unit names the neighbouring relation (:data:`dpfreq.release.RELATIONS`;
    the domain is public, so an item without rows is in class 0). ``method="direct"``, unit
    ``"item"`` (add or remove one item with all its rows): the item moves between a class
    ``k >= 1`` and class 0, so the classes ``t >= 1`` change by exactly one in one coordinate
    (ℓ1 sensitivity 1); they are released with independent exact ``DLap(e^{−γ})`` noise,
    ``γ = ε`` (rounded down to an exact fraction), and class 0 is ``d`` minus their sum
    (post-processing of the noisy classes and the public ``d``). Units ``"item_replace"``
    (replace one item's rows: the item moves from class ``a`` to class ``b``) and ``"event"``
    (add or remove one row: one item moves between adjacent classes, or not at all): all
    ``n + 1`` classes change by at most 2 in ℓ1 and all get noise with ``γ = ε/2``. Either way
    the noisy vector is ε-DP (Ghosh, Roughgarden & Sundararajan 2009); the layout is chosen from
    public parameters (``mechanism_params["layout_why"]``), and the projection and intervals
    are post-processing. ``method="fft"``/``"mle"`` (unit ``"event"`` only): every one of the
    ``d`` clamped item counts gets ``DLap(e^{−ε})`` (sensitivity 1 per event) and the profile
    is reconstructed from the noisy counts (Wu & Pagh 2024); an item with ``k`` rows is
    protected at ``kε``.

    Only the ``n + 1`` exact class sizes leave the engine; the release records no
    data-dependent number besides its noisy outputs, and error messages do not print counts.

    The direct method is far more accurate here than the sketch: its error does not grow with
    ``d`` (a few items per class), while the sketch's grows like ``√d``. The sketch is the tool
    for updatable and distributed histograms (:class:`ProfileSketch`).

    References
    ----------
    Michael Hay, Chao Li, Gerome Miklau and David Jensen. Accurate Estimation of the Degree
    Distribution of Private Networks. ICDM 2009.
    Hao Wu and Rasmus Pagh. Profile Reconstruction from Private Sketches. ICML 2024.

    Examples
    --------
    >>> import numpy as np
    >>> from dpfreq.profile import release_profile
    >>> rel = release_profile(np.array([3, 1, 0, 2]), domain_size=10, max_count=4,
    ...                       epsilon=1.0, unit="item", rng=7)
    >>> rel.value.shape, rel.unit, rel.method
    ((5,), 'item', 'direct')
    """
    if group is not None or max_groups_per_item is not None or groups is not None:
        if group is None:
            raise ParameterError(message("group", "the group column when "
                                         "max_groups_per_item or groups is given", group))
        return release_grouped_profile(
            source, item=item, group=group, groups=groups,
            max_groups_per_item=max_groups_per_item, domain_size=domain_size,
            max_count=max_count, epsilon=epsilon, unit=unit, confidence=confidence,
            engine=engine, rng=rng, accountant=accountant, delta=delta,
            selection_epsilon=selection_epsilon, selection=selection,
            capping_epsilon=capping_epsilon, release_one=release_direct)
    if delta is not None:
        raise ParameterError(message("delta", "None without group= (the profile is pure "
                                     "ε-DP; delta is the δ of private partition selection of "
                                     "groups)", delta))
    check_ungrouped(selection_epsilon=selection_epsilon, selection=selection,
                    capping_epsilon=capping_epsilon)
    par = check_profile_parameters(domain_size, max_count, epsilon, unit, confidence, method)
    norm_s = _NORMS.get(norm) if isinstance(norm, int | str) and not isinstance(norm, bool) \
        else None
    if norm_s is None:
        raise ParameterError(message("norm", "one of 1, 2, 'inf'", norm))
    steps = _ProfileSteps(par=par, norm=norm_s, source=source, item=item, engine=engine)
    return run_release(steps, accountant=accountant, rng=rng)
