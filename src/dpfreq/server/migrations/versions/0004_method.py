"""The longitudinal mechanism is named ``method``: every study's stored parameters are rewritten.

The sealed parameters of each study held the field ``randomizer``; the library now reads only
``method``. This migration renames the field, recomputes ``param_id`` (a hash of the fields, so
of their names too), reseals the text (its SHA-256 checksum) and stores the new ``param_id``
beside it. The format is written out here (docs/protocol.md §1) rather than imported, so the
migration keeps doing what it did when the library changes. Devices enrolled before the upgrade
still hold the old ``param_id``: the service refuses their reports until they fetch the study's
parameters again.

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
                    sa.column("param_id", sa.String))


def _renamed(text: str, old: str, new: str) -> tuple[str, str] | None:
    """The sealed parameters ``text`` with field ``old`` named ``new`` and their ``param_id``,
    or None when ``text`` has no field ``old``."""
    sealed = json.loads(text)
    payload = sealed["payload"]
    if old not in payload:
        return None
    payload[new] = payload.pop(old)
    payload.pop("param_id", None)
    param_id = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]
    payload["param_id"] = param_id
    body = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    digest = f"{sealed['kind']}|{sealed['version']}|{body}"
    sealed["sha256"] = hashlib.sha256(digest.encode()).hexdigest()
    return json.dumps(sealed, sort_keys=True), param_id


def _rename(old: str, new: str) -> None:
    conn = op.get_bind()
    rows = conn.execute(sa.select(_STUDIES.c.study, _STUDIES.c.params)).all()
    for study, text in rows:
        done = _renamed(text, old, new)
        if done is not None:
            conn.execute(sa.update(_STUDIES).where(_STUDIES.c.study == study)
                         .values(params=done[0], param_id=done[1]))


def upgrade() -> None:
    _rename("randomizer", "method")


def downgrade() -> None:
    _rename("method", "randomizer")
