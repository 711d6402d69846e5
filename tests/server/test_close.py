"""Study close and expiry (reports and enrolments refused with 410, estimates still readable)
and the retention of raw reports (deleted only for studies that take no more reports; the
estimate stays exactly the same)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
import sqlalchemy as sa

from conftest import admin, bearer, create_study, enrol, enrol_headers, run_devices, stored
from dpfreq.server import storage


def _report(params, device, interval=1):
    return {"reports": [{"device": device, "order": 0, "interval": interval, "bit": 1,
                         "param_id": params.param_id}]}


def test_a_closed_study_refuses_reports_and_enrolments_and_still_estimates(client):
    params = create_study(client, min_devices=1)
    run_devices(client, params, np.random.default_rng(1), 3)
    device, token = enrol(client, params, 0)
    before = client.get("/v1/studies/s1/estimates", headers=admin()).json()
    manager = client.post("/v1/studies/s1/manager-tokens", headers=admin()).json()["token"]
    r = client.post("/v1/studies/s1/close", headers=bearer(manager))
    assert r.status_code == 200, r.text
    closed = r.json()["closed"]
    assert closed is not None
    again = client.post("/v1/studies/s1/close", headers=bearer(manager))
    assert again.json()["closed"] == closed  # closing twice changes nothing
    n = stored(client)
    r = client.post("/v1/studies/s1/reports", json=_report(params, device),
                    headers=bearer(token))
    assert r.status_code == 410
    assert list(r.json()) == ["error"]
    assert stored(client) == n
    r = client.post("/v1/studies/s1/devices", json={"param_id": params.param_id, "order": 0},
                    headers=enrol_headers(client, "s1"))
    assert r.status_code == 410
    analyst = client.post("/v1/studies/s1/analyst-tokens", headers=admin()).json()["token"]
    after = client.get("/v1/studies/s1/estimates", headers=bearer(analyst))
    assert after.status_code == 200
    assert after.json()["columns"] == before["columns"]
    summary = client.get("/v1/studies/s1/summary", headers=bearer(analyst)).json()
    assert summary["rejections"]["closed"] == 1
    assert summary["study"]["closed"] == closed


def test_only_admin_or_the_studys_manager_closes(sqlite_client):
    c = sqlite_client
    create_study(c)
    create_study(c, "s2")
    other = c.post("/v1/studies/s2/manager-tokens", headers=admin()).json()["token"]
    analyst = c.post("/v1/studies/s1/analyst-tokens", headers=admin()).json()["token"]
    assert c.post("/v1/studies/s1/close", headers=bearer(other)).status_code == 403
    assert c.post("/v1/studies/s1/close", headers=bearer(analyst)).status_code == 403
    assert c.post("/v1/studies/s1/close").status_code == 401
    assert c.post("/v1/studies/nope/close", headers=admin()).status_code == 404


def test_the_writer_refuses_a_study_closed_by_another_process(sqlite_client):
    c = sqlite_client
    params = create_study(c)
    device, token = enrol(c, params, 0)
    service = c.app.state.service
    assert service.cached_study("s1").closed is None
    with service.engine.begin() as conn:  # another process closes it; this one's cache is stale
        conn.execute(storage.studies.update().values(closed=datetime.now(UTC).isoformat()))
    assert service.cached_study("s1").closed is None
    r = c.post("/v1/studies/s1/reports", json=_report(params, device), headers=bearer(token))
    assert r.status_code == 410
    assert stored(c) == (0, 0)


@pytest.mark.parametrize("closes", ["2020-01-05", "2020-01-05T12:00:00+02:00"])
def test_an_expired_study_refuses_reports(sqlite_client, closes):
    c = sqlite_client
    params = create_study(c, closes_at=closes)
    assert c.get("/v1/studies/s1").json()["closes_at"].startswith("2020-01-05T")
    r = c.post("/v1/studies/s1/devices", json={"param_id": params.param_id, "order": 0},
               headers=enrol_headers(c, "s1"))
    assert r.status_code == 410


def test_a_study_expiring_later_takes_reports(sqlite_client):
    c = sqlite_client
    later = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    params = create_study(c, closes_at=later)
    device, token = enrol(c, params, 0)
    r = c.post("/v1/studies/s1/reports", json=_report(params, device), headers=bearer(token))
    assert r.status_code == 200


def test_a_malformed_expiry_is_400(sqlite_client):
    body = {"study": "x", "horizon": 4, "max_changes": 1, "epsilon": 1.0, "method": "auto",
            "start": "2020-01-01", "period": "1d", "min_devices": 1, "closes_at": "soon"}
    r = sqlite_client.post("/v1/studies", json=body, headers=admin())
    assert r.status_code == 400
    assert "closes_at" in r.json()["error"]


def test_retention_deletes_raw_reports_of_closed_studies_only(client):
    params = create_study(client, min_devices=2)
    create_study(client, "open", min_devices=1)
    run_devices(client, params, np.random.default_rng(2), 4)
    run_devices(client, params, np.random.default_rng(3), 2, study="open")
    an = client.post("/v1/studies/s1/analyst-tokens", headers=admin()).json()["token"]
    before = client.get("/v1/studies/s1/estimates", headers=bearer(an)).json()
    service = client.app.state.service
    assert service.purge_raw_reports(0.0) == []  # nothing closed yet
    assert client.post("/v1/studies/s1/close", headers=admin()).status_code == 200
    later = datetime.now(UTC) + timedelta(days=3)
    assert service.purge_raw_reports(5.0, now=later) == []  # closed 3 days ago: kept
    assert service.purge_raw_reports(2.0, now=later) == ["s1"]
    with service.engine.connect() as conn:
        left = dict(conn.execute(sa.select(storage.uploads.c.study, sa.func.count())
                                 .group_by(storage.uploads.c.study)).all())
    assert "s1" not in left
    assert left["open"] > 0
    after = client.get("/v1/studies/s1/estimates", headers=bearer(an)).json()
    assert after == before  # exactly the same estimate, from the running sums
    assert client.get("/v1/studies/s1/exports/reports", headers=bearer(an)).status_code == 410
    assert client.get("/v1/studies/s1/exports/enrolment", headers=bearer(an)).status_code == 200
    assert service.reported_devices("s1") == 4
    assert service.purge_raw_reports(0.0) == []  # once
