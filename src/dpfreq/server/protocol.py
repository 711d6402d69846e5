"""The service's one door to :mod:`dpfreq.longitudinal`: parameters, calendar, the wire form of
client reports and estimates, all through the system's public API as any user would call it.

Estimates are the aggregator's own: the service keeps the running per-(order, interval) sums
and counts in its database (updated in the same transaction as the reports they count) and hands
them with the enrolled devices per order to
:func:`~dpfreq.longitudinal.estimate_from_report_sums`, which returns what
:class:`~dpfreq.longitudinal.LongitudinalAggregator` returns after ingesting the same reports,
in ``O(d)`` per request instead of a rescan of the reports.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.longitudinal import (
    LongitudinalClient,
    LongitudinalEstimate,
    ProtocolParams,
    estimate_from_report_sums,
    make_params,
)
from dpfreq.longitudinal.result import parse_period

__all__ = [
    "StudyProtocol",
    "build_params",
    "client_order",
    "client_report",
    "estimate_columns",
    "estimate_from_running_sums",
    "params_from_json",
    "utc_now",
]


def _naive_utc(start: str) -> str:
    """``start`` as the library's time axis wants it: a date, or a timestamp in UTC without an
    offset (an offset is converted to UTC)."""
    text = start.strip()
    if "T" not in text and " " not in text:
        return text
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return text  # make_params names the problem
    if when.tzinfo is not None:
        when = when.astimezone(UTC).replace(tzinfo=None)
    return when.isoformat()


def build_params(*, horizon: int, max_changes: int, epsilon: float, method: str,
                 start: str, period: str, per_order_sparsity: bool = False) -> ProtocolParams:
    """Protocol parameters of a new study, with its time axis (validated by
    :func:`~dpfreq.longitudinal.make_params`)."""
    return make_params(horizon=horizon, max_changes=max_changes, epsilon=epsilon,
                       method=method, per_order_sparsity=per_order_sparsity,
                       start=_naive_utc(start), period=period)


def params_from_json(text: str) -> ProtocolParams:
    """Parameters stored with a study or read from the server (checksum and every field
    checked)."""
    return ProtocolParams.from_json(text)


def client_report(report: dict[str, Any], device: int) -> dict[str, Any]:
    """The wire form ``{device, order, interval, bit, param_id}`` of a client's report."""
    return {"device": int(device), "order": int(report["order"]),
            "interval": int(report["interval"]), "bit": int(report["bit"]),
            "param_id": str(report["param_id"])}


def client_order(client: LongitudinalClient) -> int:
    """The order a client enrols with."""
    return int(client.enrolment()["order"])


@dataclass(frozen=True)
class StudyProtocol:
    """A study's parameters and calendar (period 1 starts at ``params.start``, in UTC)."""

    params: ProtocolParams

    @property
    def start(self) -> datetime:
        """First instant of period 1 (UTC)."""
        text = str(self.params.start)
        if "T" in text or " " in text:
            return datetime.fromisoformat(text).replace(tzinfo=UTC)
        return datetime.fromisoformat(text + "T00:00:00").replace(tzinfo=UTC)

    @property
    def period_seconds(self) -> int:
        """Length of a period in seconds."""
        return int(parse_period(self.params.period).total_seconds())

    @property
    def horizon(self) -> int:
        """Number of periods of the study."""
        return int(self.params.horizon)

    @property
    def padded(self) -> int:
        """The power-of-two horizon of the dyadic decomposition."""
        return int(self.params.padded_horizon)

    @property
    def orders(self) -> int:
        """Number of orders ``log2(padded) + 1``."""
        return int(self.params.orders)

    def slots(self) -> list[tuple[int, int]]:
        """Every (order, interval) pair of the study, order-major."""
        return [(h, j) for h in range(self.orders) for j in range(1, (self.padded >> h) + 1)]

    def current_period(self, now: datetime) -> int:
        """The period running at ``now`` (1-based; 0 before the start)."""
        elapsed = (now - self.start).total_seconds()
        if elapsed < 0:
            return 0
        return int(elapsed // self.period_seconds) + 1

    def period_start(self, t: int) -> datetime:
        """First instant of period ``t``."""
        return self.start + timedelta(seconds=(t - 1) * self.period_seconds)


def estimate_from_running_sums(protocol: StudyProtocol, enrolled: NDArray[np.int64],
                               totals: dict[tuple[int, int], tuple[int, int]], *,
                               confidence: float) -> LongitudinalEstimate:
    """The aggregator's estimate from running sums.

    Parameters
    ----------
    enrolled : array of int
        Enrolled devices per order.
    totals : dict
        ``(order, interval) -> (Σ (2·bit − 1), number of reports)``.
    confidence : float
        Confidence of the per-period intervals and of the simultaneous band.

    Returns
    -------
    LongitudinalEstimate
        What :meth:`~dpfreq.longitudinal.LongitudinalAggregator.estimate` returns after
        ingesting the stored reports with the stored enrolment.

    Privacy
    -------
    Unit: one device's whole sequence (device level; neighbouring = any two sequences with at
    most ``max_changes`` changes). Every stored report was randomized on its device under
    ε-local DP; the estimate is post-processing of those reports and spends no further budget,
    however often it is asked for.
    """
    keys = sorted(totals)
    return estimate_from_report_sums(
        protocol.params,
        order=np.array([h for h, _ in keys], dtype=np.int64),
        interval=np.array([j for _, j in keys], dtype=np.int64),
        sums=np.array([totals[k][0] for k in keys], dtype=np.int64),
        counts=np.array([totals[k][1] for k in keys], dtype=np.int64),
        devices_per_order=np.asarray(enrolled, dtype=np.int64),
        confidence=confidence)


def estimate_columns(release: LongitudinalEstimate) -> dict[str, list[Any]]:
    """The release's tidy table as JSON-ready columns (dates as ISO text; ``None`` for a period
    without an estimate yet, never a number)."""
    out: dict[str, list[Any]] = {}
    for name, col in release.table().items():
        arr = np.asarray(col)
        if np.issubdtype(arr.dtype, np.datetime64):
            out[name] = [str(v) for v in arr]
        elif arr.dtype.kind in "iu":
            out[name] = [int(v) for v in arr]
        else:
            out[name] = [None if np.isnan(v) else float(v) for v in arr]
    return out


def utc_now() -> datetime:
    """The current instant (UTC)."""
    return datetime.now(UTC)
