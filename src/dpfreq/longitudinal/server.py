"""Server side: ingest enrolments and reports, per-(h, j) sums, estimates (futurerand.md §3.2,
§7.3, §7.4, §8.8)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq import _validate
from dpfreq.errors import DataError, ParameterError

from .client import ProtocolParams
from .simulate import LongitudinalEstimate, make_release, offsets

__all__ = ["LongitudinalAggregator", "aggregate_reports_file"]

DROPOUT_POLICIES = ("paper", "per-interval")


class LongitudinalAggregator:
    """Server of the longitudinal protocol: per-(h, j) counters for one parameter set
    (Algorithm 2, §3.2, §7.3).

    Parameters
    ----------
    params : ProtocolParams
        The parameter bundle shared with the devices (its ``param_id`` is checked on every
        enrolment and report batch that carries one).

    Notes
    -----
    Devices are identified by an integer pseudonymous ``user`` id, used only to validate:
    enrolment before reports, the report's h equal to the enrolled h, no duplicate (user, h, j).
    A batch with any invalid row is rejected as a whole with a :class:`DataError` naming the
    reason and the first offending row; nothing of it is counted. Duplicates are detected with
    one bit per (user, j) of the user's order (``≈ 2d/(log d+1)`` bits per user).

    Dropout policy (§8.8): ``estimate(dropouts="paper")`` (default) is the paper's estimator and
    assumes full participation: a missing report counts as 0, which biases f̂ towards 0 (the
    number of missing reports among closed intervals is recorded in ``mechanism_params``).
    ``dropouts="per-interval"`` rescales each (h, j) sum by ``n_h / count[h, j]`` (enrolled users
    of order h over reports received): unbiased when dropouts are independent of the data
    (missing completely at random), biased otherwise; its sd and bound are then approximate.
    Late joiners should enrol at the start with value 0 (their first 1 is a change).

    Privacy
    -------
    Every report is part of an ε-local-DP transcript (user-level: a device's whole sequence
    with at most k changes); the server's estimates are post-processing and spend no budget.
    """

    def __init__(self, params: ProtocolParams) -> None:
        if not isinstance(params, ProtocolParams):
            raise ParameterError(
                f"params of LongitudinalAggregator must be a ProtocolParams; got {params!r}."
            )
        self.params = params
        d = params.padded_periods
        self._off = offsets(d)
        self.sums = np.zeros(2 * d - 1, dtype=np.int64)  # Σ y over reports
        self.counts = np.zeros(2 * d - 1, dtype=np.int64)
        self._users = np.zeros(0, dtype=np.int64)  # sorted user ids
        self._index = np.zeros(0, dtype=np.int64)  # enrolment index of each sorted user
        self._h_by_index = np.zeros(0, dtype=np.int64)  # order per enrolment index
        self._bit_start = np.zeros(1, dtype=np.int64)  # first seen-bit of each index (+ end)
        self._seen = np.zeros(0, dtype=np.uint8)  # packed bits, one per (user, j)

    @property
    def enrolled(self) -> NDArray[np.int64]:
        """Enrolled users per order h."""
        return np.bincount(self._h_by_index, minlength=self.params.orders)

    @property
    def n_users(self) -> int:
        """Number of enrolled users."""
        return int(self._h_by_index.size)

    def enrol(
        self,
        users: Any,
        h: Any,
        param_id: str | None = None,
        protocol_version: int | None = None,
    ) -> None:
        """Record enrolments ``(user, h)`` (arrays or scalars), as sent by devices.

        Raises
        ------
        DataError
            Unknown parameter id or protocol version, h out of range, a user enrolled twice.
        """
        self._check_param(param_id)
        if protocol_version is not None and protocol_version != self.params.version:
            raise DataError(
                f"rejected: protocol version {protocol_version!r} (this aggregator serves "
                f"version {self.params.version})."
            )
        u = self._int_array(users, "users", "enrol")
        hh = np.atleast_1d(np.asarray(h))
        self._check_h(hh)
        hh = hh.astype(np.int64).ravel()
        if u.shape != hh.shape:
            raise DataError(
                "users and h of LongitudinalAggregator.enrol must have the same length."
            )
        allu = np.concatenate([self._users, u])
        su = np.sort(allu)
        if su.size > 1 and np.any(su[1:] == su[:-1]):
            dup = su[1:][su[1:] == su[:-1]][0]
            raise DataError(f"rejected: user {dup} is enrolled twice.")
        first = self._h_by_index.size
        idx = np.concatenate([self._index, np.arange(first, first + u.size, dtype=np.int64)])
        order = np.argsort(allu, kind="stable")
        self._users, self._index = allu[order], idx[order]
        self._h_by_index = np.concatenate([self._h_by_index, hh])
        sizes = self.params.padded_periods >> hh
        self._bit_start = np.concatenate(
            [self._bit_start, self._bit_start[-1] + np.cumsum(sizes, dtype=np.int64)]
        )
        need = (int(self._bit_start[-1]) + 7) // 8
        if need > self._seen.size:
            self._seen = np.concatenate([self._seen, np.zeros(need - self._seen.size, np.uint8)])

    @staticmethod
    def _int_array(values: Any, name: str, method: str) -> NDArray[np.int64]:
        arr = np.atleast_1d(np.asarray(values)).ravel()
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            raise DataError(
                f"{name} of LongitudinalAggregator.{method} must be integers; got dtype "
                f"{arr.dtype}."
            )
        return arr.astype(np.int64)

    def _check_param(self, param_id: str | None) -> None:
        if param_id is not None and param_id != self.params.param_id:
            raise DataError(
                f"rejected: unknown parameter id {param_id!r} (this aggregator serves "
                f"{self.params.param_id!r})."
            )

    def _check_h(self, h: NDArray[Any]) -> None:
        if h.size and (
            not np.issubdtype(h.dtype, np.integer) or h.min() < 0 or h.max() >= self.params.orders
        ):
            bad = h[(h < 0) | (h >= self.params.orders)] if np.issubdtype(h.dtype, np.number) else h
            raise DataError(
                f"rejected: order h must be an integer in 0..{self.params.orders - 1}; got "
                f"{bad.flat[0] if bad.size else h.flat[0]!r}."
            )

    def ingest(self, users: Any, h: Any, j: Any, bit: Any, param_id: str | None = None) -> int:
        """Validate and count a batch of reports ``(user, h, j, bit)``; returns the batch size.

        Raises
        ------
        DataError
            Unknown parameter id; h outside ``0..log d``; j outside ``1..d/2^h``; bit not in
            {0, 1}; a report before its user's enrolment or with another order than enrolled;
            a duplicate (same user, h and j) within the batch or already ingested. The batch is
            then not counted at all.
        """
        self._check_param(param_id)
        u = self._int_array(users, "users", "ingest")
        hh = np.asarray(h).ravel()
        jj = np.asarray(j).ravel()
        bb = np.asarray(bit).ravel()
        if not (u.size == hh.size == jj.size == bb.size):
            raise DataError(
                "users, h, j and bit of LongitudinalAggregator.ingest must have equal lengths."
            )
        if u.size == 0:
            return 0
        self._check_h(hh)
        hh = hh.astype(np.int64)
        if not np.issubdtype(jj.dtype, np.integer):
            raise DataError(f"rejected: interval j must be an integer; got dtype {jj.dtype}.")
        jj = jj.astype(np.int64)
        d = self.params.padded_periods
        size = d >> hh
        badj = (jj < 1) | (jj > size)
        if badj.any():
            i = int(np.argmax(badj))
            raise DataError(
                f"rejected: interval j={jj[i]} out of range 1..{size[i]} for order "
                f"h={hh[i]} (row {i})."
            )
        badb = (bb != 0) & (bb != 1)
        if badb.any():
            i = int(np.argmax(badb))
            raise DataError(f"rejected: bit must be 0 or 1; got {bb[i]!r} (row {i}).")
        pos = np.searchsorted(self._users, u)
        if self._users.size == 0:
            known = np.zeros(u.size, dtype=bool)
        else:
            pos = np.minimum(pos, self._users.size - 1)
            known = self._users[pos] == u
        if not known.all():
            i = int(np.argmax(~known))
            raise DataError(f"rejected: report from user {u[i]} before its enrolment (row {i}).")
        index = self._index[pos]
        enrolled_h = self._h_by_index[index]
        wrong = enrolled_h != hh
        if wrong.any():
            i = int(np.argmax(wrong))
            raise DataError(
                f"rejected: user {u[i]} reported order h={hh[i]} but enrolled with "
                f"h={enrolled_h[i]} (row {i})."
            )
        bitpos = np.sort(self._bit_start[index] + jj - 1)
        byte = bitpos >> 3
        mask = (np.uint8(1) << (bitpos & 7).astype(np.uint8)).astype(np.uint8)
        if (bitpos.size > 1 and np.any(bitpos[1:] == bitpos[:-1])) or np.any(
            self._seen[byte] & mask
        ):
            raise DataError(
                "rejected: duplicate report (same user, h and j) in the batch or already ingested."
            )
        starts = np.flatnonzero(np.concatenate([[True], byte[1:] != byte[:-1]]))
        self._seen[byte[starts]] |= np.bitwise_or.reduceat(mask, starts)
        slot = self._off[hh] + jj - 1
        y = 2 * bb.astype(np.int64) - 1
        self.sums += np.bincount(slot, weights=y, minlength=2 * d - 1).astype(np.int64)
        self.counts += np.bincount(slot, minlength=2 * d - 1)
        return int(u.size)

    def _set_enrolment_counts(self, nh: NDArray[np.int64]) -> None:
        """Anonymous enrolment from per-order user counts (file aggregation)."""
        self._h_by_index = np.repeat(np.arange(self.params.orders, dtype=np.int64), nh)
        self._users = np.arange(self._h_by_index.size, dtype=np.int64)
        self._index = self._users.copy()

    def estimate(self, *, beta: float, dropouts: str = "paper") -> LongitudinalEstimate:
        """f̂_t for every period with per-time sd and the simultaneous (1 − β) bound (§7.4).

        Parameters
        ----------
        beta : float, keyword-only
            Failure probability of the simultaneous bound (no default).
        dropouts : {"paper", "per-interval"}
            Dropout policy (§8.8), see the class notes.

        Returns
        -------
        LongitudinalEstimate
            ``f̂_t = Σ_{(h,j) ∈ C(t)} ((log d+1)/c_h)·Σ_u y_u[h, j]`` for t = 1..d, unclamped
            (unbiased), with ``sd`` and the simultaneous bound. Intervals without any report
            yet (not closed) contribute 0; ``missing_reports`` counts absent reports of the
            closed ones.

        Privacy
        -------
        Unit: one device's whole sequence (user-level; neighbouring = any two sequences with
        at most k changes). Post-processing of ε-LDP reports (each device's guarantee is
        ``params.epsilon``, certificate ``params.certificate``); spends no central budget.
        """
        beta = _validate.check_open_unit(beta, "beta", "LongitudinalAggregator.estimate")
        dropouts = _validate.check_choice(
            dropouts, "dropouts", "LongitudinalAggregator.estimate", DROPOUT_POLICIES
        )
        p = self.params
        n = self.n_users
        sums = self.sums.astype(np.float64)
        nh = self.enrolled
        hslot = np.repeat(np.arange(p.orders), [p.padded_periods >> h for h in range(p.orders)])
        expected = nh[hslot]
        closed = self.counts > 0
        missing = int((expected - self.counts)[closed].sum())
        if dropouts == "per-interval":
            with np.errstate(divide="ignore", invalid="ignore"):
                sums = np.where(self.counts > 0, sums * expected / np.maximum(self.counts, 1), 0.0)
        rel = make_release(
            sums,
            p.padded_periods,
            n,
            np.asarray(p.c_gaps),
            p.epsilon,
            beta,
            "futurerand-longitudinal",
            {
                "randomizer": p.randomizer,
                "changes": p.changes,
                "certificate": p.certificate,
                "per_order_sparsity": p.per_order_sparsity,
                "param_id": p.param_id,
                "dropouts": dropouts,
                "missing_reports": missing,
            },
            seeded=False,
        )
        return rel


def aggregate_reports_file(
    path: Any,
    params: ProtocolParams,
    *,
    engine: Any = None,
    beta: float = 0.05,
    dropouts: str = "paper",
) -> LongitudinalEstimate:
    """Server side on a collected reports file (CSV or Parquet with columns user, h, j, bit).

    Parameters
    ----------
    path : str, pathlib.Path or Spark DataFrame
        CSV or Parquet file, one row per report; optional column ``param_id``. With the DuckDB
        or memory engine a local file or local Parquet directory. With a Spark engine also a
        URI read by Spark (``hdfs://``, ``s3a://``, ``file://``, a glob, a Parquet directory
        written by Spark), or a Spark DataFrame with these columns (``engine=None`` then
        selects Spark).
    params : ProtocolParams
        The parameter bundle the devices used.
    engine : None, str, Engine or SparkSession, keyword-only
        Where validation and the per-(h, j) sums run: passed **unchanged** to
        :func:`dpfreq.engines.get_engine` (``"memory"``, ``"duckdb"`` (default for files),
        ``"spark"``, a configured engine instance, or a SparkSession).
    beta : float
        Failure probability of the simultaneous bound.
    dropouts : {"paper", "per-interval"}
        Dropout policy, see :class:`LongitudinalAggregator`.

    Returns
    -------
    LongitudinalEstimate
        Identical to :meth:`LongitudinalAggregator.estimate` on the same reports, whichever
        engine ran.

    Raises
    ------
    DataError
        Missing or unreadable file, missing column, h, j or bit not integers, null values,
        unknown parameter id, h or j out of range, bit not in {0, 1}, duplicate (user, h, j)
        reports, a user reporting two orders. The message is the same for every engine
        (except the reason of an unreadable file).
    ParameterError
        A Spark DataFrame with a non-Spark engine, or another type of ``path``.

    Notes
    -----
    Validation runs where the data is, before any sum, and rejects the whole file on the first
    failed rule (:mod:`dpfreq.longitudinal._report_checks` lists the rules):

    * DuckDB, memory and other local engines: an in-process DuckDB reads the local file or
      Parquet directory once into a validated table (a local path that does not exist is
      rejected before anything is read); the DuckDB and memory engines sum that table, any
      other engine instance re-reads the file.
    * Spark: the same rules as Spark aggregations on the executors (one ``agg`` of
      conditional counts, then one ``groupBy`` pipeline partitioned by user for duplicates,
      users with two orders and users per order); paths are handed to Spark as they are and
      only a local path without a scheme is checked for existence on the driver.

    Only per-(h, j) sums and counts and the users per order reach the driver, which does the
    estimation (post-processing). Every user appearing in the file counts as enrolled with its
    reported order.

    Privacy
    -------
    Post-processing of ε-LDP reports (user-level: each device's whole sequence with at most k
    changes); spends no central budget.
    """
    from dpfreq.engines import get_engine

    from . import _report_checks as checks

    func = "aggregate_reports_file"
    if not isinstance(params, ProtocolParams):
        raise ParameterError(
            _validate.message("params", func, "a ProtocolParams", type(params).__name__)
        )
    beta = _validate.check_open_unit(beta, "beta", func)
    dropouts = _validate.check_choice(dropouts, "dropouts", func, DROPOUT_POLICIES)
    is_frame = type(path).__module__.startswith("pyspark") and type(path).__name__ == "DataFrame"
    if is_frame:
        source: Any = path
        label = "<Spark DataFrame>"
    elif isinstance(path, str | os.PathLike):
        text = os.fspath(path)
        if not isinstance(text, str):
            raise ParameterError(_validate.message(
                "path", func, "a CSV/Parquet path or URI, or a Spark DataFrame", text))
        # URIs go to Spark unchanged (pathlib would turn file:///x into file:/x)
        source = label = text if checks.is_uri(text) else str(Path(text))
        checks.check_local_file(label)
    else:
        raise ParameterError(_validate.message(
            "path", func, "a CSV/Parquet path or URI, or a Spark DataFrame", type(path).__name__))
    eng = get_engine(engine, source)
    if getattr(eng, "name", None) == "spark":
        checked = checks.check_reports_spark(eng, source, label, params)
        rs = eng.report_sums(checked.frame, order="h", interval="j", value="bit")
    else:
        if is_frame:
            raise ParameterError(_validate.message(
                "engine", func, "a Spark engine or None when path is a Spark DataFrame",
                getattr(eng, "name", type(eng).__name__)))
        local = Path(label)
        if not local.exists():  # a URI or glob: only Spark reads those here
            raise checks.missing_file(
                label, " (URIs, such as hdfs:// or s3a://, and globs are read with "
                "engine='spark')")
        kind = getattr(eng, "name", None)
        with checks.check_reports_duckdb(local, str(local), params) as checked:
            # DuckDB and memory sum the validated table; another engine reads the file
            if kind == "duckdb":
                sums_source: Any = checked.frame
            elif kind == "memory":
                sums_source = checked.frame.fetchnumpy()
            else:
                sums_source = str(local)
            rs = eng.report_sums(sums_source, order="h", interval="j", value="bit")
    agg = LongitudinalAggregator(params)
    order = np.asarray(rs.order, dtype=np.int64)
    slot = agg._off[order] + np.asarray(rs.interval, dtype=np.int64) - 1
    counts = np.asarray(rs.counts, dtype=np.int64)
    agg.sums[slot] = 2 * np.asarray(rs.sums, dtype=np.int64) - counts
    agg.counts[slot] = counts
    # enrolment from the file (pseudonymous ids only matter for n_h)
    agg._set_enrolment_counts(checked.users_per_order)
    return agg.estimate(beta=beta, dropouts=dropouts)
