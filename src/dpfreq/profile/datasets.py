"""Synthetic ad-impression logs for demos, tests and benchmarks, and their exact profiles.

:func:`make_impressions` simulates a week of ad impressions over a public domain of potential
users; :func:`write_impressions` writes such a log to Parquet (through DuckDB, no pyarrow
needed); :func:`true_profile` computes the exact, **non-private** profile of a count vector for
comparison with a private release.

Generating synthetic data is not a release: nothing here is differentially private, and
nothing here should ever be run on real data and published. Randomness still goes through
:func:`dpfreq.rng.resolve_rng` (an integer seed gives a reproducible log).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq._validate import (
    check_count_array,
    check_int,
    check_open_unit,
    check_positive_float,
    message,
)
from dpfreq.errors import DataError, ParameterError, public_caller, public_errors
from dpfreq.resources import check_memory
from dpfreq.rng import RNGLike, resolve_rng

__all__ = [
    "DEFAULT_CAMPAIGNS",
    "ImpressionLog",
    "make_impressions",
    "true_profile",
    "write_impressions",
]

#: Campaign names of the synthetic log; campaign ``i`` is shown with weight ``1 / (i + 1)``.
DEFAULT_CAMPAIGNS: tuple[str, ...] = (
    "spring_sale", "brand_awareness", "retargeting", "app_install", "video_launch",
)

#: Relative traffic per hour of the day (UTC): a night trough and an evening peak.
_HOURLY = np.array([2, 1, 1, 1, 1, 2, 4, 6, 7, 7, 7, 8, 9, 8, 7, 7, 8, 9, 11, 13, 14, 12, 8, 4],
                   dtype=np.float64)

_US_PER_HOUR = 3_600_000_000
_US_PER_DAY = 24 * _US_PER_HOUR


@dataclass(frozen=True, eq=False)
class ImpressionLog:
    """A synthetic impression log: one row per impression, in time order.

    Attributes
    ----------
    user : numpy.ndarray of int64
        Domain index ``0..domain_size-1`` of the user who saw each impression.
    timestamp : numpy.ndarray of datetime64[us]
        Time of each impression (UTC), non-decreasing.
    campaign : numpy.ndarray of int64
        Index into ``campaigns`` of each impression.
    campaigns : tuple of str
        Campaign names.
    domain_size : int
        Number of potential users ``d`` (the public domain); most are never reached.
    """

    user: NDArray[np.int64]
    timestamp: NDArray[np.datetime64]
    campaign: NDArray[np.int64]
    campaigns: tuple[str, ...]
    domain_size: int

    def __len__(self) -> int:
        return int(self.user.size)

    @property
    def id_width(self) -> int:
        """Number of digits of the user ids (``u`` + zero-padded domain index, at least 7)."""
        return max(7, len(str(self.domain_size - 1)))

    def counts(self) -> NDArray[np.int64]:
        """Exact impressions per domain user (length ``domain_size``; zeros for the unreached)."""
        return np.bincount(self.user, minlength=self.domain_size).astype(np.int64)

    def user_ids(self) -> NDArray[np.str_]:
        """The user id strings (``"u0001234"``) of the rows, as :func:`write_impressions` writes.

        Formats one string per row: fine for small logs, slow for millions of rows.
        """
        width = self.id_width
        return np.array([f"u{u:0{width}d}" for u in self.user.tolist()], dtype=f"<U{width + 1}")

    def columns(self, *, string_ids: bool = False) -> dict[str, NDArray[Any]]:
        """The log as a mapping of columns (a source for the memory engine).

        ``user_id`` holds the integer domain index, or with ``string_ids=True`` the id strings
        (slow for large logs). ``campaign`` holds the campaign names.
        """
        names = np.array(self.campaigns)
        return {
            "user_id": self.user_ids() if string_ids else self.user,
            "timestamp": self.timestamp,
            "campaign": names[self.campaign],
        }


def _zero_truncated_negative_binomial(size: int, mean: float, dispersion: float,
                                      generator: np.random.Generator) -> NDArray[np.int64]:
    """Exact draws of ``NB(r, p) | NB >= 1`` by redrawing the zeros (vectorized rejection)."""
    p = dispersion / (dispersion + mean)
    out = generator.negative_binomial(dispersion, p, size=size).astype(np.int64)
    zeros = np.flatnonzero(out == 0)
    while zeros.size:
        out[zeros] = generator.negative_binomial(dispersion, p, size=zeros.size)
        zeros = zeros[out[zeros] == 0]
    return out


@public_errors("make_impressions")
def make_impressions(
    n_users: int = 1_000_000,
    *,
    domain_size: int | None = None,
    heavy_fraction: float = 0.2,
    light_mean: float = 2.5,
    light_dispersion: float = 1.5,
    heavy_median: float = 8.0,
    heavy_sigma: float = 1.0,
    max_impressions: int = 1000,
    days: int = 7,
    start: str = "2024-01-01",
    campaigns: Sequence[str] = DEFAULT_CAMPAIGNS,
    rng: RNGLike = None,
) -> ImpressionLog:
    """Simulate a realistic ad-impression log over a public domain of potential users.

    ``n_users`` users, a uniformly random subset of the ``domain_size`` potential users, are
    reached at least once; the others never appear in the log (count 0). A reached user's
    number of impressions follows a two-part mixture typical of ad delivery:

    * light users (probability ``1 − heavy_fraction``): zero-truncated negative binomial with
      untruncated mean ``light_mean`` and dispersion ``light_dispersion``;
    * heavy users (probability ``heavy_fraction``): discrete log-normal
      ``ceil(exp(N(ln heavy_median, heavy_sigma²)))``, a long tail of heavy browsers,

    capped at ``max_impressions`` per user (a delivery frequency cap, which also bounds the
    size of the log). Impressions are spread over ``days`` days from ``start`` with a diurnal
    pattern (evening peak, night trough); each one shows a campaign with weight
    ``1 / (i + 1)`` for the ``i``-th campaign.

    Parameters
    ----------
    n_users : int, default 1_000_000
        Number of users reached (distinct users in the log), ``>= 1``.
    domain_size : int, optional
        Number of potential users ``d >= n_users``; default ``2 * n_users``.
    heavy_fraction : float, default 0.2
        Share of heavy users, in (0, 1).
    light_mean, light_dispersion : float, default 2.5 and 1.5
        Mean and dispersion ``r`` of the (untruncated) negative binomial of light users.
    heavy_median, heavy_sigma : float, default 8.0 and 1.0
        Median and log-scale spread of the heavy users' impressions.
    max_impressions : int, default 1000
        Frequency cap: no user gets more impressions.
    days : int, default 7
        Length of the period covered, in days.
    start : str, default "2024-01-01"
        First day (ISO date, UTC).
    campaigns : sequence of str, default :data:`DEFAULT_CAMPAIGNS`
        Campaign names.
    rng : None, int or numpy.random.Generator, keyword-only
        Random source (:func:`dpfreq.rng.resolve_rng`); an integer gives a reproducible log.

    Returns
    -------
    ImpressionLog
        The rows in time order, with the domain size.

    Raises
    ------
    ParameterError
        On invalid parameters.

    Notes
    -----
    **Privacy.** None: this is synthetic data for demos and tests, not a release.

    The default log holds about 5.3 impressions per reached user (≈ 5.3 million rows for a
    million users); about 0.7 % of the reached users exceed 50 impressions.

    Examples
    --------
    >>> log = make_impressions(1000, rng=3)
    >>> log.domain_size, int((log.counts() > 0).sum())
    (2000, 1000)
    """
    n = check_int(n_users, "n_users", minimum=1)
    d = 2 * n if domain_size is None else check_int(domain_size, "domain_size", minimum=n)
    heavy = check_open_unit(heavy_fraction, "heavy_fraction")
    mean = check_positive_float(light_mean, "light_mean")
    disp = check_positive_float(light_dispersion, "light_dispersion")
    median = check_positive_float(heavy_median, "heavy_median")
    sigma = check_positive_float(heavy_sigma, "heavy_sigma")
    cap = check_int(max_impressions, "max_impressions", minimum=1)
    n_days = check_int(days, "days", minimum=1)
    # about 5.3 rows per user of user, timestamp and campaign (8 bytes each), a few copies
    # while sampling and sorting: refuse before allocating rather than run out of memory
    check_memory(n * (mean + 1) * 24 * 3, param="n_users", value=n,
                 what="the synthetic impression log")
    try:
        origin = np.datetime64(start, "us")
    except (TypeError, ValueError):
        raise ParameterError(message("start", "an ISO date or timestamp", start)) from None
    if np.isnat(origin):
        raise ParameterError(message("start", "an ISO date or timestamp", start))
    names = tuple(campaigns) if not isinstance(campaigns, str) else (campaigns,)
    if not names or not all(isinstance(c, str) and c for c in names):
        raise ParameterError(message("campaigns", "a non-empty sequence of non-empty "
                                     "strings", campaigns))
    gen = resolve_rng(rng).generator

    users = gen.choice(d, size=n, replace=False).astype(np.int64)
    is_heavy = gen.random(n) < heavy
    per_user = np.empty(n, dtype=np.int64)
    n_light = int(n - is_heavy.sum())
    per_user[~is_heavy] = _zero_truncated_negative_binomial(n_light, mean, disp, gen)
    heavy_draws = np.ceil(np.exp(gen.normal(math.log(median), sigma, size=n - n_light)))
    per_user[is_heavy] = np.clip(heavy_draws, 1, cap).astype(np.int64)
    np.minimum(per_user, cap, out=per_user)

    user = np.repeat(users, per_user)
    rows = user.size
    day = gen.integers(0, n_days, size=rows, dtype=np.int64)
    hour = gen.choice(24, size=rows, p=_HOURLY / _HOURLY.sum()).astype(np.int64)
    offset = day * _US_PER_DAY + hour * _US_PER_HOUR
    offset += gen.integers(0, _US_PER_HOUR, size=rows, dtype=np.int64)
    weights = 1.0 / np.arange(1, len(names) + 1)
    campaign = gen.choice(len(names), size=rows, p=weights / weights.sum()).astype(np.int64)

    # Times, users and campaigns of the rows are independent: sorting the times alone and
    # shuffling the users gives the law of sorting whole rows by time, at a fraction of the cost.
    offset.sort()
    gen.shuffle(user)
    timestamp = origin + offset.astype("timedelta64[us]")
    return ImpressionLog(user=user, timestamp=timestamp, campaign=campaign, campaigns=names,
                         domain_size=d)


@public_errors("write_impressions")
def write_impressions(
    folder: str | Path,
    log: ImpressionLog | None = None,
    *,
    filename: str = "impressions.parquet",
    **make_kwargs: Any,
) -> Path:
    """Write an impression log to ``folder/filename`` as Parquet (created if needed).

    Columns: ``user_id`` (string ``"u"`` + zero-padded domain index, e.g. ``"u0001234"``),
    ``timestamp`` (``TIMESTAMP``, UTC), ``campaign`` (string). The file is written by DuckDB
    (``COPY ... (FORMAT parquet)``) straight from the numpy columns; pyarrow is not needed.

    Parameters
    ----------
    folder : str or pathlib.Path
        Output directory.
    log : ImpressionLog, optional
        The log to write; when omitted, one is generated with
        ``make_impressions(**make_kwargs)``.
    filename : str, default "impressions.parquet"
        Name of the file inside ``folder``.
    **make_kwargs
        Arguments of :func:`make_impressions` (only without ``log``), e.g. ``n_users``,
        ``domain_size``, ``rng``.

    Returns
    -------
    pathlib.Path
        The path of the written file.

    Raises
    ------
    ParameterError
        Both ``log`` and generator arguments given, or an invalid argument.
    OSError
        The folder cannot be created or written.

    Notes
    -----
    **Privacy.** None: this writes synthetic data; it is not a release.
    """
    import duckdb

    func = public_caller()
    if log is None:
        log = make_impressions(**make_kwargs)
    elif make_kwargs:
        raise ParameterError(message("make_kwargs", "empty when a log is given",
                                     sorted(make_kwargs)))
    elif not isinstance(log, ImpressionLog):
        raise ParameterError(message("log", "an ImpressionLog or None",
                                     type(log).__name__))
    if not isinstance(filename, str) or not filename or "/" in filename or "\\" in filename:
        raise ParameterError(message("filename", "a plain file name", filename))
    out_dir = Path(folder)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / filename
    names = ", ".join("'" + c.replace("'", "''") + "'" for c in log.campaigns)
    src = {
        "uid": log.user,
        "ts": log.timestamp.astype(np.int64),
        "cmp": log.campaign,
    }
    target = str(path).replace("'", "''")
    con = duckdb.connect(":memory:")
    try:
        con.register("dpfreq_impressions", src)
        con.execute(
            f"COPY (SELECT 'u' || lpad(CAST(uid AS VARCHAR), {log.id_width}, '0') AS user_id, "
            f"make_timestamp(ts) AS timestamp, ([{names}])[cmp + 1] AS campaign "
            f"FROM dpfreq_impressions) TO '{target}' (FORMAT parquet)"
        )
    except duckdb.Error as exc:
        raise OSError(f"{func}: cannot write {str(path)!r}: "
                      f"{str(exc).strip().splitlines()[0]}") from exc
    finally:
        con.close()
    return path


@public_errors("true_profile")
def true_profile(counts: Any, domain_size: int, max_count: int) -> NDArray[np.float64]:
    """The exact (non-private) profile ``f[0..n]`` of a count vector, clamped like a release.

    ``f[t]`` is the fraction of the ``domain_size`` items with count exactly ``t`` for
    ``t < n``, and ``f[n]`` the fraction with count ``n`` or more (counts are clamped at
    ``max_count`` exactly as :func:`dpfreq.profile.release_profile` clamps them). Items beyond
    the length of ``counts`` have count 0.

    Parameters
    ----------
    counts : array-like of int
        Per-item counts (length at most ``domain_size``), e.g. :meth:`ImpressionLog.counts`.
    domain_size : int
        Number of items ``d``.
    max_count : int
        Count cap ``n``.

    Returns
    -------
    numpy.ndarray of float64
        ``f`` of length ``n + 1``, summing to 1.

    Raises
    ------
    DataError
        Negative or non-integer counts, or more counts than ``domain_size``.

    Notes
    -----
    **Privacy.** None: this is the exact profile, for simulations and demos only. Publishing
    it reveals the data.

    Examples
    --------
    >>> true_profile([0, 1, 1, 5], domain_size=5, max_count=3).tolist()
    [0.4, 0.4, 0.0, 0.2]
    """
    d = check_int(domain_size, "domain_size", minimum=1)
    n = check_int(max_count, "max_count", minimum=0)
    c = check_count_array(counts, "counts")
    if c.size > d:
        raise DataError(message("counts", f"a vector of at most domain_size = {d} counts",
                                f"{c.size} counts"))
    m = np.bincount(np.minimum(c, n), minlength=n + 1).astype(np.int64)
    m[0] += d - c.size
    return m / float(d)
