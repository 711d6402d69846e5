"""A worker's background driver: moves each measurement along, retrying what failed.

About every ``poll`` seconds, for each measurement this worker has not finished:

* **worker 0, collecting**: reads the other worker's manifest; once the deadline has passed,
  or every declared party has uploaded the same share id to both workers, it freezes worker 1
  (which then takes no share and answers the shares it holds), fixes the plan and draws
  (:func:`~dpfreq.server.roles.worker_state.fix_plan`);
* **worker 0, planned**: sends the plan and its public draws to worker 1 and stores the
  answer (worker 1's public draws);
* **either, exchanged**: computes its outputs and sends each to the aggregator until it is
  acknowledged.

Each step is idempotent and every message is a function of stored rows, so a worker, its
peer or the aggregator that is down only delays the measurement: the driver retries on the
next round (a worker down is resumed when it is back).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import httpx
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from dpfreq.crossparty.shuffle import Plan
from dpfreq.crossparty.shuffle.worker import WorkerDraws

from . import tables
from .common import MeasurementRow
from .worker_state import fix_plan, manifest, outputs, record_peer_draws, record_sent

__all__ = ["WorkerDriver"]

log = logging.getLogger("dpfreq.server")


class WorkerDriver:
    """The driver of one worker service (see the module docstring).

    Parameters
    ----------
    engine : sqlalchemy.engine.Engine
        The worker's database.
    metrics : Metrics
        Counters of sent outputs (``dpfreq_shuffle_outputs_sent``).
    timeout : float
        Seconds to wait for the other worker or the aggregator.
    """

    def __init__(self, engine: Engine, metrics: Any = None, timeout: float = 60.0) -> None:
        self.engine = engine
        self.metrics = metrics
        self.client = httpx.Client(timeout=timeout)

    def close(self) -> None:
        """Close the HTTP client."""
        self.client.close()

    def step(self) -> None:
        """One round over the unfinished measurements (errors are logged, retried later)."""
        m = tables.measurements
        with self.engine.connect() as conn:
            names = [r[0] for r in conn.execute(sa.select(m.c.measurement).where(
                m.c.role == "worker",
                m.c.state.in_(("collecting", "frozen", "planned", "exchanged"))))]
        for name in names:
            try:
                self.advance(name)
            except Exception as exc:  # the peer or aggregator is away, a race: next round
                log.warning("shuffle: waiting", extra={"measurement": name,
                                                       "reason": " ".join(str(exc).split())[:200]})

    def _row(self, name: str) -> MeasurementRow:
        m = tables.measurements
        with self.engine.connect() as conn:
            return MeasurementRow(conn.execute(sa.select(m).where(
                m.c.measurement == name, m.c.role == "worker")).one())

    def _call(self, method: str, url: str, token: str, **kwargs: Any) -> Any:
        r = self.client.request(method, url, headers={"Authorization": f"Bearer {token}"},
                                **kwargs)
        if r.status_code >= 400:
            raise RuntimeError(f"{method} {url}: {r.status_code} {r.text[:200]}")
        return r.json()

    def advance(self, name: str) -> None:
        """Move one measurement as far as it goes now."""
        row = self._row(name)
        topo = row.json("topology")
        base = f"{topo['peer_url'].rstrip('/')}/v1/measurements/{name}/peer"
        if topo["position"] == 0 and row.state == "collecting":
            peer = self._call("GET", f"{base}/manifest", topo["peer_token"])["shares"]
            mine = manifest(self.engine, name, row.params)
            everyone = all(p in mine and mine[p] == peer.get(p) for p in row.params.parties)
            if not everyone and datetime.now(UTC) < row.params.deadline_at:
                return
            peer = self._call("POST", f"{base}/freeze", topo["peer_token"])["shares"]
            fix_plan(self.engine, row, peer)
            log.info("shuffle: plan fixed", extra={"measurement": name})
            row = self._row(name)
        if topo["position"] == 0 and row.state == "planned":
            draws = WorkerDraws.from_dict(row.json("draws"))
            answer = self._call("POST", f"{base}/plan", topo["peer_token"],
                                json={"plan": row.json("plan"), "draws": draws.public()})
            plan = Plan.from_dict(row.json("plan"), row.params)
            record_peer_draws(self.engine, name, answer["draws"], len(plan.entities))
            row = self._row(name)
        if row.state == "exchanged":
            self._send(row, topo)

    def _send(self, row: MeasurementRow, topo: dict[str, Any]) -> None:
        entities = len(Plan.from_dict(row.json("plan"), row.params).entities)
        base = f"{topo['aggregator_url'].rstrip('/')}/v1/measurements/{row.measurement}"
        if entities == 0:  # nobody uploaded to both workers: tell the aggregator, once
            self._call("POST", f"{base}/empty-plan", topo["aggregator_token"],
                       json={"plan": row.json("plan")})
            record_sent(self.engine, row.measurement, -1, 0)
            log.warning("shuffle: no party uploaded to both workers by the deadline",
                        extra={"measurement": row.measurement})
            return
        url = f"{base}/outputs"
        for entity, frame in outputs(self.engine, row):
            self._put(f"{url}/{entity}", topo["aggregator_token"], frame)
            record_sent(self.engine, row.measurement, entity, entities)
            if self.metrics is not None:
                self.metrics.outputs_sent.inc()
            log.info("shuffle: output acknowledged", extra={"measurement": row.measurement,
                                                            "entity": entity})

    def _put(self, url: str, token: str, frame: bytes) -> None:
        r = self.client.put(url, content=frame, headers={
            "Authorization": f"Bearer {token}", "Content-Type": "application/octet-stream"})
        if r.status_code >= 400:
            raise RuntimeError(f"PUT {url}: {r.status_code} {r.text[:200]}")
