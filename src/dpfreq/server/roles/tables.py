"""The tables of the shuffle roles (migration 0008), on the service's metadata.

``shuffle_measurements``  one row per measurement this service takes part in: its role
                          (``worker`` or ``aggregator``), the sealed public parameters and
                          their id; a worker's topology (its position, the other worker's and
                          the aggregator's URLs and the tokens it presents to them), the plan,
                          its own draws (secret: its dummies), the other worker's public draws
                          and the entities the aggregator acknowledged; the aggregator's result
                          (the release's JSON, or why nothing was released); a state.
``shuffle_shares``        a worker's share of each party (one row per party: a second,
                          different share is refused), with its share id, form, digest.
``shuffle_outputs``       the aggregator's inputs: one worker output per (entity, position).

Every change of a row is one transaction, committed before the request that caused it is
answered, so a restarted service carries on from its rows.
"""

from __future__ import annotations

import sqlalchemy as sa

from dpfreq.server.storage import METADATA

__all__ = ["STATES", "measurements", "outputs", "shares"]

#: Worker: collecting → (worker 1: frozen, once worker 0 is about to plan) → planned (worker 0
#: fixed the plan) → exchanged (both hold the other's draws) → sent (the aggregator
#: acknowledged every output). Aggregator: collecting → released or failed.
STATES = ("collecting", "frozen", "planned", "exchanged", "sent", "released", "failed")

measurements = sa.Table(
    "shuffle_measurements",
    METADATA,
    sa.Column("measurement", sa.String(64), primary_key=True),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("params", sa.Text, nullable=False),
    sa.Column("param_id", sa.String(64), nullable=False),
    sa.Column("topology", sa.Text, nullable=True),
    sa.Column("plan", sa.Text, nullable=True),
    sa.Column("draws", sa.Text, nullable=True),
    sa.Column("peer_draws", sa.Text, nullable=True),
    sa.Column("sent", sa.Text, nullable=True),
    sa.Column("result", sa.Text, nullable=True),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("created", sa.String(40), nullable=False),
    sa.Column("updated", sa.String(40), nullable=False),
)

shares = sa.Table(
    "shuffle_shares",
    METADATA,
    sa.Column("measurement", sa.String(64), primary_key=True),
    sa.Column("party", sa.Integer, primary_key=True),
    sa.Column("share_id", sa.String(32), nullable=False),
    sa.Column("form", sa.String(8), nullable=False),
    sa.Column("digest", sa.String(64), nullable=False),
    sa.Column("payload", sa.LargeBinary, nullable=False),
    sa.Column("received", sa.String(40), nullable=False),
)

outputs = sa.Table(
    "shuffle_outputs",
    METADATA,
    sa.Column("measurement", sa.String(64), primary_key=True),
    sa.Column("entity", sa.Integer, primary_key=True),
    sa.Column("position", sa.Integer, primary_key=True),
    sa.Column("plan", sa.Text, nullable=False),
    sa.Column("digest", sa.String(64), nullable=False),
    sa.Column("payload", sa.LargeBinary, nullable=False),
    sa.Column("received", sa.String(40), nullable=False),
)
