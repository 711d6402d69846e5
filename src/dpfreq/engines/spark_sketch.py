"""A distributed, updatable profile sketch on Spark (issue 7; profile spec §1.1 and §5).

The sketch is the noisy histogram ``h~[ℓ] = min(h[ℓ], n) + Z_ℓ`` over the *whole public domain*
``ℓ ∈ {0, …, d−1}`` (never-seen items included), stored as a Spark table
``(item BIGINT, noisy_count BIGINT)``. It is built from ``spark.range`` over fixed domain blocks;
each block's exact discrete Laplace noise is drawn *inside an executor* by
:func:`dpfreq.noise.sample_discrete_laplace` on the CSPRNG
``dpfreq.rng.keyed_generator(master_key, block)`` — never by SQL ``rand()``. Because the noise of
a block depends only on the key and the block index, a recomputed or retried task reproduces the
same noise (a lazily evaluated table never shows two different noise draws), and the result does
not depend on how Spark schedules or partitions the work.

Only the driver holds the master key; it is not saved. :meth:`save` writes the noisy table as
Parquet plus ``dpfreq_sketch.json`` (ε, γ fraction, d, max_count, seeded); :meth:`open` reads it
back with the same noise. :meth:`update` adds occurrence counts by a join (the sketch is
updatable, spec §1.1). :meth:`noisy_profile_counts` reduces the table on the executors to the
integer vector of length ``n + 2B + 1`` (spec §5) that :meth:`reconstruct` hands to
:func:`dpfreq.profile.reconstruct.reconstruct_profile_from_counts` on the driver.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dpfreq._validate import check_epsilon, check_int, message
from dpfreq.budget import Accountant
from dpfreq.engines.spark import SparkEngine
from dpfreq.errors import DataError, ParameterError
from dpfreq.noise import discrete_laplace_gamma
from dpfreq.rng import RNGLike, new_secret_key, resolve_rng

__all__ = ["DistributedProfileSketch"]

_META = "dpfreq_sketch.json"
_TABLE = "noisy_counts.parquet"
_SCHEMA = "item long, noisy_count long"
DEFAULT_BLOCK_SIZE = 1 << 20


def _noise_batches(key: bytes, gamma: Fraction, d: int, block_size: int) -> Any:
    """The executor-side generator for ``mapInArrow``: block ids in, (item, noise) batches out."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        from dpfreq.noise import sample_discrete_laplace
        from dpfreq.rng import keyed_generator

        for batch in batches:
            for block in batch.column(0).to_numpy():
                lo = int(block) * block_size
                hi = min(lo + block_size, d)
                gen = keyed_generator(key, 0x5E7C, int(block))
                noise = sample_discrete_laplace(gamma, hi - lo, rng=gen)
                items = np.arange(lo, hi, dtype=np.int64)
                yield pa.RecordBatch.from_arrays([pa.array(items), pa.array(noise)],
                                                 names=["item", "noisy_count"])

    return run


def _hadoop_path(spark: SparkSession, path: str) -> tuple[Any, Any]:
    """(org.apache.hadoop.fs.Path, its FileSystem) through the session's JVM."""
    jvm: Any = spark.sparkContext._jvm
    hpath = jvm.org.apache.hadoop.fs.Path(path)
    fs = hpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    return hpath, fs


def _qualified(spark: SparkSession, path: str) -> str:
    """The fully qualified URI of a path (``file:/...`` for local paths)."""
    hpath, fs = _hadoop_path(spark, path)
    return str(fs.makeQualified(hpath).toString()).rstrip("/")


def _write_text(spark: SparkSession, path: str, text: str) -> None:
    """Write a small text file through Hadoop's FileSystem (local, HDFS, S3, ...)."""
    hpath, fs = _hadoop_path(spark, path)
    out = fs.create(hpath, True)
    try:
        out.write(bytearray(text.encode("utf-8")))
    finally:
        out.close()


def _read_text(spark: SparkSession, path: str) -> str | None:
    """A small text file's content, or None if it does not exist."""
    hpath, fs = _hadoop_path(spark, path)
    if not fs.exists(hpath) or not fs.isFile(hpath):
        return None
    rows = spark.read.text(path, wholetext=True).collect()
    return str(rows[0][0]) if rows else ""


@dataclass(frozen=True)
class _Meta:
    epsilon: float
    gamma: Fraction
    domain_size: int
    max_count: int
    seeded: bool
    block_size: int

    def to_json(self) -> str:
        return json.dumps({"kind": "dpfreq.DistributedProfileSketch", "version": 1,
                           "epsilon": self.epsilon, "gamma": str(self.gamma),
                           "domain_size": self.domain_size, "max_count": self.max_count,
                           "seeded": self.seeded, "block_size": self.block_size}, indent=2)


class DistributedProfileSketch:
    """The noisy histogram over the public domain ``0..d−1`` as a Spark table.

    Create with :meth:`create` (noise only, or noise plus the clamped counts of ``data``) or
    :meth:`open` (a saved sketch). ``table`` is the DataFrame ``(item, noisy_count)``.

    Privacy
    -------
    Unit of privacy: one occurrence of one item; neighbouring data differ by one occurrence, so
    the clamped histogram changes by at most 1 in one coordinate. Adding i.i.d. exact discrete
    Laplace noise with ``γ = discrete_laplace_gamma(ε)`` (``γ <= ε``) to every coordinate of the
    public domain makes the stored table ε-DP (spec §1.1); everything computed from it
    (:meth:`noisy_profile_counts`, :meth:`reconstruct`) is post-processing. The guarantee
    requires the master key to stay secret; a seeded key is for testing only. Updates add exact
    counts without clamping: the caller must keep every item's total within ``max_count``.
    """

    def __init__(self, table: DataFrame, meta: _Meta, *, spark: SparkSession,
                 location: str | None = None) -> None:
        self.table = table
        self._meta = meta
        self.spark = spark
        self._location = location  # directory the table is read from (open/save), if any

    # -- properties ------------------------------------------------------------------------
    @property
    def epsilon(self) -> float:
        return self._meta.epsilon

    @property
    def gamma(self) -> Fraction:
        return self._meta.gamma

    @property
    def domain_size(self) -> int:
        return self._meta.domain_size

    @property
    def max_count(self) -> int:
        return self._meta.max_count

    @property
    def seeded(self) -> bool:
        return self._meta.seeded

    # -- construction ----------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        spark: SparkSession,
        *,
        domain_size: int,
        max_count: int,
        epsilon: float,
        data: Any = None,
        item: str = "item",
        rng: RNGLike = None,
        accountant: Accountant | None = None,
        block_size: int = DEFAULT_BLOCK_SIZE,
        num_partitions: int | None = None,
    ) -> DistributedProfileSketch:
        """Draw the noise over the whole domain (and add the clamped counts of ``data``).

        Parameters
        ----------
        spark : SparkSession
            The session whose executors draw the noise.
        domain_size : int
            Public domain size ``d``; items are the integers ``0..d−1``.
        max_count : int
            Public cap ``n`` on every item's count (counts of ``data`` are clamped to it).
        epsilon : float
            Privacy parameter ε (pure ε-DP).
        data : Spark DataFrame or Parquet/CSV path, optional
            Events (one row per occurrence) with an integer column ``item`` in ``0..d−1``.
        item : str, default "item"
            The item column of ``data``.
        rng : None, int or numpy.random.Generator, keyword-only
            ``None``: a fresh secret master key from the OS; otherwise the master key is drawn
            from the (seeded) generator and the sketch is marked ``seeded``.
        accountant : Accountant, optional
            Charged ``(ε, 0)`` before any noise is drawn.
        block_size : int, default 2^20
            Domain items per noise block (one keyed CSPRNG stream per block).
        num_partitions : int, optional
            Spark partitions of the block range (default: Spark's default parallelism).

        Returns
        -------
        DistributedProfileSketch
        """
        func = "DistributedProfileSketch.create"
        if not isinstance(spark, SparkSession):
            raise ParameterError(message("spark", func, "a SparkSession", type(spark).__name__))
        d = check_int(domain_size, "domain_size", func, minimum=1)
        n = check_int(max_count, "max_count", func, minimum=0)
        eps = check_epsilon(epsilon, "epsilon", func)
        bs = check_int(block_size, "block_size", func, minimum=1)
        n_blocks = -(-d // bs)
        if num_partitions is None:
            parts = max(1, spark.sparkContext.defaultParallelism * 4)
        else:
            parts = check_int(num_partitions, "num_partitions", func, minimum=1)
        parts = min(parts, n_blocks)
        resolved = resolve_rng(rng, func)
        if accountant is not None:
            accountant.spend(eps, 0.0, label=func)
        key = new_secret_key() if not resolved.seeded else resolved.generator.bytes(32)
        gamma = discrete_laplace_gamma(eps)
        blocks = spark.range(0, n_blocks, 1, numPartitions=parts)
        table = blocks.mapInArrow(_noise_batches(key, gamma, d, bs), _SCHEMA)
        meta = _Meta(epsilon=eps, gamma=gamma, domain_size=d, max_count=n,
                     seeded=resolved.seeded, block_size=bs)
        sketch = cls(table, meta, spark=spark)
        if data is not None:
            sketch = sketch._add(data, item=item, clamp=True, func=func)
        return sketch

    @classmethod
    def open(cls, path: str | Path, *, spark: SparkSession) -> DistributedProfileSketch:
        """Re-open a sketch written by :meth:`save` (same noise; no key needed).

        ``path`` is any Hadoop file-system URI Spark can read (local path, ``hdfs://``,
        ``s3a://``, ...).
        """
        func = "DistributedProfileSketch.open"
        root = _qualified(spark, str(path))
        text = _read_text(spark, f"{root}/{_META}")
        if text is None:
            raise DataError(f"path of {func}: {str(path)!r} holds no {_META}.")
        try:
            raw = json.loads(text)
            meta = _Meta(epsilon=float(raw["epsilon"]), gamma=Fraction(raw["gamma"]),
                         domain_size=int(raw["domain_size"]), max_count=int(raw["max_count"]),
                         seeded=bool(raw["seeded"]), block_size=int(raw["block_size"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise DataError(f"path of {func}: unreadable {_META} in {str(path)!r}.") from exc
        table = spark.read.parquet(f"{root}/{_TABLE}")
        return cls(table, meta, spark=spark, location=root)

    def save(self, path: str | Path) -> None:
        """Write the noisy table (Parquet) and ``dpfreq_sketch.json`` under directory ``path``.

        ``path`` is any Hadoop file-system URI Spark can write. The table is computed once and
        written; this object then reads it back, and :meth:`open` gives the same noisy counts.
        """
        root = _qualified(self.spark, str(path))
        if self._location is not None and root == self._location:
            raise ParameterError(message(
                "path", "DistributedProfileSketch.save", "a directory other than the one this "
                "sketch's table is read from (Spark cannot overwrite its own input)", str(path)))
        self.table.write.mode("overwrite").parquet(f"{root}/{_TABLE}")
        _write_text(self.spark, f"{root}/{_META}", self._meta.to_json())
        self.table = self.spark.read.parquet(f"{root}/{_TABLE}")
        self._location = root

    # -- updates ---------------------------------------------------------------------------
    def _add(self, data: Any, *, item: str, clamp: bool, func: str,
             count: str | None = None) -> DistributedProfileSketch:
        df = SparkEngine(spark=self.spark).dataframe(data, func)
        if item not in df.columns:
            raise DataError(f"column {item!r} of {func} is not in the source; available: "
                            f"{', '.join(df.columns)}.")
        if count is not None and count not in df.columns:
            raise DataError(f"column {count!r} of {func} is not in the source; available: "
                            f"{', '.join(df.columns)}.")
        key = F.col(f"`{item}`")
        weight = F.lit(1).cast("long") if count is None else F.col(f"`{count}`").cast("long")
        inc = df.groupBy(key.cast("long").alias("item")).agg(F.sum(weight).alias("inc"),
                                                             F.count(key).alias("nk"),
                                                             F.count(F.lit(1)).alias("n"))
        d = self.domain_size
        check = inc.agg(
            F.count(F.when(F.col("item").isNull() | (F.col("nk") < F.col("n")), 1)).alias("nulls"),
            F.count(F.when((F.col("item") < 0) | (F.col("item") >= d), 1)).alias("outside"),
            F.count(F.when(F.col("inc").isNull() | (F.col("inc") < 0), 1)).alias("neg"),
        ).collect()[0]
        if check["nulls"]:
            raise DataError(f"column {item!r} of {func} must be free of nulls and integral.")
        if check["outside"]:
            raise DataError(f"column {item!r} of {func} must hold items in 0..{d - 1}; got "
                            f"{check['outside']} item(s) outside the public domain.")
        if check["neg"]:
            raise DataError(f"column {count!r} of {func} must be counts >= 0 without nulls.")
        if clamp:
            inc = inc.withColumn("inc", F.least(F.col("inc"), F.lit(self.max_count)))
        joined = self.table.join(inc.select("item", "inc"), on="item", how="left")
        table = joined.select(
            "item", (F.col("noisy_count") + F.coalesce(F.col("inc"), F.lit(0))).alias(
                "noisy_count"))
        return DistributedProfileSketch(table, self._meta, spark=self.spark,
                                        location=self._location)

    def update(self, increments: Any, *, item: str = "item",
               count: str | None = "count") -> DistributedProfileSketch:
        """A new sketch with occurrence counts added (``h~[ℓ] += c``; spec §1.1, updatable).

        Parameters
        ----------
        increments : Spark DataFrame or Parquet/CSV path
            Rows ``(item, count)``, or one row per occurrence when ``count`` is None.
        item, count : str
            Column names.

        Notes
        -----
        No noise is drawn and no budget is spent: the noise was drawn once at creation. Counts
        are added unclamped (the sketch does not know the exact totals); keep every item's
        total within ``max_count``.
        """
        func = "DistributedProfileSketch.update"
        return self._add(increments, item=item, clamp=False, func=func, count=count)

    # -- reductions ------------------------------------------------------------------------
    def noisy_profile_counts(self, B: int) -> NDArray[np.int64]:
        """Counts of items whose noisy value is ``t`` for ``t ∈ [−B .. n+B]`` (spec §5).

        Returns an int64 vector of length ``n + 2B + 1`` (position ``t + B``); values outside
        the window are not counted. Computed by one ``groupBy`` on the executors.
        """
        b = check_int(B, "B", "DistributedProfileSketch.noisy_profile_counts", minimum=0)
        n = self.max_count
        v = F.least(F.greatest(F.col("noisy_count"), F.lit(-b - 1)), F.lit(n + b + 1)) + (b + 1)
        rows = self.table.groupBy(v.alias("v")).agg(F.count(F.lit(1)).alias("c")).collect()
        full = np.zeros(n + 2 * b + 3, dtype=np.int64)
        for r in rows:  # at most n + 2B + 3 rows
            full[int(r["v"])] = int(r["c"])
        return full[1:-1].copy()

    def to_numpy(self) -> NDArray[np.int64]:
        """The noisy histogram collected to the driver (only for domains that fit in memory)."""
        tbl = self.table.orderBy("item")
        if hasattr(tbl, "toArrow"):
            return np.asarray(tbl.toArrow().column("noisy_count").to_numpy(), dtype=np.int64)
        return np.array([r["noisy_count"] for r in tbl.collect()], dtype=np.int64)  # pragma: no cover  # noqa: E501

    def reconstruct(self, *, eta: float = 0.05, norm: int | float | str = 1,
                    method: str = "fft", B: int | None = None) -> Any:
        """Reconstruct the profile on the driver from :meth:`noisy_profile_counts`.

        Deterministic post-processing (no budget): calls
        :func:`dpfreq.profile.reconstruct.reconstruct_profile_from_counts` with this sketch's
        ``d``, ``n``, ε and ``seeded`` flag. ``B`` defaults to
        :func:`dpfreq.profile.reconstruct.default_bound_parameter`. Returns a ``ProfileRelease``.
        """
        from dpfreq.profile.reconstruct import (
            default_bound_parameter,
            reconstruct_profile_from_counts,
        )

        if B is None:
            B = default_bound_parameter(self.domain_size, self.max_count, self.epsilon, eta)
        counts = self.noisy_profile_counts(B)
        return reconstruct_profile_from_counts(
            counts, domain_size=self.domain_size, max_count=self.max_count,
            epsilon=self.epsilon, eta=eta, norm=norm, B=B, method=method, seeded=self.seeded,
            mechanism_params={"engine": "spark", "sketch": "DistributedProfileSketch",
                              "gamma": str(self.gamma)})
