"""Migration 0004: studies stored with the field ``randomizer`` are rewritten to ``method``, with
the ``param_id`` and checksum the library itself writes for the same parameters."""

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


def _stored(engine: sa.Engine) -> tuple[str, str]:
    with engine.connect() as conn:
        row = conn.execute(sa.select(storage.studies.c.params, storage.studies.c.param_id)
                           ).one()
    return str(row.params), str(row.param_id)


@pytest.mark.parametrize("method", ["auto", "erlingsson"])
def test_stored_parameters_are_renamed_and_rehashed(db_url, method):
    with make_client(db_url) as c:
        params = create_study(c, method=method, per_order_sparsity=method == "auto")
    engine = storage.make_engine(db_url)
    try:
        _migrate(engine, "0003")  # the parameters as the previous release stored them
        old_text, old_id = _stored(engine)
        _, payload = open_json(old_text, kind=KIND, versions=(1,), sign=False)
        assert payload["randomizer"] == params.method
        assert "method" not in payload
        assert old_id == payload["param_id"] != params.param_id
        with pytest.raises(DataError, match="do not hold valid protocol parameters"):
            ProtocolParams.from_json(old_text)
        storage.upgrade(engine)
        text, param_id = _stored(engine)
    finally:
        engine.dispose()
    assert text == params.to_json()
    assert param_id == params.param_id
    with make_client(db_url) as c:
        info = c.get("/v1/studies/s1").json()
    assert (info["method"], info["param_id"]) == (params.method, params.param_id)
