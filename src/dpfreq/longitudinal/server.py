"""Server side: ingest enrolments and reports, per-(h, j) sums, estimates (futurerand.md §3.2,
§7.3, §7.4, §8.8)."""

from __future__ import annotations

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
    """Per-(h, j) counters for one parameter set (Algorithm 2).

    Devices are identified by an integer pseudonymous ``user`` id, used only to validate
    (enrolment before reports, the report's h equal to the enrolled h, no duplicate (user, j)).
    A batch with any invalid row is rejected as a whole with a :class:`DataError` naming the
    reason and the first offending row; nothing of it is counted.

    Dropout policy (§8.8): ``estimate(dropouts="paper")`` (default) is the paper's estimator and
    assumes full participation: a missing report counts as 0, which biases f̂ towards 0 (the
    number of missing reports among closed intervals is recorded in ``mechanism_params``).
    ``dropouts="per-interval"`` rescales each (h, j) sum by ``n_h / count[h, j]`` (enrolled users
    of order h over reports received): unbiased when dropouts are independent of the data
    (missing completely at random), biased otherwise; its sd and bound are then approximate.
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
        self._order_of: dict[int, int] = {}
        self._users = np.zeros(0, dtype=np.int64)
        self._user_h = np.zeros(0, dtype=np.int64)
        self._seen = np.zeros(0, dtype=np.int64)  # sorted keys user·(2d) + slot

    @property
    def enrolled(self) -> NDArray[np.int64]:
        """Enrolled users per order h."""
        return np.bincount(self._user_h, minlength=self.params.orders)

    def enrol(self, users: Any, h: Any, param_id: str | None = None) -> None:
        """Record enrolments ``(user, h)`` (arrays or scalars)."""
        self._check_param(param_id)
        u = np.atleast_1d(np.asarray(users)).astype(np.int64)
        hh = np.atleast_1d(np.asarray(h))
        self._check_h(hh)
        hh = hh.astype(np.int64)
        if u.shape != hh.shape:
            raise DataError(
                "users and h of LongitudinalAggregator.enrol must have the same length."
            )
        allu = np.concatenate([self._users, u])
        if np.unique(allu).size != allu.size:
            raise DataError("enrol rejected: a user is enrolled twice.")
        order = np.argsort(allu, kind="stable")
        self._users = allu[order]
        self._user_h = np.concatenate([self._user_h, hh])[order]

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
        """Validate and count a batch of reports ``(user, h, j, bit)``; returns the batch size."""
        self._check_param(param_id)
        u = np.asarray(users).astype(np.int64).ravel()
        hh = np.asarray(h).ravel()
        jj = np.asarray(j).ravel()
        bb = np.asarray(bit).ravel()
        if not (u.size == hh.size == jj.size == bb.size):
            raise DataError(
                "users, h, j and bit of LongitudinalAggregator.ingest must have equal lengths."
            )
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
        if not np.isin(bb, (0, 1)).all():
            i = int(np.argmax(~np.isin(bb, (0, 1))))
            raise DataError(f"rejected: bit must be 0 or 1; got {bb[i]!r} (row {i}).")
        pos = np.searchsorted(self._users, u)
        pos_c = np.minimum(pos, max(self._users.size - 1, 0))
        known = (
            (self._users.size > 0) & (self._users[pos_c] == u)
            if self._users.size
            else np.zeros(u.size, bool)
        )
        if not np.all(known):
            i = int(np.argmax(~known))
            raise DataError(f"rejected: report from user {u[i]} before its enrolment (row {i}).")
        if np.any(self._user_h[pos_c] != hh):
            i = int(np.argmax(self._user_h[pos_c] != hh))
            raise DataError(
                f"rejected: user {u[i]} reported order h={hh[i]} but enrolled with "
                f"h={self._user_h[pos_c][i]} (row {i})."
            )
        slot = self._off[hh] + jj - 1
        key = u * (2 * d) + slot
        sk = np.sort(key)
        if (sk.size > 1 and np.any(sk[1:] == sk[:-1])) or np.isin(sk, self._seen).any():
            raise DataError(
                "rejected: duplicate report (same user, h and j) in the batch or already ingested."
            )
        self._seen = np.union1d(self._seen, sk)
        y = 2 * bb.astype(np.int64) - 1
        self.sums += np.bincount(slot, weights=y, minlength=2 * d - 1).astype(np.int64)
        self.counts += np.bincount(slot, minlength=2 * d - 1)
        return int(u.size)

    def estimate(self, *, beta: float, dropouts: str = "paper") -> LongitudinalEstimate:
        """f̂_t for every period with per-time sd and the simultaneous (1 − β) bound (§7.4).

        Periods whose intervals are not closed yet use zero sums. No clamping (unbiased).

        Privacy
        -------
        Post-processing of ε-LDP reports (each device's guarantee is ``params.epsilon``);
        spends no central budget.
        """
        beta = _validate.check_open_unit(beta, "beta", "LongitudinalAggregator.estimate")
        dropouts = _validate.check_choice(
            dropouts, "dropouts", "LongitudinalAggregator.estimate", DROPOUT_POLICIES
        )
        p = self.params
        n = int(self._users.size)
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
            p.c_gap,
            p.epsilon,
            beta,
            "futurerand-longitudinal",
            {
                "randomizer": p.randomizer,
                "changes": p.changes,
                "param_id": p.param_id,
                "dropouts": dropouts,
                "missing_reports": missing,
            },
            seeded=False,
        )
        return rel


def aggregate_reports_file(
    path: str | Path, params: ProtocolParams, *, engine: str | None = None, beta: float = 0.05
) -> LongitudinalEstimate:
    """Server side on a collected reports file (CSV or Parquet with columns user, h, j, bit).

    Rows are validated with DuckDB (ranges, bit values, duplicates, one order per user); the
    per-(h, j) sums go through ``dpfreq.engines.get_engine(engine, source).report_sums``. Every
    user appearing in the file counts as enrolled with its reported order.
    """
    import duckdb

    from dpfreq.engines import get_engine

    path = Path(path)
    if not path.exists():
        raise DataError(f"reports file {str(path)!r} does not exist.")
    reader = "read_parquet" if path.suffix == ".parquet" else "read_csv_auto"
    con = duckdb.connect()
    try:
        rel = f"{reader}('{path.as_posix()}')"
        cols = [c[0] for c in con.execute(f"DESCRIBE SELECT * FROM {rel}").fetchall()]
        for c in ("user", "h", "j", "bit"):
            if c not in cols:
                raise DataError(f"reports file must have columns user, h, j, bit; missing {c!r}.")
        if "param_id" in cols:
            ids = [r[0] for r in con.execute(f"SELECT DISTINCT param_id FROM {rel}").fetchall()]
            for pid in ids:
                if str(pid) != params.param_id:
                    raise DataError(
                        f"rejected: unknown parameter id {pid!r} (expected {params.param_id!r})."
                    )
        d, orders = params.padded_periods, params.orders
        bad = con.execute(
            f"SELECT count(*) FILTER (WHERE h < 0 OR h >= {orders}), "
            f"count(*) FILTER (WHERE j < 1 OR j > ({d} >> CAST(h AS INTEGER))), "
            f"count(*) FILTER (WHERE bit NOT IN (0, 1)) FROM {rel}"
        ).fetchone()
        if bad[0]:
            raise DataError(f"rejected: {bad[0]} reports with order h outside 0..{orders - 1}.")
        if bad[1]:
            raise DataError(
                f"rejected: {bad[1]} reports with interval j out of range for their order."
            )
        if bad[2]:
            raise DataError(f"rejected: {bad[2]} reports with bit not in {{0, 1}}.")
        dup = con.execute(
            f"SELECT count(*) FROM (SELECT user, j FROM {rel} "
            "GROUP BY user, h, j HAVING count(*) > 1)"
        ).fetchone()[0]
        if dup:
            raise DataError(f"rejected: {dup} duplicate reports (same user, h and j).")
        multi = con.execute(
            f"SELECT count(*) FROM (SELECT user FROM {rel} "
            "GROUP BY user HAVING count(DISTINCT h) > 1)"
        ).fetchone()[0]
        if multi:
            raise DataError(f"rejected: {multi} users report more than one order h.")
        n = con.execute(f"SELECT count(DISTINCT user) FROM {rel}").fetchone()[0]
        nh_rows = con.execute(f"SELECT h, count(DISTINCT user) FROM {rel} GROUP BY h").fetchall()
    finally:
        con.close()
    eng = get_engine(engine, str(path))
    rs = eng.report_sums(str(path), order="h", interval="j", value="bit")
    agg = LongitudinalAggregator(params)
    off = agg._off
    slot = off[np.asarray(rs.order, dtype=np.int64)] + np.asarray(rs.interval, dtype=np.int64) - 1
    agg.sums[slot] = 2 * np.asarray(rs.sums, dtype=np.int64) - np.asarray(rs.counts, dtype=np.int64)
    agg.counts[slot] = np.asarray(rs.counts, dtype=np.int64)
    # enrolment from the file (pseudonymous ids only matter for n_h)
    hs = (
        np.concatenate([np.full(int(c), int(h), dtype=np.int64) for h, c in nh_rows])
        if nh_rows
        else np.zeros(0, np.int64)
    )
    agg._user_h = hs
    agg._users = np.arange(int(n), dtype=np.int64)
    return agg.estimate(beta=beta)
