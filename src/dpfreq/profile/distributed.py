"""The updatable ε-DP noisy histogram over a public domain as a Spark table.

:class:`DistributedProfileSketch` is :class:`~dpfreq.profile.ProfileSketch` for domains that do
not fit on one machine: the noisy histogram ``h~[ℓ] = min(h[ℓ], n) + Z_ℓ`` over the whole public
domain ``ℓ ∈ 0..d−1`` (never-seen items included) is a Spark table ``(item, value)``. The noise
is drawn on the executors, block by block, by :mod:`dpfreq.profile.histogram_noise` — the same
keyed blocks and exact sampler as the in-memory sketch, so the same master key gives the same
noise in both. Everything Spark-specific is an ε-free table operation of the Spark engine
(``get_engine("spark").tables()``); the ε, the accountant, the noise and the file format live
here.

Only the driver holds the master key; it is not saved. :meth:`save` writes the table (Parquet)
and a sealed metadata file (:func:`dpfreq.artifacts.seal_json`: format version, SHA-256, and a
digest of the table's rows); :meth:`open` validates every field and checks the table's digest in
the same pass as the first reduction.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import check_confidence, check_epsilon, check_int, message
from dpfreq.artifacts import open_json, seal_json
from dpfreq.budget import BudgetAccountant, check_accountant
from dpfreq.engines import DomainTables, get_engine
from dpfreq.errors import DataError, DPFreqError, ParameterError, public_caller, public_errors
from dpfreq.noise import discrete_laplace_gamma
from dpfreq.profile.bounds import default_bound_parameter
from dpfreq.profile.checks import check_reconstruction_memory
from dpfreq.profile.histogram_noise import NOISE_BLOCK, block_noise, master_key
from dpfreq.profile.reconstruct import reconstruct_profile_from_counts
from dpfreq.profile.result import ProfileRelease
from dpfreq.profile.sketch_files import DOMAIN_LIMIT
from dpfreq.rng import RNGLike, resolve_rng

__all__ = ["DistributedProfileSketch"]

_KIND = "DistributedProfileSketch"
_VERSION = 1
_META = "dpfreq_sketch.json"
_TABLE = "noisy_counts.parquet"
_FIELDS = {"epsilon", "gamma", "domain_size", "max_count", "seeded", "block_size", "rows",
           "digest"}


@dataclass(frozen=True)
class _BlockNoise:
    """The executors' callable: block ``b``'s exact noise under the master key (picklable)."""

    key: bytes
    gamma: Fraction

    def __call__(self, block: int, size: int) -> NDArray[np.int64]:
        return block_noise(self.key, block, size, self.gamma)


@dataclass(frozen=True)
class _Meta:
    epsilon: float
    gamma: Fraction
    domain_size: int
    max_count: int
    seeded: bool
    block_size: int


def _tables(engine: Any, source: Any) -> Any:
    """The Spark engine's table operations (``engine``: None, "spark", a SparkSession or a
    Spark engine; None infers Spark from a Spark DataFrame source or takes it anyway)."""
    if engine is None:
        name: str | None = "spark"
        if source is not None and type(source).__module__.startswith("pyspark"):
            name = None
        eng = get_engine(name, source)
    else:
        eng = get_engine(engine)
    if not isinstance(eng, DomainTables):
        raise ParameterError(message("engine", "the Spark engine (a DistributedProfileSketch "
                                     "lives in Spark)", eng.name))
    return eng.tables()


def _meta_from(payload: dict[str, Any], label: str) -> tuple[_Meta, tuple[int, int]]:
    """Validate every field of the sealed metadata; one DataError naming the file."""
    try:
        if set(payload) != _FIELDS:
            raise ValueError("its fields are not those of a DistributedProfileSketch")
        eps = check_epsilon(payload["epsilon"], "epsilon")
        gamma = Fraction(str(payload["gamma"]))
        if gamma != discrete_laplace_gamma(eps):
            raise ValueError("its gamma is not the noise fraction of its epsilon")
        ints = {}
        for name, lo, hi in (("domain_size", 1, DOMAIN_LIMIT - 1), ("max_count", 0, DOMAIN_LIMIT),
                             ("block_size", 1, DOMAIN_LIMIT), ("rows", 1, DOMAIN_LIMIT - 1),
                             ("digest", 0, DOMAIN_LIMIT * 2**32)):
            value = payload[name]
            if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
                raise ValueError(f"{name} is not an integer in [{lo}, {hi}]")
            ints[name] = value
        if not isinstance(payload["seeded"], bool):
            raise ValueError("seeded is not true or false")
        if ints["rows"] != ints["domain_size"]:
            raise ValueError("its table does not have one row per domain item")
    except (ValueError, TypeError, ZeroDivisionError, DPFreqError) as exc:
        raise DataError(f"{label} is not a valid dpfreq {_KIND} file: "
                        f"{str(exc).rstrip('.')}.") from None
    meta = _Meta(epsilon=eps, gamma=gamma, domain_size=ints["domain_size"],
                 max_count=ints["max_count"], seeded=payload["seeded"],
                 block_size=ints["block_size"])
    return meta, (ints["rows"], ints["digest"])


class DistributedProfileSketch:
    """The noisy histogram over the public domain ``0..d−1`` as a Spark table.

    Create with :meth:`create` (noise only, or noise plus the clamped counts of ``source``) or
    :meth:`open` (a saved sketch). ``table`` is the DataFrame ``(item, value)`` of noisy counts.

    Notes
    -----
    **Privacy.** Unit of privacy: ``"event"`` (add or remove one occurrence of one item; the
    only relation the sketch supports, see :class:`ProfileSketch`); neighbouring data differ
    by one occurrence, so the clamped histogram changes by at most 1 in one coordinate. Adding
    i.i.d. exact discrete Laplace noise ``DLap(e^{−γ})``, ``γ = discrete_laplace_gamma(ε) <=
    ε``, to every coordinate of the public domain makes the stored table ε-DP (Ghosh,
    Roughgarden & Sundararajan 2009); everything computed from it (:meth:`noisy_profile_counts`,
    :meth:`reconstruct`, :meth:`save`) is post-processing. The guarantee requires the master key
    to stay secret; a seeded key is for testing only. Updates add exact counts without
    clamping: the caller must keep every item's total within ``max_count``.

    Examples
    --------
    The sketch lives in a Spark table (the lines that need Spark are not run here):

    >>> from dpfreq.profile import DistributedProfileSketch
    >>> sketch = DistributedProfileSketch.create(  # doctest: +SKIP
    ...     spark.table("events"), item="user_id", domain_size=10**8, max_count=50,
    ...     epsilon=1.0, engine="spark")
    >>> sketch.save("/data/sketches/users")  # doctest: +SKIP
    >>> rel = DistributedProfileSketch.open("/data/sketches/users").reconstruct()  # doctest: +SKIP
    >>> rel.value.shape  # doctest: +SKIP
    (51,)
    """

    def __init__(self, table: Any, meta: _Meta, *, tables: Any, location: str | None = None,
                 digest: tuple[int, int] | None = None) -> None:
        self.table = table
        self._meta = meta
        self._tables = tables
        self._location = location  # directory the table is read from (open/save), if any
        self._digest = digest  # expected digest of ``table`` as saved, if it is a saved table

    # -- properties ------------------------------------------------------------------------
    @property
    def epsilon(self) -> float:
        """ε of the sketch."""
        return self._meta.epsilon

    @property
    def gamma(self) -> Fraction:
        """The exact noise parameter ``γ = discrete_laplace_gamma(ε)``."""
        return self._meta.gamma

    @property
    def domain_size(self) -> int:
        """Public domain size ``d``."""
        return self._meta.domain_size

    @property
    def max_count(self) -> int:
        """Public count cap ``n``."""
        return self._meta.max_count

    @property
    def seeded(self) -> bool:
        """Whether the noise came from a seeded (non-production) source."""
        return self._meta.seeded

    # -- construction ----------------------------------------------------------------------
    @classmethod
    @public_errors("DistributedProfileSketch.create")
    def create(
        cls,
        source: Any = None,
        *,
        item: str = "item",
        domain_size: int,
        max_count: int,
        epsilon: float,
        engine: Any = None,
        accountant: BudgetAccountant | None = None,
        rng: RNGLike = None,
        block_size: int = NOISE_BLOCK,
        num_partitions: int | None = None,
    ) -> DistributedProfileSketch:
        """Draw the noise over the whole domain on the executors (plus the clamped counts of
        ``source``).

        Parameters
        ----------
        source : Spark DataFrame, Parquet/CSV path, SQL or table name, optional
            Events (one row per occurrence) with an integer column ``item`` in ``0..d−1``.
            None: a sketch of noise only (add data with :meth:`update`).
        item : str, default "item"
            The item column of ``source``.
        domain_size : int
            Public domain size ``d`` (``1 <= d < 2^62``); items are the integers ``0..d−1``.
        max_count : int
            Public cap ``n`` on every item's count (counts of ``source`` are clamped to it).
        epsilon : float
            Privacy parameter ε in [1e-6, 1000] (pure ε-DP). No default.
        engine : "spark", SparkSession or Spark engine, optional
            Where the table lives (default: the Spark engine of the active session).
        accountant : Accountant or Ledger, optional
            Charged ``(ε, 0)`` after every check (parameters, memory of the reconstruction, the
            source's items and counts) and before any noise is drawn.
        rng : None, int or numpy.random.Generator, keyword-only
            ``None``: a fresh secret master key from the OS; otherwise the key is drawn from the
            (seeded) generator and the sketch is marked ``seeded``. With the same generator
            state and ``block_size``, the noise equals that of :class:`ProfileSketch`.
        block_size : int, default 2^20
            Domain items per noise block (one keyed CSPRNG stream per block).
        num_partitions : int, optional
            Spark partitions of the block range (default: 4 × the default parallelism).

        Returns
        -------
        DistributedProfileSketch

        Raises
        ------
        ParameterError
            Invalid parameters, a reconstruction window too large for memory, or an engine
            that is not Spark. Nothing is spent.
        DataError
            Items outside ``0..d−1``, nulls, or an unreadable source (no value is named).
            Nothing is spent.
        EngineUnavailableError
            pyspark is not installed (the message is the ``pip install`` to run).

        Notes
        -----
        **Privacy.** Unit of privacy: ``"event"`` (add or remove one row; the only relation the
        sketch supports); neighbouring sources differ by one row, so the clamped histogram
        changes by at most 1 in one coordinate.
        Every one of the ``d`` coordinates gets one exact ``DLap(e^{−γ})`` draw, ``γ <= ε``:
        the table is ε-DP (Ghosh, Roughgarden & Sundararajan 2009). The accountant is charged
        ``(ε, 0)`` once, after every check and before the noise is drawn.
        """
        d = check_int(domain_size, "domain_size", minimum=1, maximum=DOMAIN_LIMIT - 1)
        n = check_int(max_count, "max_count", minimum=0, maximum=DOMAIN_LIMIT)
        eps = check_epsilon(epsilon, "epsilon")
        bs = check_int(block_size, "block_size", minimum=1, maximum=1 << 26)
        parts = None if num_partitions is None else check_int(num_partitions, "num_partitions",
                                                              minimum=1)
        if not isinstance(item, str) or not item:
            raise ParameterError(message("item", "a non-empty column name (str)", item))
        acct = check_accountant(accountant)
        resolved = resolve_rng(rng)
        check_reconstruction_memory(n, 0, epsilon=eps)
        check_reconstruction_memory(n, default_bound_parameter(d, n, eps, 0.025), epsilon=eps)
        tables = _tables(engine, source)
        gamma = discrete_laplace_gamma(eps)
        meta = _Meta(epsilon=eps, gamma=gamma, domain_size=d, max_count=n,
                     seeded=resolved.seeded, block_size=bs)
        pending = None
        if source is not None:  # checked (one pass, cached) before anything is spent
            pending = tables.checked_counts(source, item=item, count=None, domain_size=d,
                                            clamp=n)
        if acct is not None:
            acct.spend(eps, 0.0, label="DistributedProfileSketch.create", unit="event")
        noise = _BlockNoise(key=master_key(resolved), gamma=gamma)
        table = tables.domain_table(domain_size=d, block_size=bs, block_values=noise,
                                    num_partitions=parts)
        if pending is not None:
            table = tables.add_counts(table, pending)
        return cls(table, meta, tables=tables)

    @classmethod
    @public_errors("DistributedProfileSketch.open")
    def open(cls, path: str | Path, *, engine: Any = None) -> DistributedProfileSketch:
        """Re-open a sketch written by :meth:`save` (same noise; no key needed).

        ``path`` is any Hadoop file-system URI Spark can read (local path, ``hdfs://``,
        ``s3a://``, ...). The metadata is checked now (format version, checksum, every field);
        the table's digest is checked in the same pass as the first reduction.

        Raises
        ------
        DataError
            No metadata file, a corrupted or edited one, a field out of its rules, or a table
            that is not an ``(item, value)`` table of longs: one line naming the path.
        """
        func = public_caller()
        tables = _tables(engine, None)
        root = tables.qualified(str(path))
        label = f"{path}/{_META}"
        text = tables.read_text(f"{root}/{_META}")
        if text is None:
            raise DataError(f"{path} holds no {_META} ({func}).")
        _, payload = open_json(text, kind=_KIND, versions=(_VERSION,), label=label)
        meta, digest = _meta_from(payload, label)
        table = tables.read_table(f"{root}/{_TABLE}")
        return cls(table, meta, tables=tables, location=root, digest=digest)

    @public_errors("DistributedProfileSketch.save")
    def save(self, path: str | Path) -> None:
        """Write the noisy table (Parquet) and the sealed metadata under directory ``path``.

        ``path`` is any Hadoop file-system URI Spark can write. The table is computed once,
        written and read back (this object then reads it); :meth:`open` gives the same noisy
        counts. Saving is post-processing of the ε-DP table.
        """
        root = self._tables.qualified(str(path))
        if self._location is not None and root == self._location:
            raise ParameterError(message(
                "path", "a directory other than the one this sketch's table is read from "
                "(Spark cannot overwrite its own input)", str(path)))
        table = self._tables.write_table(self.table, f"{root}/{_TABLE}")
        rows, digest = self._tables.digest(table)
        m = self._meta
        payload = {"epsilon": m.epsilon, "gamma": str(m.gamma), "domain_size": m.domain_size,
                   "max_count": m.max_count, "seeded": m.seeded, "block_size": m.block_size,
                   "rows": rows, "digest": digest}
        self._tables.write_text(f"{root}/{_META}", seal_json(payload, kind=_KIND,
                                                             version=_VERSION))
        self.table, self._location, self._digest = table, root, (rows, digest)

    # -- updates ---------------------------------------------------------------------------
    @public_errors("DistributedProfileSketch.update")
    def update(self, increments: Any, *, item: str = "item",
               count: str | None = "count") -> DistributedProfileSketch:
        """A new sketch with occurrence counts added (``h~[ℓ] += c``); this one is unchanged.

        Parameters
        ----------
        increments : Spark DataFrame or Parquet/CSV path, SQL or table name
            Rows ``(item, count)``, or one row per occurrence when ``count`` is None.
        item, count : str
            Column names.

        Notes
        -----
        No noise is drawn and no budget is spent: the noise was drawn once at creation. Counts
        are added unclamped (the sketch does not know the exact totals); keep every item's
        total within ``max_count``. Per-item sums of one update must stay below 2^52; a counter
        that would pass the int64 range makes the reductions of the new sketch refuse (never a
        wrapped value).
        """
        counts = self._tables.checked_counts(increments, item=item, count=count,
                                             domain_size=self.domain_size, clamp=None)
        return DistributedProfileSketch(self._tables.add_counts(self.table, counts), self._meta,
                                        tables=self._tables, location=self._location)

    # -- reductions ------------------------------------------------------------------------
    @public_errors("DistributedProfileSketch.noisy_profile_counts")
    def noisy_profile_counts(self, B: int) -> NDArray[np.int64]:
        """Counts of items whose noisy value is ``t``, for each integer ``t`` in ``−B…n+B``.

        Returns an int64 vector of length ``n + 2B + 1`` (position ``t + B``); values outside
        the window are not counted. One ``groupBy`` on the executors, which also checks the
        digest of a saved table and that no counter overflowed.
        """
        func = public_caller()
        b = check_int(B, "B", minimum=0, maximum=DOMAIN_LIMIT)
        counts, nulls, digest = self._tables.value_counts(self.table, low=-b,
                                                          high=self.max_count + b)
        if self._digest is not None and digest != self._digest:
            raise DataError(f"{self._location}/{_TABLE} does not match its digest in {_META}: "
                            "the table was edited or corrupted after saving.")
        if nulls:
            raise DataError(f"{func}: an update took a counter beyond the int64 range; this "
                            "sketch is refused (the sketch before that update is unchanged).")
        return counts

    @public_errors("DistributedProfileSketch.to_numpy")
    def to_numpy(self) -> NDArray[np.int64]:
        """The noisy histogram collected to the driver (only for domains that fit in memory)."""
        from dpfreq.resources import check_memory

        check_memory(24 * self.domain_size, param="domain_size",
                     value=self.domain_size, what="the collected histogram")
        return self._tables.to_numpy(self.table)

    @public_errors("DistributedProfileSketch.reconstruct")
    def reconstruct(self, *, confidence: float = 0.95, norm: int | float | str = 1,
                    method: str = "fft") -> ProfileRelease:
        """Reconstruct the profile on the driver from :meth:`noisy_profile_counts`.

        Post-processing (no budget): the window ``B`` is
        :func:`~dpfreq.profile.bounds.default_bound_parameter` at failure probability
        ``(1 − confidence)/2``; the release is that of
        :func:`~dpfreq.profile.reconstruct.reconstruct_profile_from_counts` (unit ``"event"``,
        per-class intervals and band, ``l1_bound``).
        """
        conf = check_confidence(confidence, "confidence")
        B = default_bound_parameter(self.domain_size, self.max_count, self.epsilon,
                                    (1.0 - conf) / 2.0)
        check_reconstruction_memory(self.max_count, B, epsilon=self.epsilon)
        counts = self.noisy_profile_counts(B)
        return reconstruct_profile_from_counts(
            counts, domain_size=self.domain_size, max_count=self.max_count,
            epsilon=self.epsilon, confidence=conf, norm=norm, B=B, method=method,
            seeded=self.seeded, mechanism_params={"engine": "spark",
                                                  "sketch": "DistributedProfileSketch"})
