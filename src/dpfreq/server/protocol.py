"""The service's one door to :mod:`dpfreq.longitudinal`: parameters, enrolment checks and
estimates through the system's public API, as any user of the library would call it.

Estimates are :class:`~dpfreq.longitudinal.LongitudinalAggregator`'s own: the service keeps the
aggregator's running per-(order, interval) sums and counts in its database (updated in the same
transaction as the reports), loads them into an aggregator whose enrolment has the stored number
of devices per order, and asks it for the estimate. The numbers are therefore those the
aggregator gives after ingesting the same reports, computed in ``O(d)`` per request instead of a
rescan of the reports.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfreq.longitudinal import (
    LongitudinalAggregator,
    LongitudinalClient,
    ProtocolParams,
    make_params,
)
from dpfreq.longitudinal.simulate import offsets

__all__ = [
    "StudyProtocol",
    "build_params",
    "client_report",
    "estimate_from_running_sums",
    "params_from_json",
]


def build_params(
    *, horizon: int, max_changes: int, epsilon: float, randomizer: str,
    per_order_sparsity: bool = False,
) -> ProtocolParams:
    """Protocol parameters of a new study (validated by :func:`make_params`)."""
    return make_params(horizon, max_changes, epsilon, randomizer,
                       per_order_sparsity=per_order_sparsity)


def params_from_json(text: str) -> ProtocolParams:
    """Parameters stored with a study (their ``param_id`` is re-checked)."""
    return ProtocolParams.from_json(text)


def client_report(report: dict[str, Any], device: int) -> dict[str, Any]:
    """The wire form ``{device, order, interval, bit, param_id}`` of a client's report."""
    return {"device": int(device), "order": int(report["h"]), "interval": int(report["j"]),
            "bit": int(report["bit"]), "param_id": str(report["param_id"])}


def client_order(client: LongitudinalClient) -> int:
    """The order a client enrols with."""
    return int(client.enrolment()["h"])


@dataclass(frozen=True)
class StudyProtocol:
    """A study's protocol and calendar: parameters, start instant, period length."""

    params: ProtocolParams
    start: datetime
    period_seconds: int

    @property
    def horizon(self) -> int:
        """Number of periods of the study."""
        return int(self.params.periods)

    @property
    def padded(self) -> int:
        """The power-of-two horizon of the dyadic decomposition."""
        return int(self.params.padded_periods)

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


def estimate_from_running_sums(
    protocol: StudyProtocol,
    enrolled: NDArray[np.int64],
    totals: dict[tuple[int, int], tuple[int, int]],
    *,
    confidence: float,
) -> dict[str, Any]:
    """The aggregator's estimate from running sums, as tidy columns with dates.

    Parameters
    ----------
    enrolled : array of int
        Enrolled devices per order.
    totals : dict
        ``(order, interval) -> (Σ (2·bit − 1), number of reports)``.
    confidence : float
        Confidence of the simultaneous band.
    """
    params = protocol.params
    agg = LongitudinalAggregator(params)
    counts = np.asarray(enrolled, dtype=np.int64)
    n = int(counts.sum())
    if n:
        agg.enrol(np.arange(n, dtype=np.int64),
                  np.repeat(np.arange(params.orders, dtype=np.int64), counts))
    off = offsets(params.padded_periods)
    for (h, j), (total, reports) in totals.items():
        agg.sums[off[h] + j - 1] = total
        agg.counts[off[h] + j - 1] = reports
    release = agg.estimate(beta=1.0 - confidence)
    horizon = protocol.horizon
    value = np.asarray(release.value, dtype=np.float64)[:horizon]
    bound = float(release.error.value)
    return {
        "period": list(range(1, horizon + 1)),
        "start": [protocol.period_start(t).isoformat() for t in range(1, horizon + 1)],
        "estimate": value.tolist(),
        "lower": (value - bound).tolist(),
        "upper": (value + bound).tolist(),
        "sd": np.asarray(release.sd, dtype=np.float64)[:horizon].tolist(),
        "release": release,
    }


def utc_now() -> datetime:
    """The current instant (UTC)."""
    return datetime.now(UTC)
