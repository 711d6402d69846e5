"""Server side of the longitudinal protocol: enrolments, report batches, files, estimates."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq import _validate
from dpfreq.errors import DataError, ParameterError, public_caller, public_errors

from .dyadic import offsets
from .enrolment import enrolled_per_order
from .estimate import make_estimate
from .params import ProtocolParams
from .result import LongitudinalEstimate

__all__ = ["DROPOUT_POLICIES", "REPORT_COLUMNS", "LongitudinalAggregator",
           "aggregate_reports_file", "estimate_from_report_sums"]

DROPOUT_POLICIES = ("paper", "per-interval")
#: Wire columns of a report (files, batches, engines); ``param_id`` is optional in files.
REPORT_COLUMNS = ("device", "order", "interval", "bit", "param_id")


def _ids(values: Any) -> NDArray[np.str_]:
    """Device ids as text (integers are written in decimal): ids are compared as text."""
    arr = np.atleast_1d(np.asarray(values, dtype=object)).ravel()
    if any(v is None or isinstance(v, bool | float) for v in arr.tolist()):
        raise DataError(f"devices of {public_caller()} must be integers or "
                        "strings (no nulls, floats or booleans).")
    return arr.astype(str) if arr.size else np.zeros(0, dtype="<U1")


def _ints(values: Any, name: str) -> NDArray[np.int64]:
    arr = np.atleast_1d(np.asarray(values)).ravel()
    if arr.size and (arr.dtype.kind not in "iu"):
        raise DataError(f"{name} of {public_caller()} must be integers.")
    return arr.astype(np.int64)


def _estimate(params: ProtocolParams, sums: NDArray[np.int64], counts: NDArray[np.int64],
              enrolled: NDArray[np.int64], *, confidence: float,
              dropouts: str) -> LongitudinalEstimate:
    """The estimate from ±1 sums and report counts per (h, j) and devices per order."""
    confidence = _validate.check_confidence(confidence, "confidence")
    dropouts = _validate.check_choice(dropouts, "dropouts", DROPOUT_POLICIES)
    p = params
    hslot = np.repeat(np.arange(p.orders), [p.padded_horizon >> h for h in range(p.orders)])
    expected = enrolled[hslot]
    closed = counts > 0
    missing = int((expected - counts)[closed].sum())
    values = sums.astype(np.float64)
    if dropouts == "per-interval":
        values = np.where(closed, values * expected / np.maximum(counts, 1), 0.0)
    mech = {"method": p.method, "max_changes": p.max_changes,
            "certificate": p.certificate, "per_order_sparsity": p.per_order_sparsity,
            "param_id": p.param_id, "dropouts": dropouts, "missing_reports": missing}
    return make_estimate(
        values, padded_horizon=p.padded_horizon, horizon=p.horizon,
        devices=int(enrolled.sum()), c_gaps=np.asarray(p.c_gaps), epsilon=p.epsilon,
        confidence=confidence, mechanism="futurerand-longitudinal", mechanism_params=mech,
        seeded=False, max_changes=p.max_changes, method=p.method, start=p.start,
        period=p.period, reported=closed | (expected == 0))


class LongitudinalAggregator:
    """Server of the longitudinal protocol: running per-(order, interval) sums for one parameter
    set, fed incrementally by enrolments and report batches.

    Parameters
    ----------
    params : ProtocolParams
        The parameter bundle shared with the devices (its ``param_id`` is checked on every
        enrolment and report batch that carries one).

    Notes
    -----
    Devices are identified by a pseudonymous ``device`` id (integer or text; compared as text),
    used only to validate: enrolment before reports, a report's order equal to the enrolled one,
    no duplicate (device, order, interval). A batch with any invalid row is rejected as a whole
    with one :class:`DataError` saying which rule it broke; nothing of it is counted. Duplicates
    are detected with one bit per (device, interval of its order).

    Dropout policy: ``estimate(dropouts="paper")`` (default) is the paper's estimator and
    assumes full participation: a missing report counts as 0, which biases f̂ towards 0 (the
    number of missing reports among intervals that received any is in ``mechanism_params``).
    ``dropouts="per-interval"`` rescales each (h, j) sum by ``n_h / count[h, j]`` (enrolled
    devices of order h over reports received): unbiased when dropouts are independent of the
    data, biased otherwise; its intervals are then approximate. Late joiners should enrol at the
    start with value 0 (their first 1 is a change).

    Privacy
    -------
    Every report is part of an ε-local-DP transcript (device level: a device's whole sequence
    with at most k changes); the server's estimates are post-processing and spend no budget.

    Examples
    --------
    >>> from dpfreq.longitudinal import LongitudinalClient, make_params
    >>> p = make_params(horizon=4, max_changes=1, epsilon=1.0, method="rr")
    >>> clients = {f"dev{i}": LongitudinalClient(p, rng=i) for i in range(50)}
    >>> agg = LongitudinalAggregator(p)
    >>> agg.enrol(list(clients), [c.order for c in clients.values()], param_id=p.param_id)
    >>> reports = [{**r, "device": d} for d, c in clients.items()
    ...            for x in (0, 1, 1, 1) for r in c.step(x)]
    >>> agg.ingest_reports(reports) == len(reports)
    True
    >>> est = agg.estimate(confidence=0.9)
    >>> est.value.shape, est.unit, est.devices
    ((4,), 'device', 50)
    """

    @public_errors("LongitudinalAggregator")
    def __init__(self, params: ProtocolParams) -> None:
        if not isinstance(params, ProtocolParams):
            raise ParameterError(_validate.message("params",
                                                   "a ProtocolParams", type(params).__name__))
        self.params = params
        d = params.padded_horizon
        self._off = offsets(d)
        self._sums = np.zeros(2 * d - 1, dtype=np.int64)  # Σ y (±1) over reports
        self._counts = np.zeros(2 * d - 1, dtype=np.int64)
        self._devices = np.zeros(0, dtype="<U1")  # sorted device ids
        self._index = np.zeros(0, dtype=np.int64)  # enrolment index of each sorted device
        self._order_by_index = np.zeros(0, dtype=np.int64)
        self._bit_start = np.zeros(1, dtype=np.int64)  # first seen-bit of each index (+ end)
        self._seen = np.zeros(0, dtype=np.uint8)  # packed bits, one per (device, interval)

    @property
    def enrolled(self) -> NDArray[np.int64]:
        """Enrolled devices per order."""
        return np.bincount(self._order_by_index, minlength=self.params.orders)

    @property
    def devices(self) -> int:
        """Number of enrolled devices."""
        return int(self._order_by_index.size)

    @property
    def sums(self) -> NDArray[np.int64]:
        """Copy of the running ``Σ y`` (±1) per (order, interval), flat by order."""
        return self._sums.copy()

    @property
    def counts(self) -> NDArray[np.int64]:
        """Copy of the running number of reports per (order, interval), flat by order."""
        return self._counts.copy()

    def _check_param(self, param_id: Any) -> None:
        if param_id is not None and param_id != self.params.param_id:
            raise DataError("rejected: the parameter id is not the one this aggregator serves.")

    def _check_orders(self, orders: NDArray[np.int64]) -> None:
        if orders.size and (orders.min() < 0 or orders.max() >= self.params.orders):
            raise DataError(f"rejected: order must be an integer in 0..{self.params.orders - 1}.")

    @public_errors("LongitudinalAggregator.enrol")
    def enrol(self, devices: Any, orders: Any, *, param_id: str | None = None,
              protocol_version: int | None = None) -> None:
        """Record enrolments ``(device, order)`` (arrays or scalars), as sent by devices.

        Raises
        ------
        DataError
            Another parameter id or protocol version, an order out of range, a device enrolled
            twice (nothing of the batch is recorded).
        """
        self._check_param(param_id)
        if protocol_version is not None and protocol_version != self.params.version:
            raise DataError(f"rejected: protocol_version must be {self.params.version}, the "
                            f"one this aggregator serves; got {protocol_version!r}.")
        u = _ids(devices)
        hh = _ints(orders, "orders")
        if u.shape != hh.shape:
            raise DataError("devices and orders of LongitudinalAggregator.enrol must have the "
                            "same length.")
        self._check_orders(hh)
        alld = np.concatenate([self._devices, u])
        sd = np.sort(alld)
        if sd.size > 1 and np.any(sd[1:] == sd[:-1]):
            raise DataError("rejected: a device is enrolled twice.")
        first = self._order_by_index.size
        idx = np.concatenate([self._index, np.arange(first, first + u.size, dtype=np.int64)])
        perm = np.argsort(alld, kind="stable")
        self._devices, self._index = alld[perm], idx[perm]
        self._order_by_index = np.concatenate([self._order_by_index, hh])
        sizes = self.params.padded_horizon >> hh
        self._bit_start = np.concatenate(
            [self._bit_start, self._bit_start[-1] + np.cumsum(sizes, dtype=np.int64)])
        need = (int(self._bit_start[-1]) + 7) // 8
        if need > self._seen.size:
            self._seen = np.concatenate([self._seen, np.zeros(need - self._seen.size, np.uint8)])

    @public_errors("LongitudinalAggregator.ingest")
    def ingest(self, devices: Any, orders: Any, intervals: Any, bits: Any, *,
               param_id: str | None = None) -> int:
        """Validate and count a batch of reports; returns the number of reports counted.

        Raises
        ------
        DataError
            Another parameter id; order outside ``0..log d``; interval outside ``1..d/2^h``;
            bit not in {0, 1}; a report from a device not enrolled or with another order than
            enrolled; a duplicate (device, order, interval) within the batch or already
            ingested. The batch is then not counted at all.
        """
        self._check_param(param_id)
        u = _ids(devices)
        hh, jj = _ints(orders, "orders"), _ints(intervals, "intervals")
        bb = np.atleast_1d(np.asarray(bits)).ravel()
        if not (u.size == hh.size == jj.size == bb.size):
            raise DataError("devices, orders, intervals and bits of LongitudinalAggregator."
                            "ingest must have equal lengths.")
        if u.size == 0:
            return 0
        self._check_orders(hh)
        size = self.params.padded_horizon >> hh
        if np.any((jj < 1) | (jj > size)):
            raise DataError("rejected: interval must be in 1..d/2^order for its order.")
        if bb.dtype.kind not in "iub" or np.any((bb != 0) & (bb != 1)):
            raise DataError("rejected: bit must be 0 or 1.")
        pos = np.searchsorted(self._devices, u)
        known = np.zeros(u.size, dtype=bool)
        if self._devices.size:
            pos = np.minimum(pos, self._devices.size - 1)
            known = self._devices[pos] == u
        if not known.all():
            raise DataError("rejected: a report from a device that is not enrolled.")
        index = self._index[pos]
        if np.any(self._order_by_index[index] != hh):
            raise DataError("rejected: a report with another order than its device enrolled "
                            "with.")
        bitpos = np.sort(self._bit_start[index] + jj - 1)
        byte = bitpos >> 3
        mask = (np.uint8(1) << (bitpos & 7).astype(np.uint8)).astype(np.uint8)
        if (bitpos.size > 1 and np.any(bitpos[1:] == bitpos[:-1])) or np.any(
                self._seen[byte] & mask):
            raise DataError("rejected: duplicate report (same device, order and interval) in "
                            "the batch or already ingested.")
        starts = np.flatnonzero(np.concatenate([[True], byte[1:] != byte[:-1]]))
        self._seen[byte[starts]] |= np.bitwise_or.reduceat(mask, starts)
        slot = self._off[hh] + jj - 1
        y = 2 * bb.astype(np.int64) - 1
        self._sums += np.bincount(slot, weights=y, minlength=self._sums.size).astype(np.int64)
        self._counts += np.bincount(slot, minlength=self._counts.size)
        return int(u.size)

    def ingest_reports(self, reports: Iterable[Mapping[str, Any]]) -> int:
        """:meth:`ingest` of report dicts with keys ``device, order, interval, bit`` and an
        optional ``param_id`` (the dicts of :meth:`LongitudinalClient.step` plus ``device``)."""
        rows = list(reports)
        try:
            cols = {c: [r[c] for r in rows] for c in REPORT_COLUMNS[:4]}
            pids = {r.get("param_id") for r in rows} - {None}
        except (KeyError, TypeError, AttributeError):
            raise DataError("reports of LongitudinalAggregator.ingest_reports must be mappings "
                            "with keys device, order, interval and bit.") from None
        if len(pids) > 1:
            raise DataError("rejected: the parameter id is not the one this aggregator serves.")
        return self.ingest(cols["device"], cols["order"], cols["interval"], cols["bit"],
                           param_id=pids.pop() if pids else None)

    @public_errors("LongitudinalAggregator.estimate")
    def estimate(self, *, confidence: float = 0.95,
                 dropouts: str = "paper") -> LongitudinalEstimate:
        """Estimates ``f̂_t`` for every period with per-period intervals and a band.

        Parameters
        ----------
        confidence : float, keyword-only
            Confidence of each interval and of the simultaneous band (default 0.95).
        dropouts : {"paper", "per-interval"}, keyword-only
            Dropout policy, see the class notes.

        Returns
        -------
        LongitudinalEstimate
            ``f̂_t = Σ_{(h,j) ∈ C(t)} ((log d+1)/c_h)·Σ_u y_u[h, j]`` for t = 1..horizon,
            clamped to ``[0, devices]`` (the unclamped values are kept). A period with an
            interval of ``C(t)`` that has no report yet (at an order with enrolled devices)
            has no estimate: NaN, ``null`` in JSON (see ``LongitudinalEstimate.available``).

        Privacy
        -------
        Unit: one device's whole sequence (device level; neighbouring = any two sequences with
        at most k changes). Post-processing of ε-LDP reports (each device's guarantee is
        ``params.epsilon``, certificate ``params.certificate``); spends no central budget.
        """
        return _estimate(self.params, self._sums, self._counts, self.enrolled,
                         confidence=confidence, dropouts=dropouts)


@public_errors("aggregate_reports_file")
def aggregate_reports_file(source: Any, params: ProtocolParams, *, enrolled: Any,
                           engine: Any = None, confidence: float = 0.95,
                           dropouts: str = "paper") -> LongitudinalEstimate:
    """Server side on collected reports: validate and sum them where they live, then estimate.

    Parameters
    ----------
    source : str, pathlib.Path, DataFrame, relation or mapping of columns
        The reports, one row per report, wire columns ``device, order, interval, bit`` and an
        optional ``param_id``: a CSV/Parquet file or Parquet directory, a SQL query, a DuckDB
        relation, a pandas/Polars/Arrow table (DuckDB), a Spark DataFrame or a URI read by Spark
        (``hdfs://``, ``s3a://``), or a mapping of columns (memory engine). Identifiers
        (``device``, ``param_id``) are read as text, so ``"0042"`` keeps its zeros.
    params : ProtocolParams
        The parameter bundle the devices used.
    enrolled : sequence of int, str, pathlib.Path or mapping of columns, keyword-only
        The enrolled population: devices per order (``params.orders`` counts) or an
        enrolment table with columns ``device, order`` (the service's enrolment export; see
        :func:`~dpfreq.longitudinal.enrolment.enrolled_per_order`). Required: the devices
        present in the reports undercount it whenever a report is missing (dropouts, reports
        not yet collected).
    engine : None, str, Engine or SparkSession, keyword-only
        Where validation and the per-(order, interval) sums run, passed to
        :func:`dpfreq.engines.get_engine` (default: inferred from ``source``).
    confidence : float, keyword-only
        Confidence of the intervals and the band (default 0.95).
    dropouts : {"paper", "per-interval"}, keyword-only
        Dropout policy, see :class:`LongitudinalAggregator`.

    Returns
    -------
    LongitudinalEstimate
        Identical to :meth:`LongitudinalAggregator.estimate` on the same reports and
        enrolment, whichever engine ran (and to the collection service's estimate on its own
        report and enrolment exports).

    Raises
    ------
    DataError
        Unreadable source, missing column, non-integer order/interval/bit, nulls, another
        parameter id, order or interval out of range, bit not in {0, 1}, duplicate (device,
        order, interval) reports, a device reporting two orders, more devices of an order in
        the reports than enrolled: the whole source is rejected with one message naming the
        broken rule (never counts or ids from the data).

    Privacy
    -------
    Post-processing of ε-LDP reports (device level: each device's whole sequence with at most
    k changes); spends no central budget.

    Examples
    --------
    >>> from dpfreq.longitudinal import make_params
    >>> p = make_params(horizon=2, max_changes=1, epsilon=1.0, method="rr")
    >>> reports = {"device": ["a", "a", "b"], "order": [0, 0, 1], "interval": [1, 2, 1],
    ...            "bit": [1, 0, 1]}
    >>> rel = aggregate_reports_file(reports, p, enrolled=[1, 2], engine="memory")
    >>> rel.devices, rel.horizon
    (3, 2)
    """
    from dpfreq.engines import ReportSumming, get_engine, require_capability

    func = public_caller()
    if not isinstance(params, ProtocolParams):
        raise ParameterError(_validate.message("params", "a ProtocolParams",
                                               type(params).__name__))
    _validate.check_confidence(confidence, "confidence")
    _validate.check_choice(dropouts, "dropouts", DROPOUT_POLICIES)
    population = enrolled_per_order(enrolled, params)
    eng = require_capability(get_engine(engine, source), ReportSumming,
                             "longitudinal report sums")
    sizes = tuple(params.padded_horizon >> h for h in range(params.orders))
    rs = eng.report_sums(source, param_id=params.param_id, interval_counts=sizes)
    if np.any(np.asarray(rs.devices_per_order, dtype=np.int64) > population):
        raise DataError(f"rejected by {func}: the reports come from more devices of some order "
                        "than the enrolment lists.")
    counts = np.asarray(rs.counts, dtype=np.int64)
    return estimate_from_report_sums(
        params, order=rs.order, interval=rs.interval,
        sums=2 * np.asarray(rs.sums, dtype=np.int64) - counts, counts=counts,
        devices_per_order=population, confidence=confidence, dropouts=dropouts)


@public_errors("estimate_from_report_sums")
def estimate_from_report_sums(params: ProtocolParams, *, order: Any, interval: Any, sums: Any,
                              counts: Any, devices_per_order: Any, confidence: float = 0.95,
                              dropouts: str = "paper") -> LongitudinalEstimate:
    """The estimate from running totals kept elsewhere (e.g. a collection service's database).

    Parameters
    ----------
    params : ProtocolParams
        The parameter bundle of the reports.
    order, interval : array-like of int, keyword-only
        The (order, interval) pairs that have totals (each at most once).
    sums : array-like of int, keyword-only
        ``Σ (2·bit − 1)`` over the validated reports of each pair.
    counts : array-like of int, keyword-only
        Number of validated reports of each pair.
    devices_per_order : array-like of int, keyword-only
        Enrolled devices per order (length ``params.orders``).
    confidence, dropouts : keyword-only
        As :meth:`LongitudinalAggregator.estimate`.

    Returns
    -------
    LongitudinalEstimate
        What :meth:`LongitudinalAggregator.estimate` returns after ingesting the same reports.

    Raises
    ------
    ParameterError
        If ``params`` is not a :class:`ProtocolParams` or ``confidence``/``dropouts`` is invalid.
    DataError
        If the totals have unequal lengths, are out of range (order, interval, ``|sums| >
        counts``, negative counts) or name an (order, interval) pair twice.

    Privacy
    -------
    Post-processing of ε-LDP reports (device level); spends no central budget.

    Examples
    --------
    >>> from dpfreq.longitudinal import make_params
    >>> p = make_params(horizon=2, max_changes=1, epsilon=1.0, method="rr")
    >>> rel = estimate_from_report_sums(p, order=[0, 0, 1], interval=[1, 2, 1],
    ...                                 sums=[1, -1, 1], counts=[1, 1, 1],
    ...                                 devices_per_order=[1, 1])
    >>> rel.devices, rel.mechanism_params["missing_reports"]
    (2, 0)
    """
    func = public_caller()
    if not isinstance(params, ProtocolParams):
        raise ParameterError(_validate.message("params", "a ProtocolParams",
                                               type(params).__name__))
    h, j = _ints(order, "order"), _ints(interval, "interval")
    s, c = _ints(sums, "sums"), _ints(counts, "counts")
    nh = _ints(devices_per_order, "devices_per_order")
    if not (h.size == j.size == s.size == c.size) or nh.size != params.orders:
        raise DataError(f"order, interval, sums and counts of {func} must have equal lengths "
                        f"and devices_per_order {params.orders} entries.")
    d = params.padded_horizon
    bad = (h < 0) | (h >= params.orders)
    if bad.any() or np.any((j < 1) | (j > (d >> np.where(bad, 0, h)))) or np.any(c < 0) \
            or np.any(np.abs(s) > c) or np.any(nh < 0):
        raise DataError(f"totals of {func} are out of range (order, interval, |sums| <= "
                        "counts, counts >= 0).")
    slot = offsets(d)[h] + j - 1
    if np.unique(slot).size != slot.size:
        raise DataError(f"order and interval pairs of {func} must be unique.")
    all_sums = np.zeros(2 * d - 1, dtype=np.int64)
    all_counts = np.zeros_like(all_sums)
    all_sums[slot], all_counts[slot] = s, c
    return _estimate(params, all_sums, all_counts, nh, confidence=confidence,
                     dropouts=dropouts)
