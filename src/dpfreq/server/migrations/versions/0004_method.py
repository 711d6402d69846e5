"""The longitudinal mechanism is named ``method``, in protocol version 2: every study's stored
parameters are rewritten.

The sealed parameters of each study held the field ``randomizer`` under protocol version 1; the
library now reads only ``method``, and only version 2. This migration renames the field, sets
the version to 2 (in the parameters and in the sealed header), recomputes ``param_id`` (a hash
of the fields, so of their names and of the version too), reseals the text (its SHA-256
checksum) and stores the new ``param_id`` and ``protocol_version`` beside it; the downgrade
restores field name and version 1. The format is written out here (docs/protocol.md §1) rather
than imported, so the migration keeps doing what it did when the library changes. Devices
enrolled before the upgrade still hold the old ``param_id``: the service refuses their reports
until they fetch the study's parameters again.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-28
"""

import hashlib
import json

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_STUDIES = sa.table("studies", sa.column("study", sa.String), sa.column("params", sa.Text),
                    sa.column("param_id", sa.String), sa.column("protocol_version", sa.Integer))


def _rewritten(text: str, old: str, new: str, version: int) -> tuple[str, str] | None:
    """The sealed parameters ``text`` with field ``old`` named ``new`` and protocol ``version``,
    and their ``param_id``; None when ``text`` has no field ``old``."""
    sealed = json.loads(text)
    payload = sealed["payload"]
    if old not in payload:
        return None
    payload[new] = payload.pop(old)
    payload["version"] = sealed["version"] = version
    payload.pop("param_id", None)
    param_id = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]
    payload["param_id"] = param_id
    body = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    digest = f"{sealed['kind']}|{version}|{body}"
    sealed["sha256"] = hashlib.sha256(digest.encode()).hexdigest()
    return json.dumps(sealed, sort_keys=True), param_id


def _rewrite(old: str, new: str, version: int) -> None:
    conn = op.get_bind()
    rows = conn.execute(sa.select(_STUDIES.c.study, _STUDIES.c.params)).all()
    for study, text in rows:
        done = _rewritten(text, old, new, version)
        if done is not None:
            conn.execute(sa.update(_STUDIES).where(_STUDIES.c.study == study)
                         .values(params=done[0], param_id=done[1], protocol_version=version))


def upgrade() -> None:
    _rewrite("randomizer", "method", 2)


def downgrade() -> None:
    _rewrite("method", "randomizer", 1)
