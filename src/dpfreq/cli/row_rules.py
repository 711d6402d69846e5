"""Public rules on the rows of an input file: ``--null-group drop`` and ``--start/--end`` of
`dpfreq profile`.

A rule decides from each row alone, from public parameters (never from counts), whether the row
is released; the release then covers the rows the rule keeps and says so. The rules run where
the engine reads the file: the file becomes a DuckDB relation of the kept rows, which the
``memory`` and ``duckdb`` engines read like the file itself (the CSV columns of items and groups
read as text, as the engines read them). With ``--engine spark``, filter the table first.

The time range is the one `dpfreq reach` uses for the same ``--start``, ``--end``, ``--period``
and ``--timezone`` (:func:`dpfreq.windows.params.time_axis`): whole periods from the wall-clock
``--start`` in the zone, up to the period holding ``--end`` (a date: through that day).
"""

from __future__ import annotations

from typing import Any

import click

from dpfreq._validate import message
from dpfreq.cli._common import with_options
from dpfreq.errors import DataError, ParameterError

__all__ = ["null_group_hint", "null_group_option", "rows_kept", "time_range_options"]

_EPOCH_US = {"s": 1_000_000, "ms": 1_000, "us": 1}


def null_group_option(f: Any) -> Any:
    """``--null-group error|drop``: what a row whose group is missing does."""
    return click.option(
        "--null-group", type=click.Choice(["error", "drop"]), default="error",
        show_default=True,
        help="With --group: rows whose group is missing (null) refuse the file (error) or are "
             "dropped (drop: a public rule on each row, no count involved; the release covers "
             "the rows with a group).")(f)


def time_range_options(f: Any) -> Any:
    """``--time``, ``--start``, ``--end``, ``--period``, ``--timezone``, ``--time-unit`` of
    `dpfreq profile`: release the rows whose time lies in the public range only."""
    options = [
        click.option("--time", "time_col", default=None,
                     help="Column with each row's time; with --start/--end only the rows in "
                          "that public range are released."),
        click.option("--start", default=None,
                     help="Public start of the range (date/timestamp), as for dpfreq reach."),
        click.option("--end", default=None,
                     help="Public end of the range (a date is inclusive of that day), as for "
                          "dpfreq reach."),
        click.option("--period", default="1d", show_default=True,
                     help="The range is whole periods from --start up to the one holding "
                          "--end, as for dpfreq reach with the same --period."),
        click.option("--timezone", default="UTC", show_default=True, metavar="ZONE",
                     help="IANA zone of --start/--end (wall-clock time), as for dpfreq "
                          "reach."),
        click.option("--time-unit", type=click.Choice(["s", "ms", "us", "ns"]), default=None,
                     help="An integer --time column holds epochs in this unit."),
    ]
    return with_options(f, options)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _is_spark(engine: Any) -> bool:
    return engine == "spark" or type(engine).__name__.lower().startswith("spark")


def _time_filter(rel: Any, column: str, axis: Any) -> str:
    """The SQL condition keeping the rows whose time is in the axis' range."""
    if column not in rel.columns:
        from dpfreq.engines import column_error  # the planner commands import no engine

        raise column_error(rel, column)
    kind = str(rel.types[rel.columns.index(column)]).upper()
    col = _quoted(column)
    low, high = axis.utc_bounds()
    if axis.time_unit is not None:
        if not any(word in kind for word in ("INT", "DECIMAL")):
            raise DataError(message("--time", "an integer column of epochs (with "
                                    "--time-unit)", f"a column of type {kind}"))
        if axis.time_unit == "ns":
            return f"{col} >= {low * 1000} AND {col} < {high * 1000}"
        f = _EPOCH_US[axis.time_unit]
        return f"{col} * {f} >= {low} AND {col} * {f} < {high}"
    if "WITH TIME ZONE" in kind:  # an instant: its epoch
        us = f"epoch_us({col})"
    elif kind.startswith(("TIMESTAMP", "DATE")):  # no zone: read as UTC, as the engines do
        us = f"epoch_us(CAST({col} AS TIMESTAMP))"
    else:
        raise DataError(message("--time", "timestamps or dates (integer epochs need "
                                "--time-unit)", f"a column of type {kind}"))
    return f"{us} >= {low} AND {us} < {high}"


def rows_kept(file: str, *, item: str, group: str | None, null_group: str, engine: Any,
              time: str | None = None, start: str | None = None,
              end: str | None = None, period: str = "1d", timezone: str = "UTC",
              time_unit: str | None = None) -> Any:
    """``file`` itself when no rule applies, else a DuckDB relation of the rows the rules keep
    (the public range ``[start, end]`` of ``time``; rows with a group when ``null_group`` is
    ``"drop"``). Every parameter is checked before the file is read."""
    ranged = start is not None or end is not None
    if time is not None and not ranged:
        raise ParameterError(message("--time", "given with --start and --end (the public "
                                     "range of the rows released)", time))
    if ranged and (start is None or end is None or time is None):
        given = " ".join(f"{option} {value}" for option, value in
                         (("--start", start), ("--end", end), ("--time", time))
                         if value is not None)
        raise ParameterError(message("--start/--end", "both given, with --time", given))
    if null_group == "drop" and group is None:
        raise ParameterError(message("--null-group", "'error' without --group",
                                     null_group))
    drop = null_group == "drop"
    if not ranged and not drop:
        return file
    axis = None
    if ranged:
        from dpfreq.windows.params import time_axis

        axis = time_axis(None, start, end, period, time_unit, timezone)
    if _is_spark(engine):
        raise ParameterError(message("--engine", "memory or duckdb with --start/--end "
                                     "or --null-group drop (these rules run where DuckDB reads "
                                     "the file; with Spark, filter the table first)", "spark"))
    from dpfreq.engines import column_error
    from dpfreq.engines.duckdb import DuckDBEngine

    text = tuple(c for c in (item, group) if c is not None)
    rel = DuckDBEngine().relation(file, text_columns=text)
    conditions = []
    if drop:
        assert group is not None
        if group not in rel.columns:
            raise column_error(rel, group)
        conditions.append(f"{_quoted(group)} IS NOT NULL")
    if axis is not None:
        assert time is not None
        conditions.append(_time_filter(rel, time, axis))
    return rel.filter(" AND ".join(f"({c})" for c in conditions))


def null_group_hint(exc: DataError, group: str | None) -> DataError:
    """``exc`` with the way out when it refuses nulls in the group column (a new error to
    raise from it), else ``exc`` itself."""
    text = str(exc)
    if group is None or f"column {group!r}" not in text or "nulls" not in text:
        return exc
    return DataError(text.rstrip() + " Pass --null-group drop to release the rows that have a "
                     "group only (a public rule on each row).")
