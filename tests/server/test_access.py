"""Access: token revocation, rotation and expiry for every role, per-study managers, the audit
log, protected and rate-limited enrolment, and the minimum counted over reporting devices."""

from __future__ import annotations

import socket
import time

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from conftest import ADMIN, admin, bearer, create_study, enrol, make_client, run_devices
from dpfreq.server import service as service_module
from dpfreq.server import storage


def _analyst(c, study="s1", **body):
    r = c.post(f"/v1/studies/{study}/analyst-tokens", headers=admin(), json=body or None)
    assert r.status_code == 201, r.text
    return r.json()


def test_revoked_token_stops_working(sqlite_client):
    c = sqlite_client
    create_study(c)
    tok = _analyst(c)
    assert c.get("/v1/studies/s1/summary", headers=bearer(tok["token"])).status_code == 200
    r = c.delete(f"/v1/tokens/{tok['id']}", headers=admin())
    assert r.status_code == 200, r.text
    assert c.get("/v1/studies/s1/summary", headers=bearer(tok["token"])).status_code == 401
    assert c.delete(f"/v1/tokens/{tok['id']}", headers=admin()).status_code == 404


def test_rotation_replaces_the_token(sqlite_client):
    c = sqlite_client
    params = create_study(c)
    _device, token = enrol(c, params, 0)
    for old in (_analyst(c)["token"], token):
        r = c.post("/v1/tokens/rotate", headers=bearer(old))
        assert r.status_code == 201, r.text
        new = r.json()["token"]
        assert c.post("/v1/tokens/rotate", headers=bearer(old)).status_code == 401
        assert c.get("/v1/studies/s1", headers=bearer(new)).status_code == 200
    r = c.get("/v1/studies/s1/summary", headers=bearer(new))  # the rotated device token
    assert r.status_code == 403


def test_expired_token_is_refused(sqlite_client, monkeypatch):
    c = sqlite_client
    create_study(c)
    tok = _analyst(c, ttl_seconds=60)
    assert tok["expires"] is not None
    assert c.get("/v1/studies/s1/summary", headers=bearer(tok["token"])).status_code == 200
    later = time.time() + 61
    monkeypatch.setattr(service_module.time, "time", lambda: later)
    assert c.get("/v1/studies/s1/summary", headers=bearer(tok["token"])).status_code == 401


def test_restart_with_a_new_admin_token_revokes_the_old(sqlite_url):
    with make_client(sqlite_url) as c:
        assert c.get("/v1/studies", headers=admin()).status_code == 200
        extra = c.post("/v1/admin-tokens", headers=admin(), json={"ttl_seconds": 3600}).json()
    with make_client(sqlite_url, admin_token="a-new-admin-token-0123456789") as c:
        assert c.get("/v1/studies", headers=admin()).status_code == 401
        assert c.get("/v1/studies", headers=bearer("a-new-admin-token-0123456789")
                     ).status_code == 200
        # an admin token issued through the API stays valid until revoked or expired
        assert c.get("/v1/studies", headers=bearer(extra["token"])).status_code == 200


def test_manager_is_confined_to_its_study(sqlite_client):
    c = sqlite_client
    create_study(c, "s1")
    create_study(c, "s2")
    mgr = c.post("/v1/studies/s1/manager-tokens", headers=admin()).json()["token"]
    r = c.post("/v1/studies/s1/analyst-tokens", headers=bearer(mgr))
    assert r.status_code == 201
    analyst = r.json()
    assert c.post("/v1/studies/s2/analyst-tokens", headers=bearer(mgr)).status_code == 403
    assert c.get("/v1/studies", headers=bearer(mgr)).status_code == 403
    other = _analyst(c, "s2")
    assert c.delete(f"/v1/tokens/{other['id']}", headers=bearer(mgr)).status_code == 404
    assert c.delete(f"/v1/tokens/{analyst['id']}", headers=bearer(mgr)).status_code == 200
    log = c.get("/v1/audit", headers=bearer(mgr)).json()["audit"]
    assert {line["study"] for line in log} == {"s1"}
    assert any(line["action"] == f"revoked {analyst['id']}" for line in log)
    everything = c.get("/v1/audit", headers=admin()).json()["audit"]
    assert any(line["action"] == "POST /v1/studies" and line["role"] == "admin"
               for line in everything)


def test_enrolment_needs_the_secret_and_is_rate_limited(sqlite_url):
    with make_client(sqlite_url, enrol_rate=0.001, enrol_burst=2) as c:
        params = create_study(c)
        body = {"param_id": params.param_id, "order": 0}
        assert c.post("/v1/studies/s1/devices", json=body).status_code == 401
        assert c.post("/v1/studies/s1/devices", json=body,
                      headers=bearer("wrong")).status_code == 401
        enrol(c, params, 0)
        enrol(c, params, 0)
        r = c.post("/v1/studies/s1/devices", json=body,
                   headers=bearer(c.enrol_secrets["s1"]))
        assert r.status_code == 429
        assert int(r.headers["retry-after"]) >= 1


def test_minimum_counts_devices_that_reported(sqlite_client, rng):
    c = sqlite_client
    params = create_study(c, min_devices=2)
    for _ in range(5):
        enrol(c, params, 0)  # enrolled, silent: they do not lift the minimum
    an = _analyst(c)["token"]
    assert c.get("/v1/studies/s1/estimates", headers=bearer(an)).status_code == 403
    assert c.get("/v1/studies/s1/summary", headers=bearer(an)).json()["estimate"] is None
    run_devices(c, params, rng, 2)
    assert c.get("/v1/studies/s1/estimates", headers=bearer(an)).status_code == 200


def test_authentication_comes_before_body_validation(sqlite_client):
    c = sqlite_client
    assert c.post("/v1/studies", json={"nonsense": 1}).status_code == 401
    assert c.post("/v1/studies", json={"nonsense": 1},
                  headers=bearer("unknown")).status_code == 401
    assert c.post("/v1/studies", json={"nonsense": 1}, headers=admin()).status_code == 422


def test_serve_that_cannot_bind_registers_nothing(tmp_path, monkeypatch):
    from dpfreq.cli.serve import command

    db = tmp_path / "bind.db"
    monkeypatch.setenv("DPFREQ_ADMIN_TOKEN", ADMIN + "-never-registered")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        res = CliRunner().invoke(command, ["--db", str(db), "--port", str(port)])
    assert res.exit_code == 1
    assert f"cannot listen on 127.0.0.1:{port}" in res.output
    assert len(res.output.strip().splitlines()) == 1
    if db.exists():
        engine = storage.make_engine(str(db))
        with engine.connect() as conn:
            names = sa.inspect(conn).get_table_names()
            if "tokens" in names:
                assert conn.execute(sa.select(sa.func.count()).select_from(storage.tokens)
                                    ).scalar_one() == 0
        engine.dispose()


@pytest.mark.parametrize("role", ["analyst", "manager"])
def test_tokens_of_every_role_can_expire_at_issue(sqlite_client, role):
    c = sqlite_client
    create_study(c)
    r = c.post(f"/v1/studies/s1/{role}-tokens", headers=admin(), json={"ttl_seconds": 5})
    assert r.status_code == 201
    assert r.json()["expires"] == pytest.approx(time.time() + 5, abs=2)


def test_summaries_are_cached_between_reads(sqlite_url, rng):
    with make_client(sqlite_url, read_cache_seconds=3600) as c:
        params = create_study(c, min_devices=1)
        an = _analyst(c)["token"]
        first = c.get("/v1/studies/s1/summary", headers=bearer(an)).json()
        run_devices(c, params, rng, 2)
        assert c.get("/v1/studies/s1/summary", headers=bearer(an)).json() == first
    with make_client(sqlite_url, read_cache_seconds=0) as c:
        assert c.get("/v1/studies/s1/summary", headers=bearer(an)).json() != first
