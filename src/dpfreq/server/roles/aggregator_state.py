"""The aggregator's database operations: store the workers' outputs, make the release once.

An output is stored in one transaction (an identical retry is acknowledged again; a different
output for the same entity and position, or one made under another plan than the other
worker's, is refused). When both outputs of every measured entity are stored, the aggregator
reconstructs the noisy histograms, estimates, and stores the release's JSON — or, when the
outputs do not reconstruct register values (a worker or a party deviated), the reason, and
releases nothing. The release is a deterministic function of the stored outputs: a restart
computes the same one.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from dpfreq.crossparty.shuffle import Plan, reconstruct_histogram, release_from_histograms
from dpfreq.crossparty.shuffle.plan import MISSING_REASONS
from dpfreq.crossparty.shuffle.shares import Frame
from dpfreq.errors import DataError

from .. import storage
from . import tables
from .common import MeasurementRow, Refused, update_row

__all__ = ["CONFIDENCE", "fail_empty", "result_payload", "store_output", "try_release"]

#: Confidence level of the intervals of a stored release.
CONFIDENCE = 0.95


def _locked(conn: Any, measurement: str) -> Any:
    m = tables.measurements
    return conn.execute(sa.select(m).where(m.c.measurement == measurement,
                                           m.c.role == "aggregator").with_for_update()).first()


def store_output(engine: Engine, measurement: str, frame: Frame) -> bool:
    """Store one checked worker output; True when new, False for an identical retry.

    Raises
    ------
    Refused
        409: another output of this entity and position is stored, or the other worker's
        outputs were made under another plan.
    """
    h = frame.header
    o = tables.outputs
    plan_text = json.dumps(h["plan"], sort_keys=True)
    with engine.begin() as conn:
        _locked(conn, measurement)
        rows = conn.execute(sa.select(o.c.entity, o.c.position, o.c.plan, o.c.digest)
                            .where(o.c.measurement == measurement)).all()
        for r in rows:
            if (r.entity, r.position) == (h["entity"], h["position"]):
                if r.digest == h["sha256"]:
                    return False
                raise Refused(409, "another output of this entity and worker is stored; "
                                   "nothing was replaced.")
            if r.plan != plan_text:
                raise Refused(409, "the two workers' outputs were made under different plans.")
        conn.execute(o.insert().values(
            measurement=measurement, entity=h["entity"], position=h["position"],
            plan=plan_text, digest=h["sha256"], payload=frame.payload,
            received=storage.timestamp()))
    return True


def try_release(engine: Engine, measurement: str) -> str | None:
    """Make and store the release when every output is in; its state afterwards (None while
    outputs are missing)."""
    o = tables.outputs
    with engine.begin() as conn:
        row = MeasurementRow(_locked(conn, measurement))
        if row.state in ("released", "failed"):
            return row.state
        rows = conn.execute(sa.select(o.c.entity, o.c.position, o.c.plan, o.c.payload)
                            .where(o.c.measurement == measurement)).all()
        if not rows:
            return None
        plan = Plan.from_dict(json.loads(rows[0].plan), row.params)
        got = {(r.entity, r.position): bytes(r.payload) for r in rows}
        if any((e, w) not in got for e, _ in plan.entities for w in (0, 1)):
            return None
        try:
            hists = [reconstruct_histogram(np.frombuffer(got[(e, 0)], dtype="<u4"),
                                           np.frombuffer(got[(e, 1)], dtype="<u4"), V)
                     for (e, _), V in zip(plan.entities, plan.values(row.params), strict=True)]
            release = release_from_histograms(hists, params=row.params, plan=plan,
                                              confidence=CONFIDENCE)
            result, state = release.to_json(), "released"
        except DataError as exc:
            result, state = json.dumps({"error": str(exc)}), "failed"
        update_row(conn, measurement, plan=json.dumps(plan.to_dict()), result=result,
                   state=state)
    return state


def fail_empty(engine: Engine, measurement: str, plan: Plan) -> None:
    """Record that nothing will be released: no party uploaded to both workers."""
    why = "; ".join(f"{p}: {MISSING_REASONS[r]}" for p, r in plan.missing)
    with engine.begin() as conn:
        row = MeasurementRow(_locked(conn, measurement))
        if row.state == "collecting":
            update_row(conn, measurement, plan=json.dumps(plan.to_dict()), state="failed",
                       result=json.dumps({"error": "no party uploaded to both workers by the "
                                                   f"deadline; nothing is released ({why})."}))


def result_payload(row: MeasurementRow) -> dict[str, Any]:
    """The stored release (with its digest), or the reason nothing was released."""
    text = row.row.result
    out: dict[str, Any] = json.loads(text)
    if row.state == "released":
        out["sha256"] = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return out
