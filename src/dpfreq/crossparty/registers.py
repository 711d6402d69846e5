"""A party's exact register frequencies, computed where its log lives (memory, DuckDB, Spark).

From a log of impressions ``(user, time[, campaign])`` — one row per impression — a party
computes, for each register ``r`` of the virtual-ID space, the capped frequency

    f[r] = min(K, number of impressions of the sampled users whose register is r)

(:mod:`dpfreq.crossparty.vid` places users; only the rows of the campaigns listed and of the
measurement period are counted). Each engine runs the same two aggregations — impressions per
user, then per register — in its own language: numpy and :mod:`hashlib` (``memory``, the
reference), SQL with ``sha256`` (``duckdb``), DataFrame expressions with ``sha2`` (``spark``);
only the ``R`` capped values reach this process. The values are **exact** (no noise): they feed
the sketch's noise here (:func:`dpfreq.crossparty.build_sketch`), and the secret-shared
protocol of a later release, and are never published as they are.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import check_int, message
from dpfreq.crossparty.params import CrossPartyParams
from dpfreq.crossparty.registers_duckdb import duckdb_registers, log_columns
from dpfreq.crossparty.registers_memory import instant_us, memory_registers
from dpfreq.crossparty.registers_spark import spark_registers
from dpfreq.crossparty.vid import vid_hash
from dpfreq.engines import get_engine
from dpfreq.errors import DataError, ParameterError, public_errors
from dpfreq.resources import check_memory

__all__ = ["LogSpec", "RegisterCounts", "check_log_spec", "register_frequencies"]


@dataclass(frozen=True)
class LogSpec:
    """Which rows of a log count, and which column holds the user.

    Attributes
    ----------
    user : str
        The user column (integers or text).
    time : str or None
        The time column (integers, or timestamps/dates read as microseconds since the Unix
        epoch, UTC), or None to count every row.
    period : tuple of int or None
        ``(start, end)``: rows with ``start <= time < end`` count (with ``time``).
    campaign : str or None
        The campaign column, or None.
    campaigns : tuple of str
        The campaigns counted (compared as text; integers in decimal), with ``campaign``.
    period_unit : {"integer", "microseconds"} or None
        What the bounds are: integers of the time column, or instants (the bounds were dates):
        a time column of the other kind is refused
        (:func:`~dpfreq.crossparty.period_unit.check_time_kind`). None: not checked.
    """

    user: str
    time: str | None = None
    period: tuple[int, int] | None = None
    campaign: str | None = None
    campaigns: tuple[str, ...] = ()
    period_unit: str | None = None


@dataclass(frozen=True)
class RegisterCounts:
    """The exact capped frequency of every register of one party (never published as is).

    Attributes
    ----------
    values : numpy.ndarray of int64
        ``f[r]`` for ``r = 0..R−1``, each in ``0..K``.
    engine : str
        The engine that computed them.
    """

    values: NDArray[np.int64]
    engine: str


def _column(value: Any, param: str) -> str:
    if not isinstance(value, str) or not value:
        raise ParameterError(message(param, "a non-empty column name (str)", value))
    return value


def _instant(value: Any) -> int:
    """A period bound as an integer: itself, or a datetime/date as µs since the epoch (UTC;
    naive datetimes are read as UTC, as timestamp columns are)."""
    if isinstance(value, dt.date):
        return instant_us(value)
    return check_int(value, "period", minimum=-(2**62), maximum=2**62)


def check_log_spec(*, user: Any, time: Any, period: Any, campaign: Any,
                   campaigns: Any, period_unit: str | None = None) -> LogSpec:
    """Validate the log arguments of the public call into a :class:`LogSpec` (one-line errors).
    The period's unit is ``period_unit`` when given (a coverage's), else what its bounds are
    (dates or datetimes: ``"microseconds"``; integers: ``"integer"``).

    Examples
    --------
    >>> check_log_spec(user="u", time="t", period=(0, 10), campaign=None, campaigns=None)
    LogSpec(user='u', time='t', period=(0, 10), campaign=None, campaigns=(), \
period_unit='integer')
    """
    u = _column(user, "user")
    t = None if time is None else _column(time, "time")
    if (t is None) != (period is None):
        raise ParameterError(message("period", "given together with time (the "
                                     "measurement period of the time column)", period))
    bounds = None
    if period is not None:
        if not isinstance(period, tuple | list) or len(period) != 2:
            raise ParameterError(message("period", "a pair (start, end)", period))
        shown = " to ".join(b.isoformat() if isinstance(b, dt.date) else str(b)
                            for b in period)
        if len({isinstance(b, dt.date) for b in period}) > 1:
            raise ParameterError(message("period", "two integers or two dates/datetimes (not "
                                         "one of each)", shown))
        bounds = (_instant(period[0]), _instant(period[1]))
        if bounds[1] <= bounds[0]:
            raise ParameterError(message("period", "a pair with start < end", shown))
    c = None if campaign is None else _column(campaign, "campaign")
    if (c is None) != (campaigns is None):
        raise ParameterError(message("campaigns", "given together with campaign (the "
                                     "public list of campaigns counted)", campaigns))
    names: tuple[str, ...] = ()
    if campaigns is not None:
        if isinstance(campaigns, str | bytes) or not hasattr(campaigns, "__iter__"):
            raise ParameterError(message("campaigns", "a list of campaign names",
                                         campaigns))
        values = list(campaigns)
        if not values or not all(isinstance(v, str) or (isinstance(v, int) and not
                                                         isinstance(v, bool)) for v in values):
            raise ParameterError(message("campaigns", "a non-empty list of campaign names "
                                         "(str or int)", campaigns))
        names = tuple(sorted({str(v) for v in values}))
    unit = None if bounds is None else period_unit or (
        "microseconds" if any(isinstance(b, dt.date) for b in period) else "integer")
    return LogSpec(user=u, time=t, period=bounds, campaign=c, campaigns=names,
                   period_unit=unit)


def _dense(regs: NDArray[np.int64], values: NDArray[np.int64], registers: int,
           max_frequency: int) -> NDArray[np.int64]:
    out = np.zeros(registers, dtype=np.int64)
    if regs.size:
        if (regs.min() < 0 or regs.max() >= registers
                or np.bincount(regs, minlength=registers).max() > 1):
            raise DataError("the engine returned registers outside 0..R-1 or twice (a bug).")
        out[regs] = np.minimum(values, max_frequency)
    return out


@public_errors("register_frequencies")
def register_frequencies(source: Any, *, spec: LogSpec, params: CrossPartyParams, key: bytes,
                         engine: Any = None
                         ) -> RegisterCounts:
    """The exact capped register frequencies of one party's log (see the module docstring).

    Parameters
    ----------
    source : mapping, path, SQL, DataFrame, DuckDB relation or Spark DataFrame
        The party's impression log, one row per impression.
    spec : LogSpec
        The columns and the rows counted (:func:`check_log_spec`).
    params : CrossPartyParams
        The measurement's public parameters.
    key : bytes
        The shared hash key (its fingerprint must be ``params.key_id``).
    engine : None, "memory", "duckdb", "spark", an engine or a SparkSession
        Where the log is aggregated (None: from the kind of ``source``).

    Returns
    -------
    RegisterCounts
        ``R`` exact values in ``0..K``. Exact: never publish them without noise.

    Raises
    ------
    ParameterError
        A wrong key or engine.
    DataError
        A missing column, a user column that is neither integers nor text, nulls in the user
        or time column, a time column that is neither integers nor timestamps.

    Examples
    --------
    >>> from dpfreq.crossparty.vid import key_fingerprint
    >>> params = CrossPartyParams(
    ...     measurement="m", registers=16, sampling_start=0, sampling_width=1, max_frequency=3,
    ...     epsilon_reach=1.0, epsilon_frequency=1.0, hash="sha256-prefix/v1",
    ...     key_id=key_fingerprint(bytes(32)))
    >>> log = {"user": [1, 1, 2, 3, 3, 3, 3]}
    >>> counts = register_frequencies(log, spec=LogSpec(user="user"), params=params,
    ...                               key=bytes(32))
    >>> int(counts.values.sum()) <= 7, int(counts.values.max()) <= 3, counts.engine
    (True, True, 'memory')
    """
    vh = vid_hash(key, params)
    check_memory(16 * params.registers, param="registers", value=params.registers,
                 what="the register frequencies (8 bytes per register)")
    eng = get_engine(engine, source)
    name = str(getattr(eng, "name", ""))
    K = params.max_frequency
    if name == "memory":
        if not isinstance(source, Mapping):  # a file, SQL or table: its columns, through DuckDB
            reader = get_engine("duckdb")
            source = log_columns(reader, reader.relation(  # type: ignore[attr-defined]
                source, text_columns=(spec.user,)), spec)
        regs, values = memory_registers(source, spec, vh, K)
    elif name == "duckdb":
        regs, values = duckdb_registers(eng.relation(source, text_columns=(  # type: ignore[attr-defined]
            spec.user,)), spec, vh, K)
    elif name == "spark":
        regs, values = spark_registers(eng.dataframe(source, text_columns=(  # type: ignore[attr-defined]
            spec.user,)), spec, vh, K)
    else:
        raise ParameterError(message("engine", "the memory, duckdb or spark engine", name))
    return RegisterCounts(_dense(regs, values, params.registers, K), name)
