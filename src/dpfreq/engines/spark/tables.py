"""Table operations on Spark for values keyed by a public integer domain ``0..d−1``.

These operations know nothing about privacy: no ε, no noise law, no file format of a system.
A system hands in what must run on the executors as a picklable callable (e.g. "the values of
block ``b``") and gets back DataFrames and small numpy results. They are reached through the
Spark engine (``get_engine("spark").tables()``), never by importing this module.

* :meth:`SparkTables.domain_table`: a table ``(item, value)`` with one row per domain item,
  built from ``spark.range`` over fixed blocks of the domain; each block's values come from the
  callable, run inside an executor (``mapInArrow``).
* :meth:`SparkTables.checked_counts` / :meth:`SparkTables.add_counts`: the per-item counts
  (or summed weights) of a source, checked on the executors (integral items inside the
  domain, no nulls, non-negative counts below 2^52 per item), then added by a join; a sum
  beyond int64 becomes null (``try_add``), never a wrapped value.
* :meth:`SparkTables.value_counts`: the number of rows per value on a window ``[low, high]``
  (one ``groupBy``; only ``high − low + 3`` numbers reach the driver), with the number of
  overflowed (null) values and a digest of the table computed in the same pass.
* Parquet and small text files through Hadoop's FileSystem (local, HDFS, S3, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dpfreq._validate import message
from dpfreq.engines.columns import column_error
from dpfreq.errors import DataError, public_caller

__all__ = ["BlockValues", "SparkTables", "TableDigest"]

#: ``block_values(block, size) -> int64 array of length size``: the values of the items
#: ``block·block_size .. block·block_size + size − 1``. Must be picklable.
BlockValues = Callable[[int, int], NDArray[np.int64]]

_SCHEMA = "item long, value long"
_INCREMENT_LIMIT = 1 << 52
_HASH_MASK = (1 << 24) - 1  # 24-bit hashes: their sum stays exact in a long up to d = 2^39
_INT_TYPES = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)


def _errors() -> tuple[type[BaseException], ...]:
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    return (PySparkException, Py4JError)


def _failed(exc: BaseException) -> DataError:
    """A one-line DataError naming Spark's error class only (its message may quote data), or,
    when the executors' Python cannot import dpfreq, saying what they need."""
    func = public_caller()
    from dpfreq.engines.spark.session import executor_import_error

    missing = executor_import_error(exc)
    if missing is not None:
        return DataError(f"{func} failed in Spark: {missing}.")
    condition = getattr(exc, "getCondition", lambda: None)()
    return DataError(f"{func} failed in Spark ({condition or type(exc).__name__}).")


#: ``(rows, hash sum)``: the row count and the sum of the low 24 bits of xxhash64 of every row.
TableDigest = tuple[int, int]


def _block_batches(block_values: BlockValues, domain_size: int, block_size: int) -> Any:
    """The executor-side function for ``mapInArrow``: block ids in, ``(item, value)`` out."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for batch in batches:
            for block in batch.column(0).to_numpy():
                lo = int(block) * block_size
                hi = min(lo + block_size, domain_size)
                values = np.asarray(block_values(int(block), hi - lo), dtype=np.int64)
                items = np.arange(lo, hi, dtype=np.int64)
                yield pa.RecordBatch.from_arrays([pa.array(items), pa.array(values)],
                                                 names=["item", "value"])

    return run


class SparkTables:
    """ε-free table operations on the session of a Spark engine."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    @property
    def spark(self) -> Any:
        """The engine's SparkSession."""
        return self.engine.spark

    # -- building --------------------------------------------------------------------------
    def domain_table(self, *, domain_size: int, block_size: int, block_values: BlockValues,
                     num_partitions: int | None = None) -> DataFrame:
        """``(item, value)`` for every item ``0..d−1``; block ``b``'s values are
        ``block_values(b, size)``, computed lazily on the executors. The values of an item
        depend only on its block, never on partitioning or retries (if ``block_values`` is
        deterministic)."""
        n_blocks = -(-domain_size // block_size)
        parts = (max(1, self.spark.sparkContext.defaultParallelism * 4)
                 if num_partitions is None else num_partitions)
        blocks = self.spark.range(0, n_blocks, 1, numPartitions=min(parts, n_blocks))
        return blocks.mapInArrow(_block_batches(block_values, domain_size, block_size), _SCHEMA)

    def _increments(self, source: Any, *, item: str, count: str | None) -> DataFrame:
        df = self.engine.dataframe(source)
        for column in (item, count):
            if column is not None and column not in df.columns:
                raise column_error(df, column)
        if not isinstance(df.schema[item].dataType, _INT_TYPES):
            raise DataError(message(item, "a column of integer item ids",
                                    f"type {df.schema[item].dataType.simpleString()}"))
        key = F.col(f"`{item}`")
        weight = F.lit(1).cast("long") if count is None else F.col(f"`{count}`").cast("long")
        return df.groupBy(key.cast("long").alias("item")).agg(
            F.sum(weight).alias("inc"), F.count(key).alias("nk"), F.count(F.lit(1)).alias("n"),
            F.count(weight).alias("nw"))

    def checked_counts(self, source: Any, *, item: str, count: str | None,
                       domain_size: int, clamp: int | None) -> DataFrame:
        """The per-item counts ``(item, inc)`` of ``source``, checked and cached.

        The source is aggregated once per item and the aggregate is persisted, so the checks
        and a later join read the same rows. Checks (one ``agg`` on the executors; messages
        name no value): no null item, item in ``0..d−1``, no null or negative count, every
        per-item sum below 2^52. With ``clamp`` the per-item sums are capped at it.
        """
        func = public_caller()
        inc = self._increments(source, item=item, count=count).persist()
        aggs = [
            F.count(F.when(F.col("item").isNull() | (F.col("nk") < F.col("n")), 1)).alias("nul"),
            F.count(F.when((F.col("item") < 0) | (F.col("item") >= domain_size), 1)).alias("out"),
            F.count(F.when(F.col("inc").isNull() | (F.col("inc") < 0)
                           | (F.col("nw") < F.col("n")), 1)).alias("neg"),
            F.count(F.when(F.col("inc") >= _INCREMENT_LIMIT, 1)).alias("big"),
        ]
        try:
            check = inc.agg(*aggs).collect()[0]
        except _errors() as exc:
            inc.unpersist()
            raise _failed(exc) from None
        problems = [(check["nul"], item, "free of nulls"),
                    (check["out"], item, f"item ids in the public domain 0..{domain_size - 1}"),
                    (check["neg"], count, "counts >= 0 without nulls"),
                    (check["big"], count or item, "per-item sums below 2^52 in one update")]
        for bad, column, rule in problems:
            if bad:
                inc.unpersist()
                raise DataError(f"column {column!r} of {func} must hold {rule}; some rows do not.")
        if clamp is not None:
            inc = inc.withColumn("inc", F.least(F.col("inc"), F.lit(clamp).cast("long")))
        return inc.select("item", "inc")

    @staticmethod
    def add_counts(table: DataFrame, counts: DataFrame) -> DataFrame:
        """``table`` with ``counts`` (``(item, inc)``, from :meth:`checked_counts`) added to
        ``value`` by a join. A sum beyond int64 gives a null value (found by
        :meth:`value_counts`), never a wrapped number."""
        joined = table.join(counts, on="item", how="left")
        added = F.try_add(F.col("value"), F.coalesce(F.col("inc"), F.lit(0).cast("long")))
        return joined.select("item", added.cast("long").alias("value"))

    # -- reductions ------------------------------------------------------------------------
    def value_counts(self, table: DataFrame, *, low: int, high: int) -> tuple[NDArray[np.int64],
                                                                              int, TableDigest]:
        """``(counts, nulls, digest)``: rows with value ``t`` for ``t ∈ [low .. high]``
        (position ``t − low``; values outside are not counted), rows whose value is null, and
        the :meth:`digest` of the table — in one ``groupBy`` pass."""
        clipped = F.least(F.greatest(F.col("value"), F.lit(low - 1)), F.lit(high + 1))
        # greatest/least skip nulls: an overflowed (null) value must stay null
        v = F.when(F.col("value").isNull(), F.lit(None)).otherwise(clipped - (low - 1))
        h = F.xxhash64(F.col("item"), F.col("value")).bitwiseAND(F.lit(_HASH_MASK))
        try:
            rows = table.groupBy(v.alias("v")).agg(F.count(F.lit(1)).alias("c"),
                                                   F.sum(h).alias("h")).collect()
        except _errors() as exc:
            raise _failed(exc) from None
        full = np.zeros(high - low + 3, dtype=np.int64)
        nulls, total, hashes = 0, 0, 0
        for r in rows:  # at most high − low + 4 rows
            total += int(r["c"])
            hashes += int(r["h"] or 0)
            if r["v"] is None:
                nulls += int(r["c"])
            else:
                full[int(r["v"])] = int(r["c"])
        return full[1:-1].copy(), nulls, (total, hashes)

    def digest(self, table: DataFrame) -> TableDigest:
        """``(rows, Σ (xxhash64(item, value) mod 2^24))``: a checksum of the table's contents
        (independent of row order and partitioning)."""
        h = F.xxhash64(F.col("item"), F.col("value")).bitwiseAND(F.lit(_HASH_MASK))
        try:
            row = table.agg(F.count(F.lit(1)).alias("c"), F.sum(h).alias("h")).collect()[0]
        except _errors() as exc:
            raise _failed(exc) from None
        return (int(row["c"]), int(row["h"] or 0))

    def to_numpy(self, table: DataFrame) -> NDArray[np.int64]:
        """The values in item order, collected to the driver (small domains only)."""
        func = public_caller()
        try:
            arrow = table.orderBy("item").toArrow()
        except _errors() as exc:
            raise _failed(exc) from None
        col = arrow.column("value")
        if col.null_count:
            raise DataError(f"{func}: some values overflowed int64.")
        return np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.int64)

    # -- files -----------------------------------------------------------------------------
    def _hadoop_path(self, path: str) -> tuple[Any, Any]:
        jvm: Any = self.spark.sparkContext._jvm
        hpath = jvm.org.apache.hadoop.fs.Path(path)
        fs = hpath.getFileSystem(self.spark.sparkContext._jsc.hadoopConfiguration())
        return hpath, fs

    def qualified(self, path: str) -> str:
        """The fully qualified URI of a path (``file:/...`` for local paths)."""
        hpath, fs = self._hadoop_path(path)
        return str(fs.makeQualified(hpath).toString()).rstrip("/")

    def write_text(self, path: str, text: str) -> None:
        """Write a small text file through Hadoop's FileSystem."""
        hpath, fs = self._hadoop_path(path)
        out = fs.create(hpath, True)
        try:
            out.write(bytearray(text.encode("utf-8")))
        finally:
            out.close()

    def read_text(self, path: str) -> str | None:
        """A small text file's content, or None if it does not exist."""
        hpath, fs = self._hadoop_path(path)
        if not fs.exists(hpath) or not fs.isFile(hpath):
            return None
        try:
            rows = self.spark.read.text(path, wholetext=True).collect()
        except _errors() as exc:  # e.g. the file system's own checksum of the file fails
            raise DataError(f"{path} is unreadable or corrupted ({type(exc).__name__}).") from None
        return str(rows[0][0]) if rows else ""

    def write_table(self, table: DataFrame, path: str) -> DataFrame:
        """Write ``table`` as Parquet at ``path`` (overwriting) and return it read back."""
        try:
            table.write.mode("overwrite").parquet(path)
        except _errors() as exc:
            raise _failed(exc) from None
        return self.read_table(path)

    def read_table(self, path: str) -> DataFrame:
        """The ``(item, value)`` Parquet table at ``path``; a DataError if it is not one."""
        func = public_caller()
        try:
            df = self.spark.read.parquet(path)
        except _errors() as exc:
            raise DataError(f"{path} is not a readable table ({func}).") from exc
        types = {f.name: f.dataType for f in df.schema.fields}
        if set(types) != {"item", "value"} or not all(isinstance(t, T.LongType)
                                                      for t in types.values()):
            raise DataError(f"{path} is not an (item, value) table of longs ({func}).")
        return df

