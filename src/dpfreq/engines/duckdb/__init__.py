"""The DuckDB engine: exact aggregates of CSV/Parquet files, SQL, relations and DataFrames on
one machine (the default engine for files and tables)."""

from dpfreq.engines.duckdb.engine import DuckDBEngine

__all__ = ["DuckDBEngine"]
