"""Time columns on Spark read as every other engine reads them, whatever the session's zone.

Every engine turns a time column into int64 microseconds since the Unix epoch: an instant
(``TIMESTAMP``, i.e. a time zone aware value) by its epoch, a zone-less value (``TIMESTAMP_NTZ``,
a naive pandas/Arrow timestamp) as if its wall clock were UTC. Spark needs two corrections:

* casting ``TIMESTAMP_NTZ`` to ``TIMESTAMP`` reads the wall clock in
  ``spark.sql.session.timeZone``, so a session in ``America/New_York`` would shift every event
  by 4 or 5 hours (and period boundaries with it). :func:`ntz_micros` computes the epoch from the
  value's own fields (day number, hour, minute, second with its fraction), which involve no zone.
* ``spark.createDataFrame`` reads naive pandas/Arrow timestamps in the session's zone and
  refuses nanoseconds: :func:`arrow_instants` hands it microsecond instants.
* Spark refuses Parquet ``TIMESTAMP(NANOS)`` columns, which pandas and pyarrow write by default.
  :func:`read_parquet` reads such a file with ``spark.sql.legacy.parquet.nanosAsLong`` (Spark's
  own way: the nanoseconds as a long; the setting stays on the session, as Spark reads lazily,
  and only turns reads that would fail into longs) and turns each nanosecond column back into a
  ``TIMESTAMP`` of ``⌊ns / 1000⌋`` microseconds (floor, as numpy's ``datetime64[ns]`` to
  ``[us]`` cast). The nanosecond columns are found in the Parquet schema by pyarrow (Spark's
  schema shows them only as longs).
"""

from __future__ import annotations

import glob as _glob
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

__all__ = ["NANOS_AS_LONG", "arrow_instants", "is_nanos_error", "ntz_micros", "read_parquet"]

#: Spark's setting that reads Parquet TIMESTAMP(NANOS) as the long number of nanoseconds
NANOS_AS_LONG = "spark.sql.legacy.parquet.nanosAsLong"
_DAY_US = 86_400_000_000


def ntz_micros(col: Column) -> Column:
    """Microseconds since the epoch of a ``TIMESTAMP_NTZ`` column, its wall clock read as UTC
    (no session time zone involved: the calendar fields of a zone-less value are its own)."""
    second_us = (F.date_part(F.lit("SECOND"), col) * F.lit(1_000_000)).cast("long")
    return (F.unix_date(F.to_date(col)).cast("long") * F.lit(_DAY_US)
            + F.hour(col).cast("long") * F.lit(3_600_000_000)
            + F.minute(col).cast("long") * F.lit(60_000_000) + second_us)


def arrow_instants(table: Any) -> Any:
    """An Arrow table's timestamp columns as microsecond instants Spark takes as they are.

    ``spark.createDataFrame`` reads a naive Arrow timestamp as a wall clock in the session's
    zone and refuses nanoseconds it would lose; here a naive column is declared UTC (its wall
    clock read as UTC, as every engine reads it) and nanoseconds are floored to microseconds.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    for i, field in enumerate(table.schema):
        ty = field.type
        if pa.types.is_timestamp(ty) and (ty.tz is None or ty.unit != "us"):
            col = table.column(i)
            if ty.unit == "ns":
                col = pc.floor_temporal(col, unit="microsecond")
            table = table.set_column(i, field.name, col.cast(pa.timestamp("us", ty.tz or "UTC")))
    return table


def is_nanos_error(exc: BaseException) -> bool:
    """Whether Spark refused a Parquet source for a nanosecond timestamp column."""
    return "TIMESTAMP(NANOS" in str(exc)


def _nanos_columns(text: str) -> list[str] | None:
    """Names of the Parquet timestamp[ns] columns at ``text`` (file, directory or glob); None if
    pyarrow cannot read the schema there (e.g. a URI of a file system it does not know)."""
    try:
        import pyarrow as pa
        import pyarrow.dataset as ds

        paths: Any = sorted(_glob.glob(text)) if any(ch in text for ch in "*?[") else text
        schema = ds.dataset(paths, format="parquet").schema
    except Exception:  # any failure means: not readable here (the caller reports Spark's error)
        return None
    return [f.name for f in schema
            if pa.types.is_timestamp(f.type) and f.type.unit == "ns"]


def _as_micros(df: DataFrame, names: list[str]) -> DataFrame:
    """The long nanosecond columns ``names`` as ``TIMESTAMP`` of ``⌊ns / 1000⌋`` µs (exact:
    ``(ns − pmod(ns, 1000)) div 1000`` in long arithmetic)."""
    longs = {f.name for f in df.schema.fields if isinstance(f.dataType, T.LongType)}
    return df.withColumns({
        name: F.timestamp_micros(F.expr(f"(`{name}` - pmod(`{name}`, 1000)) div 1000"))
        for name in names if name in longs})


def read_parquet(spark: SparkSession, text: str) -> DataFrame:
    """The Parquet source at ``text``, its nanosecond timestamp columns as ``TIMESTAMP``.

    Spark's refusal of a nanosecond column switches :data:`NANOS_AS_LONG` on (then every later
    read of such a file gives longs, converted here too); Spark's error is raised unchanged
    when pyarrow cannot find the nanosecond columns.
    """
    try:
        df = spark.read.parquet(text)
    except (PySparkException, Py4JJavaError) as exc:
        names = _nanos_columns(text) if is_nanos_error(exc) else None
        if not names:
            raise
        spark.conf.set(NANOS_AS_LONG, "true")
        return _as_micros(spark.read.parquet(text), names)
    if str(spark.conf.get(NANOS_AS_LONG, "false")).lower() == "true":
        names = _nanos_columns(text)
        if names:
            return _as_micros(df, names)
    return df
