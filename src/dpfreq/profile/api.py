"""One-call private profile release: data in, :class:`ProfileRelease` out (issue 3 item 5).

:func:`release_profile` takes a per-item count vector or a tabular source (CSV/Parquet path,
SQL query or table, DuckDB relation, mapping of columns, Spark DataFrame), computes the exact
count-of-counts through an engine (:func:`dpfreq.engines.get_engine`), adds exact discrete
Laplace noise to the count of every item of the public domain — never-seen items included — and
reconstructs the profile with Algorithms 2+3 of Wu & Pagh (spec ``profile_reconstruction.md``
§1, §4, §5, §7–§9). Memory is ``O(n + B + chunk)``: the noisy histogram of ``d`` items is never
materialized; noise is drawn in chunks and folded straight into the noisy-profile counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import (
    check_choice,
    check_count_array,
    check_epsilon,
    check_int,
    check_open_unit,
    message,
)
from dpfreq.engines import Engine, get_engine
from dpfreq.errors import DataError, ParameterError
from dpfreq.noise import discrete_laplace_gamma, sample_discrete_laplace
from dpfreq.profile.reconstruct import (
    _METHODS,
    _norm_name,
    default_bound_parameter,
    reconstruct_profile_from_counts,
)
from dpfreq.profile.result import ProfileRelease
from dpfreq.rng import RNGLike, resolve_rng

__all__ = ["release_profile"]

_NOISE_CHUNK = 1 << 23  # items per noise chunk: 64 MiB of int64 temporaries at most


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


def noisy_profile_counts_from_classes(
    classes: NDArray[np.int64], *, max_count: int, B: int, gamma: Any,
    generator: np.random.Generator,
) -> NDArray[np.int64]:
    """Counts of ``k + Z`` on ``[−B .. n+B]`` for ``classes[k]`` items of clamped count ``k``.

    ``Z ~ DLap(e^{−γ})`` i.i.d., one per item, drawn exactly (:mod:`dpfreq.noise`) in the
    canonical order ``k = 0, 1, …, n`` and in chunks of at most 2^23 items. The result has the
    law of ``noisy_profile_counts(h + Z, max_count=n, B=B)`` for any histogram ``h`` with these
    class sizes (items are exchangeable in the profile), and it depends only on the class sizes,
    so every source holding the same multiset of counts gives the same release under one seed.
    """
    n, b = max_count, B
    P = n + 2 * b + 1
    out = np.zeros(P + 2, dtype=np.int64)
    ends = np.cumsum(classes)
    starts = ends - classes
    values = np.arange(n + 1, dtype=np.int64)
    # One sampler call per chunk of items (not per class: n can be 10^5 classes of a few items).
    for lo in range(0, int(ends[-1]) if ends.size else 0, _NOISE_CHUNK):
        size = min(int(ends[-1]) - lo, _NOISE_CHUNK)
        per_class = np.clip(ends - lo, 0, size) - np.clip(starts - lo, 0, size)
        z = sample_discrete_laplace(gamma, size, rng=generator)
        z += np.repeat(values, per_class)
        np.clip(z, -b - 1, n + b + 1, out=z)
        z += b + 1
        out += np.bincount(z, minlength=P + 2)
    return out[1:-1].copy()


def release_profile(
    source: Any,
    *,
    item: str | None = None,
    domain_size: int,
    max_count: int,
    epsilon: float,
    eta: float = 0.05,
    norm: int | float | str = 1,
    method: str = "fft",
    engine: str | Engine | None = None,
    rng: RNGLike = None,
) -> ProfileRelease:
    """Release the ε-DP profile (frequency of frequencies) of a data set (Wu & Pagh 2024).

    The profile ``f[t]`` is the fraction of the ``domain_size`` items of the public domain that
    occur exactly ``t`` times (``t = 0..max_count``); items that never occur count towards
    ``f[0]``.

    Parameters
    ----------
    source : array-like of int, str, pathlib.Path, mapping, DuckDB relation or Spark DataFrame
        Either

        * a **count vector**: 1-d non-negative integer counts, one per item. Its length may be
          smaller than ``domain_size``: the remaining domain items are taken to have count 0
          (so passing only the counts of the items that occur is fine); a length above
          ``domain_size`` is an error. ``item`` and ``engine`` must then be None; or
        * **events** (one row per occurrence of an item) in a CSV/Parquet path, a SQL query or
          table name, a DuckDB relation, a mapping ``{column: array}`` or a Spark DataFrame;
          ``item`` names the item column. The engine computes the exact count of every
          distinct item (never shown to anyone).
    item : str, optional
        The item column of a tabular source (required there; not allowed with a count vector).
    domain_size : int
        Public number of items ``d`` (never taken from the data). The data must not hold more
        than ``d`` distinct items.
    max_count : int
        Public count cap ``n``: the released profile covers ``t = 0..n``. Counts above ``n`` are
        **clamped** to ``n`` before the noise is added (so ``f[n]`` is the fraction of items
        occurring ``n`` times *or more*). Clamping is part of the mechanism and keeps the
        sensitivity at 1: it biases ``f[n]`` but leaks nothing.
    epsilon : float
        Privacy parameter ε > 0 (pure ε-DP). No default.
    eta : float, default 0.05
        Failure probability η of the reported error bound.
    norm : 1, 2 or "inf", default 1
        Norm that the reconstruction optimizes and that the error bound refers to.
    method : {"fft", "mle"}, default "fft"
        ``"fft"``: Algorithms 2+3 of the paper (with its guarantee); ``"mle"``: EM maximum
        likelihood (see :func:`reconstruct_profile_from_counts`).
    engine : {"memory", "duckdb", "spark"} or Engine, optional
        Where a tabular source is aggregated: an engine name, or an engine instance (e.g.
        ``get_engine("duckdb", connection=con)`` or a Spark engine bound to a session);
        inferred from the source when omitted (files and SQL: DuckDB; mappings: memory; Spark
        DataFrames: Spark).
    rng : None, int or numpy.random.Generator, keyword-only
        ``None`` (default): the secure CSPRNG. A seed or generator makes the release
        reproducible and marks it ``seeded`` (testing only, not for production).

    Returns
    -------
    ProfileRelease
        ``value`` is the profile ``r[0..n]``; ``error`` the high-probability bound of spec
        §9.2; ``mechanism_params`` records the engine, the clamping rule and the kernel.

    Raises
    ------
    ParameterError
        Invalid parameters (ε ≤ 0, NaN or inf; η outside (0, 1); unknown norm, method or
        engine; ``item`` missing or superfluous).
    DataError
        Negative or non-integer counts, a count vector longer than ``domain_size``, more
        distinct items than ``domain_size``, an unknown column, an unreadable or empty file.

    Notes
    -----
    **Privacy.** Unit of privacy: one occurrence (one event, one row) of one item.
    Neighbouring data sets differ by one event, so the clamped histogram ``min(h, n)`` over the
    public domain changes by at most 1 in one coordinate (ℓ1 sensitivity 1). Every one of the
    ``d`` coordinates — including items that never occur — gets independent exact discrete
    Laplace noise ``DLap(e^{−γ})`` with ``γ = discrete_laplace_gamma(ε) ≤ ε``, so the noisy
    histogram is ε-DP (Ghosh, Roughgarden & Sundararajan 2009); the noisy profile and the
    reconstruction are post-processing of it, hence the release is ε-DP. If one person (user,
    device) contributes many events, the guarantee is per *event*: a person with ``k`` events
    is protected at level ``kε`` (group privacy), not ``ε``.

    The release never records data-dependent quantities outside the DP output (not the number
    of distinct items, not how many counts were clamped). The error messages for data that
    violate the declared bounds do name the offending number (they are not a release).

    Implementation: the count vector or the engine's exact count-of-counts is reduced to class
    sizes ``m[k]`` (items with clamped count ``k``, ``m[0] = d − Σ_{k≥1} m[k]``); noise is
    drawn class by class in chunks and folded into the counts of noisy values on
    ``[−B .. n+B]`` (spec §5) with the ``B`` of :func:`default_bound_parameter`; then
    :func:`reconstruct_profile_from_counts` runs Algorithms 2+3. This has exactly the law of
    ``reconstruct_profile(min(h, n) + Z)`` and uses ``O(n + B)`` memory besides the input, so
    ``d = 10^8`` needs no 800 MB histogram. The same seed gives the same release for every
    source holding the same multiset of counts (array, CSV, Parquet, DuckDB, ...).

    References
    ----------
    Hao Wu and Rasmus Pagh. Profile Reconstruction from Private Sketches. ICML 2024.

    Examples
    --------
    >>> import numpy as np
    >>> from dpfreq.profile import release_profile
    >>> rel = release_profile(np.array([3, 1, 0, 2]), domain_size=10, max_count=4,
    ...                       epsilon=1.0, rng=7)
    >>> rel.value.shape
    (5,)
    """
    func = "release_profile"
    d = check_int(domain_size, "domain_size", func, minimum=1)
    n = check_int(max_count, "max_count", func, minimum=0)
    eps = check_epsilon(epsilon, "epsilon", func)
    et = check_open_unit(eta, "eta", func)
    norm_s = _norm_name(norm, func)
    method_s = check_choice(method, "method", func, _METHODS)
    resolved = resolve_rng(rng, func)

    classes = np.zeros(n + 1, dtype=np.int64)
    if _is_count_vector(source):
        if item is not None:
            raise ParameterError(message("item", func, "None when source is a count vector "
                                         "(columns are only named in tabular sources)", item))
        if engine is not None:
            raise ParameterError(message("engine", func, "None when source is a count vector "
                                         "(engines aggregate tabular sources)", engine))
        counts = check_count_array(source, "source", func)
        if counts.size > d:
            raise DataError(message("source", func, f"a count vector with at most domain_size = "
                                    f"{d} entries (one per domain item)",
                                    f"{counts.size} entries"))
        classes = _classes_from_vector(counts, n)
        classes[0] += d - counts.size
        engine_name = "none (count vector)"
    else:
        if item is None:
            raise ParameterError(message("item", func, "the name of the item column of the "
                                         "tabular source", item))
        if not isinstance(item, str) or not item:
            raise ParameterError(message("item", func, "a non-empty column name (str)", item))
        # get_engine accepts None, a name, an Engine instance or a SparkSession and gives the
        # one-line errors for anything else.
        eng = get_engine(engine, source)
        engine_name = str(getattr(eng, "name", type(eng).__name__))
        prev = eng.count_of_counts(source, item=item, max_count=n if n >= 1 else None)
        values = np.asarray(prev.counts, dtype=np.int64)
        sizes = np.asarray(prev.prevalences, dtype=np.int64)
        distinct = int(sizes.sum())
        if distinct > d:
            raise DataError(f"source of {func} holds {distinct} distinct items in column "
                            f"{item!r}, more than domain_size = {d}; domain_size must be the "
                            "public size of a domain containing every item.")
        np.add.at(classes, np.minimum(values, n), sizes)
        classes[0] += d - distinct

    gamma = discrete_laplace_gamma(eps)
    b = default_bound_parameter(d, n, eps, et)
    profile_counts = noisy_profile_counts_from_classes(
        classes, max_count=n, B=b, gamma=gamma, generator=resolved.generator)
    params = {
        "engine": engine_name,
        "clamping": f"counts above max_count = {n} clamped to {n} before noising",
        "noise": "exact discrete Laplace, one draw per domain item",
        "unit_of_privacy": "one occurrence (event) of one item",
    }
    return reconstruct_profile_from_counts(
        profile_counts, domain_size=d, max_count=n, epsilon=eps, eta=et, norm=norm_s,
        method=method_s, B=b, seeded=resolved.seeded, mechanism_params=params,
    )
