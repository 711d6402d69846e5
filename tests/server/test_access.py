"""Access: token revocation, rotation and expiry for every role, per-study managers, the audit
log, protected and rate-limited enrolment, and the minimum counted over reporting devices."""

from __future__ import annotations

import contextlib
import logging
import socket
import time
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from conftest import ADMIN, admin, bearer, create_study, enrol, make_client, run_devices
from dpfreq.errors import DataError
from dpfreq.server import service as service_module
from dpfreq.server import storage
from dpfreq.server.auth import Principal, hash_token, token_id


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


NEW_ADMIN = "a-new-admin-token-0123456789"


@contextlib.contextmanager
def server_log() -> Iterator[list[logging.LogRecord]]:
    """The records of the service's logger while the block runs."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("dpfreq.server")
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)


def _admin_status(c, token):
    return c.get("/v1/studies", headers=bearer(token)).status_code


def test_a_new_start_retires_every_admin_token_of_the_previous_start(sqlite_url):
    """A start with another admin token revokes the previous start's token, its rotation and
    the admin tokens issued by either (all logged, and in the audit log); tokens of other
    roles stay."""
    with make_client(sqlite_url) as c:
        create_study(c)
        analyst = _analyst(c)
        issued = c.post("/v1/admin-tokens", headers=admin(), json={"ttl_seconds": 3600}).json()
        rotated = c.post("/v1/tokens/rotate", headers=admin()).json()
        grandchild = c.post("/v1/admin-tokens", headers=bearer(rotated["token"])).json()
        assert _admin_status(c, ADMIN) == 401
        assert _admin_status(c, rotated["token"]) == 200
    with server_log() as records, make_client(sqlite_url, admin_token=NEW_ADMIN) as c:
        for old in (ADMIN, issued["token"], rotated["token"], grandchild["token"]):
            assert _admin_status(c, old) == 401
        assert _admin_status(c, NEW_ADMIN) == 200
        r = c.get("/v1/studies/s1/summary", headers=bearer(analyst["token"]))
        assert r.status_code == 200  # other roles are not admin tokens of the lineage
        audit = c.get("/v1/audit", headers=bearer(NEW_ADMIN)).json()["audit"]
    replaced = sorted([issued["id"], rotated["id"], grandchild["id"]])
    logged = [r for r in records if r.getMessage().startswith("admin tokens of an earlier")]
    assert len(logged) == 1
    assert logged[0].revoked == replaced
    assert logged[0].levelno == logging.WARNING
    gone = {line["token"] for line in audit if line["action"].startswith("revoked at start")}
    assert gone == set(replaced)


def test_restart_with_the_same_token_keeps_its_lineage_and_says_the_file_is_stale(sqlite_url):
    """Restarting with the token file whose token was rotated: the rotation keeps working,
    the file's token stays revoked (never registered again), and the start says so in the
    log and in the audit log."""
    with make_client(sqlite_url) as c:
        rotated = c.post("/v1/tokens/rotate", headers=admin()).json()
    with server_log() as records, make_client(sqlite_url) as c:
        assert _admin_status(c, ADMIN) == 401
        assert _admin_status(c, rotated["token"]) == 200
        audit = c.get("/v1/audit", headers=bearer(rotated["token"])).json()["audit"]
    errors = [r for r in records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert "was revoked and is never registered again" in errors[0].getMessage()
    assert errors[0].revoked_at is not None
    assert any(line["action"] == "start: configured admin token refused (revoked)"
               for line in audit)


def test_a_revoked_token_is_never_registered_again(sqlite_url):
    with make_client(sqlite_url) as c:
        other = c.post("/v1/admin-tokens", headers=admin()).json()
        boot_id = token_id(hash_token(ADMIN))
        r = c.delete(f"/v1/tokens/{boot_id}", headers=bearer(other["token"]))
        assert r.status_code == 200, r.text
        service = c.app.state.service
        with pytest.raises(DataError, match="never registered twice"):
            service.register_token(ADMIN, Principal("admin"))
    with server_log() as records, make_client(sqlite_url) as c:
        assert _admin_status(c, ADMIN) == 401
        assert _admin_status(c, other["token"]) == 200  # same lineage: kept
    assert [r.levelno for r in records if r.levelno >= logging.WARNING] == [logging.ERROR]


def test_recovery_from_a_leaked_admin_token(sqlite_url):
    """docs/service.md, "A leaked admin token": whoever took the start's token rotated it,
    issued another admin token and, with that, a manager token. The operator restarts with a
    new token file (which revokes every admin token descended from the leaked one), reads the
    audit log for what those tokens did, and revokes the manager token by its id."""
    with make_client(sqlite_url) as c:
        create_study(c)
        mine = _analyst(c)  # the operator's own analyst token, issued before the leak
        stolen = c.post("/v1/tokens/rotate", headers=admin()).json()
        extra = c.post("/v1/admin-tokens", headers=bearer(stolen["token"])).json()
        manager = c.post("/v1/studies/s1/manager-tokens", headers=bearer(extra["token"])).json()
    # 1. a new admin token file, and restart
    with server_log() as records, make_client(sqlite_url, admin_token=NEW_ADMIN) as c:
        revoked = next(r.revoked for r in records if hasattr(r, "revoked"))
        assert revoked == sorted([stolen["id"], extra["id"]])
        for token in (ADMIN, stolen["token"], extra["token"]):
            assert _admin_status(c, token) == 401
        # 2. what did the revoked tokens issue?
        audit = c.get("/v1/audit?limit=1000", headers=bearer(NEW_ADMIN)).json()["audit"]
        suspects = set(revoked)
        issued_by_them = [line["token"] for line in audit
                          if line["action"].startswith("issued by ")
                          and line["action"].removeprefix("issued by ") in suspects]
        assert set(issued_by_them) == {extra["id"], manager["id"]}
        # 3. revoke what is still active, by its full id
        for tid in issued_by_them:
            r = c.delete(f"/v1/tokens/{tid}", headers=bearer(NEW_ADMIN))
            assert r.status_code in (200, 404), r.text
        r = c.post("/v1/studies/s1/analyst-tokens", headers=bearer(manager["token"]))
        assert r.status_code == 401
        assert c.get("/v1/studies/s1/summary", headers=bearer(mine["token"])).status_code == 200


def test_revocation_needs_the_full_id_and_answers_what_was_revoked(sqlite_client):
    c = sqlite_client
    create_study(c)
    tok = _analyst(c)
    for partial in (tok["id"][:4], tok["id"][:15], tok["id"].upper(), tok["id"] + "0"):
        r = c.delete(f"/v1/tokens/{partial}", headers=admin())
        assert r.status_code == 400, r.text
        assert "16 lower-case hex digits" in r.json()["error"]
    assert c.get("/v1/studies/s1/summary", headers=bearer(tok["token"])).status_code == 200
    r = c.delete(f"/v1/tokens/{tok['id']}", headers=admin())
    assert r.status_code == 200, r.text
    [gone] = r.json()["revoked"]
    assert {k: gone[k] for k in ("id", "role", "study", "device")} == {
        "id": tok["id"], "role": "analyst", "study": "s1", "device": None}
    assert gone["revoked"]


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
        wait = int(r.headers["retry-after"])
        assert wait >= 1
        # the answer states the limit, the options that set it and the wait
        assert r.json()["error"] == (
            "rate limit: at most 0.001 enrolments per study and client address per second, in "
            "bursts of at most 2 (--enrol-rate, --enrol-burst); retry in "
            f"{wait} s.")


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
