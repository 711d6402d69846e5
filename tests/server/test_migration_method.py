"""Migration 0004: studies stored with the field ``randomizer`` under protocol version 1 are
rewritten to ``method`` under version 2, with the ``param_id`` and checksum the library itself
writes for the same parameters; the downgrade restores both."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from conftest import create_study, make_client
from dpfreq.artifacts import open_json
from dpfreq.errors import DataError
from dpfreq.longitudinal import ProtocolParams
from dpfreq.server import storage

KIND = "dpfreq.longitudinal.params"


def _migrate(engine: sa.Engine, revision: str) -> None:
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location",
                        str(Path(storage.__file__).with_name("migrations")))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)


def _stored(engine: sa.Engine) -> tuple[str, str, int]:
    with engine.connect() as conn:
        row = conn.execute(sa.select(storage.studies.c.params, storage.studies.c.param_id,
                                     storage.studies.c.protocol_version)).one()
    return str(row.params), str(row.param_id), int(row.protocol_version)


@pytest.mark.parametrize("method", ["auto", "erlingsson"])
def test_stored_parameters_are_renamed_versioned_and_rehashed(db_url, method):
    with make_client(db_url) as c:
        params = create_study(c, method=method, per_order_sparsity=method == "auto")
    assert params.version == 2
    engine = storage.make_engine(db_url)
    try:
        _migrate(engine, "0003")  # the parameters as the previous release stored them
        old_text, old_id, old_version = _stored(engine)
        version, payload = open_json(old_text, kind=KIND, versions=(1,), sign=False)
        assert version == payload["version"] == old_version == 1
        assert payload["randomizer"] == params.method
        assert "method" not in payload
        assert old_id == payload["param_id"] != params.param_id
        with pytest.raises(DataError, match=r"^protocol version of the parameters must be 2, "
                                            r"the supported protocol version .*; got 1\.$"):
            ProtocolParams.from_json(old_text)
        storage.upgrade(engine)
        text, param_id, protocol_version = _stored(engine)
    finally:
        engine.dispose()
    assert text == params.to_json()
    assert param_id == params.param_id
    assert protocol_version == 2
    with make_client(db_url) as c:
        info = c.get("/v1/studies/s1").json()
    assert (info["method"], info["param_id"]) == (params.method, params.param_id)
    assert info["bundle"]["protocol"] == 2
