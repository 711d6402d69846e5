"""A worker's database operations: shares, the plan, the draws, the outputs.

Every step is one transaction that first locks the measurement's row (``SELECT ... FOR
UPDATE`` on PostgreSQL; SQLite serializes writers), so a share is either stored before the
plan is fixed — and then counted if the other worker holds the same upload — or refused.
The draws (the worker's secret, dummy counts and mask seeds) are drawn once, when the plan is
fixed, and stored in the same transaction; everything sent afterwards is recomputed from
stored rows, so a restarted worker sends the same bytes again and never draws new noise for a
measurement it has already planned.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from dpfreq.crossparty.shuffle import Plan, dummy_law
from dpfreq.crossparty.shuffle.aggregate import output_frame
from dpfreq.crossparty.shuffle.party import share_words
from dpfreq.crossparty.shuffle.plan import make_plan
from dpfreq.crossparty.shuffle.shares import Frame
from dpfreq.crossparty.shuffle.worker import (
    PeerDraws,
    WorkerDraws,
    draw_worker,
    sum_shares,
    worker_output,
)
from dpfreq.errors import DataError

from .. import storage
from . import tables
from .common import MeasurementRow, Refused, update_row

__all__ = ["accept_plan", "fix_plan", "freeze", "manifest", "outputs", "record_peer_draws",
           "record_sent", "store_share"]


def _locked(conn: Any, measurement: str) -> Any:
    m = tables.measurements
    return conn.execute(sa.select(m).where(m.c.measurement == measurement, m.c.role == "worker")
                        .with_for_update()).first()


def store_share(engine: Engine, measurement: str, party: int, frame: Frame) -> bool:
    """Store a checked party share; True when new, False for an identical retry.

    Raises
    ------
    Refused
        410 after the deadline or once the plan is fixed; 409 when the party already
        uploaded another share (nothing is replaced: a party is counted once).
    """
    h = frame.header
    s = tables.shares
    with engine.begin() as conn:
        row = _locked(conn, measurement)
        found = conn.execute(sa.select(s.c.share_id, s.c.digest).where(
            s.c.measurement == measurement, s.c.party == party)).first()
        if found is not None:
            if (found.share_id, found.digest) == (h["share_id"], h["sha256"]):
                return False
            raise Refused(409, "this party already uploaded another share to this worker; "
                               "nothing was replaced (a party is counted once).")
        params = MeasurementRow(row).params
        if row.state != "collecting":
            raise Refused(410, "the measurement's parties are being fixed; no share is taken "
                               "now.")
        if datetime.now(UTC) >= params.deadline_at:
            raise Refused(410, f"the measurement's deadline ({params.deadline}) has passed.")
        try:
            conn.execute(s.insert().values(
                measurement=measurement, party=party, share_id=h["share_id"], form=h["form"],
                digest=h["sha256"], payload=frame.payload, received=storage.timestamp()))
        except IntegrityError:  # a concurrent upload of the same party won
            raise Refused(409, "this party's share is being stored by another request.") \
                from None
    return True


def freeze(engine: Engine, measurement: str) -> dict[str, str]:
    """Worker 1, asked by worker 0 that is about to fix the plan: take no share from now on
    (state ``frozen``) and answer the shares held — every share acknowledged before is in the
    answer, any later one is refused (410), so no acknowledged share is left out unnoticed."""
    with engine.begin() as conn:
        row = MeasurementRow(_locked(conn, measurement))
        if row.state == "collecting":
            update_row(conn, measurement, state="frozen")
        return _manifest_in(conn, measurement, row.params)


def manifest(engine: Engine, measurement: str, params: Any) -> dict[str, str]:
    """``party -> share id`` of every share this worker holds."""
    s = tables.shares
    with engine.connect() as conn:
        rows = conn.execute(sa.select(s.c.party, s.c.share_id)
                            .where(s.c.measurement == measurement)).all()
    return {params.parties[int(p)]: str(sid) for p, sid in rows}


def fix_plan(engine: Engine, row: MeasurementRow, peer: dict[str, str]) -> Plan:
    """Worker 0: fix the plan from both manifests and draw its own draws (one transaction)."""
    params = row.params
    with engine.begin() as conn:
        current = MeasurementRow(_locked(conn, row.measurement))
        if current.state != "collecting":
            return Plan.from_dict(current.json("plan"), params)
        mine = _manifest_in(conn, row.measurement, params)
        plan = make_plan(params, mine, peer)
        draws = draw_worker(dummy_law(params), plan.values(params), position=0)
        update_row(conn, row.measurement, plan=json.dumps(plan.to_dict()),
                   draws=json.dumps(draws.to_dict()), state="planned")
    return plan


def _manifest_in(conn: Any, measurement: str, params: Any) -> dict[str, str]:
    s = tables.shares
    rows = conn.execute(sa.select(s.c.party, s.c.share_id)
                        .where(s.c.measurement == measurement)).all()
    return {params.parties[int(p)]: str(sid) for p, sid in rows}


def accept_plan(engine: Engine, measurement: str, plan_data: Any, peer_data: Any
                ) -> dict[str, Any]:
    """Worker 1: check worker 0's plan against the shares held here, draw its own draws and
    store both with worker 0's public draws; its public draws (the same answer to a retry).

    Raises
    ------
    Refused
        409 for a plan that names a share this worker does not hold, or that differs from
        the plan already accepted; 422 for a malformed plan or draws.
    """
    with engine.begin() as conn:
        row = _locked(conn, measurement)
        if row is None:
            raise Refused(404, "no such measurement.")
        current = MeasurementRow(row)
        params = current.params
        try:
            plan = Plan.from_dict(plan_data, params)
            peer = PeerDraws.from_public(peer_data, entities=len(plan.entities))
        except DataError as exc:
            raise Refused(422, str(exc)) from None
        if peer.position != 0:
            raise Refused(422, "the plan's draws must be worker 0's.")
        if current.state not in ("collecting", "frozen"):
            if current.json("plan") != plan.to_dict() or current.json("peer_draws") != peer_data:
                raise Refused(409, "another plan was accepted for this measurement.")
            return WorkerDraws.from_dict(current.json("draws")).public()
        held = _manifest_in(conn, measurement, params)
        if any(held.get(p) != sid for p, sid in plan.included):
            raise Refused(409, "the plan names a share this worker does not hold.")
        draws = draw_worker(dummy_law(params), plan.values(params), position=1)
        update_row(conn, measurement, plan=json.dumps(plan.to_dict()),
                   draws=json.dumps(draws.to_dict()), peer_draws=json.dumps(peer_data),
                   state="exchanged", sent=json.dumps([]))
    return draws.public()


def record_peer_draws(engine: Engine, measurement: str, peer_data: Any, entities: int) -> None:
    """Worker 0: store worker 1's public draws (checked) once."""
    peer = PeerDraws.from_public(peer_data, entities=entities)
    if peer.position != 1:
        raise DataError("the other worker answered with draws of the wrong position.")
    with engine.begin() as conn:
        row = MeasurementRow(_locked(conn, measurement))
        if row.state == "planned":
            update_row(conn, measurement, peer_draws=json.dumps(peer_data), state="exchanged",
                       sent=json.dumps([]))


def _words(conn: Any, measurement: str, params: Any, party: int) -> np.ndarray:
    s = tables.shares
    r = conn.execute(sa.select(s.c.share_id, s.c.form, s.c.payload).where(
        s.c.measurement == measurement, s.c.party == party)).one()
    frame = Frame(header={"form": r.form, "party": params.parties[party],
                          "share_id": r.share_id}, payload=bytes(r.payload))
    return share_words(frame, params)


def outputs(engine: Engine, row: MeasurementRow) -> Iterator[tuple[int, bytes]]:
    """``(entity, frame)`` of each output not yet acknowledged by the aggregator, computed
    from the stored shares and draws (the same bytes every time)."""
    params, plan = row.params, Plan.from_dict(row.json("plan"), row.params)
    own = WorkerDraws.from_dict(row.json("draws"))
    peer = PeerDraws.from_public(row.json("peer_draws"), entities=len(plan.entities))
    done = set(row.json("sent") or [])
    for i, (entity, parties) in enumerate(plan.entities):
        if entity in done:
            continue
        with engine.connect() as conn:
            total = sum_shares([], params.registers)
            for j in parties:
                np.add(total, _words(conn, row.measurement, params, j), out=total)
        words = worker_output(total, own=own, peer=peer, entity=entity, index=i,
                              param_id=params.param_id)
        yield entity, output_frame(words, params=params, plan=plan, position=own.position,
                                   entity=entity)


def record_sent(engine: Engine, measurement: str, entity: int, entities: int) -> None:
    """Note that the aggregator acknowledged ``entity``'s output (state ``sent`` when all;
    ``entity = -1`` with ``entities = 0``: the empty plan was acknowledged)."""
    with engine.begin() as conn:
        row = MeasurementRow(_locked(conn, measurement))
        done = sorted(set(row.json("sent") or []) | {entity})
        update_row(conn, measurement, sent=json.dumps(done),
                   state="sent" if len(done) >= entities else row.state)
