"""The Spark engine (optional extra ``[spark]``): the same aggregates on a cluster, in Spark SQL.

Importing this package imports pyspark; :func:`dpfreq.engines.get_engine` turns a missing
pyspark into :class:`~dpfreq.errors.EngineUnavailableError` naming the extra.
"""

from dpfreq.engines.spark.engine import SparkEngine
from dpfreq.engines.spark.session import spark_session

__all__ = ["SparkEngine", "spark_session"]
